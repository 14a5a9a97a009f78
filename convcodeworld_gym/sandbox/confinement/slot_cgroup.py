"""Runs in the host and the warm worker: a worker slot's own cgroup, a CPU and process bound on its runs, and the way to
end all their processes at once.

The kernel schedules every process on its own: a run that forks 1000 busy processes (a fork bomb) or keeps a few
dozen threads busy takes that many shares of the machine from every other run, and its end at the time limit
waits until the worker, starved too, gets the CPU to notice it and the dying processes get it to exit. A cgroup
per slot makes the slot's runs one entity for the scheduler (a group's weight is one process's), caps them at
``cpus`` CPUs (cgroup v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``) and ``pids`` processes and threads (``pids.max``),
and lets the worker end every process of a run at once when it stops the run (v2 ``cgroup.kill``; v1: freeze,
SIGKILL each, thaw, so that nothing forks in between).

Who does what. The pool makes the slot's cgroup before the slot's first worker starts (:meth:`SlotCgroup.make`, as
root or in a cgroup tree delegated to it) and removes it with the slot (:meth:`SlotCgroup.remove`: its processes
killed, then the dirs). The worker is told the dirs; each run's spare joins them right after its fork, before its
confinement and long before its job (:meth:`SlotCgroup.join`), and the worker kills them when it stops a run at a
limit (:meth:`SlotCgroup.kill`). The worker and its zygote stay outside: a run's bound never slows the worker's
clock. At any time the cgroup holds one run (or the spare waiting for the next job), never two.

A run cannot leave its cgroup or raise its limits: the dirs and files are root's (mode 0755 and 0644) and the run
is the slot's non-root uid, and its Landlock domain lets it write beneath its private ``/tmp`` and ``/dev/shm``
only (``tests/sandbox/confinement/test_cpu_bound.py`` tries).

Where the cgroup file system cannot be written (not root and no delegated tree, a container's read-only
``/sys/fs/cgroup``), nothing is made and :class:`CgroupUnavailable` says why; the run is then bounded by what
holds it otherwise (a container's ``--cpus`` and ``--pids-limit``, ``RLIMIT_NPROC``), which the report names.

Holds:
    CgroupTree         where slots' cgroups are made: one cgroup v2 dir, or a dir per v1 controller
    find_tree          the tree under a cgroup mount point (``/sys/fs/cgroup``), or why there is none to use
    SlotCgroup         one slot's cgroup: make, join, kill, remove, its CPU count; ``describe()`` for ``details["confinement"]``
    CgroupUnavailable  no cgroup can be made here, and why
    DEFAULT_ROOT       where Linux mounts its cgroup file systems (``/sys/fs/cgroup``)
    slot_names         the names of the slot cgroups under a tree (in any of its hierarchies)
    remove_slot        kill what a named slot cgroup holds and remove its dirs (one its owner left behind)
"""

from __future__ import annotations

import errno
import os
import signal
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CgroupTree", "find_tree", "SlotCgroup", "CgroupUnavailable", "DEFAULT_ROOT", "slot_names", "remove_slot"]

#: Where Linux mounts its cgroup file systems.
DEFAULT_ROOT = "/sys/fs/cgroup"
_PERIOD_US = 100_000  # the scheduler's default bandwidth period
_MIN_QUOTA_US = 1_000  # the kernel's least quota
_FREEZE_WAIT_S = 0.05
_SIGNAL_ROUNDS_S = 0.25
_EMPTY_WAIT_S = 5.0
_POLL_S = 0.002
#: The v1 controllers a slot's cgroup is made in; ``freezer`` is optional (without it a run is ended by signals), and
#: so is ``cpuacct`` where it is a hierarchy apart from ``cpu`` (without it :meth:`SlotCgroup.cpu_seconds` is None).
_V1_NEEDED = ("cpu", "pids")
_V1_OPTIONAL = ("freezer", "cpuacct")


class CgroupUnavailable(Exception):
    """No cgroup can be made for a slot here; the message says why."""


