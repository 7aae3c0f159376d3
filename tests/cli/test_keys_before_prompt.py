"""On a terminal with no question given, `panel` asks `Question:`; a run that cannot start
(a missing key) says so before that, so nobody types a question only to lose it.

Each test runs `panel` as a real process with a pseudo-terminal on stdin (the prompt is only
asked on a terminal) and pipes for its output. A process that waits at the prompt never ends
by itself: the guard ends it and the test fails, saying so."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import HANG_GUARD  # a process stuck at the prompt fails the test; never a measurement

pytestmark = [pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX"), pytest.mark.subprocess]


def environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    """No key of any provider: only what panel needs to run offline, away from the user's files."""
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "PANEL_CONFIG_DIR": str(tmp_path / "config"),
        "PANEL_DB": str(tmp_path / "panel.db"),
        "PANEL_DEMO_DELAY": "0",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_OFFLINE_MODE": "True",
        **extra,
    }


class AtATerminal:
    """`panel ARGS` with a pseudo-terminal on stdin, its stdout and stderr read as they come."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.keyboard, terminal = pty.openpty()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "panel_cli", *args],
            stdin=terminal,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        os.close(terminal)
        self.stderr = b""

    def wait_for_stderr(self, text: str) -> None:
        """Read stderr until it holds `text` (the prompt has no line end, so read as it comes)."""
        assert self.process.stderr is not None
        deadline = time.monotonic() + HANG_GUARD
        while text.encode() not in self.stderr:
            assert time.monotonic() < deadline, f"no {text!r} on stderr: {self.stderr.decode()!r}"
            ready, _, _ = select.select([self.process.stderr], [], [], 1.0)
            if ready:
                chunk = os.read(self.process.stderr.fileno(), 4096)
                assert chunk, f"stderr closed before {text!r}: {self.stderr.decode()!r}"
                self.stderr += chunk

    def type(self, line: str) -> None:
        os.write(self.keyboard, line.encode() + b"\n")

    def end(self) -> tuple[int, str, str]:
        """Its exit code, stdout and stderr, once it ends by itself."""
        try:
            out, err = self.process.communicate(timeout=HANG_GUARD)
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, err = self.process.communicate()
            pytest.fail(f"panel did not end by itself (waiting at the prompt?): {(self.stderr + err).decode()!r}")
        finally:
            os.close(self.keyboard)
        return self.process.returncode, out.decode(), (self.stderr + err).decode()


def test_missing_keys_are_told_before_the_question_is_asked(tmp_path):
    """The new user's line: gpt-4o and claude need keys that are not set (llama runs locally)."""
    code, out, err = AtATerminal(["council", "--members", "gpt-4o,claude,llama"], environment(tmp_path)).end()

    assert code == 2
    assert "Question" not in err
    assert "Member 'gpt-4o' (openai/gpt-4o) needs OPENAI_API_KEY." in err
    assert "Member 'claude' (anthropic/claude-sonnet-4-5) needs ANTHROPIC_API_KEY." in err
    assert out == ""


def test_a_key_only_litellm_knows_is_told_before_the_question_is_asked(tmp_path):
    """A provider panel's own table does not list is judged by litellm once it has loaded: that
    too comes before the prompt (here gpt-4o's key is set, nlp_cloud's is not)."""
    env = environment(tmp_path, OPENAI_API_KEY="fake-test-key")
    code, out, err = AtATerminal(["council", "--members", "nlp_cloud/chatdolphin,gpt-4o"], env).end()

    assert code == 2
    assert "Question" not in err
    assert "Member 'nlp_cloud/chatdolphin' (nlp_cloud/chatdolphin) needs NLP_CLOUD_API_KEY." in err


def test_a_run_that_can_start_asks_and_runs_the_typed_question(tmp_path):
    """The same terminal, with nothing missing: the prompt is asked and the typed question runs."""
    panel = AtATerminal(["council", "--demo"], environment(tmp_path))
    panel.wait_for_stderr("Question:")
    panel.type("Which database for a billing service?")
    code, out, err = panel.end()

    assert code == 0, err
    assert "question: Which database for a billing service?" in err
    assert out.strip()
