"""Runs in the host: where a sandbox worker runs, how the pool starts one, talks to it, and stops it.

A :class:`~.pool.SandboxExecutor` speaks to each worker (:mod:`..worker.main`) in the messages of
:mod:`..messages`, one JSON line each: jobs on the worker's stdin, replies on its stdout. A :class:`Launcher` decides where that worker lives and
hands back a :class:`WorkerProcess`, the pool's only handle on it. :class:`LocalLauncher` starts
the worker as a child process of this one (the default); :class:`~..backends.docker.ContainerLauncher`
starts it inside a locked-down container.
"""

from __future__ import annotations

import abc
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ..children import describe_exit, kill_group
from ..confinement.slot_cgroup import DEFAULT_ROOT, CgroupTree, CgroupUnavailable, SlotCgroup, find_tree
from ..messages import WorkerConfig
from ..runtimes.interpreter import child_env
from ..runtimes.needs import RuntimeProbe
from .spawner import spawn

__all__ = ["WorkerProcess", "Launcher", "LocalLauncher", "WORKER_MODULE", "PACKAGE_ROOT", "PACKAGE_DIR", "EXIT_WAIT_S",
           "worker_boot"]

WORKER_MODULE = "convcodeworld_gym.sandbox.worker.main"
#: The directory holding the ``convcodeworld_gym`` package.
PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])
#: The ``convcodeworld_gym`` package dir itself: all a worker needs on its path.
PACKAGE_DIR = str(Path(__file__).resolve().parents[2])
#: How long a WorkerProcess waits for a worker that stopped answering to end, to say how it ended.
EXIT_WAIT_S = 5.0


def worker_boot(package_dir: str, *, start: bool = True) -> str:
    """Python source (for ``python -s -c``) that imports the worker from ``package_dir`` and, if ``start``, runs it.

    Neither the package's ``__init__`` (gymnasium, the env, ...) nor the sandbox's (the host's executors) is run:
    bare package objects whose paths are ``package_dir`` and its ``sandbox`` dir stand in for them, so the worker
    imports its own room and the rooms below it (run, confinement, runtimes, the records), standard library only,
    and no host code. Nothing is added to ``sys.path`` (the dir above the package may be a site-packages full of
    the env's own libraries): a runtime interpreter with nothing of this project installed, and other pins, runs it.
    """
    sandbox_dir = os.path.join(package_dir, "sandbox")
    return ("import sys, types\n"
            f"for name, path in (('convcodeworld_gym', {package_dir!r}), ('convcodeworld_gym.sandbox', {sandbox_dir!r})):\n"
            "    package = types.ModuleType(name)\n"
            "    package.__path__ = [path]\n"
            "    sys.modules[name] = package\n"
            f"from {WORKER_MODULE} import main\n"
            + ("main()\n" if start else ""))


class WorkerProcess(abc.ABC):
    """A started worker. Not thread-safe: the pool uses one from one thread at a time."""

    @property
    @abc.abstractmethod
    def fd(self) -> int:
        """A descriptor to ``select`` on and ``os.read`` the worker's stdout from; EOF once it has ended."""

    @abc.abstractmethod
    def send(self, data: bytes) -> None:
        """Write ``data`` to the worker's stdin. Raises OSError when the worker is gone."""

    @abc.abstractmethod
    def exited(self) -> bool:
        """True once the worker has ended (it may not be reaped yet)."""

    @abc.abstractmethod
    def exit_text(self) -> str:
        """How the worker ended, in words ("was killed by signal SIGKILL"); waits a little for the end."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Kill the worker (if still running) and free what it holds. Idempotent."""