@dataclass(frozen=True)
class CgroupTree:
    """Where slot cgroups go: ``version`` 2 with one parent dir (``parents == {"": dir}``), or 1 with one parent dir
    per controller (``cpu``, ``pids`` and, where mounted, ``freezer``)."""

    version: int
    parents: dict[str, str] = field(default_factory=dict)


def find_tree(root: str = DEFAULT_ROOT, proc_cgroup: str = "/proc/self/cgroup") -> CgroupTree:
    """The cgroup tree under the mount point ``root``: cgroup v2 where ``root`` (or ``root/unified``, a hybrid
    layout) is one whose ``cpu`` and ``pids`` controllers can be had, else v1's ``cpu`` and ``pids`` hierarchies
    (with ``freezer`` where mounted); each v1 parent is this process's own cgroup of that controller
    (``proc_cgroup``) where that dir shows under the mount, else the mount's root. Writing is not tried here:
    :meth:`SlotCgroup.make` finds that out. ``root`` may also be a delegated v2 cgroup dir.

    Raises:
        CgroupUnavailable: neither is there, with what each lacks.
    """
    why = []
    for v2 in (root, os.path.join(root, "unified")):
        if os.path.exists(os.path.join(v2, "cgroup.controllers")):
            lacking = [c for c in ("cpu", "pids") if c not in _words(os.path.join(v2, "cgroup.controllers"))]
            if not lacking:
                return CgroupTree(2, {"": v2})
            why.append(f"the cgroup v2 tree at {v2} lacks the {' and '.join(lacking)} controller"
                       f"{'s' if len(lacking) > 1 else ''} (bound to cgroup v1 hierarchies, or not delegated)")
    own = _own_v1_paths(proc_cgroup)
    parents = {}
    for controller in (*_V1_NEEDED, *_V1_OPTIONAL):
        mount = _v1_mount(root, controller)
        if mount is None or any(_v1_mount(root, other) == mount for other in parents):
            continue  # not mounted, or mounted with one listed already (``cpu,cpuacct``): one dir serves both
        nested = os.path.join(mount, own.get(controller, "/").lstrip("/"))
        parents[controller] = os.path.normpath(nested if os.path.isdir(nested) else mount)
    lacking = [c for c in _V1_NEEDED if c not in parents]
    if not lacking:
        return CgroupTree(1, parents)
    why.append(f"no cgroup v1 {' or '.join(lacking)} hierarchy is mounted under {root}")
    raise CgroupUnavailable("; ".join(why))


def _words(path: str) -> set[str]:
    try:
        with open(path) as fh:
            return set(fh.read().split())
    except OSError:
        return set()


def _own_v1_paths(proc_cgroup: str) -> dict[str, str]:
    """This process's cgroup path per v1 controller, from ``/proc/self/cgroup`` (``4:cpu,cpuacct:/a``)."""
    paths: dict[str, str] = {}
    try:
        with open(proc_cgroup) as fh:
            for line in fh:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for controller in controllers.split(","):
                    if controller:
                        paths[controller] = path
    except (OSError, ValueError):
        pass
    return paths


def _v1_mount(root: str, controller: str) -> str | None:
    """The dir of ``controller``'s v1 hierarchy under ``root`` (``cpu`` or ``cpu,cpuacct``, as distributions name
    it), or None. A v1 hierarchy shows by its ``tasks`` file (v2 has none), and ``cpu``'s by its quota file."""
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return None
    for name in names:
        if controller in name.split(","):
            path = os.path.join(root, name)
            marker = "cpu.cfs_quota_us" if controller == "cpu" else "tasks"
            if os.path.exists(os.path.join(path, marker)):
                return path
    return None


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _read(path: str) -> str:
    with open(path) as fh:
        return fh.read()


def _pids(directory: str) -> list[int]:
    try:
        return [int(p) for p in _read(os.path.join(directory, "cgroup.procs")).split()]
    except (OSError, ValueError):
        return []


