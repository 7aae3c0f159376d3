"""A warm `python -m panel_cli`: a server that has imported panel and litellm once, and forks a
new process for each `panel` a test starts, instead of paying Python's start and the imports
(half a second, three more with litellm) every time.

What a forked child shares with the server is what a fresh interpreter would have built the
same way from the same environment: the imported modules and the signal dispositions the
server was started with (it installs no handler of its own). Everything a test can see is the
child's own: its pid (so `/proc/PID/...` and signals reach it), its exit status (the server
reads it without reaping, so the pid is never reused while the test can still signal it), its
standard streams (the test's pipes, passed as file descriptors and given fresh stdio objects,
buffered as the interpreter buffers them), its working directory, argv and environment. An
uncaught exception, `SystemExit` or `KeyboardInterrupt` leaves the child through the
interpreter's own exit path, as it leaves `python -m panel_cli`.

What it cannot give is what a process gets from its exec: imports, the lazy load of litellm,
a signal before panel has started, a hash seed of its own, /proc/PID/environ (the kernel's copy
of the environment it was started with, here the server's; its os.environ, and so every process
it starts, has the test's), and what is read from the environment at start (PYTHON*, LC_* and
LANG by the interpreter, LITELLM_* by litellm's import). Tests of those start a fresh process
(`fresh=True` in tests/helpers), and so does any request whose environment differs from the
server's in those variables.

Run as `python -m tests.warm_panel FD` by `WarmPanel`, FD its end of the control socket."""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# The audit event a test's process start raises (tests/conftest.py checks its marker).
STARTED_EVENT = "tests.warm_panel.start"
# Variables read once, at start (by the interpreter, or by litellm as it is imported): a child
# of the server cannot honour a change, so a request that makes one gets a fresh process.
STARTUP_PREFIXES = ("PYTHON", "LC_", "LITELLM_")
STARTUP_NAMES = frozenset({"LANG"})


# The server needs Linux's pidfds (5.3) and waitid(P_PIDFD) (5.4) to learn a child's status
# without reaping it; elsewhere tests/helpers starts every panel fresh.
def _pidfds_work() -> bool:
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return False
    return hasattr(os, "P_PIDFD") and hasattr(socket, "send_fds")


WARM_PANEL_WORKS = _pidfds_work()
# Waiting for the server to answer a request only turns a hang into a failure.
ANSWER_GUARD = 120.0


# The environment this test process started with, before any test changed it.
_STARTED_WITH = dict(os.environ)


def startup_environment(env: dict[str, str]) -> dict[str, str]:
    return {key: value for key, value in env.items() if key.startswith(STARTUP_PREFIXES) or key in STARTUP_NAMES}


# -- the server ------------------------------------------------------------------------------


@dataclass
class Request:
    args: list[str]
    cwd: str
    env: dict[str, str]
    fds: list[int]  # the child's stdin, stdout and stderr


@dataclass
class Child:
    pid: int
    pidfd: int
    status: socket.socket  # the test's end learns the exit status here, then closes it
    exited: bool = False
    abandoned: bool = False


@dataclass
class Server:
    control: socket.socket
    selector: selectors.BaseSelector = field(default_factory=selectors.DefaultSelector)
    children: dict[int, Child] = field(default_factory=dict)

    def serve(self) -> Request:
        """Answer requests until the test process goes (the control socket closes). Returns
        only in a forked child, with the request it is to run."""
        self.selector.register(self.control, selectors.EVENT_READ, None)
        while True:
            for key, _ in self.selector.select():
                if key.data is None:
                    request = self.accept()
                    if request is not None:
                        return request
                elif key.fileobj is key.data.status:
                    self.hear_status_closed(key.data)
                else:
                    self.hear_exit(key.data)

    def accept(self) -> Request | None:
        message, fds, _, _ = socket.recv_fds(self.control, 1 << 20, 4)
        if not message:  # the test process is ending: reap what has ended, leave the rest
            for child in self.children.values():
                os.waitpid(child.pid, 0 if child.exited else os.WNOHANG)
            sys.exit(0)
        *streams, status_fd = fds
        status = socket.socket(fileno=status_fd)
        asked = json.loads(message)
        request = Request(args=asked["args"], cwd=asked["cwd"], env=asked["env"], fds=streams)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            status.close()
            self.close_all()
            return request
        for fd in streams:
            os.close(fd)
        child = Child(pid=pid, pidfd=os.pidfd_open(pid), status=status)
        self.children[child.pidfd] = child
        self.selector.register(child.pidfd, selectors.EVENT_READ, child)
        self.selector.register(child.status, selectors.EVENT_READ, child)
        with contextlib.suppress(OSError):
            send(status, f"pid {pid}")
        return None

    def hear_exit(self, child: Child) -> None:
        """The child has ended: its status goes to the test, the zombie stays until the test
        has read it (or has gone), so its pid is not reused under a test that signals it."""
        found = os.waitid(os.P_PIDFD, child.pidfd, os.WEXITED | os.WNOWAIT)
        code = found.si_status if found.si_code == os.CLD_EXITED else -found.si_status
        self.selector.unregister(child.pidfd)
        child.exited = True
        with contextlib.suppress(OSError):
            send(child.status, f"exit {code}")
        if child.abandoned:
            self.reap(child)

    def hear_status_closed(self, child: Child) -> None:
        self.selector.unregister(child.status)
        child.status.close()
        child.abandoned = True
        if child.exited:
            self.reap(child)

    def reap(self, child: Child) -> None:
        os.waitpid(child.pid, 0)
        os.close(child.pidfd)
        del self.children[child.pidfd]

    def close_all(self) -> None:
        """In a new child: nothing of the server stays open, as in a fresh process."""
        self.selector.close()
        self.control.close()
        for child in self.children.values():
            child.status.close()
            os.close(child.pidfd)


