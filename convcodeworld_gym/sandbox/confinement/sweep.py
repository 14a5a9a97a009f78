"""Runs in the warm worker: ending what a run left behind under its uid, where no PID namespace per run does it.

At level ``uid`` (a worker that is root but cannot open namespaces: inside a container without
``CAP_SYS_ADMIN``, or a host without namespace support) a run's processes share the slot's uid
and its temporary dirs with the next run: a ``setsid`` daemon escapes the process group its
helper kills, and files in ``/dev/shm`` or ``/tmp`` stay. The slot's uid is its own (no other
slot, executor or container on the machine uses it), so after each run the worker forks a child
that becomes that uid, kills every process it may signal (``kill(-1)``: every process of the uid,
never root's, never another uid's, never itself), waits until they are reaped, and removes what the uid owns at the top of the
temporary dirs (the run's work dir among them), and the SysV shared memory segments, message queues
and semaphore sets the uid owns (where runs share one IPC namespace, a segment would outlive its run).
Because the sweeper has no privilege left, it can reach nothing the run itself could not. Sockets in
TIME_WAIT cannot be swept: only a network namespace per run (level ``namespaces``) ends those.

Contract for the caller: sweep after a run has ended and *before* the slot's next confined child
exists (it would be killed too).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import time
from collections.abc import Iterable

from .confine import libc

__all__ = ["sweep_uid", "sysv_ipc_ids"]


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
            _kill_all_and_wait(uid)
            for directory in dirs:
                _remove_owned(directory, uid)
            _remove_sysv_ipc(uid)
            code = 0
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


_GONE_WAIT_S = 2.0


def _kill_all_and_wait(uid: int) -> None:
    """SIGKILL every process this uid may signal, then wait (a while) until no process of ``uid`` is left,
    zombies included: a killed process still counts against the pids limit, and is still seen in
    ``/proc``, until it is reaped. (``kill(-1, 0)`` cannot tell: it succeeds while any process exists.)"""
    deadline = time.monotonic() + _GONE_WAIT_S
    while True:
        try:
            os.kill(-1, signal.SIGKILL)  # again each round: catches a process forked while the last was delivered
        except ProcessLookupError:
            return
        if not _has_other_processes(uid) or time.monotonic() > deadline:
            return
        time.sleep(0.005)


def _has_other_processes(uid: int) -> bool:
    """Is any process but this one, of real uid ``uid``, in ``/proc`` (alive or a zombie)?"""
    me = str(os.getpid())
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or entry == me:
            continue
        try:
            with open(f"/proc/{entry}/status") as fh:
                for line in fh:
                    if line.startswith("Uid:"):
                        if int(line.split()[1]) == uid:
                            return True
                        break
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    return False


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


_IPC_RMID = 0
#: /proc/sysvipc file, its id column, and how to remove one object by id.
_SYSV = (("shm", "shmid", lambda lib, i: lib.shmctl(i, _IPC_RMID, None)),
         ("msg", "msqid", lambda lib, i: lib.msgctl(i, _IPC_RMID, None)),
         ("sem", "semid", lambda lib, i: lib.semctl(i, 0, _IPC_RMID)))


def sysv_ipc_ids(uid: int) -> dict[str, list[int]]:
    """The ids of the SysV shared memory segments (``shm``), message queues (``msg``) and semaphore sets
    (``sem``) that ``uid`` owns or created in this IPC namespace, from ``/proc/sysvipc``."""
    found: dict[str, list[int]] = {}
    for kind, id_column, _remove in _SYSV:
        try:
            with open(f"/proc/sysvipc/{kind}") as fh:
                header, *rows = [line.split() for line in fh]
        except (OSError, ValueError):
            continue
        at, owner, creator = header.index(id_column), header.index("uid"), header.index("cuid")
        found[kind] = [int(row[at]) for row in rows if str(uid) in (row[owner], row[creator])]
    return found


def _remove_sysv_ipc(uid: int) -> None:
    """Remove every SysV IPC object ``uid`` owns (as that uid: its owner may)."""
    lib = libc()
    ids = sysv_ipc_ids(uid)
    for kind, _column, remove in _SYSV:
        for ident in ids.get(kind, []):
            remove(lib, ctypes.c_int(ident))


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