class Launcher(abc.ABC):
    """Starts workers for a pool and says what the pool must know about where they run.

    Attributes:
        backend: ``details["backend"]`` of every result (``"sandbox"``, ``"docker"``).
        own_cgroup: True when each worker has a memory cgroup to itself (a container), so that an
            OOM kill counted there during a run is that run's (:mod:`..confinement.cgroup`).
    """

    backend: str = "sandbox"
    own_cgroup: bool = False

    @property
    @abc.abstractmethod
    def switches_uid(self) -> bool:
        """True when workers run as root and can drop each run to the slot's own uid (the pool then claims one)."""

    @abc.abstractmethod
    def readable(self) -> list[str]:
        """Paths, as the worker sees them, that runs must be able to read (the package, the interpreter)."""

    @abc.abstractmethod
    def start(self, config: WorkerConfig) -> WorkerProcess:
        """Start a worker with ``config`` (its one command-line argument); raises ExecutorError when it cannot."""

    def confinement(self, reported: dict[str, Any]) -> dict[str, Any]:
        """``details["confinement"]`` from what the worker reported (a launcher adds what it confines itself)."""
        return reported

    def details(self) -> dict[str, Any]:
        """Extra keys for every result's ``details`` (e.g. the image)."""
        return {}

    def slot_bound(self, name: str, cpus: float, pids: int) -> tuple[SlotCgroup | None, dict[str, Any]]:
        """What bounds the CPU and processes of one slot's runs as a whole: a cgroup made for the slot now (named
        ``name``, at most ``cpus`` CPUs and ``pids`` tasks; the pool removes it with the slot) and its description,
        or None and what bounds them instead (a container's limits) or why nothing does (``{"kind": "none",
        "why": ...}``). Called once per slot, before its first worker starts. The default makes none."""
        return None, {"kind": "none", "why": f"the {self.backend} launcher makes no cgroup for a slot"}

    def runtime(self) -> str:
        """What identifies the runtime beyond this interpreter (part of the result cache's fingerprint)."""
        return ""

    def probe(self) -> RuntimeProbe | None:
        """Asks the workers' interpreter what it lacks (:mod:`..runtimes.needs`); None when it cannot be asked from here."""
        return None

    def close(self) -> None:
        """Release what the launcher holds beyond its workers. Idempotent."""


class _ChildProcess(WorkerProcess):
    """A worker that is a child process of this one (``pid`` is its real pid)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.pid = proc.pid

    @property
    def fd(self) -> int:
        assert self.proc.stdout is not None
        return self.proc.stdout.fileno()

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def exited(self) -> bool:
        return self.proc.poll() is not None

    def exit_text(self) -> str:
        try:
            self.proc.wait(EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            pass
        return describe_exit(self.proc.returncode, "stopped answering")

    def stop(self) -> None:
        if self.proc.returncode is None:  # not reaped yet, so its pid (and group id) is still its own
            kill_group(self.proc.pid)
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()  # type: ignore[union-attr]
            except OSError:
                pass


class LocalLauncher(Launcher):
    """Workers as child processes of this process, started with ``python`` (the runtime interpreter, by
    default this one) and a scrubbed environment; ``python`` needs nothing of this project installed
    (:func:`worker_boot`).

    Each is started from the spawner thread (see :mod:`.spawner`), in its own session, and dies
    with this process.

    Each slot's runs get a cgroup of their own (:mod:`..confinement.slot_cgroup`) under ``cgroup_root``, the
    mount point of the cgroup file systems (cgroup v2, or v1's ``cpu``, ``pids`` and ``freezer``), where that
    can be written: as root, or in a v2 tree delegated to this user (point ``cgroup_root`` at it). ``None``
    makes none. Where none can be made, results say why (``details["confinement"]["cpu_bound"]``).
    """

    def __init__(self, python: str | None = None, cgroup_root: str | None = DEFAULT_ROOT) -> None:
        self.python = python or sys.executable
        self.cgroup_root = cgroup_root
        self._probe: RuntimeProbe | None = None
        self._tree: CgroupTree | CgroupUnavailable | None = None

    def probe(self) -> RuntimeProbe:
        if self._probe is None:
            self._probe = RuntimeProbe.shared(self.python)
        return self._probe

    @property
    def switches_uid(self) -> bool:
        return os.geteuid() == 0

    def readable(self) -> list[str]:
        return [PACKAGE_DIR, os.path.dirname(os.path.realpath(self.python))]  # the worker adds its interpreter's paths

    def slot_bound(self, name: str, cpus: float, pids: int) -> tuple[SlotCgroup | None, dict[str, Any]]:
        """The slot's own cgroup under ``cgroup_root`` (see the class), or why there is none."""
        if self.cgroup_root is None:
            return None, {"kind": "none", "why": "cgroups switched off (LocalLauncher(cgroup_root=None))"}
        if self._tree is None:
            try:
                self._tree = find_tree(self.cgroup_root)
            except CgroupUnavailable as exc:
                self._tree = exc
        try:
            if isinstance(self._tree, CgroupUnavailable):
                raise self._tree
            slot = SlotCgroup.make(self._tree, name, cpus, pids)
        except CgroupUnavailable as exc:
            return None, {"kind": "none", "why": str(exc)}
        return slot, slot.describe()

    def start(self, config: WorkerConfig) -> WorkerProcess:
        proc = spawn(  # from a thread that outlives the worker: it dies with its parent *thread*
            [self.python, "-s", "-c", worker_boot(PACKAGE_DIR), config.to_wire().decode()],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=child_env("/tmp"), cwd="/", start_new_session=True,
        )
        return _ChildProcess(proc)
