"""`panel eval` from the command line, in-process through `main` (so user errors are exit
code 2 with one sentence, as in a shell), on simulated voters: no key, no network."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from panel_cli.cli.app import main
from panel_cli.eval.datasets import load_dataset
from panel_cli.protocols.ensemble.engine import NO_CONFIDENCE
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
        assert system["simulated"] and system["cost"] == 0.0, "simulated: nothing spent"
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


# Kept evals: list, show, resume; calibration; the HTML report ---------------------------------


def run_json(args: list[str], capsys, monkeypatch) -> dict:
    code, out, err = panel([*args, "--json"], capsys, monkeypatch)
    assert code == 0, err
    return json.loads(out)


def test_the_eval_group_keeps_the_short_form_and_lists_its_commands(jury, tmp_path, capsys, monkeypatch):
    code, out, _ = panel(["eval", "--help"], capsys, monkeypatch)
    assert code == 0
    for command in ("run", "list", "show"):
        assert command in out
    db = str(tmp_path / "runs.db")
    short = run_json(
        ["eval", str(jury), "--dataset", "builtin:general", "--limit", "3", "--protocols", "vote", "--db", db],
        capsys,
        monkeypatch,
    )
    long = run_json(
        ["eval", "run", str(jury), "--dataset", "builtin:general", "--limit", "3", "--protocols", "vote", "--db", db],
        capsys,
        monkeypatch,
    )
    assert [item["grade"]["correct"] for item in short["items"]] == [item["grade"]["correct"] for item in long["items"]]


def test_list_and_show_read_the_kept_evals(jury, tmp_path, capsys, monkeypatch):
    db = str(tmp_path / "runs.db")
    result = run_json(
        ["eval", str(jury), "--dataset", "builtin:general", "--limit", "4", "--protocols", "vote,confer", "--db", db],
        capsys,
        monkeypatch,
    )
    listed = run_json(["eval", "list", "--db", db], capsys, monkeypatch)
    assert [(row["id"], row["status"], row["questions"], row["items"]) for row in listed] == [
        (result["eval_id"], "finished", 4, 12)
    ]
    shown = run_json(["eval", "show", result["eval_id"][:4], "--db", db], capsys, monkeypatch)
    for key in ("systems", "pairs", "comparisons", "theory", "settings", "dataset_sha256", "asked"):
        assert shown[key] == result[key], key
    assert [pair["first"] + "/" + pair["second"] for pair in shown["pairs"]] == [
        "baseline/vote",
        "baseline/confer",
        "vote/confer",
    ]
    code, out, _ = panel(["eval", "list", "--db", db], capsys, monkeypatch)
    assert code == 0 and result["eval_id"] in out and "finished" in out
    code, out, err = panel(["eval", "show", "nope", "--db", db], capsys, monkeypatch)
    assert (code, out) == (2, "")
    assert err == f"panel: No eval 'nope' in {db} (panel eval list shows them).\n"


def test_resume_runs_only_what_the_eval_lacks(jury, tmp_path, capsys, monkeypatch):
    """An eval cut short (its status and some items taken away, as a kill would leave it):
    `--resume` runs only the missing items, and the eval ends finished with them all."""
    import sqlite3

    db = tmp_path / "runs.db"
    result = run_json(
        ["eval", str(jury), "--dataset", "builtin:general", "--limit", "5", "--protocols", "vote", "--db", str(db)],
        capsys,
        monkeypatch,
    )
    eval_id = result["eval_id"]
    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE evals SET status = 'interrupted' WHERE id = ?", (eval_id,))
        lost = [item["question_id"] for item in result["items"] if item["system"] == "vote"][:2]
        connection.execute(
            "DELETE FROM eval_items WHERE eval_id = ? AND system = 'vote' AND question_id IN (?, ?)", (eval_id, *lost)
        )
    connection.close()
    with TranscriptReader.open(db) as reader:
        before = len(reader.list_runs(limit=-1))
    resumed = run_json(["eval", "--resume", eval_id, "--db", str(db)], capsys, monkeypatch)
    with TranscriptReader.open(db) as reader:
        assert len(reader.list_runs(limit=-1)) - before == 2
    assert resumed["status"] == "finished" and len(resumed["items"]) == 10
    assert sorted((i["system"], i["question_id"], i["grade"]["correct"]) for i in resumed["items"]) == sorted(
        (i["system"], i["question_id"], i["grade"]["correct"]) for i in result["items"]
    )
    code, _, err = panel(["eval", "--resume", eval_id, "--db", str(db)], capsys, monkeypatch)
    assert code == 2 and err == f"panel: Eval {eval_id} is finished; panel eval show {eval_id} shows it.\n"


@pytest.mark.parametrize(
    "args, message",
    [
        (["eval", "JURY", "--resume", "e1"], "panel: --resume goes on with the eval as it was; leave out FILE.\n"),
        (
            ["eval", "JURY", "--dataset", "builtin:general", "--split", "0.5"],
            "panel: --split holds out questions from --calibrate; give --calibrate too.\n",
        ),
        (
            ["eval", "JURY", "--dataset", "builtin:general", "--calibrate", "-", "--json"],
            "panel: --calibrate - prints the weights on stdout, and so does --json; write the weights to a file.\n",
        ),
        (
            ["eval", "JURY", "--dataset", "builtin:general", "--calibrate", "w.yaml", "--protocols", "vote"],
            "panel: --calibrate without --split measures the members alone and runs no protocol, so nothing is graded "
            "on what it was calibrated on; add --split 0.5 to check the weights on held-out questions.\n",
        ),
    ],
)
def test_eval_option_errors(args, message, jury, tmp_path, capsys, monkeypatch):
    args = [str(jury) if arg == "JURY" else arg for arg in args]
    code, out, err = panel([*args, "--db", str(tmp_path / "r.db")], capsys, monkeypatch)
    assert (code, out, err) == (2, "", message)


MIXED = "name: mixed\nprotocol: vote\nmethod: weighted_plurality\nmembers:\n" + "".join(
    f"  - {{name: v{i}, model: demo/oracle@{p}}}\n" for i, p in enumerate((0.9, 0.6, 0.6, 0.6, 0.6), start=1)
)


def test_calibrate_on_half_writes_weights_a_panel_can_name(tmp_path, capsys, monkeypatch):
    path = tmp_path / "mixed.yaml"
    path.write_text(MIXED, encoding="utf-8")
    weights = tmp_path / "weights.yaml"
    db = str(tmp_path / "r.db")
    code, out, err = panel(
        [
            "eval",
            str(path),
            "--dataset",
            "builtin:general",
            "--calibrate",
            str(weights),
            "--split",
            "0.5",
            "--protocols",
            "vote",
            "--db",
            db,
            "--json",
        ],
        capsys,
        monkeypatch,
    )
    assert code == 0, err
    result = json.loads(out)
    calibration = result["calibration"]
    assert calibration["questions"] == 36 and calibration["options"] == 4
    assert [entry["member"] for entry in calibration["members"]] == ["v1", "v2", "v3", "v4", "v5"]
    # The members alone on the calibration half; the systems on the other half.
    parts = {system["name"]: system["part"] for system in result["plan"]}
    assert parts == {
        "alone:v1": "calibration",
        "alone:v2": "calibration",
        "alone:v3": "calibration",
        "alone:v4": "calibration",
        "alone:v5": "calibration",
        "baseline": "check",
        "vote": "check",
    }
    asked = {item["question_id"] for item in result["items"] if item["system"] == "alone:v1"}
    checked = {item["question_id"] for item in result["items"] if item["system"] == "vote"}
    assert len(asked) == 36 and len(checked) == 37 and asked.isdisjoint(checked)
    assert result["settings"]["weights"] == {entry["member"]: entry["weight"] for entry in calibration["members"]}
    assert all(entry["standard_error"] > 0 for entry in calibration["members"])
    assert "weighted plurality" in result["theory"]["vote"]["rule"]
    # 36 questions are too few to trust the weights: said once the eval is done.
    assert "panel: warning: calibrated on 36 questions, fewer than 50: each weight is rough" in err
    # The file is what a panel names.
    path.write_text(MIXED.replace("members:", f"weights: from {weights.name}\nmembers:"), encoding="utf-8")
    from panel_cli.config import load_panel

    assert [member.weight for member in load_panel(path).members] == [
        entry["weight"] for entry in calibration["members"]
    ]
    # `-`: the weights as YAML on stdout, the table on stderr.
    code, out, err = panel(
        [
            "eval",
            str(path),
            "--dataset",
            "builtin:general",
            "--limit",
            "8",
            "--calibrate",
            "-",
            "--db",
            db,
        ],
        capsys,
        monkeypatch,
    )
    assert code == 0, err
    assert out.startswith("# Weights calibrated by panel eval") and "\nweights:\n  v1: " in out
    assert "alone:v1" in err
    # The table says each weight with its standard error, and that 8 questions are too few.
    assert "Calibrated: 8 questions of 4 options" in err and " ± " in err
    assert "warning: calibrated on 8 questions, fewer than 50" in err


def test_an_html_report_names_what_was_measured_and_escapes_every_text(jury, tmp_path, capsys, monkeypatch):
    data = tmp_path / "d.jsonl"
    rows = [
        {"id": "x1", "question": "<script>alert(1)</script> Which?", "answer": "a&b", "options": ["a&b", "c"]},
        {"id": "x2", "question": "Second?", "answer": "c", "options": ["a&b", "c"]},
    ]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    report = tmp_path / "report.html"
    result = run_json(
        [
            "eval",
            str(jury),
            "--dataset",
            str(data),
            "--protocols",
            "vote,delphi",
            "--report",
            str(report),
            "--db",
            str(tmp_path / "r.db"),
        ],
        capsys,
        monkeypatch,
    )
    page = report.read_text(encoding="utf-8")
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    for fact in (
        result["dataset_sha256"],
        "demo/oracle@0.7",
        "panel ",
        "litellm ",
        "not measurable with simulated voters",
        "a&amp;b",
    ):
        assert fact in page, fact
    for item in result["items"]:
        assert item["run_id"] in page
    delphi = next(system for system in result["systems"] if system["system"] == "delphi")
    assert delphi["not_measurable"].startswith("delphi's answer is its facilitator's summary")


def test_the_root_help_says_what_the_eval_group_says():
    """`panel --help` lists `eval` without importing it, from a copy of its help."""
    from panel_cli.cli.app import EVAL_HELP as listed
    from panel_cli.cli.eval import EVAL_HELP

    assert listed == EVAL_HELP


CALIBRATED = "name: calibrated\ntally: log_odds\nmembers:\n" + "".join(
    f"  - {{name: v{i}, model: 'demo/oracle@{p}?confidence=p'}}\n" for i, p in enumerate((0.9, 0.6, 0.6), start=1)
)


def test_every_report_draws_how_the_confidence_did_and_says_where_it_came_from(tmp_path, capsys, monkeypatch):
    """confer by log-odds over oracles stating their own accuracy: each answer's confidence is
    the posterior of the votes, and every format says how it did (ECE, Brier against the exact
    posterior's) with the reliability diagram: a chart on the terminal, a table and the chart in
    Markdown, an SVG on the page; with the date, Python, the commit and the command line."""
    path = tmp_path / "calibrated.yaml"
    path.write_text(CALIBRATED, encoding="utf-8")
    db = str(tmp_path / "r.db")
    args = ["eval", str(path), "--dataset", "builtin:general", "--limit", "20", "--protocols", "confer", "--db", db]
    code, out, err = panel([*args, "--report", str(tmp_path / "r.md")], capsys, monkeypatch)
    assert code == 0, err
    assert "Confidence (the probability each answer is right)" in out
    assert "confer: ECE " in out and "× the exact posterior's" in out
    assert "█ the share right, │ the mean confidence stated" in out
    assert f"Without a confidence: baseline — {NO_CONFIDENCE['race']}." in " ".join(out.split())
    text = (tmp_path / "r.md").read_text(encoding="utf-8")
    assert "## Confidence" in text and "| confidence | answers | mean stated | share right | right − stated |" in text
    assert "```text\nconfidence  answers  stated  right" in text
    assert "- Command: panel eval " in text and " --dataset builtin:general --limit 20 --protocols confer --db " in text
    assert "- Date: " in text and "- Ran on: Python " in text
    eval_id = json.loads(panel(["eval", "list", "--json", "--db", db], capsys, monkeypatch)[1])[0]["id"]
    code, _, err = panel(
        ["eval", "show", eval_id, "--db", db, "--report", str(tmp_path / "r.html")], capsys, monkeypatch
    )
    assert code == 0, err
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert '<section class="card" id="confidence">' in page and '<svg class="reliability"' in page


def test_list_shows_a_stored_eval_without_what_a_terminal_would_obey(jury, tmp_path, capsys, monkeypatch):
    """An eval imported from someone else's file holds whatever was written into its row."""
    import contextlib
    import sqlite3

    db = tmp_path / "runs.db"
    run_json(["eval", str(jury), "--dataset", "builtin:general", "--limit", "2", "--db", str(db)], capsys, monkeypatch)
    with contextlib.closing(sqlite3.connect(db)) as con, con:
        con.execute("UPDATE evals SET panel = 'P' || char(27) || '[2J', dataset = 'D' || char(27) || ']0;t' || char(7)")
    code, out, _ = panel(["eval", "list", "--db", str(db)], capsys, monkeypatch)
    assert code == 0 and "P" in out and "\x1b" not in out
    assert all(
        "\x1b" not in row["panel"] + row["dataset"]
        for row in run_json(["eval", "list", "--db", str(db)], capsys, monkeypatch)
    )
