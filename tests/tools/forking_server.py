"""The fixture MCP server (`tests/fakes/mcp_server.py`) after it has started a child of its own
that sleeps for an hour: a grandchild of panel, as a server that runs a helper, a shell or a
language server has. The child's pid goes to the file `GRANDCHILD_PIDFILE` names. Its stdin and
stdout are not the server's pipes, so nothing but its process group ties it to the server."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / "fakes" / "mcp_server.py"

if __name__ == "__main__":
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(3600)"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    Path(os.environ["GRANDCHILD_PIDFILE"]).write_text(str(child.pid))
    runpy.run_path(str(FIXTURE), run_name="__main__")