def send(sock: socket.socket, text: str) -> None:
    sock.sendmsg([text.encode()], [], socket.MSG_NOSIGNAL)


def warm_up() -> None:
    """Import every module of panel, and litellm as a run loads it."""
    import importlib
    import pkgutil

    import panel_cli
    from panel_cli.llm.litellm_setup import load_litellm

    for module in pkgutil.walk_packages(panel_cli.__path__, "panel_cli."):
        if not module.name.endswith(".__main__"):
            importlib.import_module(module.name)
    load_litellm()


def become(request: Request) -> None:
    """Turn the forked server into the process the test asked for, short of running panel."""
    for target, fd in enumerate(request.fds):
        os.dup2(fd, target)
    for fd in set(request.fds):
        os.close(fd)
    os.chdir(request.cwd)
    os.environ.clear()
    os.environ.update(request.env)
    sys.path[0] = os.getcwd()  # as `python -m` puts it
    sys.argv = ["-m", *request.args]  # runpy puts panel_cli/__main__.py first
    buffered = not isinstance(sys.stdout.buffer, io.FileIO)  # the interpreter's own: not -u
    sys.stdin, sys.stdout, sys.stderr = (
        fresh_stdio(fd, old, buffered=buffered) for fd, old in enumerate((sys.stdin, sys.stdout, sys.stderr))
    )
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr


def fresh_stdio(fd: int, old: Any, *, buffered: bool) -> io.TextIOWrapper:
    """A standard stream made as the interpreter makes it at start (create_stdio in CPython's
    pylifecycle.c): line-buffered on a terminal, and always for stderr, unless unbuffered (-u,
    PYTHONUNBUFFERED: then stdout and stderr write through); its encoding and error handler
    those the server's own got from the same environment."""
    writes = fd != 0
    buffer = open(fd, "wb" if writes else "rb", -1 if buffered or not writes else 0, closefd=False)  # noqa: SIM115 - sys.stdout's for life
    raw = buffer if isinstance(buffer, io.FileIO) else buffer.raw
    raw.name = old.name
    stream = io.TextIOWrapper(
        buffer,
        encoding=old.encoding,
        errors=old.errors,
        newline="\n",
        line_buffering=buffered and (os.isatty(fd) or fd == 2),
        write_through=not buffered,
    )
    stream.mode = old.mode
    return stream


def main() -> None:
    warm_up()
    import gc

    gc.freeze()  # the imports' objects, shared by every child, are never walked again
    request = Server(socket.socket(fileno=int(sys.argv[1]))).serve()
    become(request)


# -- the test's side ---------------------------------------------------------------------------


