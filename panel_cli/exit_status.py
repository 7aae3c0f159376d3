"""Every exit code panel uses, in one place. docs/exit-codes.md says when each happens, and a
test keeps the two the same."""

from __future__ import annotations

from enum import IntEnum

# Shells report a process killed by signal N as 128 + N; panel exits the same way when it
# stops a run for SIGHUP (1), SIGINT (2) or SIGTERM (15), after keeping what it has.
SIGNAL_BASE = 128


class ExitStatus(IntEnum):
    SUCCESS = 0
    # The command ran but did not get what it was for: a protocol reached no answer, a batch
    # has a question without one, a deletion was declined, or an unexpected error.
    FAILURE = 1
    # Bad input the user can fix: a panel file, an option, a model, a key, a database.
    USER_ERROR = 2
    # `--gate`: the run came to no verdict to judge (no option won a vote, the critic gave none).
    UNDECIDED = 3
    SIGHUP = SIGNAL_BASE + 1
    SIGINT = SIGNAL_BASE + 2
    SIGTERM = SIGNAL_BASE + 15

    @classmethod
    def for_signal(cls, signum: int) -> ExitStatus:
        """The exit code of a command stopped by SIGHUP, SIGINT or SIGTERM, the signals panel handles."""
        return cls(SIGNAL_BASE + signum)