@dataclass(frozen=True)
class SlotCgroup:
    """One slot's cgroup, as made by :meth:`make` (its description crosses to the worker: :meth:`to_data`).

    ``dirs``: v2 ``{"": dir}``; v1 one dir per controller (``cpu``, ``pids``, and ``freezer`` and ``cpuacct`` where
    mounted apart).
    ``cpus``: the CPUs its runs may use at most (the quota, after any parent's); ``pids``: its most tasks.
    """

    version: int
    dirs: dict[str, str]
    cpus: float
    pids: int

    @classmethod
    def make(cls, tree: CgroupTree, name: str, cpus: float, pids: int) -> SlotCgroup:
        """Make (or take over, emptied, from an owner that died) the cgroup ``name`` under ``tree``, capped at
        ``cpus`` CPUs and ``pids`` tasks. Raises :class:`CgroupUnavailable` (nothing left behind) when the tree
        cannot be written or the limits cannot be set."""
        if not cpus > 0 or pids < 1:
            raise ValueError(f"a slot cgroup needs cpus > 0 and pids >= 1, got {cpus!r}, {pids!r}")
        made: list[str] = []
        dirs = {controller: os.path.join(parent, name) for controller, parent in tree.parents.items()}
        try:
            if tree.version == 2:
                _enable_controllers(tree.parents[""])
            for directory in dirs.values():
                try:
                    os.mkdir(directory, 0o755)
                    made.append(directory)
                except FileExistsError:
                    pass
            slot = cls(tree.version, dirs, cpus, pids)
            if len(made) < len(dirs):  # taken over from an owner that died: it may still hold that owner's runs
                slot.kill(_EMPTY_WAIT_S)
            slot = slot._limit(cpus, pids, tree)
        except OSError as exc:
            for directory in reversed(made):
                try:
                    os.rmdir(directory)
                except OSError:
                    pass
            raise CgroupUnavailable(f"cannot make the slot's cgroup {', '.join(dirs.values())}: "
                                    f"{exc.strerror or exc}") from None
        return slot

    def _limit(self, cpus: float, pids: int, tree: CgroupTree) -> SlotCgroup:
        """Write the quota and the pids limit; returns the cgroup with the quota that holds (in v1 an ancestor's
        lower quota caps a child's: the kernel refuses more)."""
        quota = max(_MIN_QUOTA_US, round(cpus * _PERIOD_US))
        if self.version == 2:
            directory = self.dirs[""]
            _write(os.path.join(directory, "cpu.max"), f"{quota} {_PERIOD_US}")
            _write(os.path.join(directory, "pids.max"), str(pids))
        else:
            cpu = self.dirs["cpu"]
            parent = _v1_ancestor_quota(os.path.dirname(cpu), _v1_mount_of(tree.parents["cpu"]))
            if parent is not None and parent < cpus:
                quota = max(_MIN_QUOTA_US, int(parent * _PERIOD_US))
            _write(os.path.join(cpu, "cpu.cfs_period_us"), str(_PERIOD_US))
            _write(os.path.join(cpu, "cpu.cfs_quota_us"), str(quota))
            _write(os.path.join(self.dirs["pids"], "pids.max"), str(pids))
        return SlotCgroup(self.version, self.dirs, quota / _PERIOD_US, pids)

    # ------------------------------------------------------------------ the worker's side

    def to_data(self) -> dict[str, Any]:
        """What the worker is told (:class:`~..messages.WorkerConfig`); :meth:`from_data` rebuilds it."""
        return {"kind": f"cgroup{self.version}", "dirs": dict(self.dirs), "cpus": self.cpus, "pids": self.pids}

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> SlotCgroup | None:
        """The cgroup :meth:`to_data` described, or None when ``data`` describes no cgroup (another bound)."""
        kind = data.get("kind")
        if kind not in ("cgroup1", "cgroup2"):
            return None
        return cls(int(kind[-1]), {str(k): str(v) for k, v in data["dirs"].items()}, float(data["cpus"]), int(data["pids"]))

    def describe(self) -> dict[str, Any]:
        """The bound, as results report it (``details["confinement"]["cpu_bound"]``)."""
        return {"kind": f"cgroup{self.version}", "cpus": self.cpus, "pids": self.pids, "kill": self.kill_method,
                "cgroup": self.dirs.get("", self.dirs.get("cpu", ""))}

    @property
    def kill_method(self) -> str:
        """How :meth:`kill` ends a run: ``cgroup.kill``, ``freezer`` (freeze, SIGKILL each, thaw) or ``signals``."""
        if self.version == 2:
            return "cgroup.kill" if os.path.exists(os.path.join(self.dirs[""], "cgroup.kill")) else "freezer"
        return "freezer" if "freezer" in self.dirs else "signals"

    def join(self) -> None:
        """Move the calling process (single-threaded: a fresh fork) into this cgroup, in every hierarchy.
        Raises OSError where the kernel refuses."""
        for directory in self.dirs.values():
            _write(os.path.join(directory, "cgroup.procs"), "0")

    def kill(self, wait_s: float = 0.0) -> bool:
        """SIGKILL every process in the cgroup at once; with ``wait_s``, wait that long until none is left.
        True when none is left (without ``wait_s``: when none was there). Never raises."""
        try:
            if self.kill_method == "cgroup.kill":
                _write(os.path.join(self.dirs[""], "cgroup.kill"), "1")
            elif self.kill_method == "freezer":
                self._freeze_and_kill()
            else:
                self._kill_listed()
        except OSError:
            self._kill_listed()
        return self.empty(wait_s)

    def cpu_seconds(self) -> float | None:
        """The CPU time every process that ever ran in this cgroup has used, in seconds (the kernel's count: processes
        that exited are in it too); None where the kernel keeps no count here (v1 without a ``cpuacct`` hierarchy)."""
        try:
            if self.version == 2:
                for line in _read(os.path.join(self.dirs[""], "cpu.stat")).splitlines():
                    if line.startswith("usage_usec "):
                        return int(line.split()[1]) / 1e6
                return None
            directory = self.dirs.get("cpuacct", self.dirs["cpu"])
            return int(_read(os.path.join(directory, "cpuacct.usage"))) / 1e9
        except (OSError, ValueError):
            return None

    def empty(self, wait_s: float = 0.0) -> bool:
        """True once no process is left in the cgroup, waiting up to ``wait_s`` seconds for it."""
        deadline = time.monotonic() + wait_s
        while any(_pids(directory) for directory in self.dirs.values()):
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_S)
        return True

    def _freeze_and_kill(self) -> None:
        """Freeze the cgroup (nothing in it runs or forks), SIGKILL each of its processes, thaw: they die at once.
        A frozen process cannot exit, so no pid read then is reused before the kill. A freeze waits for each process
        to be scheduled, which a thousand throttled ones are not at once: past a short wait, those still running are
        signalled through pidfds (:meth:`_kill_listed`), and the rest, frozen, cannot fork meanwhile."""
        if self.version == 2:
            state, frozen, thawed = os.path.join(self.dirs[""], "cgroup.freeze"), "1", "0"
            directory = self.dirs[""]
        else:
            state, frozen, thawed = os.path.join(self.dirs["freezer"], "freezer.state"), "FROZEN", "THAWED"
            directory = self.dirs["freezer"]
        _write(state, frozen)
        try:
            deadline = time.monotonic() + _FREEZE_WAIT_S
            while not self._frozen() and time.monotonic() < deadline:
                time.sleep(_POLL_S)
            if not self._frozen():
                self._kill_listed()
                return
            for pid in _pids(directory):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        finally:
            _write(state, thawed)

    def _frozen(self) -> bool:
        if self.version == 2:
            return "frozen 1" in _read(os.path.join(self.dirs[""], "cgroup.events"))
        return _read(os.path.join(self.dirs["freezer"], "freezer.state")).strip() == "FROZEN"

    def _kill_listed(self) -> None:
        """Without a freezer: SIGKILL each listed process through a pidfd, taken before the list is read again, so
        that a pid reused meanwhile by a process outside the cgroup is never signalled (its pidfd names the process
        the pid had then, and a pid not listed again is skipped); in rounds, while new processes show up."""
        directory = self.dirs.get("", self.dirs.get("pids", ""))
        signalled: set[int] = set()
        deadline = time.monotonic() + _SIGNAL_ROUNDS_S
        while time.monotonic() < deadline:
            fds = {}
            for pid in set(_pids(directory)) - signalled:
                try:
                    fds[pid] = os.pidfd_open(pid)
                except OSError:
                    pass
            if not fds:
                return
            still = set(_pids(directory))
            for pid, fd in fds.items():
                try:
                    if pid in still:
                        signal.pidfd_send_signal(fd, signal.SIGKILL)
                        signalled.add(pid)
                except OSError:
                    pass
                finally:
                    os.close(fd)

    def remove(self, wait_s: float = _EMPTY_WAIT_S) -> bool:
        """Kill what is left in the cgroup, wait (up to ``wait_s``) until it is empty, remove its dirs. True when
        every dir is gone. Never raises."""
        self.kill(wait_s)
        deadline = time.monotonic() + wait_s
        gone = True
        for directory in self.dirs.values():
            while True:
                try:
                    os.rmdir(directory)
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if exc.errno != errno.EBUSY or time.monotonic() >= deadline:
                        gone = False
                        break
                    self.kill()
                    time.sleep(_POLL_S)
        return gone