class WarmPanel:
    """One server per test process, started at its first use."""

    _started: WarmPanel | None = None
    _lock = threading.Lock()

    def __init__(self, startup: dict[str, str]) -> None:
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - the server's stderr for its life, read if it fails
        # The test process's own environment as it started, no test's, and the variables read
        # at start as the first request has them.
        self.env = {
            **{key: value for key, value in _STARTED_WITH.items() if key not in startup_environment(_STARTED_WITH)},
            **startup,
        }
        with theirs:
            self.server = subprocess.Popen(
                [sys.executable, "-m", "tests.warm_panel", str(theirs.fileno())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self.log,
                cwd=ROOT,
                env=self.env,
                pass_fds=[theirs.fileno()],
                preexec_fn=_hear_ctrl_c,
            )
        self.sending = threading.Lock()
        atexit.register(self.stop)

    def stop(self) -> None:
        """Close the control socket, which ends the server, and reap it: its children's time
        then counts in this process's (`time pytest` sees it), and nothing is left behind."""
        self.control.close()
        try:
            self.server.wait(timeout=ANSWER_GUARD)
        except subprocess.TimeoutExpired:
            self.server.kill()
            self.server.wait()

    @classmethod
    def serving(cls, env: dict[str, str]) -> WarmPanel | None:
        """The server, started if need be, if a child of it can be the process `env` would
        start; None if only a fresh process can."""
        with cls._lock:
            if cls._started is None or cls._started.server.poll() is not None:
                cls._started = cls(startup_environment(env))
            started = cls._started
        return started if startup_environment(env) == startup_environment(started.env) else None

    def request(self, args: list[str], cwd: str, env: dict[str, str], fds: list[int]) -> socket.socket:
        """Ask for a child; the socket on which its pid, then its exit status, come."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        payload = json.dumps({"args": args, "cwd": cwd, "env": env}).encode()
        with theirs, self.sending:
            socket.send_fds(self.control, [payload], [*fds, theirs.fileno()])
        return mine

    def failure(self) -> str:
        self.log.seek(0)
        return f"the warm panel server failed: {self.log.read().decode(errors='replace')[-2000:]}"


def _hear_ctrl_c() -> None:
    """SIGINT back to its default before the server starts (tests/helpers.py: hear_ctrl_c), so
    Python installs its own handler there, and every child has it as a fresh panel would."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class WarmProcess(subprocess.Popen):  # type: ignore[type-arg]
    """`subprocess.Popen` of `python -m panel_cli ARGS` whose process the warm server forks.
    Popen makes the pipes and does everything else (text, communicate, timeouts, signals by
    pid); only how the process starts and how its status is learned are the server's. Those
    are Popen's private hooks on POSIX (`_execute_child`, `_internal_poll`, `_wait`)."""

    def __init__(self, warm: WarmPanel, args: list[str], **popen: Any) -> None:
        self._warm = warm
        self._status: socket.socket | None = None
        super().__init__([sys.executable, "-m", "panel_cli", *args], **popen)

    def _execute_child(  # type: ignore[override]
        self,
        args: list[str],
        executable: Any,
        preexec_fn: Any,
        close_fds: bool,
        pass_fds: Any,
        cwd: Any,
        env: Any,
        startupinfo: Any,
        creationflags: int,
        shell: bool,
        p2cread: int,
        p2cwrite: int,
        c2pread: int,
        c2pwrite: int,
        errread: int,
        errwrite: int,
        *_: Any,
    ) -> None:
        sys.audit(STARTED_EVENT, args)
        streams = [fd if fd != -1 else inherited for fd, inherited in ((p2cread, 0), (c2pwrite, 1), (errwrite, 2))]
        env = dict(os.environ if env is None else env)
        self._status = self._warm.request(args[3:], os.path.abspath(cwd or os.getcwd()), env, streams)
        self._status.settimeout(ANSWER_GUARD)
        answer = self._status.recv(64).decode()
        if not answer.startswith("pid "):
            raise RuntimeError(self._warm.failure())
        self.pid = int(answer.split()[1])
        self._child_created = True
        self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)

    def _internal_poll(self, _deadstate: int | None = None, **_: Any) -> int | None:
        if self.returncode is None and self._waitpid_lock.acquire(False):
            try:
                self._hear_status(0.0, _deadstate)
            finally:
                self._waitpid_lock.release()
        return self.returncode

    def _wait(self, timeout: float | None) -> int:
        with self._waitpid_lock:
            if self.returncode is None and not self._hear_status(timeout, None):
                raise subprocess.TimeoutExpired(self.args, timeout)  # type: ignore[arg-type]
        return self.returncode  # type: ignore[return-value]

    def _hear_status(self, timeout: float | None, deadstate: int | None) -> bool:
        """Read the exit status if it comes within `timeout`; whether it came."""
        assert self._status is not None
        self._status.settimeout(timeout)
        try:
            answer = self._status.recv(64).decode()
        except (TimeoutError, BlockingIOError):
            return False
        if not answer.startswith("exit "):
            if deadstate is None:
                raise RuntimeError(self._warm.failure())
            self.returncode = deadstate
        else:
            self.returncode = int(answer.split()[1])
        self._status.close()  # the server may now reap the child
        return True


if __name__ == "__main__":
    main()
    import runpy

    runpy.run_module("panel_cli", run_name="__main__", alter_sys=True)
