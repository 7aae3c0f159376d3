"""Wiring one protocol run: panel -> engine -> events -> (view, store), then the output and
exit code. Every protocol command ends here, so they all behave alike."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from panel_cli.config import Panel, resolve_question
from panel_cli.errors import UserError
from panel_cli.redact import redact, redact_obj, secret_values

if TYPE_CHECKING:
    from panel_cli.protocols.base import Engine, ProtocolResult


def read_stdin_question() -> str | None:
    """The question piped on stdin, if any; a terminal on stdin means there is none."""
    if sys.stdin is None or sys.stdin.isatty():
        return None
    try:
        return sys.stdin.read()
    except OSError:
        return None


def question_for(panel: Panel, panel_file: Path | None, given: str | None) -> str:
    stdin_text = None if given else read_stdin_question()
    return resolve_question(panel, panel_file.parent if panel_file else None, given, stdin_text)


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def execute(engine: Engine, panel: Panel, question: str, *, json_mode: bool, quiet: bool, db: Path | None) -> None:
    """Run `engine` and exit with SPEC §4's code: 0 answer, 1 no answer, 2 user error, 130 interrupted."""
    console = Console()
    status = None
    if console.is_terminal and not (json_mode or quiet):
        status = console.status("Loading the model gateway…", spinner="dots")
        status.start()
    try:
        from panel_cli.llm.gateway import Gateway, load_litellm

        load_litellm()
    finally:
        if status is not None:
            status.stop()
    from panel_cli.store.db import TranscriptStore, resolve_db_path
    from panel_cli.view.base import make_view

    run_id = new_run_id()
    db_path = resolve_db_path(db)
    callable_members = panel.callable_members()
    secret_names = [m.api_key_env for m in callable_members if m.api_key_env]

    async def run() -> ProtocolResult:
        from panel_cli.events import EventBus
        from panel_cli.protocols.base import run_engine

        store = await TranscriptStore.open(db_path, secret_names=secret_names)
        view = make_view(console, json_mode=json_mode, quiet=quiet, err_stream=sys.stderr)
        bus = EventBus(run_id, [store, view])
        gateway = Gateway(bus.emit, defaults=panel.defaults, concurrency=panel.concurrency)
        try:
            gateway.check_keys(callable_members)
            return await run_engine(engine, panel, question, gateway, bus.emit)
        finally:
            view.close()
            await gateway.aclose()
            await store.close()

    result = asyncio.run(run())
    secrets = secret_values(secret_names)
    final_answer = result.final_answer
    if json_mode:
        payload = redact_obj({"run_id": run_id, **result.model_dump(mode="json")}, secrets)
        sys.stdout.write(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    elif final_answer is not None and (quiet or not console.is_terminal):
        sys.stdout.write(redact(final_answer.rstrip(), secrets) + "\n")
    if not result.reached_answer:
        if not json_mode:
            sys.stderr.write(f"panel: the panel reached no answer (run {run_id}).\n")
        raise typer.Exit(1)


def apply_demo(panel: Panel, demo: bool) -> Panel:
    return panel.as_demo() if demo else panel


def parse_names(value: str | None, option: str) -> list[str] | None:
    if value is None:
        return None
    names = [name.strip() for name in value.split(",") if name.strip()]
    if not names:
        raise UserError(f"{option} needs at least one name, separated by commas.")
    return names
