"""Shell completion of what a command takes: `history retally` offers only the runs it can count
again, `eval` its commands as well as panel files, and every enumerated option (`--tally`,
`--answer-order`, `--method`, `--mode`, `--tie-break`) the values the panel model allows.
Completed in-process, as bash asks for them."""

from __future__ import annotations

import asyncio
import typing
from pathlib import Path

import pytest
from typer.testing import CliRunner

from panel_cli.cli.app import app
from panel_cli.events import RunFinished, VoteOpened
from panel_cli.protocols.confer.log_odds import ConferTally
from panel_cli.protocols.confer.settings import AnswerOrder
from panel_cli.protocols.ensemble.settings import EnsembleMode
from panel_cli.protocols.vote.methods import Method as VoteMethod
from panel_cli.protocols.vote.methods import TieBreak
from tests.helpers import ROOT
from tests.store.sample_runs import confer_run, record, run_started


def complete(words: str) -> list[str]:
    """What bash is offered for the last word of `words` (a trailing space: a new word)."""
    env = {"_PANEL_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(len(words.split(" ")) - 1)}
    outcome = CliRunner(env=env).invoke(app, [], prog_name="panel")
    return outcome.output.split()


def choices(kind: object) -> list[str]:
    """A Literal's values, through `Annotated` and `| None`."""
    found: list[str] = []
    for arg in typing.get_args(kind):
        found += [arg] if isinstance(arg, str) else choices(arg)
    return found


@pytest.mark.parametrize(
    ("words", "kind"),
    [
        ("panel confer configs/demo.yaml --tally ", ConferTally),
        ("panel confer configs/demo.yaml --answer-order ", AnswerOrder),
        ("panel vote configs/vote.yaml --method ", VoteMethod),
        ("panel decide configs/decide.yaml --tie-break ", TieBreak),
        ("panel ensemble configs/ensemble.yaml --mode ", EnsembleMode),
        ("panel history retally x --method ", VoteMethod),
        ("panel history retally x --tie-break ", TieBreak),
    ],
    ids=["tally", "answer-order", "method", "tie-break", "mode", "retally-method", "retally-tie-break"],
)
def test_an_enumerated_option_offers_what_the_panel_model_allows(
    words: str, kind: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    assert complete(words) == choices(kind)


def test_an_enumerated_option_offers_the_values_that_begin_with_what_is_typed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    assert complete("panel vote configs/vote.yaml --method su") == ["supermajority"]
    assert complete("panel confer --answer-order s") == ["sequential"]


def test_eval_offers_its_commands_and_panel_files(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    offered = complete("panel eval ")
    assert offered[:3] == ["run", "list", "show"] and "configs/" in offered
    assert complete("panel eval li") == ["list"]
    assert complete("panel eval configs/vo") == ["configs/vote.yaml"]
    assert "--dataset" in complete("panel eval configs/vote.yaml --data")


def test_retally_offers_only_the_runs_it_can_count_again(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    opened = VoteOpened(
        options=["PostgreSQL", "SQLite"], method="majority", threshold=0.5, voters=["gpt", "claude"], quorum=1
    )
    vote = run_started().model_copy(update={"protocol": "vote"})
    asyncio.run(record(db, "ab-vote", [vote, opened, RunFinished(final_answer="PostgreSQL")]))
    asyncio.run(record(db, "ab-unopened", [vote, RunFinished(final_answer=None, reached_answer=False)]))
    asyncio.run(record(db, "ab-confer", confer_run("ab-confer")))
    assert complete(f"panel history retally --db {db} ab") == ["ab-vote"]
    assert complete(f"panel history retally --db {db} la") == [], "the run started last has no ballots"
    assert set(complete(f"panel history show --db {db} ab")) == {"ab-vote", "ab-unopened", "ab-confer"}
    asyncio.run(record(db, "ab-latest", [vote, opened, RunFinished(final_answer="SQLite")]))
    assert complete(f"panel history retally --db {db} la") == ["last"]
