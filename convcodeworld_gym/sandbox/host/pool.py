"""Runs in the host: the sandbox executor, a pool of warm, confined workers with a per-task judge mode and time limit.

Holds:
    SandboxExecutor   the confined, pooled :class:`~.executor.Executor` (the environment's default)
    WorkerDied        raised internally when a worker stops answering (the run is retried on a fresh worker)
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import logging
import os
import queue
import re
import select
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, replace
from typing import Any

from ...errors import ExecutorError
from ...tasks import TEST_CLASS, Task, third_party
from ..confinement.confine import Level, SandboxSettings
from ..confinement.slot_cgroup import CgroupUnavailable, SlotCgroup, find_tree, remove_slot, slot_names
from ..limits import Limits
from ..messages import Job, Mode, Ready, Reply, RunReply, WorkerConfig, WorkerFailed, reply_from_wire
from ..result import ExecutionResult
from ..run.events import MODULE_NAME, assemble
from ..run.judge import judge_facts, judge_source
from ..runtimes.install import resolve_runtime
from ..runtimes.needs import Lacking, RuntimeProbe
from ..runtimes.packages import HEAVY_MODULES, installed_preload, network_policy, runtime_fingerprint
from .cache import ResultCache, result_key
from .executor import Executor
from .judge_policy import calibration_modes, check_judge, flagged_constructs, refusal, run_mode
from .launch import Launcher, LocalLauncher, WorkerProcess
from .lending import IdleWatch, RunTokens, Watched
from .profile import IMPORT_PROFILES, ProfileStore, TaskProfile, TimePolicy, import_profile, profile_for, profile_key
from .shipped import ShippedProfiles, shipped_profiles

__all__ = ["SandboxExecutor", "WorkerDied"]

_log = logging.getLogger(__name__)

_WORKER_GRACE_S = 15.0  # the worker owns the run's clock; the parent waits this much longer before killing it


@functools.lru_cache(maxsize=4096)
def _judge_facts(prelude: str, test: str) -> dict[str, Any]:
    """The split judge's facts of a task's tests (:func:`..run.judge.judge_facts`), found once per task."""
    return judge_facts(judge_source("", prelude, test)).to_data()


class WorkerDied(Exception):
    """A worker exited or stopped answering during a run."""


class _CalibrationLost(ExecutorError):
    """The infrastructure lost a task's calibration run (its canonical solution), also on its retry: no profile is
    stored, and the run that needed it comes back lost (:meth:`..result.ExecutionResult.lost`)."""


_UID_LOCK_DIR = "/run/lock" if os.path.isdir("/run/lock") else "/tmp"
_UID_RANGE = 4096


def _claim_uid(base: int) -> tuple[int, int]:
    """Reserve a sandbox uid no other executor on this machine uses: returns (uid, lock fd held for our lifetime)."""
    for uid in range(base, base + _UID_RANGE):
        fd = os.open(os.path.join(_UID_LOCK_DIR, f"ccw-sandbox-uid-{uid}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return uid, fd
        except OSError:
            os.close(fd)
    raise ExecutorError(f"no free sandbox uid in [{base}, {base + _UID_RANGE}); close other executors or change base_uid")


_SLOT_PREFIX = "ccw-sandbox-"
_BY_UID = re.compile(r"ccw-sandbox-uid(\d+)$")
_BY_PID = re.compile(r"ccw-sandbox-pid(\d+)-slot\d+$")


@contextlib.contextmanager
def _owner_gone(name: str) -> Iterator[bool]:
    """Whether the process that made the slot cgroup ``name`` has died, held true for the ``with`` block: a slot named
    by its uid belongs to whoever holds that uid's lock (:func:`_claim_uid`; the kernel frees it when its holder
    dies), and the lock is held here meanwhile, so no pool claims the uid while its cgroup is removed; a slot named by
    a pid belongs to that process. Any doubt (a name of another form, a lock that cannot be opened) says alive."""
    by_uid, by_pid = _BY_UID.match(name), _BY_PID.match(name)
    if by_pid is not None:
        yield not os.path.exists(f"/proc/{by_pid.group(1)}")
        return
    if by_uid is None:
        yield False
        return
    try:
        fd = os.open(os.path.join(_UID_LOCK_DIR, f"ccw-sandbox-uid-{by_uid.group(1)}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False  # held: its owner lives
            return
        yield True
    finally:
        os.close(fd)  # and with it the lock


def sweep_left_slots(launcher: Launcher) -> int:
    """Remove the slot cgroups that sandbox processes which died left behind (a killed server, a timed-out
    benchmark), with whatever they still hold; never one whose owner lives. Returns how many were removed. Only for
    a :class:`~.launch.LocalLauncher` whose cgroup tree is found; nothing elsewhere."""
    root = getattr(launcher, "cgroup_root", None) if isinstance(launcher, LocalLauncher) else None
    if root is None:
        return 0
    try:
        tree = find_tree(root)
    except CgroupUnavailable:
        return 0
    removed = 0
    for name in slot_names(tree, _SLOT_PREFIX):
        with _owner_gone(name) as gone:
            if gone and remove_slot(tree, name):
                removed += 1
    return removed


class _Worker:
    """One worker slot: its worker is started on demand by the launcher and replaced when it dies.
    Where the worker may switch uids, the slot's uid is its own on this machine.

    The slot's runs are bounded as a whole (``run_cpus`` CPUs, ``settings.max_processes`` tasks) by what the
    launcher gives the slot before its first worker starts (:meth:`.launch.Launcher.slot_bound`): a cgroup of its
    own, kept across its workers (each stopped worker's leftovers in it are killed) and removed by :meth:`release`."""

    def __init__(self, slot: int, settings: SandboxSettings, preload: tuple[str, ...], launcher: Launcher,
                 run_cpus: float = 1.0) -> None:
        self.slot, self.settings, self.preload, self.launcher = slot, settings, preload, launcher
        self.run_cpus = run_cpus
        self.proc: WorkerProcess | None = None
        self.confinement: dict[str, Any] = {}
        self._buffer = b""
        self._uid: tuple[int, int] | None = None
        self._cgroup: SlotCgroup | None = None
        self._bound: dict[str, Any] | None = None

    def start(self) -> dict[str, Any]:
        if self._uid is None and self.launcher.switches_uid:
            self._uid = _claim_uid(self.settings.base_uid)
        uid = self._uid[0] if self._uid else self.settings.base_uid
        if self._bound is None:
            # Named by the slot's uid where it holds one (no other executor on the machine uses it, so a cgroup of
            # that name was left by an owner that died, and is taken over), else by this process and slot.
            name = f"ccw-sandbox-uid{uid}" if self._uid else f"ccw-sandbox-pid{os.getpid()}-slot{self.slot}"
            self._cgroup, self._bound = self.launcher.slot_bound(name, self.run_cpus, self.settings.max_processes)
        config = WorkerConfig(uid=uid, settings=asdict(self.settings), preload=tuple(self.preload),
                              readable=tuple(self.launcher.readable()), own_cgroup=self.launcher.own_cgroup,
                              cpu_bound=self._cgroup.to_data() if self._cgroup is not None else self._bound)
        self.proc = self.launcher.start(config)
        try:
            reply = self._read(timeout=120.0)
        except WorkerDied as exc:
            self.stop()
            raise ExecutorError(f"sandbox worker {self.slot} did not start: {exc}") from None
        if not isinstance(reply, Ready):
            self.stop()
            raise ExecutorError(f"sandbox worker {self.slot} did not start: {reply}")
        self.confinement = self.launcher.confinement(reply.confinement)
        return self.confinement

    @property
    def alive(self) -> bool:
        return self.proc is not None and not self.proc.exited()

    def _read(self, timeout: float) -> Reply:
        assert self.proc is not None
        fd = self.proc.fd
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerDied(f"the sandbox worker did not answer within {timeout:g} s")
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if not ready:
                if self.proc.exited():
                    raise WorkerDied(f"the sandbox worker {self.proc.exit_text()}")
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise WorkerDied(f"the sandbox worker {self.proc.exit_text()}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return reply_from_wire(line)

    def request(self, job: Job, timeout: float) -> Reply:
        assert self.proc is not None
        try:
            self.proc.send(job.to_wire() + b"\n")
        except OSError as exc:
            raise WorkerDied(f"the sandbox worker could not take the job ({exc})") from None
        return self._read(timeout)

    def kill_run(self) -> bool:
        """End the slot's run now, as a limit does: every process in the slot's cgroup killed at once (the worker and
        its zygote stay outside it; the worker reports the run as ended). False where the slot has no cgroup (the run
        then ends at its limits). Safe from any thread."""
        if self._cgroup is None:
            return False
        self._cgroup.kill()
        return True

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.stop()
        self.proc = None
        self._buffer = b""
        if self._cgroup is not None:  # what the worker's runs left (they die with it, but not at once)
            self._cgroup.kill()

    def release(self) -> None:
        """Stop the worker, remove the slot's cgroup and give its uid back."""
        self.stop()
        if self._cgroup is not None:
            if not self._cgroup.remove():
                _log.warning("the sandbox slot's cgroup %s could not be removed", self._cgroup.describe()["cgroup"])
            self._cgroup = None
        self._bound = None
        if self._uid is not None:
            os.close(self._uid[1])
            self._uid = None


class _RunTicket:
    """One awaited run (:meth:`SandboxExecutor.arun`): the slot it runs on while it runs, and whether its caller gave up.
    A cancel kills the run on its slot at once (:meth:`_Worker.kill_run`); a run whose caller gave up before it
    started never starts, is never retried and is never cached. The kill and the run's end take one lock, so a kill
    never reaches the slot's next run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.cancelled = False
        self._worker: _Worker | None = None

    def attach(self, worker: _Worker) -> bool:
        """The run is about to start on ``worker``; False (do not start it) when its caller has given up."""
        with self._lock:
            if self.cancelled:
                return False
            self._worker = worker
            return True

    def detach(self) -> None:
        """The run has ended (its reply is read): a cancel from now on kills nothing."""
        with self._lock:
            self._worker = None

    def cancel(self) -> None:
        """The caller gave up: kill the run if it is running, and keep it from starting, from a retry and the cache."""
        with self._lock:
            self.cancelled = True
            if self._worker is not None and self._worker.kill_run():
                _log.info("a run whose caller gave up was killed on sandbox slot %d", self._worker.slot)


_ALL = "all"  # the one group of an executor given preload=
#: Imported by every group's workers: ``unittest.mock``, which the judge imports for every test that mocks (~10 ms per run
#: otherwise), and the two sides of input/output tests, the judge's check and the program's runner (each I/O run
#: compiled them afresh where no bytecode is written).
_EVERY_GROUP = ("unittest.mock", "convcodeworld_gym.sandbox.run.iocheck", "convcodeworld_gym.sandbox.run.ioprogram")


class _Group:
    """The worker slots of one import profile: grown on demand up to the executor's ``workers``."""

    def __init__(self, name: str, preload: tuple[str, ...]) -> None:
        self.name, self.preload, self.size = name, preload, 0
        self.idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()


class SandboxExecutor(Executor):
    """Runs programs in warm, confined sandbox workers; the judge cannot be forged in split mode.

    Each slot is a long-lived worker process that confines itself (see
    :class:`~..confinement.confine.Level`; the level achieved is in every result's ``details["confinement"]``)
    and has imported the libraries of its import profile; each run is a child forked from the
    smallest one that holds what the task imports (``details["worker_group"]``). Tasks are judged in
    ``split`` mode (tests in a trusted judge process, the program in another; values cross as data
    or stand-ins, the tests' mocks stay in the judge). ``inprocess`` judging (program and tests in
    one process, where a program can forge its verdict) happens only on request: ``judge="inprocess"``,
    or ``allow_forgeable=True``, which judges in-process a task whose canonical solution fails
    split but passes that way. Every result says how it was judged: ``details["judge"]`` and
    ``details["forgeable"]``. The calibrated mode and time limit are kept in ``profiles``. Where the launcher can
    give each slot a cgroup of its own (:meth:`.launch.Launcher.slot_bound`; as root), a slot's runs are held to
    ``settings.run_cpus`` CPUs (default: the machine's CPUs divided by ``workers``, at least one) and
    ``settings.max_processes`` tasks as a whole, and ended at once at a limit; ``details["confinement"]["cpu_bound"]``
    says which bound holds.
    At most ``workers`` runs compute at once; with ``lend_idle`` (the default), a run whose slot's cgroup counts
    almost no CPU for a second (it sleeps, it blocks) lends its place to the next run in line, which starts on
    another slot, and takes it back as soon as it computes again (:mod:`.lending`; ``details["lent_s"]``): a slow
    program that waits on nothing holds only its own slot, never the CPUs. Groups then grow to ``2 × workers``
    slots at most.
    Identical (tests, program, runtime) runs are answered from ``cache``.

    A run the infrastructure lost is retried once, on a freshly started worker, with its full time limits
    (the lost attempt's time is not charged to it; ``wall_time_s`` counts both). Lost means: its worker
    died or stopped answering during the run (a program cannot kill its worker: the worker is outside the
    run's PID namespace, under another uid, and seccomp refuses the calls), the worker failed on the run
    itself (:class:`~..messages.WorkerFailed`), or the worker lost the run before any of the program's code
    ran (no spare could be made, or the spare refused before it was ready: :attr:`..messages.RunReply.lost`).
    Whatever the run's own processes do (exit, crash, be killed by a signal, hit a time, memory or output
    limit) stays the program's verdict. A retried result says so in ``details["retried"]`` (``lost``: the
    first loss's reason, ``lost_s``: its seconds); a run lost again is :meth:`..result.ExecutionResult.lost`: no
    verdict, ``infra_error`` says why, and it is never cached.

    Args:
        limits: limits for tasks without a calibrated profile (and when ``calibrate`` is False).
        workers: number of worker slots (default: the CPUs available).
        settings: sandbox sizes and rlimits.
        require: fail closed: raise :class:`~convcodeworld_gym.errors.ExecutorError` unless every worker
            reaches this :class:`~..confinement.confine.Level` (``"full"``, ``"namespaces"``, ``"uid"`` or ``"process"``).
        judge: ``"auto"`` (per task, calibrated), ``"split"`` or ``"inprocess"`` (forgeable) for every task.
        allow_forgeable: with ``judge="auto"``, judge in-process a task whose canonical solution fails
            under the split judge but passes in-process (its results carry ``forgeable``); default off:
            such a task stays split (its profile says the canonical solution fails).
        calibrate: measure each task's canonical solution once to set its mode and time limit.
        time_policy: floor / factor / cap of calibrated time limits.
        profiles: where profiles live (default: in memory).
        shipped: profiles measured ahead (:mod:`.shipped`) that answer a task's first step without a canonical
            run: True (the package's, for HumanEval and BigCodeBench v0.1.0_hf), a :class:`~.shipped.ShippedProfiles`,
            or False (calibrate every task here).
        cache: True (a fresh :class:`ResultCache`), a cache to share, or False to switch caching off.
        preload: modules every worker imports up front. Default (None): workers by import profile, each run forks
            from the smallest warm worker that holds what its task imports (:func:`~.profile.import_profile`:
            the standard library only, numpy, pandas, pandas + matplotlib, or ``own``: all of those installed plus
            each task's own libraries as they come); each profile's group grows on demand up to ``workers``
            slots, and at most ``workers`` runs go at once in all. Given, one group of ``workers`` slots serves
            every task (``details["worker_group"]`` is ``"all"``).
        runtime: the interpreter that runs the programs (:mod:`..runtimes.install`): a Python executable, a venv dir, or
            an installed runtime's name (``"bigcodebench"``). Default: ``$CONVCODEWORLD_RUNTIME_PYTHON``, else
            the installed BigCodeBench runtime, else this interpreter. It needs nothing of this project installed.
        python: the same as ``runtime=`` given a Python executable (kept for compatibility).
        launcher: where workers run (default: :class:`~.launch.LocalLauncher`, child processes of this one;
            :class:`~..backends.docker.DockerExecutor` passes a container launcher).
        lend_idle: let a run that uses no CPU lend its place (above); it needs the slot's cgroup and its CPU count,
            so it does nothing elsewhere (no cgroup, v1 without ``cpuacct``, containers).

    >>> from convcodeworld_gym.tasks import load_tasks
    >>> task = load_tasks("humaneval")["HumanEval/0"]
    >>> with SandboxExecutor(workers=1, preload=()) as ex:
    ...     ex.run(task, task.ground_truth).passed, ex.run(task, task.code_prompt + "    return True\\n").passed
    (True, False)
    """

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        workers: int | None = None,
        settings: SandboxSettings | None = None,
        require: Level | str | None = None,
        judge: str = "auto",
        allow_forgeable: bool = False,
        calibrate: bool = True,
        time_policy: TimePolicy | None = None,
        profiles: ProfileStore | None = None,
        shipped: ShippedProfiles | bool = True,
        cache: ResultCache | bool = True,
        preload: tuple[str, ...] | None = None,
        runtime: str | os.PathLike[str] | None = None,
        python: str | None = None,
        launcher: Launcher | None = None,
        lend_idle: bool = True,
    ) -> None:
        check_judge(judge)
        self.limits = limits or Limits()
        self.settings = settings or SandboxSettings()
        self.require = Level(require) if require is not None else None
        self.judge = judge
        self.allow_forgeable = allow_forgeable
        self.calibrate = calibrate
        self.time_policy = time_policy or TimePolicy(cap_s=max(TimePolicy().floor_s, self.limits.suite_timeout_s))
        self.profiles = profiles if profiles is not None else ProfileStore()
        self.shipped: ShippedProfiles | None = shipped_profiles() if shipped is True else (shipped or None)
        self.cache: ResultCache | None = ResultCache() if cache is True else (cache or None)
        n = workers if workers is not None else self.default_concurrency()
        if n <= 0:
            raise ValueError(f"workers must be > 0, got {n}")
        if sum(x is not None for x in (launcher, python, runtime)) > 1:
            raise ValueError("pass one of runtime=, python= or launcher= (a launcher chooses its own interpreter)")
        self._launcher = launcher or LocalLauncher(python or resolve_runtime(runtime))
        probe = self._launcher.probe()
        if preload is not None:
            self.preload = tuple(preload)
        elif probe is None or probe.python == sys.executable:
            self.preload = installed_preload()
        else:  # a runtime of its own: what it holds, not what this interpreter holds
            self.preload = tuple(m for m in HEAVY_MODULES if not probe.lacking_modules([m.split(".")[0]]))
        self.by_profile = preload is None  # else every run forks from a worker that preloads what was asked
        self._concurrency = n
        # Each slot's runs may use this many CPUs at most where the slot has a cgroup (launch.Launcher.slot_bound).
        self._run_cpus = self.settings.run_cpus or max(1.0, _available_cpus() / n)
        self._tokens = RunTokens(n)  # at most n runs compute at once, whatever their profiles
        self._watch = IdleWatch(self._tokens, on_lend=self._arun_capacity_rose) if lend_idle else None
        self._slot_cap = 2 * n if lend_idle else n  # a group's most slots: those in use plus the lent ones
        self._lock = threading.Lock()
        self._workers: list[_Worker] = []  # every slot of every group; a slot's number is its index
        self._groups: dict[str, _Group] = {}
        if not self.by_profile:
            group = self._group(_ALL)
            for _ in range(n):  # slots made up front: their number is the executor's (e.g. containers)
                group.idle.put(self._new_slot(group))  # type: ignore[arg-type]
        self._closed = False
        self._fingerprint: str | None = None
        self._profile_locks: dict[str, threading.Lock] = {}
        self.replaced_workers = 0
        #: Slot cgroups left by sandbox processes that died, removed as this pool started (:func:`sweep_left_slots`).
        self.swept_cgroups = sweep_left_slots(self._launcher) if self._launcher.switches_uid else 0
        if self.swept_cgroups:  # housekeeping of other, dead processes: no concern of this run's user (info, not warning)
            _log.info("removed %d sandbox slot cgroup(s) left by processes that died", self.swept_cgroups)

    # ----------------------------------------------------------------- public

    def default_concurrency(self) -> int:
        return self._concurrency if hasattr(self, "_concurrency") else super().default_concurrency()

    def arun_capacity(self) -> int:
        """One awaited run per slot, and one more for each run that lent its place (:mod:`.lending`) now."""
        return self._concurrency + (self._watch.lent if self._watch is not None else 0)

    @property
    def confinement(self) -> dict[str, Any]:
        """What the smallest worker achieved (starting it if needed): all workers are confined alike."""
        group = self._group(_ALL if not self.by_profile else "stdlib")
        worker = self._take_from(group)
        try:
            self._ensure(worker)
            return dict(worker.confinement)
        finally:
            group.idle.put(worker)

    def group_of(self, task: Task, program: str = "") -> str:
        """The worker group a run of ``program`` for ``task`` forks from, or ``"all"`` when the executor was given
        ``preload``: the task's import profile (kept with its profile), widened to cover what the program itself
        imports (a program that returns numpy values for a standard-library task forks from the numpy worker,
        whose judge can read them, as with one worker that holds everything). What the program imports is
        the task's to say (:meth:`~convcodeworld_gym.tasks.Task.program_imports`: an input/output task's wrapper
        imports its runner, which every group preloads; the model's code inside it is what counts)."""
        if not self.by_profile:
            return _ALL
        key = profile_key(task, self._fingerprint) if self._fingerprint is not None else None
        known = self.profiles.get(key) if key is not None else None
        base = (known.imports if known is not None and known.imports else None) or import_profile(task)
        if base == "own":
            return base
        extra = third_party(task.program_imports(program))  # an I/O task's: its code's, never the wrapper's runner
        if not extra and not ("plot" in program or "hist" in program):
            return base
        return profile_for({*IMPORT_PROFILES[base], *extra}, program)

    def runtime_probe(self) -> RuntimeProbe | None:
        """Asks the workers' interpreter what it lacks (None for workers in a container)."""
        return self._launcher.probe()

    def fingerprint(self) -> str:
        """Runtime fingerprint: interpreter, library versions, confinement level and sandbox settings."""
        if self._fingerprint is None:
            where = self._launcher.runtime()  # e.g. the image: the runtime is not only this interpreter
            probe = self._launcher.probe()
            where += f"|{probe.python}|{probe.identity()}" if probe is not None else ""  # the runs' interpreter and libraries
            self._fingerprint = runtime_fingerprint(f"{self.confinement.get('level')}|{self.settings}" + (f"|{where}" if where else ""))
        return self._fingerprint

    def profile(self, task: Task) -> TaskProfile:
        """The task's judge mode, canonical time and import profile: stored, else shipped, else measured once
        (the canonical solution is run)."""
        key = profile_key(task, self.fingerprint())
        found = self.profiles.get(key)
        if found is not None:
            return found
        with self._lock:
            lock = self._profile_locks.setdefault(key, threading.Lock())
        with lock:
            found = self._known_profile(task, key)
            if found is None:
                found, canonical = self._measure(task)
                found = replace(found, imports=import_profile(task))
                self.profiles.put(key, found)
                if canonical is not None:  # the canonical run answers its own next request
                    self._remember(task, task.ground_truth, found.mode, self._limits_for(found, task), canonical)
        return found

    def _known_profile(self, task: Task, key: str) -> TaskProfile | None:
        """The task's stored profile, else its shipped one (then stored too); None where neither exists."""
        found = self.profiles.get(key)
        if found is None and self.shipped is not None and (found := self.shipped.lookup(task)) is not None:
            self.profiles.put(key, found)
        return found

    def expected_seconds(self, task: Task) -> float | None:
        """The canonical solution's time from the task's stored or shipped profile (nothing is run for it)."""
        known = self._known_profile(task, profile_key(task, self.fingerprint()))
        return known.canonical_s if known is not None else None

    def prepare(self, task: Task) -> None:
        """The task's profile (shipped, stored, or calibrated now) and its split-judge facts, ahead of its first run.
        Never raises: a worker that cannot start says so when the task runs."""
        _judge_facts(task.header, task.test)
        if self.judge == "auto" and self.calibrate:
            try:
                self.profile(task)
            except ExecutorError:
                pass

    def derive(self, task: Task, derived: Task) -> None:
        """Store ``task``'s profile (its mode, canonical time) for ``derived``, with ``derived``'s import profile."""
        key = profile_key(derived, self.fingerprint())
        if self.judge == "auto" and self.calibrate and self.profiles.get(key) is None:
            try:
                self.profiles.put(key, replace(self.profile(task), imports=import_profile(derived)))
            except ExecutorError:
                pass  # the run says why

    def run(self, task: Task, program: str) -> ExecutionResult:
        return self._run(task, program, None)

    async def arun(self, task: Task, program: str) -> ExecutionResult:
        """:meth:`run`, awaited in the executor's FIFO pool (:meth:`.executor.Executor.arun`); cancelled, the run is killed at
        once on its slot where the slot has a cgroup (as a limit ends it; elsewhere it ends at its limits), a run
        still queued never starts, and neither is retried or cached. A calibration the run waits on is shared with
        other callers: it is never killed."""
        ticket = _RunTicket()
        try:
            return await self._threads().call(self._run, task, program, ticket)
        except asyncio.CancelledError:
            ticket.cancel()
            raise

    def _run(self, task: Task, program: str, ticket: _RunTicket | None) -> ExecutionResult:
        if (refused := self.refuse_oversized(task, program)) is not None:
            return refused
        try:
            profile = self.profile(task) if self.judge == "auto" and self.calibrate else None
        except _CalibrationLost as exc:  # no verdict on the program without the task's calibration
            return ExecutionResult.lost(task.test_names, str(exc), details={"backend": self._launcher.backend})
        mode = run_mode(self.judge, task.test, profile.mode if profile is not None else None, self.allow_forgeable)
        limits = self._limits_for(profile, task) if profile is not None else self.limits.covering(task.own_time_limits)
        return self._run_mode(task, program, mode, limits, profile, ticket)

    def close(self) -> None:
        self._closed = True
        if self._watch is not None:
            self._watch.close()
        for worker in self._workers:
            worker.release()
        self._launcher.close()

    # ----------------------------------------------------------------- internals

    def _limits_for(self, profile: TaskProfile, task: Task) -> Limits:
        """The task's limits: calibrated from its canonical time (the executor's own where its canonical solution
        failed), never below what the task itself asks (:meth:`..limits.Limits.covering`)."""
        if not profile.canonical_passed:
            return self.limits.covering(task.own_time_limits)
        return self.time_policy.limits_for(profile.canonical_s, self.limits).covering(task.own_time_limits)

    def _measure(self, task: Task) -> tuple[TaskProfile, ExecutionResult | None]:
        """Run the canonical solution (split mode first, unless the tests force in-process) to set mode and time.

        A canonical run that fails is tried once more in a freshly started worker before the task is
        downgraded to the next mode or marked failing, so that no mark comes from a polluted worker or an
        unlucky run (not when the task imports a library this runtime lacks: that failure is no accident);
        the profile's note says what failed, and whether the retry passed. A canonical run the infrastructure
        lost (also on its retry) marks nothing: :class:`_CalibrationLost` is raised and no profile is stored.
        """
        cap = self.time_policy.limits_for(None, self.limits).covering(task.own_time_limits)
        modes = calibration_modes(task.test, self.allow_forgeable)
        first = modes[0]
        if not task.has_ground_truth:  # nothing to run: the task's own limits, else the executor's, hold
            return TaskProfile(first, None, False, "no canonical solution to calibrate with"), None
        tried = []
        for mode in modes:
            result = self._canonical_run(task, mode, cap)
            retried, fresh = "", False
            if not result.passed and not result.details.get("missing_modules"):  # a missing library is no accident
                once, fresh = _why(result), True
                result = self._canonical_run(task, mode, cap, fresh=True)
                retried = f"{mode.value}: failed once ({once}), passed in a fresh worker" if result.passed else ""
            if result.passed:
                notes = ([] if mode is first else [f"canonical failed in {first.value} mode ({'; '.join(tried)})"])
                profile = TaskProfile(mode, round(result.details.get("run_s") or result.wall_time_s, 4), True,
                                      "; ".join(notes + ([retried] if retried else [])))
                return profile, replace(result, details={**result.details, "profile": profile.to_json()})
            tried.append(f"{mode.value}: {_why(result)}" + (", also in a fresh worker" if fresh else ""))
        return TaskProfile(first, None, False, "canonical solution fails: " + "; ".join(tried)), None

    def _canonical_run(self, task: Task, mode: Mode, limits: Limits, fresh: bool = False) -> ExecutionResult:
        """A calibration run of the task's canonical solution; raises :class:`_CalibrationLost` for a run the
        infrastructure lost (also on its retry), which says nothing about the task."""
        result = self._execute(task, task.ground_truth, mode, limits, fresh)
        if result.infra_error is not None:
            raise _CalibrationLost(f"calibrating the task, a run of its canonical solution was lost: {result.infra_error}")
        return result

    def _cache_key(self, task: Task, program: str, mode: Mode, limits: Limits) -> str | None:
        if self.cache is None:
            return None
        return result_key(task.test_digest, program, f"{self.fingerprint()}|{mode.value}|{limits}|{network_policy(task)}")

    def _remember(self, task: Task, program: str, mode: Mode, limits: Limits, result: ExecutionResult) -> None:
        key = self._cache_key(task, program, mode, limits)
        if key is not None and result.executed and result.infra_error is None:  # a lost run is no verdict
            self.cache.put(key, result)  # type: ignore[union-attr]

    def _run_mode(self, task: Task, program: str, mode: Mode, limits: Limits, profile: TaskProfile | None,
                  ticket: _RunTicket | None = None) -> ExecutionResult:
        key = self._cache_key(task, program, mode, limits)
        if key is not None:
            hit = self.cache.get(key)  # type: ignore[union-attr]
            if hit is not None:
                return replace(hit, details={**hit.details, "cache": "hit"})
        result = self._execute(task, program, mode, limits, ticket=ticket)
        details = dict(result.details)
        if profile is not None:
            details["profile"] = profile.to_json()
        flagged = flagged_constructs(mode, program, task.ground_truth)
        if flagged and result.passed:
            details["flagged"] = list(flagged)
            result = replace(result, crash=refusal(flagged))
        result = replace(result, details=details)
        if ticket is None or not ticket.cancelled:  # a killed run's result is no verdict
            self._remember(task, program, mode, limits, result)
        return result

    def _group(self, name: str) -> _Group:
        """The group of workers for import profile ``name`` (made on first use, without workers yet)."""
        with self._lock:
            group = self._groups.get(name)
            if group is None:
                group = self._groups[name] = _Group(name, self._preload_of(name))
            return group

    def _preload_of(self, name: str) -> tuple[str, ...]:
        """What a group's workers import up front: its profile's libraries that the runtime holds (``own``: all of
        them, and each task's own as it comes); ``all``: exactly the executor's ``preload``."""
        if name == _ALL:
            return self.preload
        if name in IMPORT_PROFILES:
            wanted = set(IMPORT_PROFILES[name])
            return (*_EVERY_GROUP, *(m for m in self.preload if m in wanted))
        return (*_EVERY_GROUP, *self.preload)

    def _new_slot(self, group: _Group) -> _Worker | None:
        """A new slot (its worker not started yet) for ``group``, or None when it has its most slots already
        (``workers``, twice that with lending)."""
        with self._lock:
            if group.size >= self._slot_cap:
                return None
            worker = _Worker(len(self._workers), self.settings, group.preload, self._launcher, self._run_cpus)
            self._workers.append(worker)
            group.size += 1
        return worker

    def _take_from(self, group: _Group) -> _Worker:
        """An idle worker of ``group``; a new slot while the group has fewer than ``workers`` and all are busy."""
        try:
            return group.idle.get_nowait()
        except queue.Empty:
            return self._new_slot(group) or group.idle.get()

    def _take(self, task: Task, program: str) -> tuple[_Group, _Worker]:
        self._tokens.take()
        try:
            group = self._group(self.group_of(task, program))
            return group, self._take_from(group)
        except BaseException:
            self._tokens.give()
            raise

    def _give(self, group: _Group, worker: _Worker, watched: int | None = None) -> Watched | None:
        """Put ``worker`` back and give its run's token back (a watched run's, unless it is lent: given already);
        returns the watched run."""
        group.idle.put(worker)
        if watched is None:
            self._tokens.give()
            return None
        assert self._watch is not None
        return self._watch.remove(watched)

    def _watch_run(self, worker: _Worker) -> int | None:
        """Watch the run about to start on ``worker`` for lending (:mod:`.lending`), where its slot counts CPU."""
        slot = worker._cgroup  # noqa: SLF001 - the slot's own cgroup, made by its worker's first start
        if self._watch is None or slot is None or slot.cpu_seconds() is None:
            return None
        return self._watch.add(Watched(slot.cpu_seconds))

    def _ensure(self, worker: _Worker) -> None:
        if self._closed:
            raise ExecutorError(f"this {type(self).__name__} is closed; create a new one")
        if worker.alive:
            return
        if worker.proc is not None:  # died between runs
            worker.stop()
            self.replaced_workers += 1
        got = worker.start()
        if self.require is not None and not Level(got["level"]).at_least(self.require):
            worker.stop()
            raise ExecutorError(
                f"sandbox confinement {got['level']!r} is below the required {self.require.value!r} "
                f"(missing: {'; '.join(got.get('missing', [])) or 'unknown'}); run as root on Linux with namespaces, "
                "or lower require="
            )

    def _execute(self, task: Task, program: str, mode: Mode, limits: Limits, fresh: bool = False,
                 ticket: _RunTicket | None = None) -> ExecutionResult:
        """One run on the next idle worker (``fresh``: on a newly started one, nothing of earlier runs in it),
        retried once on a freshly started worker when the infrastructure lost it (see the class docstring).

        The retry runs under the same ``limits``, on its own clock; its result is the run's, with
        ``details["retried"]`` naming the first loss. Lost again: :meth:`..result.ExecutionResult.lost`."""
        first = self._attempt(task, program, mode, limits, fresh, ticket)
        if first.infra_error is None or (ticket is not None and ticket.cancelled):  # nobody waits for a retry
            return first
        _log.warning("a run of %s was lost to the infrastructure (%s); retrying it on a fresh worker",
                     task.task_id, first.infra_error)
        second = self._attempt(task, program, mode, limits, fresh=True)
        details = {**second.details, "retried": {"lost": first.infra_error, "lost_s": round(first.wall_time_s, 3)}}
        wall_time_s = first.wall_time_s + second.wall_time_s
        if second.infra_error is None:
            return replace(second, details=details, wall_time_s=wall_time_s)
        _log.warning("the retry of %s was lost too (%s): the run has no verdict", task.task_id, second.infra_error)
        return ExecutionResult.lost(task.test_names, second.infra_error, wall_time_s=wall_time_s, details=details)

    def _attempt(self, task: Task, program: str, mode: Mode, limits: Limits, fresh: bool,
                 ticket: _RunTicket | None = None) -> ExecutionResult:
        """One run on the next idle worker, as :meth:`_execute` says; a run the infrastructure lost comes back with
        ``infra_error`` set (and no tests: it is retried or turned into :meth:`..result.ExecutionResult.lost`), its worker
        stopped so that the slot's next run starts a new one."""
        started = time.monotonic()
        probe = self._launcher.probe()  # None: the worker's import tells
        lacking = probe.lacking_one(task) if probe is not None else Lacking()
        network = network_policy(task)
        job = Job(program=program, test=task.test, prelude=task.header, entry_point=task.entry_point, module=MODULE_NAME,
                  test_class=TEST_CLASS, mode=mode.value, limits=asdict(limits),
                  preload=tuple(sorted(m for m in task.third_party_imports if m.split(".")[0] not in lacking.modules)),
                  network=network,
                  facts=_judge_facts(task.header, task.test) if mode is Mode.SPLIT else None,
                  first=task.public_tests)
        group, worker = self._take(task, program)
        lost: str | None = None
        reply: Reply | None = None
        watched: int | None = None
        try:
            if fresh:
                worker.stop()
            self._ensure(worker)
            details: dict[str, Any] = {"backend": self._launcher.backend, **self._launcher.details(),
                                       "confinement": {**worker.confinement, "network": network},
                                       "uid": worker.confinement.get("uid"), "judge": mode.value,
                                       "forgeable": mode is Mode.INPROCESS, "worker": worker.slot, "worker_group": group.name}
            if ticket is not None and not ticket.attach(worker):  # its caller gave up before it started
                return ExecutionResult.not_executed(task.test_names, "Not run: its caller gave up before it started.")
            watched = self._watch_run(worker)
            try:
                reply = worker.request(job, timeout=limits.suite_timeout_s + _WORKER_GRACE_S)
            except WorkerDied as exc:  # died from outside, or hung: the program cannot reach its worker
                details["worker_died"] = str(exc)
                lost = str(exc)
            finally:
                if ticket is not None:
                    ticket.detach()
            if isinstance(reply, WorkerFailed):  # never the program's doing: the worker failed on the run itself
                details["worker_error"] = reply.error
                lost = f"the sandbox worker failed on this run ({reply.error})"
            elif isinstance(reply, RunReply) and reply.lost is not None:  # none of the program's code ran
                lost = reply.lost
            if lost is not None:
                worker.stop()
                self.replaced_workers += 1  # started afresh by the next run on this slot
        finally:
            run = self._give(group, worker, watched)
        if run is not None and run.lent_s:
            details["lent_s"] = round(run.lent_s, 3)
        if lost is not None:
            return ExecutionResult(tests=(), infra_error=f"{lost}; the worker was replaced",
                                   wall_time_s=time.monotonic() - started, details=details)
        assert isinstance(reply, RunReply), reply  # a worker answers a job with a RunReply or a WorkerFailed
        result = assemble(task.test_names, reply.events, reply.stop_reason, reply.exit_desc, limits)
        if lacking.modules:
            details["missing_modules"] = list(lacking.modules)
        if lacking.data:
            details["missing_data"] = list(lacking.data)
        details["run_s"] = reply.run_s
        if reply.stages:
            details["stages"] = reply.stages
        limits_hit = result.limits_hit
        if reply.oom_kills:  # the kernel ended processes of this run at its container's memory limit
            details["oom_kills"] = reply.oom_kills
            limits_hit += ("memory_limit",)
        return ExecutionResult(tests=result.tests, executed=True, crash=result.crash, limits_hit=limits_hit,
                               wall_time_s=time.monotonic() - started, details=details)


def _available_cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _why(result: ExecutionResult) -> str:
    if result.limits_hit:
        return f"limit hit ({', '.join(result.limits_hit)})"
    texts = [result.crash or ""] + [t.traceback for t in result.tests if not t.outcome.ok]
    last = next((line for text in texts for line in reversed(text.strip().splitlines()) if line.strip()), "")
    return last[:200] or "failed"