def slot_names(tree: CgroupTree, prefix: str) -> list[str]:
    """The names of the cgroups directly under ``tree``'s parents that start with ``prefix``, in any hierarchy."""
    names: set[str] = set()
    for parent in tree.parents.values():
        try:
            names.update(entry for entry in os.listdir(parent)
                         if entry.startswith(prefix) and os.path.isdir(os.path.join(parent, entry)))
        except OSError:
            continue
    return sorted(names)


def remove_slot(tree: CgroupTree, name: str, wait_s: float = _EMPTY_WAIT_S) -> bool:
    """Kill every process in the slot cgroup ``name`` under ``tree`` and remove its dirs (those of its hierarchies
    that exist): for a slot whose owner died, never for one a live pool holds (the caller knows which). True when
    every dir is gone. Never raises."""
    dirs = {controller: os.path.join(parent, name) for controller, parent in tree.parents.items()
            if os.path.isdir(os.path.join(parent, name))}
    return not dirs or SlotCgroup(tree.version, dirs, 1.0, 1).remove(wait_s)


def _enable_controllers(parent: str) -> None:
    """Have ``parent`` (a v2 cgroup) hand the cpu and pids controllers down to its children, where it does not yet."""
    enabled = _words(os.path.join(parent, "cgroup.subtree_control"))
    for controller in ("cpu", "pids"):
        if controller not in enabled:
            _write(os.path.join(parent, "cgroup.subtree_control"), f"+{controller}")


def _v1_quota_cpus(directory: str) -> float | None:
    """The CPUs a v1 cpu cgroup's quota allows (None: no quota there), or None where it cannot be read."""
    try:
        quota = int(_read(os.path.join(directory, "cpu.cfs_quota_us")))
        period = int(_read(os.path.join(directory, "cpu.cfs_period_us")))
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None


def _v1_mount_of(directory: str) -> str:
    """The root of the v1 hierarchy ``directory`` lies in: the highest dir up from it that is still a cpu cgroup."""
    while os.path.exists(os.path.join(os.path.dirname(directory), "cpu.cfs_quota_us")) and directory != "/":
        directory = os.path.dirname(directory)
    return directory


def _v1_ancestor_quota(directory: str, mount: str) -> float | None:
    """The lowest quota (in CPUs) of ``directory`` and its ancestors up to ``mount``: a v1 child may not exceed it."""
    lowest = None
    while True:
        quota = _v1_quota_cpus(directory)
        if quota is not None and (lowest is None or quota < lowest):
            lowest = quota
        if directory == mount or len(directory) <= len(mount):
            return lowest
        directory = os.path.dirname(directory)
