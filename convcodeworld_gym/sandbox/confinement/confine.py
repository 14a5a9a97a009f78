"""Runs in the warm worker and each run's child (the host reads its settings): namespaces, mounts, uid drop, rlimits.

Everything here is a thin, checked wrapper over a system call (through ``ctypes``: Python 3.10
and 3.11 have no ``os.unshare``), plus the record of what was achieved.

A worker calls :func:`enter_worker_namespaces` once at start (as root): its view of the file system is then the
allow-list of :mod:`.view` (every other top-level dir covered, :func:`hide_outside`; task data masked,
:func:`mask_dirs`), which every run inherits. For each execution it forks a child with :meth:`RunNamespaces.fork`
(pid 1 of a fresh PID namespace, no process in between), which calls :func:`enter_run_mounts` and :func:`drop_to`
before it runs anything untrusted.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import enum
import os
import resource
import signal
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..runtimes.interpreter import paths_beneath
from . import view

__all__ = [
    "Level",
    "Confinement",
    "SandboxSettings",
    "enter_worker_namespaces",
    "RunNamespaces",
    "enter_run_mounts",
    "enter_run_network_and_ipc",
    "mount_tmpfs_keeping",
    "hide_outside",
    "mask_dirs",
    "bring_up_loopback",
    "mount_run_proc",
    "drop_to",
    "close_fds_except",
    "set_parent_death_signal",
    "SANDBOX_ROOT",
    "prctl",
    "syscall",
    "libc",
]

#: Inside a worker's mount namespace this is a private, size-limited tmpfs; each run gets a dir in it.
SANDBOX_ROOT = "/tmp"

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUTS = 0x04000000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
_MS_NOEXEC = 8
_MNT_DETACH = 2
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE = 1, 4

_libc: Any = None


def libc() -> Any:
    """The process's one handle to the C library (loaded on first use, errno kept), with the argument
    types of every function the sandbox calls through it set."""
    global _libc  # noqa: PLW0603 - one handle to libc, loaded on first use
    if _libc is None:
        lib = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        lib.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
        lib.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
        lib.unshare.argtypes = [ctypes.c_int]
        lib.setns.argtypes = [ctypes.c_int, ctypes.c_int]
        lib.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        lib.syscall.restype = ctypes.c_long
        lib.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        lib.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        _libc = lib
    return _libc


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def syscall(number: int, *args: int) -> int:
    """A raw system call (integer and pointer arguments); raises OSError when it returns -1."""
    ret = libc().syscall(ctypes.c_long(number), *(ctypes.c_long(a) for a in args))
    if ret == -1:
        err = ctypes.get_errno()
        raise OSError(err, f"syscall {number}: {os.strerror(err)}")
    return ret


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    _check(libc().mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def prctl(option: int, arg: int, arg2: int = 0) -> None:
    """``prctl(option, arg, arg2, 0, 0)``; raises OSError when it fails."""
    _check(libc().prctl(option, arg, arg2, 0, 0), f"prctl({option})")


class Level(str, enum.Enum):
    """Confinement levels, weakest first. Compare with :meth:`at_least`.

    * ``process``: own process group, scrubbed environment, private work dir, time limits.
    * ``uid``: also a distinct non-root uid per worker slot and rlimits (address space, file size, processes).
    * ``namespaces``: also no network (empty net namespace), own PID, network and IPC namespaces per run,
      a read-only view of an allow-list of the file system (the system's dirs, the runtime's paths, the
      sandbox's code; task data masked inside them: :mod:`.view`) except a private size-limited tmpfs work dir,
      own UTS namespace.
    * ``full``: also a seccomp filter (no sockets but ``AF_UNIX``, no ``kill(-1)``, no ptrace, mount,
      unshare, ...; :mod:`.seccomp`) and a Landlock domain (read only the interpreter and system dirs, write
      only the run's tmpfs, no TCP, signals scoped; :mod:`.landlock`).
    """

    PROCESS = "process"
    UID = "uid"
    NAMESPACES = "namespaces"
    FULL = "full"

    @property
    def rank(self) -> int:
        return list(Level).index(self)

    def at_least(self, other: Level | str) -> bool:
        return self.rank >= Level(other).rank


@dataclass(frozen=True)
class SandboxSettings:
    """Sizes and limits of the confined child. Defaults fit BigCodeBench tasks.

    Attributes:
        base_uid: each worker slot runs untrusted code as its own uid/gid, the first free one from ``base_uid`` up
            (free: no other executor on this machine holds its lock file), never 0.
        tmpfs_mb: size of the worker's private tmpfs (the run's work dir lives in it).
        tmpfs_inodes: most files and dirs the tmpfs holds.
        address_space_mb: ``RLIMIT_AS`` of the child (virtual memory; a warm worker with pandas maps ~1.5 GB).
        file_size_mb: ``RLIMIT_FSIZE``: largest file the program may write.
        max_processes: ``RLIMIT_NPROC`` for the slot uid, threads included (a fork bomb stops here). Room for
            the 256 threads of BigCodeBench/147's canonical solution next to the run's own processes.
        max_open_files: ``RLIMIT_NOFILE``.
        run_cpus: the CPUs one run may use at most, where the slot gets a cgroup of its own (:mod:`.slot_cgroup`);
            None: the machine's CPUs shared among the executor's workers, at least one. Its ``pids.max`` is
            ``max_processes``.
    """

    base_uid: int = 61000
    tmpfs_mb: int = 512
    tmpfs_inodes: int = 20000
    address_space_mb: int = 6144
    file_size_mb: int = 256
    max_processes: int = 1024
    max_open_files: int = 1024
    run_cpus: float | None = None

    def __post_init__(self) -> None:
        if self.base_uid <= 0:
            raise ValueError(f"SandboxSettings.base_uid must be > 0 (a non-root uid), got {self.base_uid}")
        for name in ("tmpfs_mb", "tmpfs_inodes", "address_space_mb", "file_size_mb", "max_processes", "max_open_files"):
            if getattr(self, name) <= 0:
                raise ValueError(f"SandboxSettings.{name} must be > 0, got {getattr(self, name)}")
        if self.run_cpus is not None and not self.run_cpus > 0:
            raise ValueError(f"SandboxSettings.run_cpus must be > 0 (CPUs) or None, got {self.run_cpus}")


@dataclass(frozen=True)
class Confinement:
    """What a worker achieved. ``as_dict()`` is what results report under ``details["confinement"]``.

    ``cpu_bound``: what bounds a run's CPU and processes as a whole (:mod:`.slot_cgroup`): ``kind`` ``cgroup2`` or
    ``cgroup1`` (the slot's own cgroup, with its ``cpus`` and ``pids``), ``container`` (the container's limits), or
    ``none`` with ``why`` (then only each process's rlimits hold)."""

    level: Level
    uid: int
    features: tuple[str, ...] = ()
    missing: tuple[str, ...] = field(default=(), compare=False)
    cpu_bound: dict[str, Any] = field(default_factory=dict, compare=False)

    def as_dict(self) -> dict[str, Any]:
        return {"level": self.level.value, "uid": self.uid, "features": list(self.features), "missing": list(self.missing),
                "cpu_bound": dict(self.cpu_bound)}


def _closed_ancestor(path: str) -> str | None:
    """The first ancestor dir of ``path`` that other users cannot search (e.g. /root, mode 0700), if any."""
    parts = path.strip("/").split("/")
    for i in range(1, len(parts)):
        ancestor = "/" + "/".join(parts[:i])
        if not os.stat(ancestor).st_mode & 0o001:
            return ancestor
    return None


def _bind_readable(paths: Iterable[str]) -> None:
    """Make ``paths`` reachable by other users although an ancestor dir is not searchable (e.g. /root is 0700).

    Each closed ancestor is covered, in this mount namespace only, by an empty 0755 tmpfs in which
    only the needed paths are bind-mounted back: the rest of that ancestor (its secrets) stays hidden.
    """
    groups: dict[str, list[str]] = {}
    for path in sorted({os.path.realpath(p) for p in paths if os.path.exists(p)}):
        closed = _closed_ancestor(path)
        if closed is not None and not any(path.startswith(kept + "/") for kept in groups.get(closed, [])):
            groups.setdefault(closed, []).append(path)
    for closed, members in groups.items():
        stages = []
        for i, path in enumerate(members):
            stage = f"{SANDBOX_ROOT}/.ccw_stage{i}"  # in the private tmpfs: nothing lands on the host
            os.makedirs(stage, exist_ok=True)
            _mount(path, stage, None, _MS_BIND | _MS_REC)
            stages.append(stage)
        _mount("tmpfs", closed, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=755,size=1m")
        for stage, path in zip(stages, members):
            os.makedirs(path, exist_ok=True)
            _mount(stage, path, None, _MS_BIND | _MS_REC)
            _check(libc().umount2(stage.encode(), _MNT_DETACH), f"umount {stage}")
            os.rmdir(stage)


def mount_tmpfs_keeping(target: str, options: str, keep: Iterable[str] = ()) -> None:
    """Mount a fresh tmpfs (nosuid, nodev, ``options``) on ``target``, binding each path of ``keep`` (beneath
    ``target``, see :func:`..runtimes.interpreter.paths_beneath`) back into it read-only, at the same path.

    Each kept path is opened before the tmpfs hides it and bound from that descriptor; the dirs leading
    to it are made root-owned, mode 0755, so a run can pass through them but not change them.
    """
    held = [(path, os.open(path, os.O_PATH | os.O_CLOEXEC)) for path in keep]
    umask = os.umask(0o022)
    try:
        _mount("tmpfs", target, "tmpfs", _MS_NOSUID | _MS_NODEV, options)
        for path, fd in held:
            parent = os.path.dirname(path)
            os.makedirs(parent, mode=0o755, exist_ok=True)
            if os.path.isdir(f"/proc/self/fd/{fd}"):
                os.makedirs(path, mode=0o755, exist_ok=True)
            else:
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))
            _mount(f"/proc/self/fd/{fd}", path, None, _MS_BIND | _MS_REC)
            _mount(None, path, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
    finally:
        os.umask(umask)
        for _path, fd in held:
            os.close(fd)


def hide_outside(readable: Iterable[str]) -> list[str]:
    """Cover each top-level entry of ``/`` that is not a system dir (:data:`.view.SYSTEM_TOP`) and holds no path of
    ``readable`` whole: a dir by a fresh tmpfs in which only the paths of ``readable`` and :data:`.view.SYSTEM_READ`
    beneath it are bound back, read-only (:func:`mount_tmpfs_keeping`), a file by an empty one. Symbolic links are
    left: what they point to is covered where it lies. In this mount namespace only; returns what was covered."""
    keep = [os.path.realpath(p) for p in (*readable, *view.SYSTEM_READ) if os.path.exists(p)]
    covered = []
    for name in sorted(os.listdir("/")):
        top = "/" + name
        if name in view.SYSTEM_TOP or os.path.islink(top) or top in keep:
            continue
        if os.path.isdir(top):
            mount_tmpfs_keeping(top, "mode=755,size=1m,nr_inodes=4096", paths_beneath(top, keep))
        elif os.path.isfile(top):
            _cover_file(top)
        else:
            continue
        covered.append(top)
    return covered


def _cover_file(path: str) -> None:
    """Bind an empty, read-only file over ``path`` (a file), in this mount namespace."""
    empty = f"{SANDBOX_ROOT}/.ccw_empty"  # in the worker's private tmpfs: nothing lands on the host
    os.close(os.open(empty, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o444))
    _mount(empty, path, None, _MS_BIND)
    _mount(None, path, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)


def mask_dirs(paths: Iterable[str]) -> list[str]:
    """Cover each dir of ``paths`` by an empty, read-only tmpfs (in this mount namespace); returns those covered."""
    masked = []
    for path in paths:
        _mount("tmpfs", path, "tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, "mode=555,size=4k,nr_inodes=2")
        masked.append(path)
    return masked


def enter_worker_namespaces(settings: SandboxSettings, readable: Iterable[str]) -> tuple[str, ...]:
    """Move the calling (root) process into new mount, network, IPC and UTS namespaces and lay out its view.

    ``/`` becomes read-only (this mount namespace only), ``/tmp`` becomes a private tmpfs (each run then
    gets its own, see :func:`enter_run_mounts`), the network has only a loopback, and the file system shows only
    the allow-list of :mod:`.view`: the system's dirs and the paths of ``readable`` (the run's own, see
    :func:`.view.run_readable`: the interpreter's prefix, site-packages, the sandbox's code), every other
    top-level dir covered (:func:`hide_outside`), each made reachable for the unprivileged slot uid, and the
    task data inside them masked (:func:`.view.task_data_in`, :func:`mask_dirs`). Returns the feature names achieved.

    Raises:
        OSError: a step failed (not root, no namespace support); the caller falls back to a weaker level.
    """
    readable = list(readable)
    _check(libc().unshare(_CLONE_NEWNS | _CLONE_NEWNET | _CLONE_NEWIPC | _CLONE_NEWUTS), "unshare")
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    mount_tmpfs_keeping(SANDBOX_ROOT, f"mode=755,size={settings.tmpfs_mb}m,nr_inodes={settings.tmpfs_inodes}",
                        paths_beneath(SANDBOX_ROOT, readable))
    hide_outside(readable)
    _bind_readable(p for p in readable if not os.path.realpath(p).startswith(SANDBOX_ROOT + "/"))
    mask_dirs(view.task_data_in(readable))
    _mount(None, "/", None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY)
    bring_up_loopback()
    return ("netns", "mountns", "ipcns", "utsns", "readonly_root", "private_tmpfs", "read_allow_list", "task_data_masked")


class RunNamespaces:
    """Forks each run's child straight into a new PID namespace, with no process in between.

    ``unshare(CLONE_NEWPID)`` moves only the caller's *next* children into the new namespace, and
    only once; :meth:`fork` therefore forks right after it and then returns the caller's later
    children to its own namespace (``setns``), so the worker can do this for every run. The child
    is the namespace's pid 1: when it dies the kernel kills every process of the run, and since it
    is the worker's own child, the worker can kill it by pid for as long as it has not reaped it.
    Needs root (CAP_SYS_ADMIN); construction or :meth:`fork` raise OSError otherwise.
    """

    def __init__(self) -> None:
        self._home = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)

    def fork(self) -> int:
        """``os.fork()``, the child being pid 1 of a fresh PID namespace; 0 in the child."""
        _check(libc().unshare(_CLONE_NEWPID), "unshare(CLONE_NEWPID)")
        pid = -1
        try:
            pid = os.fork()
        finally:
            if pid != 0:
                _check(libc().setns(self._home, _CLONE_NEWPID), "setns(CLONE_NEWPID)")
        return pid

    def close(self) -> None:
        os.close(self._home)


def enter_run_mounts(settings: SandboxSettings, keep: Iterable[str] = ()) -> None:
    """In a run's pid 1 (as root): a new mount namespace with a fresh size-limited ``/tmp`` and ``/dev/shm``,
    so nothing a run leaves there reaches the next run; both vanish with the run's last process. The
    paths of ``keep`` under ``/tmp`` (the interpreter's, see :mod:`..runtimes.interpreter`) stay visible, read-only."""
    _check(libc().unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    mount_tmpfs_keeping(SANDBOX_ROOT, f"mode=1777,size={settings.tmpfs_mb}m,nr_inodes={settings.tmpfs_inodes}",
                        paths_beneath(SANDBOX_ROOT, keep))
    if os.path.isdir("/dev/shm"):
        _mount("tmpfs", "/dev/shm", "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=1777,size=64m,nr_inodes=1000")


def enter_run_network_and_ipc() -> None:
    """In a run's pid 1 (as root): new network and IPC namespaces, with the loopback up.

    Whatever a run leaves in them (listening and TIME_WAIT sockets, abstract unix sockets, SysV shared
    memory, semaphores and message queues, POSIX message queues) dies with the run's last process, so no
    run meets what an earlier one left. Made in the spare, before its job, off the run's critical path.
    """
    _check(libc().unshare(_CLONE_NEWNET | _CLONE_NEWIPC), "unshare(CLONE_NEWNET | CLONE_NEWIPC)")
    bring_up_loopback()


def mount_run_proc() -> None:
    """In a run's pid 1 (as root, in its own PID and mount namespaces): a fresh ``/proc`` that shows only the
    run's own processes, not the host's (their command lines, for one, are readable by every uid)."""
    _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)


def bring_up_loopback() -> None:
    """Set ``lo`` up in this (fresh) network namespace: local servers work, nothing outside is reachable."""
    import fcntl
    import socket
    import struct

    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        flags = struct.unpack("16sH", fcntl.ioctl(sock, siocgifflags, struct.pack("16sH14x", b"lo", 0))[:18])[1]
        fcntl.ioctl(sock, siocsifflags, struct.pack("16sH14x", b"lo", flags | iff_up))


def drop_to(uid: int, settings: SandboxSettings, cpu_seconds: int | None = None) -> None:
    """Become ``uid`` (no supplementary groups) and apply the rlimits; irreversible.

    Also: no core dumps, not dumpable (so processes of the same uid cannot ptrace this one or open
    its ``/proc`` entries), killed when the parent dies, and default SIGINT handling.
    """
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    limits = {
        resource.RLIMIT_AS: settings.address_space_mb << 20,
        resource.RLIMIT_FSIZE: settings.file_size_mb << 20,
        resource.RLIMIT_NPROC: settings.max_processes,
        resource.RLIMIT_NOFILE: settings.max_open_files,
        resource.RLIMIT_CORE: 0,
    }
    if cpu_seconds is not None:
        limits[resource.RLIMIT_CPU] = max(1, int(cpu_seconds))
    for which, value in limits.items():
        _soft, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, value))
    prctl(_PR_SET_DUMPABLE, 0)
    prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def close_fds_except(keep: Iterable[int]) -> None:
    """Close every descriptor from 3 up, except those in ``keep``."""
    keep_sorted = sorted({fd for fd in keep if fd > 2})
    low = 3
    for fd in keep_sorted:
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, max(low, os.sysconf("SC_OPEN_MAX") if sys.platform != "win32" else 256))


def set_parent_death_signal() -> None:
    """Be killed when the parent process dies (a worker must not outlive its executor)."""
    prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
