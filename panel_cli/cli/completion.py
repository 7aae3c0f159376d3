"""Shell completion: panel files, member names, a gate's outcomes, run ids.

The shell runs `panel` on every TAB, so each callback imports what it needs inside
itself, and a callback that cannot answer (a bad file, no database yet) offers nothing
rather than an error: a traceback in the middle of a command line helps nobody.
Command modules pass these as `autocompletion=` to their arguments and options.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import typer

if TYPE_CHECKING:
    import sqlite3


T = TypeVar("T")

PANEL_SUFFIXES = (".yaml", ".yml")
RUN_LIMIT = 200


def panel_files(incomplete: str) -> list[str]:
    """Panel files (`*.yaml`, `*.yml`) and the folders that may hold them. The shell script
    Typer installs takes these words as they are, with no file completion of its own, so
    folders are offered too (with a trailing `/`) to walk into."""
    head = incomplete[: incomplete.rfind("/") + 1]
    prefix = incomplete[len(head) :]
    try:
        entries = list(os.scandir(Path(head or ".").expanduser()))
    except OSError:
        return []
    words = []
    for entry in entries:
        if not entry.name.startswith(prefix) or (entry.name.startswith(".") and not prefix.startswith(".")):
            continue
        try:
            if entry.is_dir():
                words.append(f"{head}{entry.name}/")
            elif entry.name.endswith(PANEL_SUFFIXES):
                words.append(f"{head}{entry.name}")
        except OSError:
            continue
    return sorted(words)


def member_names(ctx: typer.Context, incomplete: str) -> list[str]:
    """Names of the members of the panel file given earlier on the command line (the
    `panel_file` argument), for a comma-separated option such as `--agents a,b`: the names
    already typed stay, and are not offered again.

    Click stops parsing at the option whose value is being completed, before it assigns
    the positional arguments, so a file typed before `--agents` is found in `ctx.args`
    (the first positional word) rather than in `ctx.params`."""
    panel_file = ctx.params.get("panel_file") or (ctx.args[0] if ctx.args else None)
    if not panel_file:
        return []
    from panel_cli.config import load_panel
    from panel_cli.errors import PanelError

    try:
        names = [member.name for member in load_panel(panel_file).members]
    except PanelError:
        return []
    typed, _, last = incomplete.rpartition(",")
    chosen = set(typed.split(",")) if typed else set()
    return [f"{typed},{name}" if typed else name for name in names if name.startswith(last) and name not in chosen]


def vote_options(ctx: typer.Context, incomplete: str) -> list[str]:
    """What `--gate` may name on a vote: the options given earlier with `--options`, else those
    of the panel file given earlier on the command line."""
    options = list(ctx.params.get("choices") or [])
    panel_file = ctx.params.get("panel_file") or (ctx.args[0] if ctx.args else None)
    if not options and panel_file:
        from panel_cli.config import load_panel
        from panel_cli.errors import PanelError

        try:
            options = list(load_panel(panel_file).settings_given.get("options", []))
        except PanelError:
            return []
    return [option for option in options if option.lower().startswith(incomplete.lower())]


def verdicts(incomplete: str) -> list[str]:
    """What `--gate` may name on supervise."""
    return [verdict for verdict in ("approved",) if verdict.startswith(incomplete.lower())]


def default_db_path() -> Path:
    """The transcript database when `--db` is not given. The same rule as the store's
    `default_db_path`, kept here so that completing a run id does not import the store
    (and with it pydantic) on every TAB."""
    if env := os.environ.get("PANEL_DB"):
        return Path(env).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("panel", appauthor=False)) / "panel.db"


def _read_store(ctx: typer.Context, read: Callable[[sqlite3.Connection], T]) -> T | None:
    """What `read` finds in the store `--db` or PANEL_DB names, opened read-only with the
    standard library (completing must never create, migrate or write it); None when there is
    no store or it cannot be read."""
    import sqlite3

    db = ctx.params.get("db")
    path = Path(db).expanduser() if db else default_db_path()
    if not path.is_file():
        return None
    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        connection.row_factory = sqlite3.Row
        try:
            return read(connection)
        finally:
            connection.close()
    except sqlite3.Error:
        return None


def _offers_last(incomplete: str) -> bool:
    return bool(incomplete) and "last".startswith(incomplete.lower())


def run_ids(ctx: typer.Context, incomplete: str) -> list[tuple[str, str]]:
    """Ids of the stored runs that begin with what is typed, newest first, each with a
    short description for shells that show one (zsh, fish)."""

    def read(connection: sqlite3.Connection) -> list[tuple[str, str]]:
        rows = connection.execute(
            "SELECT id, started_at, protocol, question FROM run_texts WHERE substr(id, 1, ?) = ? "
            "ORDER BY started_at DESC LIMIT ?",
            (len(incomplete), incomplete, RUN_LIMIT),
        ).fetchall()
        found = [
            (run_id, _describe(started, protocol, question))
            for run_id, started, protocol, question in rows
            if isinstance(run_id, str)
        ]
        if _offers_last(incomplete) and connection.execute("SELECT 1 FROM runs LIMIT 1").fetchone() is not None:
            found.insert(0, ("last", "the run started last"))
        return found

    return _read_store(ctx, read) or []


# What a run stopped before its end is stored as: the statuses `panel resume` takes (a
# `running` one only when its process is gone from this host: stale).
RESUMABLE = ("interrupted", "failed", "running")


def resumable_run_ids(ctx: typer.Context, incomplete: str) -> list[tuple[str, str]]:
    """`run_ids` for `panel resume`: only the runs it would resume (interrupted, failed, or
    crashed: running with its process gone), so finished runs and runs another run took over
    are not offered. `last` only when the run started last is one of them."""
    from panel_cli.store.records import listed_status

    def resumable(row: sqlite3.Row) -> bool:
        return row["status"] in RESUMABLE and listed_status(row) != "running"

    def read(connection: sqlite3.Connection) -> list[tuple[str, str]]:
        rows = connection.execute(
            "SELECT r.id, r.started_at, r.protocol, q.body AS question, r.status, r.pid, r.host FROM runs r"
            " LEFT JOIN texts q ON q.id = r.question_text WHERE substr(r.id, 1, ?) = ?"
            f" AND r.status IN ({', '.join('?' for _ in RESUMABLE)}) ORDER BY r.started_at DESC LIMIT ?",
            (len(incomplete), incomplete, *RESUMABLE, RUN_LIMIT),
        ).fetchall()
        found = [
            (row["id"], _describe(row["started_at"], row["protocol"], row["question"]))
            for row in rows
            if isinstance(row["id"], str) and resumable(row)
        ]
        if _offers_last(incomplete):
            latest = connection.execute(
                "SELECT id, status, pid, host, started_at FROM runs ORDER BY started_at DESC, id LIMIT 1"
            ).fetchone()
            if latest is not None and resumable(latest):
                found.insert(0, ("last", "the run started last"))
        return found

    return _read_store(ctx, read) or []


def retallied_protocols() -> tuple[str, ...]:
    """The protocols whose stored ballots `panel history retally` counts again."""
    return ("vote", "decide")


def retallyable_run_ids(ctx: typer.Context, incomplete: str) -> list[tuple[str, str]]:
    """`run_ids` for `panel history retally`: only the runs it can count again (of a protocol
    that votes, whose vote opened, so ballots are stored). `last` only when the run started
    last is one of them."""
    protocols = retallied_protocols()
    voted = (
        f"r.protocol IN ({', '.join('?' for _ in protocols)})"
        " AND EXISTS (SELECT 1 FROM events e WHERE e.run_id = r.id AND e.type = 'vote_opened')"
    )

    def read(connection: sqlite3.Connection) -> list[tuple[str, str]]:
        rows = connection.execute(
            "SELECT r.id, r.started_at, r.protocol, q.body AS question FROM runs r"
            f" LEFT JOIN texts q ON q.id = r.question_text WHERE substr(r.id, 1, ?) = ? AND {voted}"
            " ORDER BY r.started_at DESC LIMIT ?",
            (len(incomplete), incomplete, *protocols, RUN_LIMIT),
        ).fetchall()
        found = [(row["id"], _describe(row["started_at"], row["protocol"], row["question"])) for row in rows]
        found = [(run_id, about) for run_id, about in found if isinstance(run_id, str)]
        if _offers_last(incomplete):
            latest = connection.execute("SELECT id FROM runs ORDER BY started_at DESC, id LIMIT 1").fetchone()
            if (
                latest is not None
                and connection.execute(
                    f"SELECT 1 FROM runs r WHERE r.id = ? AND {voted}", (latest["id"], *protocols)
                ).fetchone()
            ):
                found.insert(0, ("last", "the run started last"))
        return found

    return _read_store(ctx, read) or []


def field_values(field: str) -> Callable[[str], list[str]]:
    """A completion of the values a panel's `field` takes (`panel_cli.config.field_choices`).
    The panel models are imported only when the shell asks."""

    def values(incomplete: str) -> list[str]:
        from panel_cli.config import field_choices

        return [choice for choice in field_choices(field) if choice.lower().startswith(incomplete.lower())]

    return values


def _describe(started: object, protocol: object, question: object) -> str:
    """`2026-11-30 14:54 confer Which database…`: the start in local time (the file keeps ISO
    UTC). A damaged row's values are left out rather than stop the completion."""
    from datetime import datetime

    from panel_cli.store.records import read_time

    moment = read_time(started)
    when = datetime.fromtimestamp(moment).strftime("%Y-%m-%d %H:%M") if moment is not None else ""
    words = " ".join(question.split())[:60] if isinstance(question, str) else ""
    return " ".join(part for part in (when, protocol if isinstance(protocol, str) else "", words) if part)
