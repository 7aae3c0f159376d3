"""Hostile panel files (and questions): each is refused with one located sentence and exit code 2.

One test per row of the fault suite. Each runs the real `panel validate` in a subprocess
(it never imports litellm, so each is quick): a recursion, a hang or a memory blow-up
would show there as it would for a user, not be hidden by an in-process runner. The
timeout only guards against a hang; it is not an assertion about speed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

MEMBERS = "members:\n  - name: a\n    model: demo/sage\n  - name: b\n    model: demo/skeptic\n"
HANG_GUARD = 120


def refused(tmp_path: Path, name: str, content: str | bytes) -> str:
    """Write the panel file, validate it, and return the single line it was refused with."""
    file = tmp_path / name
    if isinstance(content, str):
        file.write_text(content, encoding="utf-8")
    else:
        file.write_bytes(content)
    env = {**os.environ, "PANEL_CONFIG_DIR": str(tmp_path / "config"), "NO_COLOR": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "panel_cli", "validate", name],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "unexpected error" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"panel: {name}"), lines[0]
    return lines[0].removeprefix("panel: ")


def test_a_file_over_the_size_limit(tmp_path):
    content = MEMBERS + "# padding padding padding padding\n" * 40_000
    assert (
        refused(tmp_path, "big.yaml", content) == "big.yaml: the file is larger than 1 MiB, too big for a panel file."
    )


def test_billion_laughs(tmp_path):
    lines = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]")
    content = "\n".join(lines) + "\n"
    assert len(content) < 600
    assert refused(tmp_path, "laughs.yaml", content) == (
        "laughs.yaml, line 5: the alias *d takes the values repeated through aliases past 10000, the most a file may repeat."
    )


def test_an_unknown_tag(tmp_path):
    assert refused(tmp_path, "tag.yaml", MEMBERS + "question: !custom What?\n") == (
        "tag.yaml, line 6: question: the tag '!custom' is not supported; a panel file holds plain YAML values."
    )


def test_a_python_tag_is_refused_not_run(tmp_path):
    marker = tmp_path / "ran"
    content = MEMBERS + f"question: !!python/object/apply:os.system ['touch {marker}']\n"
    assert refused(tmp_path, "python.yaml", content) == (
        "python.yaml, line 6: question: the tag '!!python/object/apply:os.system' is not supported; "
        "a panel file holds plain YAML values."
    )
    assert not marker.exists()


@pytest.mark.parametrize("opener", ["[", "- "])
def test_deep_nesting(tmp_path, opener):
    content = "members:\n  " + opener * 100_000 + "x\n"
    assert (
        refused(tmp_path, "deep.yaml", content)
        == "deep.yaml, line 2: values are nested more than 100 levels deep here."
    )


def test_a_panel_file_that_is_not_utf8(tmp_path):
    content = MEMBERS.encode() + "question: Café or tea?\n".encode("latin-1")
    assert (
        refused(tmp_path, "latin.yaml", content)
        == "latin.yaml, line 6: the file is not UTF-8 text (byte 0xe9); save it as UTF-8."
    )


def test_a_question_file_that_is_not_utf8(tmp_path):
    (tmp_path / "q.md").write_bytes("Café or tea?\n".encode("latin-1"))
    assert refused(tmp_path, "p.yaml", MEMBERS + "question_file: q.md\n") == (
        "p.yaml, line 6: question_file: q.md: line 1 is not UTF-8 text (byte 0xe9); save it as UTF-8."
    )


def test_question_file_is_dev_zero(tmp_path):
    assert refused(tmp_path, "p.yaml", MEMBERS + "question_file: /dev/zero\n") == (
        "p.yaml, line 6: question_file: /dev/zero: is not a regular file (a pipe, a device or a socket); put the question in a file."
    )


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_question_file_is_a_fifo(tmp_path):
    """Nobody ever writes to the FIFO: opening it to read would block forever."""
    os.mkfifo(tmp_path / "q.fifo")
    assert refused(tmp_path, "p.yaml", MEMBERS + "question_file: q.fifo\n") == (
        "p.yaml, line 6: question_file: q.fifo: is not a regular file (a pipe, a device or a socket); put the question in a file."
    )


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_weights_file_that_is_a_fifo(tmp_path):
    """Nobody ever writes to the FIFO: `panel validate` and the run refuse it before opening it."""
    os.mkfifo(tmp_path / "w.fifo")
    said = (
        "p.yaml, line 9: weights: w.fifo: is not a regular file (a pipe, a device or a socket); "
        "name the file panel eval --calibrate wrote."
    )
    panel = MEMBERS + "protocol: vote\nmethod: weighted\noptions: [x, y]\nweights: from w.fifo\n"
    assert refused(tmp_path, "p.yaml", panel) == said
    run = subprocess.run(
        [sys.executable, "-m", "panel_cli", "vote", "p.yaml", "-q", "Which?", "--db", str(tmp_path / "r.db")],
        cwd=tmp_path,
        env={**os.environ, "PANEL_CONFIG_DIR": str(tmp_path / "config"), "NO_COLOR": "1"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
    )
    assert (run.returncode, run.stderr.splitlines()) == (2, [f"panel: {said}"])


def test_question_and_question_file_together(tmp_path):
    (tmp_path / "q.md").write_text("From the file?\n")
    assert refused(tmp_path, "p.yaml", MEMBERS + "question: Why?\nquestion_file: q.md\n") == (
        "p.yaml, line 7: question_file: give 'question' or 'question_file', not both."
    )


# Local files a panel file names: a question file gets the refusals an attachment gets, and
# neither may come from /proc or /sys, which hold the system's state (every variable, keys
# included, in /proc/self/environ), not text to send to the models.
SYSTEM_FILE = "is under /proc or /sys, the system's own state, not a file to send to the models"


@pytest.mark.parametrize("path", ["/proc/self/environ", "/proc/self/status", "/proc/version", "/sys/kernel/osrelease"])
def test_a_question_file_under_proc_or_sys(tmp_path, path):
    if not Path(path).exists():
        pytest.skip(f"no {path} here")
    assert refused(tmp_path, "p.yaml", MEMBERS + f"question_file: {path}\n") == (
        f"p.yaml, line 6: question_file: {path}: {SYSTEM_FILE}."
    )


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="no /proc here")
def test_a_question_file_that_links_into_proc(tmp_path):
    (tmp_path / "q.md").symlink_to("/proc/self/environ")
    assert refused(tmp_path, "p.yaml", MEMBERS + "question_file: q.md\n") == (
        f"p.yaml, line 6: question_file: q.md: {SYSTEM_FILE}."
    )


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="no /proc here")
@pytest.mark.parametrize("entry", ["/proc/self/status", "status.md"])
def test_an_attachment_under_proc(tmp_path, entry):
    (tmp_path / "status.md").symlink_to("/proc/self/status")
    shown = entry if entry.startswith("/") else str(tmp_path / entry)
    assert refused(tmp_path, "p.yaml", MEMBERS + f"question: Why?\nattach: [{entry}]\n") == (
        f"p.yaml, line 7: attach: {shown}: {SYSTEM_FILE}."
    )


def test_a_question_file_with_a_nul_byte(tmp_path):
    (tmp_path / "q.md").write_bytes(b"What is\x00this?\n")
    assert refused(tmp_path, "p.yaml", MEMBERS + "question_file: q.md\n") == (
        "p.yaml, line 6: question_file: q.md: is a binary file; a question is text."
    )


@pytest.mark.parametrize(
    ("where", "encoding", "said"),
    [
        ("-q", "utf-8:surrogateescape", "The question given with -q is not UTF-8 text (byte 0xe9 at character 4)."),
        ("stdin", "utf-8:surrogateescape", "The question on stdin is not UTF-8 text (byte 0xe9 at character 4)."),
        ("stdin", "utf-8:strict", "The question on stdin is not UTF-8 text (byte 0xe9 at byte 4)."),
    ],
)
def test_a_question_that_is_not_utf8(tmp_path, where, encoding, said):
    """Bytes that are not UTF-8 in argv, or on stdin (read leniently in a C locale, strictly
    in a UTF-8 one), are one sentence and exit 2 before any call, never a run that fails."""
    question = "Café or tea?".encode("latin-1")
    given: list[str | bytes] = ["-q", question] if where == "-q" else ["-q", "-"]
    result = subprocess.run(
        [sys.executable, "-m", "panel_cli", "confer", "configs/demo.yaml", "--db", str(tmp_path / "r.db"), *given],
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "PYTHONIOENCODING": encoding},
        input=question if where == "stdin" else b"",
        capture_output=True,
        timeout=HANG_GUARD,
    )
    assert (result.returncode, result.stderr.decode()) == (2, f"panel: {said}\n")
    assert not (tmp_path / "r.db").exists()
