"""`panel eval` from the command line, in-process through `main` (so user errors are exit
code 2 with one sentence, as in a shell), on simulated voters: no key, no network."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from panel_cli.cli.app import main
from panel_cli.eval.datasets import load_dataset
from panel_cli.store.reader import TranscriptReader

JURY = "name: jury\nmembers:\n" + "".join(f"  - {{name: v{i}, model: demo/oracle@0.7}}\n" for i in range(1, 6))


def panel(args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["panel", *args])
    monkeypatch.setenv("COLUMNS", "100")
    with pytest.raises(SystemExit) as ended:
        main()
    captured = capsys.readouterr()
    return int(ended.value.code or 0), captured.out, captured.err


@pytest.fixture
def jury(tmp_path: Path) -> Path:
    path = tmp_path / "jury.yaml"
    path.write_text(JURY, encoding="utf-8")
    return path


def test_list_datasets(capsys, monkeypatch):
    code, out, _ = panel(["eval", "--list-datasets"], capsys, monkeypatch)
    assert code == 0
    size = len(load_dataset("builtin:general").items)
    assert "builtin:general" in out
    assert str(size) in out
    code, out, _ = panel(["eval", "--list-datasets", "--json"], capsys, monkeypatch)
    (general,) = json.loads(out)
    assert (general["name"], general["size"]) == ("builtin:general", size)


def test_eval_json_and_report(jury, tmp_path, capsys, monkeypatch):
    report = tmp_path / "report.md"
    db = tmp_path / "runs.db"
    args = [
        "eval",
        str(jury),
        "--dataset",
        "builtin:general",
        "--limit",
        "12",
        "--json",
        "--report",
        str(report),
        "--db",
        str(db),
    ]
    code, out, err = panel(args, capsys, monkeypatch)
    assert code == 0, err
    result = json.loads(out)
    assert (result["dataset"], result["questions"], result["panel"], result["baseline"], result["grader"]) == (
        "builtin:general",
        12,
        "jury",
        "v1",
        "option match",
    )
    assert [system["system"] for system in result["systems"]] == ["baseline", "confer", "council", "vote"]
    assert [comparison["system"] for comparison in result["comparisons"]] == ["confer", "council", "vote"]
    # Each system's own rule, exactly: a strict majority, confer's plurality, council's mean place.
    theory = {system: (round(line["accuracy"], 3), line["way"]) for system, line in result["theory"].items()}
    assert theory == {
        "baseline": (0.7, "exact"),
        "confer": (0.910, "exact"),
        "council": (0.903, "exact"),
        "vote": (0.837, "exact"),
    }
    assert len(result["items"]) == 48
    for system in result["systems"]:
        assert 0 <= system["ci_low"] <= system["accuracy"] <= system["ci_high"] <= 1
        assert system["simulated"] and system["cost"] is None
    text = report.read_text(encoding="utf-8")
    for heading in (
        "# Eval of jury on builtin:general",
        "## Scores",
        "## Against the baseline",
        "## Theory",
        "## Per question",
    ):
        assert heading in text
    assert f"panel: report written to {report}." in err
    assert err.startswith(
        f"panel: eval {result['eval_id']}: 12 questions × 4 systems (baseline, confer, council, vote), 4 at a time."
    )
    with TranscriptReader.open(db) as reader:
        assert len(reader.list_runs(limit=-1)) == 48


def test_eval_table_says_what_the_numbers_mean(jury, tmp_path, capsys, monkeypatch):
    args = [
        "eval",
        str(jury),
        "--dataset",
        "builtin:general",
        "--limit",
        "10",
        "--protocols",
        "vote",
        "--baseline",
        "v3",
        "--db",
        str(tmp_path / "r.db"),
    ]
    code, out, err = panel(args, capsys, monkeypatch)
    assert code == 0, err
    assert "Eval of jury on builtin:general: 10 questions, graded by option match" in out
    assert "baseline (v3)" in out
    assert "Theory for simulated voters (independent voters" in out
    assert "baseline (v3): 70.0% exactly — v3 alone." in out
    assert "vote: 83.7% exactly — majority: more than half of the votes." in out
    assert "vote: " in out and ("significant" in out or "no difference" in out)
    assert "panel: vote: " in err  # a line per system on a pipe


@pytest.mark.parametrize(
    "args, message",
    [
        (["eval"], "panel: Give a panel file: panel eval FILE --dataset builtin:general.\n"),
        (
            ["eval", "JURY"],
            "panel: --dataset is needed: a JSONL file of questions with answers, or builtin:general (panel eval --list-datasets).\n",
        ),
        (
            ["eval", "JURY", "--dataset", "builtin:nope"],
            "panel: --dataset: there is no built-in dataset 'nope'; the built-ins are general (panel eval --list-datasets).\n",
        ),
        (["eval", "JURY", "--dataset", "builtin:general", "--protocols", "confer,senate"], None),
        (["eval", "JURY", "--dataset", "builtin:general", "--report", "MISSING/report.md"], None),
    ],
)
def test_user_errors_are_one_sentence_and_exit_2(args, message, jury, tmp_path, capsys, monkeypatch):
    args = [str(jury) if arg == "JURY" else str(tmp_path / arg) if arg.startswith("MISSING") else arg for arg in args]
    code, out, err = panel(args, capsys, monkeypatch)
    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1
    if message is not None:
        assert err == message
    assert "Traceback" not in err


def test_a_bad_dataset_file_is_located(jury, tmp_path, capsys, monkeypatch):
    data = tmp_path / "d.jsonl"
    data.write_text('{"question": "Q?", "answer": "a"}\n{"question": "Q2?"}\n', encoding="utf-8")
    code, _, err = panel(["eval", str(jury), "--dataset", str(data)], capsys, monkeypatch)
    assert code == 2
    assert err == f"panel: {data}, line 2: answer: missing or empty; every row needs its gold answer.\n"


def test_a_cost_cap_over_an_unknown_price_stops_the_eval_before_any_run(tmp_path, fake_server, capsys, monkeypatch):
    """The file's `defaults.max_cost` holds in an eval as in one run: over a model of unknown
    price the eval stops at once (exit 2), in one sentence, with no call made."""
    path = tmp_path / "capped.yaml"
    members = "".join(f"  - {{name: m{i}, model: openai/m{i}, api_base: '{fake_server.url}'}}\n" for i in range(2))
    path.write_text(f"name: capped\ndefaults: {{retries: 0, max_cost: 1}}\nmembers:\n{members}", encoding="utf-8")
    args = [
        "eval",
        str(path),
        "--dataset",
        "builtin:general",
        "--limit",
        "2",
        "--protocols",
        "vote",
        "--db",
        str(tmp_path / "runs.db"),
    ]
    code, _, err = panel(args, capsys, monkeypatch)
    assert code == 2
    assert (
        "defaults.max_cost cannot bound this run: 2 members have no known price ('m0' (openai/m0), 'm1' (openai/m1))"
        in err
    )
    assert fake_server.requests == []
