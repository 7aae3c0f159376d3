"""The fake OpenAI server in a child process, for the benchmarks that time a client against it:
its work then does not share the client's GIL. The child is the benchmark script itself run
with `--serve …`: it prints the server's URL on its first line, answers a line on stdin with a
line on stdout if it was asked one, and stops when stdin closes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class ChildServer:
    def __init__(self, script: str, *serve_args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, script, "--serve", *serve_args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http"):
            raise RuntimeError("the fake server did not start")

    def ask(self, line: str) -> str:
        """Send the child one line; its one-line answer."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline()

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
