"""Numbers from the command line and the panel file are bounded: NaN, infinities and numbers
too large for a float, an asyncio timer or SQLite are one sentence and exit 2, before any
call, never a run that fails after paying for every call (weights of 1e308 overflowed the
weighted tally) or a cap that refuses everything (`--max-cost nan`)."""

from __future__ import annotations

import pytest

from panel_cli.errors import UserError
from tests.fakes.openai_server import reply
from tests.helpers import cli, write_panel

HUGE = "100000000000000000000000000000"


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "1e400", "1e7"])
def test_max_cost_must_be_an_amount_of_dollars(tmp_path, value):
    ran = cli("confer", "configs/demo.yaml", "--max-cost", value, "--db", str(tmp_path / "r.db"))
    assert ran.exit_code == 2, ran.output
    assert "Invalid value for '--max-cost'" in ran.stderr and "US dollars" in ran.stderr
    assert not (tmp_path / "r.db").exists()


def test_weights_of_1e308_are_refused_before_any_call(fake_server, tmp_path):
    fake_server.default(reply("tea"))
    panel = write_panel(
        tmp_path / "w.yaml",
        fake_server,
        ["a", "b"],
        "protocol: vote\nmethod: weighted\nquestion: tea or coffee?\noptions: [tea, coffee]",
        member_lines="    weight: 1e308\n",
    )
    ran = cli("vote", str(panel), "--db", str(tmp_path / "r.db"))
    assert isinstance(ran.exception, UserError), ran.output
    assert "members[0].weight: input should be less than or equal to 1000000" in ran.exception.message
    assert not fake_server.requests


def test_a_weights_file_with_a_weight_past_the_bound_is_refused(tmp_path):
    (tmp_path / "weights.yaml").write_text(f"weights:\n  a: 1e308\n  b: {HUGE}0\n")
    (tmp_path / "p.yaml").write_text(
        "protocol: vote\nmethod: weighted\noptions: [x, y]\nweights: from weights.yaml\n"
        "members:\n  - name: a\n    model: demo/sage\n  - name: b\n    model: demo/skeptic\n"
    )
    ran = cli("validate", str(tmp_path / "p.yaml"))
    assert ran.exit_code == 2, ran.output
    assert "weights.a: a weight is a number from -1,000,000 to 1,000,000, not '1e308'" in ran.stderr
    assert (
        "weights.b: a weight is a number from -1,000,000 to 1,000,000, not '1000000000000000000000000000000'"
        in ran.stderr
    )


@pytest.mark.parametrize(
    ("field", "said"),
    [
        ("timeouts: {answer: .nan}", "timeouts.answer: a duration must be a positive number of seconds"),
        ("timeouts: {answer: .inf}", "timeouts.answer: a duration is at most a day"),
        ("timeouts: {idle: 100000000000000000000h}", "timeouts.idle: a duration is at most a day"),
        ("defaults: {timeout: 25h}", "defaults.timeout: a duration is at most a day"),
        (f"defaults: {{max_tokens: {HUGE}}}", "defaults.max_tokens: input should be less than or equal to"),
        (f"defaults: {{concurrency: {HUGE}}}", "defaults.concurrency: input should be less than or equal to"),
        (f"defaults: {{max_response_chars: {HUGE}}}", "defaults.max_response_chars: input should be less than"),
        ("defaults: {max_cost: .inf}", "defaults.max_cost: input should be a finite number"),
        (f"seed: {HUGE}", "seed: input should be less than or equal to"),
        (f"max_voters: {HUGE}", "max_voters: input should be less than or equal to"),
        (f"concurrency: {{openai: {HUGE}}}", "concurrency.openai: input should be less than or equal to"),
    ],
)
def test_numbers_in_a_panel_file_are_bounded(tmp_path, field, said):
    (tmp_path / "p.yaml").write_text(
        f"question: hi\n{field}\nmembers:\n  - name: a\n    model: demo/sage\n  - name: b\n    model: demo/skeptic\n"
    )
    ran = cli("validate", str(tmp_path / "p.yaml"))
    assert ran.exit_code == 2, ran.output
    assert f"line 2: {said}" in ran.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["eval", "list", "--limit", HUGE],
        ["eval", "configs/demo.yaml", "--dataset", "panel_cli/datasets/general.jsonl", "--seed", HUGE],
        ["eval", "configs/demo.yaml", "--dataset", "panel_cli/datasets/general.jsonl", "--limit", HUGE],
        ["confer", "configs/demo.yaml", "--max-calls", HUGE],
    ],
)
def test_counts_on_the_command_line_stay_within_what_sqlite_stores(tmp_path, args):
    ran = cli(*args, "--db", str(tmp_path / "r.db"))
    assert ran.exit_code == 2, ran.output
    assert "is not in the range" in ran.stderr
