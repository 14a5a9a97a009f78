"""Ending what a run left behind under its uid, where no PID namespace per run does it.

At level ``uid`` (a worker that is root but cannot open namespaces: inside a container without
``CAP_SYS_ADMIN``, or a host without namespace support) a run's processes share the slot's uid
and its temporary dirs with the next run: a ``setsid`` daemon escapes the process group its
helper kills, and files in ``/dev/shm`` or ``/tmp`` stay. The slot's uid is its own (no other
slot, executor or container on the machine uses it), so after each run the worker forks a child
that becomes that uid, kills every process it may signal (``kill(-1)``: every process of the uid,
never root's, never another uid's, never itself) and removes what the uid owns at the top of the
temporary dirs (the run's work dir among them). Because the sweeper has no privilege left, it can
reach nothing the run itself could not.

Contract for the caller: sweep after a run has ended and *before* the slot's next confined child
exists (it would be killed too).

Holds:
    sweep_uid   kill every process of a uid and remove the entries it owns in some dirs
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Iterable

__all__ = ["sweep_uid"]


def sweep_uid(uid: int, dirs: Iterable[str]) -> bool:
    """From a forked child that becomes ``uid`` (not root): kill all of its processes, remove its entries in ``dirs``.

    Must be called as root (to switch uid); ``uid`` must be > 0. Returns True when the sweeper finished.
    """
    if uid <= 0:
        raise ValueError(f"sweep_uid needs a non-root uid, got {uid}")
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            for _ in range(2):  # the second catches a process forked while the first was delivered
                try:
                    os.kill(-1, signal.SIGKILL)
                except ProcessLookupError:
                    break
            for directory in dirs:
                _remove_owned(directory, uid)
            code = 0
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def _remove_owned(directory: str, uid: int) -> None:
    """Remove each entry directly in ``directory`` that ``uid`` owns (a dir with everything in it)."""
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.stat(follow_symlinks=False).st_uid != uid:
                continue
            if entry.is_dir(follow_symlinks=False):
                _open_up(entry.path)
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.unlink(entry.path)
        except OSError:
            pass


def _open_up(path: str) -> None:
    """Give the owner rwx on every dir beneath ``path`` (a run may have made some unreadable), so rmtree can empty them."""
    os.chmod(path, 0o700)
    for root, dirs, _files in os.walk(path):
        for name in dirs:
            sub = os.path.join(root, name)
            if not os.path.islink(sub):
                try:
                    os.chmod(sub, 0o700)
                except OSError:
                    pass
