"""Runs in the host and the worker: our child processes, signalled without ever reaching a stranger, and how they ended.

A pid, and the process-group id equal to it, can be given to a new process as soon as the old
one is reaped, and pid spaces wrap quickly (``pid_max`` is 32768 on many machines; a busy
sandbox forks several processes per run). A ``kill`` by number after the reap can therefore
land on an unrelated process, another executor's worker for instance. The rule here: a pid is
signalled only while it is our unreaped child (alive or a zombie). Exit is observed without
reaping (``WNOWAIT``), the group is killed while the zombie still holds its number, and the
reap comes last.

Holds:
    has_exited     has our child ended? (it is not reaped: its pid stays ours)
    kill_group     SIGKILL our unreaped child and its process group
    describe_exit  how a child ended, in words
"""

from __future__ import annotations

import os
import signal

__all__ = ["has_exited", "kill_group", "describe_exit"]


def has_exited(pid: int) -> bool:
    """True when our child ``pid`` has ended; it is left unreaped, so its pid cannot be reused yet."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True  # already reaped by someone else: nothing of it is left to signal


def kill_group(pid: int) -> None:
    """SIGKILL ``pid`` and its process group. ``pid`` must be our child, not yet reaped."""
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def describe_exit(returncode: int | None, unfinished: str = "did not exit") -> str:
    """``returncode`` as :mod:`subprocess` gives it (negative: killed by that signal), in words.

    >>> describe_exit(-9), describe_exit(3), describe_exit(None)
    ('was killed by signal SIGKILL', 'exited with code 3', 'did not exit')
    """
    if returncode is None:
        return unfinished
    if returncode < 0:
        try:
            return f"was killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"
