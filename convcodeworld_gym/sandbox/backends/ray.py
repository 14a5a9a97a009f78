"""Runs in the host and a Ray actor per node: executions sent to a Ray cluster, each run by a warm local sandbox on a
node.

Only Ray does the distribution. The executor keeps ``slots`` Ray actors (by default one per ``num_cpus`` CPUs of the
cluster, spread over its nodes); each actor holds one warm :class:`~convcodeworld_gym.sandbox.SandboxExecutor` (its
confinement, split judge, calibrated time limits and result cache) that it reuses for every execution sent to it. A
run goes to an idle actor that has started, so each actor runs one execution at a time and ``run_many`` keeps all of
them busy.

The cluster may change under it. A thread of the executor looks at the cluster every :data:`WATCH_S` seconds: it
starts actors where CPUs came back or were added (a restarted node, an autoscaler's new node), drops the idle ones
whose node is gone, and hands a started actor to the runs only once it answers. No run waits on the cluster without a
deadline (:func:`run_deadline_s`, from the run's own limits), and no run waits on an actor that has not started.

No task data in a run (:mod:`..confinement.view`): each run is the node's local sandbox's, which shows a run only the
system's dirs, its runtime and the package, with task data masked; Ray's own files on the node (its session dir
under ``/tmp/ray``, spilled objects that hold the tasks sent to the actors, the object store in ``/dev/shm``) are
out of a run's view, since a run gets a fresh ``/tmp`` and ``/dev/shm`` and every top-level dir but the system's is
covered. A ``--temp-dir`` inside the runtime's own paths would be visible: keep it elsewhere.

Holds:
    RayExecutor         the backend (``pip install 'convcodeworld-gym[ray]'``)
    make_ray_executor   factory for ``convcodeworld evaluate --ray ADDRESS``
    RayUnavailable      ray is not installed or the cluster cannot be reached
    run_deadline_s      how long the answer of one run on an actor is waited for
    WATCH_S             how often the executor looks at the cluster
"""

from __future__ import annotations

import collections
import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ...errors import ExecutorError
from ...tasks import Task
from ..host.executor import Executor, longest_first
from ..host.pool import SandboxExecutor
from ..host.profile import TimePolicy
from ..limits import Limits
from ..result import ExecutionResult

__all__ = ["RayExecutor", "RayUnavailable", "make_ray_executor", "run_deadline_s", "WATCH_S"]

_log = logging.getLogger(__name__)

#: The default node-side executor of one actor: the sandbox with one warm worker (one actor per CPU).
NODE_SANDBOX: Callable[[Limits], Executor] = functools.partial(SandboxExecutor, workers=1)

#: Seconds between two looks at the cluster (its CPUs, its nodes, the actors starting): CPUs that come back or are
#: added take runs about this plus an actor's start later.
WATCH_S = 1.0
#: Seconds a caller with runs waiting for an actor blocks at most before it looks for one freed elsewhere.
_TICK_S = 0.2


class RayUnavailable(ExecutorError):
    """``ray`` is not installed, or no cluster answers at the given address."""


def run_deadline_s(limits: Limits, grace_s: float = 60.0) -> float:
    """How long the answer of one run on a Ray actor is waited for: ``4 × cap + grace_s``.

    ``cap`` is the longest time limit the node's sandbox gives one run (a calibrated limit is at most
    ``max(TimePolicy.floor_s, limits.suite_timeout_s)``); four of them cover the task's calibration and the run, each
    retried once on a fresh sandbox worker, and ``grace_s`` covers Ray and a worker's start. An actor that has not
    answered by then is presumed lost (hung, or cut off from this process): it is stopped and the run retried.

    >>> run_deadline_s(Limits()), run_deadline_s(Limits(suite_timeout_s=1.0), grace_s=5.0)
    (544.0, 25.0)
    """
    return 4 * _cap_s(limits) + grace_s


def _cap_s(limits: Limits) -> float:
    """The longest time limit the node's sandbox gives one run under ``limits``."""
    return max(TimePolicy.floor_s, limits.suite_timeout_s)


class _NodeSandbox:
    """Body of one Ray actor: a node-local executor kept warm across executions."""

    def __init__(self, factory: Callable[[Limits], Executor], limits: Limits) -> None:
        import ray

        self._executor = factory(limits)
        self._node = ray.get_runtime_context().get_node_id()

    def where(self) -> tuple[str, int]:
        """The actor's node id and process id: its answer says it has started."""
        return self._node, os.getpid()

    def run(self, task: Task, program: str, derived_from: Task | None = None) -> ExecutionResult:
        if derived_from is not None:  # this actor's profiles: told before its first run of the derived task
            self._executor.derive(derived_from, task)
        result = self._executor.run(task, program)
        result.details["ray_node"] = self._node
        return result

    def close(self) -> None:
        self._executor.close()


@dataclass(eq=False)
class _Slot:
    """One actor of the executor: starting while ``probe`` (its :meth:`_NodeSandbox.where` call) is unanswered."""

    actor: Any
    probe: Any
    since: float
    node: str = ""
    pid: int = 0


@dataclass(eq=False)
class _Job:
    """One execution a caller waits for, and what happened to it so far."""

    task: Task
    program: str
    queued: float  # when it began to wait for an actor (again, after a loss)
    started: float  # when the caller handed it over
    retried: dict[str, Any] | None = None  # the first loss, once the execution was lost
    result: ExecutionResult | None = None
    error: BaseException | None = None  # the node executor raised (not the infrastructure)


@dataclass
class _Running:
    slot: _Slot
    job: _Job
    deadline: float


@dataclass
class _Capacity:
    """What the executor knows of the cluster, for its one warning per shortfall."""

    room: int = 0  # actors the cluster's CPUs hold, at the last look
    warned: bool = False  # the shortfall was told; reset once the executor has all it asked for again
    lost: list[str] = field(default_factory=list)  # the nodes of actors lost since then


#: What a ``ray://`` connection that failed without ``RAY_AUTH_MODE`` set may lack (Ray 2.59 and later turn token
#: authentication on for the clusters ``ray start`` makes, and the client then times out).
_AUTH_HINT = ("; a cluster with token authentication (Ray >= 2.59 turns it on for `ray start` clusters) also needs "
              "RAY_AUTH_MODE=token and its token (RAY_AUTH_TOKEN, or `ray get-auth-token` on the head) in this "
              "process's environment")


class RayExecutor(Executor):
    """Runs each execution on a Ray cluster, in a warm sandbox held by one of ``slots`` actors.

    Args:
        address: the cluster (``"ray://head:10001"``, ``"auto"``, ``"host:6379"``); ``None``
            connects to the Ray instance already initialised in this process, or starts a
            local one.
        limits: passed to the node-side executor (its limits for uncalibrated tasks); they bound every wait
            (:func:`run_deadline_s`).
        num_cpus: CPUs each actor reserves.
        slots: number of actors to keep (default: one per ``num_cpus`` CPUs of the cluster, growing with it).
        node_executor: builds an actor's executor from the limits (default: a
            :class:`SandboxExecutor` with one worker); must be importable on every node
            (the package installed there).
        init_kwargs: extra ``ray.init`` arguments (``num_cpus=2`` for a local test instance,
            ``runtime_env=...``).
        grace_s: Ray's own part of every deadline (an actor's start, a node's death noticed); see
            :func:`run_deadline_s`.

    Contract: as every executor; outcomes are those of the node executor (the details gain ``ray_node``), which
    retries a run whose sandbox worker it lost. Elastic: the executor keeps as many of its ``slots`` actors as the
    cluster's CPUs hold, starts more when CPUs come back or are added, and drops those whose node is gone, with no
    restart; each shortfall is told once (a warning naming the lost nodes). No run waits forever:

    * an execution whose actor is lost (its node died, its process was killed, or it did not answer within
      :func:`run_deadline_s`, when it is stopped) is retried once on another live actor (``details["retried"]``
      names the loss); lost again, it comes back :meth:`~..result.ExecutionResult.lost` (``infra_error``: no
      verdict), never as a failure of the program;
    * a run waits for an idle actor while some actor of the executor is alive (the runs ahead of it end within
      their deadlines); while none is, at most its time limit + ``grace_s``, then it comes back lost, saying why.
      An actor the cluster has no CPU for is not waited on: the runs go to the actors that have started.

    ``close()`` stops the actors (those still starting too) and the watching thread, and shuts Ray down only when
    this executor started it.

    >>> ex = RayExecutor("ray://head-node:10001")  # doctest: +SKIP
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        limits: Limits | None = None,
        num_cpus: float = 1.0,
        slots: int | None = None,
        node_executor: Callable[[Limits], Executor] = NODE_SANDBOX,
        init_kwargs: dict[str, Any] | None = None,
        grace_s: float = 60.0,
    ) -> None:
        try:
            import ray
        except ImportError as exc:
            raise RayUnavailable("the Ray backend needs ray: pip install 'convcodeworld-gym[ray]'") from exc
        if not num_cpus > 0:
            raise ValueError(f"num_cpus must be > 0 (CPUs per actor), got {num_cpus!r}")
        if slots is not None and slots < 1:
            raise ValueError(f"slots must be >= 1 (actors to start) or None for one per num_cpus CPUs, got {slots!r}")
        if not grace_s > 0:
            raise ValueError(f"grace_s must be > 0 (seconds Ray may take beyond a run's limits), got {grace_s!r}")
        self.limits = limits or Limits()
        self.grace_s = grace_s
        self.deadline_s = run_deadline_s(self.limits, grace_s)
        self._actor_wait_s = _cap_s(self.limits) + grace_s  # a run waits this long for an actor when none is alive
        self._ray = ray
        self._owns_ray = False
        if not ray.is_initialized():
            try:
                ray.init(address=address, **(init_kwargs or {}))
            except Exception as exc:  # ConnectionError, RuntimeError, ...
                raise RayUnavailable(
                    f"could not connect to the Ray cluster at {address!r} ({exc}); check the address "
                    "(`ray status` on the head node shows it) or pass address=None for a local instance"
                    + (_AUTH_HINT if str(address).startswith("ray://") and not os.environ.get("RAY_AUTH_MODE") else "")
                ) from exc
            self._owns_ray = True
        self._pid = os.getpid()
        self._num_cpus = num_cpus
        self._slots_asked = slots
        self._actor_class = ray.remote(num_cpus=num_cpus, max_restarts=0, max_task_retries=0)(_NodeSandbox)
        self._factory = node_executor
        self._derived: dict[Task, Task] = {}  # derived task -> the task whose profile it takes (see derive)
        self._lock = threading.Lock()
        self._freed = threading.Condition(self._lock)  # an actor became idle, or the executor closed
        self._slots: list[_Slot] = []  # every actor, starting or started
        self._idle: collections.deque[_Slot] = collections.deque()
        self._none_live_since: float | None = time.monotonic()  # since when no actor has started (None: one has)
        self._capacity = _Capacity()
        self._addresses: dict[str, str] = {}  # node id -> its address, as the cluster last listed it
        self._start_error: str | None = None  # why the last actor that failed to start failed
        self._next_start = 0.0  # no actor is started before then (after failed starts)
        self._failed_starts = 0
        self._wake = threading.Event()  # the watcher looks at the cluster now (an actor was lost)
        self._closed = False
        room = self._room()
        self._wanted = slots or max(1, room)
        self._start_actors(min(self._wanted, room) or 1)
        self._watcher = threading.Thread(target=self._watch, name="ccw-ray-watch", daemon=True)
        self._watcher.start()

    # ------------------------------------------------------------------ running

    def run(self, task: Task, program: str) -> ExecutionResult:
        (result,) = self._execute([(task, program)], None)
        return result

    def run_many(self, jobs: Sequence[tuple[Task, str]], max_workers: int | None = None) -> list[ExecutionResult]:
        """Run the jobs on every actor that has started, also those that start during the batch; results in job
        order. One at a time (``max_workers=1``) in the order given; else longest expected first (as
        :meth:`~..host.executor.Executor.run_many`), at most ``max_workers`` at once when given."""
        if len(jobs) <= 1 or max_workers == 1:
            return [self.run(task, program) for task, program in jobs]
        order = longest_first([self.expected_seconds(task) for task, _program in jobs])
        results = self._execute([jobs[i] for i in order], max_workers)
        done = dict(zip(order, results))
        return [done[i] for i in range(len(jobs))]

    def _execute(self, pairs: list[tuple[Task, str]], most: int | None) -> list[ExecutionResult]:
        """Run ``pairs`` (in that order of start) from this thread, at most ``most`` at once; raises the node
        executor's first error, once every run has ended."""
        if os.getpid() != self._pid:
            raise ExecutorError(
                "this RayExecutor was created in another process (e.g. copied into an AsyncVectorEnv worker); "
                "pass a factory instead: executor=functools.partial(RayExecutor, address)"
            )
        if self._closed:
            raise ExecutorError("the RayExecutor is closed; create a new one")
        now = time.monotonic()
        jobs = [_Job(task, program, now, now) for task, program in pairs]
        waiting: collections.deque[_Job] = collections.deque()
        for job in jobs:
            if (refused := self.refuse_oversized(job.task, job.program)) is not None:
                job.result = refused
            else:
                waiting.append(job)
        self._drive(waiting, most)
        for job in jobs:
            if job.error is not None:
                raise job.error
        return [job.result for job in jobs]  # type: ignore[misc]

    def _drive(self, waiting: collections.deque[_Job], most: int | None) -> None:
        """Until every job has its result: hand waiting jobs to idle actors, collect answers, and end what waited
        past its deadline."""
        running: dict[Any, _Running] = {}
        while waiting or running:
            if self._closed:
                self._end_all(waiting, running)
                return
            self._start_jobs(waiting, running, most)
            self._expire_waiting(waiting)
            if running:
                now = time.monotonic()
                timeout = min(r.deadline for r in running.values()) - now
                if waiting:  # look again soon for an actor freed elsewhere or newly started
                    timeout = min(timeout, _TICK_S)
                if len(running) == 1 and not waiting:  # one run: its answer awaited at once (one call to Ray)
                    (ref,) = running
                    if self._collect(running[ref], ref, waiting, max(0.0, timeout)):
                        del running[ref]
                else:
                    for ref in self._answered(list(running), max(0.0, timeout)):
                        self._collect(running.pop(ref), ref, waiting)
                now = time.monotonic()
                for ref in [ref for ref, r in running.items() if r.deadline <= now]:
                    late = running.pop(ref)
                    self._lost(late, f"the Ray actor running this execution did not answer within "
                                     f"{self.deadline_s:g} s (run_deadline_s of its limits); it was stopped", waiting)
            elif waiting:
                with self._lock:
                    if not self._idle and not self._closed:
                        self._freed.wait(_TICK_S)

    def _start_jobs(self, waiting: collections.deque[_Job], running: dict[Any, _Running], most: int | None) -> None:
        """Hand waiting jobs, first first, to the idle actors (``most`` running at once at most)."""
        pairs = []
        with self._lock:
            while waiting and self._idle and (most is None or len(running) + len(pairs) < most):
                pairs.append((self._idle.popleft(), waiting.popleft()))
        for slot, job in pairs:
            deadline = time.monotonic() + self.deadline_s
            try:
                ref = slot.actor.run.remote(job.task, job.program, self._derived.get(job.task))
            except Exception as exc:  # noqa: BLE001 - the cluster refused the call: the actor is as good as lost
                self._lost(_Running(slot, job, deadline), f"the Ray actor could not be sent this execution "
                                                          f"({_first_line(str(exc))})", waiting)
                continue
            running[ref] = _Running(slot, job, deadline)

    def _answered(self, refs: list[Any], timeout: float) -> list[Any]:
        """The refs among ``refs`` that have an answer (one at most), waiting up to ``timeout`` seconds for it."""
        try:
            return self._ray.wait(refs, num_returns=1, timeout=timeout, fetch_local=False)[0]
        except Exception as exc:  # noqa: BLE001 - a connection to the cluster that flaps: deadlines still hold
            _log.debug("waiting on Ray failed (%s); trying again", exc)
            time.sleep(min(timeout, _TICK_S))
            return []

    def _collect(self, done: _Running, ref: Any, waiting: collections.deque[_Job], timeout: float = 0.0) -> bool:
        """The answer of a run, waited for up to ``timeout`` seconds: its result, a loss of its actor, or the node
        executor's error. False when there is none yet."""
        exceptions = self._ray.exceptions
        job = done.job
        try:
            result = self._ray.get(ref, timeout=timeout)
        except exceptions.GetTimeoutError:
            return False
        except exceptions.RayTaskError as exc:  # the node executor raised: its error, not the cluster's
            job.error = exc
            self._release(done.slot)
            return True
        except (exceptions.RayError, ConnectionError) as exc:  # actor or node died, object lost, client cut off
            self._lost(done, f"the Ray actor running this execution was lost ({_first_line(str(exc))})", waiting)
            return True
        self._release(done.slot)
        if job.retried is not None:
            result = replace(result, details={**result.details, "retried": job.retried},
                             wall_time_s=time.monotonic() - job.started)
        job.result = result
        return True

    def _lost(self, lost: _Running, reason: str, waiting: collections.deque[_Job]) -> None:
        """``lost.job``'s actor was lost: drop the actor, and retry the job once on another (first in line)."""
        self._drop(lost.slot)
        job, now = lost.job, time.monotonic()
        if job.retried is None and not self._closed:
            _log.warning("a run of %s was lost on Ray (%s); retrying it on another actor", job.task.task_id, reason)
            job.retried = {"lost": reason, "lost_s": round(now - job.started, 3)}
            job.queued = now
            waiting.appendleft(job)
            return
        _log.warning("a run of %s was lost on Ray again (%s): it has no verdict", job.task.task_id, reason)
        self._give_up(job, reason)

    def _give_up(self, job: _Job, reason: str) -> None:
        details: dict[str, Any] = {"backend": "ray"}
        if job.retried is not None:
            details["retried"] = job.retried
        job.result = ExecutionResult.lost(job.task.test_names, reason, wall_time_s=time.monotonic() - job.started,
                                          details=details)

    def _expire_waiting(self, waiting: collections.deque[_Job]) -> None:
        """With no actor started for the run's actor wait (its limit + ``grace_s``), a waiting job comes back lost."""
        with self._lock:
            since = self._none_live_since
            if since is None or not waiting:
                return
            room, starting = self._capacity.room, len(self._slots)
        now = time.monotonic()
        for job in [job for job in waiting if now - max(job.queued, since) >= self._actor_wait_s]:
            waiting.remove(job)
            why = f"the last one that failed to start: {self._start_error}" if self._start_error else \
                f"{starting} starting, the cluster's CPUs hold {room} of the {self._wanted} asked for"
            self._give_up(job, f"no Ray actor of this executor was alive for {self._actor_wait_s:g} s ({why})")

    def _end_all(self, waiting: collections.deque[_Job], running: dict[Any, _Running]) -> None:
        """The executor was closed under these jobs: each comes back lost."""
        for job in [*waiting, *(r.job for r in running.values())]:
            if job.result is None:
                self._give_up(job, "the RayExecutor was closed during this execution")
        waiting.clear()
        running.clear()

    def derive(self, task: Task, derived: Task) -> None:
        """Each actor keeps its own profiles: the pair is sent with every run of ``derived``, and the actor that
        runs it derives the profile there (see :meth:`~..host.executor.Executor.derive`), so no actor calibrates the probe."""
        self._derived[derived] = task

    # ------------------------------------------------------------------ actors

    def _release(self, slot: _Slot) -> None:
        """``slot`` ran its execution: idle again, unless it was dropped meanwhile."""
        with self._lock:
            if slot in self._slots and not self._closed:
                self._idle.append(slot)
                self._freed.notify_all()

    def _drop(self, slot: _Slot) -> None:
        """Forget ``slot`` (lost, or its node gone) and stop its actor; the watcher starts another where CPUs allow."""
        with self._lock:
            if slot not in self._slots:
                return
            self._slots.remove(slot)
            if slot in self._idle:
                self._idle.remove(slot)
            if slot.node:
                self._capacity.lost.append(slot.node)
            self._note_live()
        self._kill(slot)
        self._wake.set()

    def _kill(self, slot: _Slot) -> None:
        try:
            self._ray.kill(slot.actor, no_restart=True)
        except Exception as exc:  # noqa: BLE001 - already gone, or the cluster is out of reach
            _log.debug("stopping a Ray actor failed (%s)", exc)

    def _note_live(self) -> None:
        """With the lock held: keep ``_none_live_since`` (no started actor since then)."""
        live = any(slot.probe is None for slot in self._slots)
        if live:
            self._none_live_since = None
        elif self._none_live_since is None:
            self._none_live_since = time.monotonic()

    def _start_actors(self, count: int) -> None:
        """Start ``count`` actors (SPREAD over the nodes); they take runs once they answer."""
        for _ in range(count):
            actor = self._actor_class.options(scheduling_strategy="SPREAD").remote(self._factory, self.limits)
            slot = _Slot(actor, actor.where.remote(), time.monotonic())
            with self._lock:
                closed = self._closed
                if not closed:
                    self._slots.append(slot)
            if closed:  # closed meanwhile: nobody will stop it
                self._kill(slot)

    def _room(self) -> int:
        """How many actors the cluster's CPUs hold (those of its live nodes)."""
        return int(self._ray.cluster_resources().get("CPU", 0) // self._num_cpus)

    def _watch(self) -> None:
        """The watching thread: until close, the actors that started join the idle ones, and the cluster is looked
        at every :data:`WATCH_S` seconds (:meth:`_look`)."""
        failing = False
        while not self._closed and self._ray.is_initialized():
            try:
                self._adopt_started()
                if not self._closed:
                    self._look()
                failing = False
            except Exception as exc:  # noqa: BLE001 - the cluster out of reach for a while: look again later
                (_log.debug if failing else _log.warning)(
                    "looking at the Ray cluster failed (%s); looking again every %g s", _first_line(str(exc)), WATCH_S)
                failing = True
                self._wake.wait(WATCH_S)
                self._wake.clear()

    def _adopt_started(self) -> None:
        """Wait up to :data:`WATCH_S` for actors that are starting to answer; those that did take runs, those that
        failed to start are forgotten."""
        with self._lock:
            starting = {slot.probe: slot for slot in self._slots if slot.probe is not None}
        if not starting:
            self._wake.wait(WATCH_S)
            self._wake.clear()
            return
        ready, rest = self._ray.wait(list(starting), num_returns=1, timeout=WATCH_S)
        if ready and rest:
            ready += self._ray.wait(rest, num_returns=len(rest), timeout=0)[0]
        if self._closed:  # close() stopped them
            return
        rose = False
        for probe in ready:
            slot = starting[probe]
            try:
                slot.node, slot.pid = self._ray.get(probe, timeout=0)
            except Exception as exc:  # noqa: BLE001 - its start failed (the node executor raised, or its node died)
                self._start_error = _first_line(str(exc))
                self._failed_starts += 1
                self._next_start = time.monotonic() + min(30.0, 2.0 ** self._failed_starts)
                _log.warning("a Ray actor of this executor did not start (%s); starting another in %.0f s if the "
                             "cluster has a CPU for it", self._start_error, self._next_start - time.monotonic())
                self._drop(slot)
                continue
            self._failed_starts = 0
            with self._lock:
                if slot in self._slots and not self._closed:
                    slot.probe = None
                    self._note_live()
                    self._idle.append(slot)
                    self._freed.notify_all()
                    rose = True
        if rose:
            self._arun_capacity_rose()

    def _look(self) -> None:
        """Drop the idle actors whose node is gone, start actors where the cluster has CPUs for them (up to the
        ``slots`` asked for, or one per ``num_cpus`` CPUs), and tell a shortfall once."""
        room = self._room()
        nodes = self._ray.nodes()
        self._addresses.update({node["NodeID"]: node.get("NodeManagerAddress", "?") for node in nodes})
        alive = {node["NodeID"] for node in nodes if node.get("Alive")}
        with self._lock:
            gone = [slot for slot in self._idle if slot.node and slot.node not in alive]
        for slot in gone:
            self._drop(slot)
        if self._slots_asked is None:
            self._wanted = max(self._wanted, room)
        with self._lock:
            held = len(self._slots)
            live = sum(slot.probe is None for slot in self._slots)
            stuck = [slot for slot in self._slots if slot.probe is not None and time.monotonic() - slot.since > self.grace_s]
        if held < min(self._wanted, room) and time.monotonic() >= self._next_start:
            self._start_actors(min(self._wanted, room) - held)
        self._tell(room, live, len(stuck))

    def _tell(self, room: int, live: int, stuck: int) -> None:
        """Warn once per shortfall: the cluster's CPUs hold fewer actors than asked for, or actors have waited longer
        than ``grace_s`` to start (no CPU free for them); log when the executor has all it asked for again."""
        capacity = self._capacity
        capacity.room = room
        short = room < self._wanted or stuck > 0
        if short and not capacity.warned:
            capacity.warned = True
            lost = ", ".join(f"node {node[:12]} ({self._addresses.get(node, '?')})"
                             for node in dict.fromkeys(capacity.lost)) or "none of its actors' nodes"
            waiting = f"; {stuck} not started after {self.grace_s:g} s: no CPU free for them, or slow to start" if stuck else ""
            _log.warning("the Ray cluster's CPUs now hold %d of the %d actors this executor asked for (lost: %s%s): "
                         "going on with the %d started, and starting more when CPUs come back",
                         min(room, self._wanted), self._wanted, lost, waiting, live)
        elif not short and capacity.warned and live >= self._wanted:
            capacity.warned = False
            capacity.lost.clear()
            _log.info("the Ray cluster holds all %d actors this executor asked for again", self._wanted)

    # ------------------------------------------------------------------ the rest

    def default_concurrency(self) -> int:
        """The number of actors, started or starting: the runs the executor keeps going at once when all have
        started."""
        with self._lock:
            return max(1, len(self._slots))

    def arun_capacity(self) -> int:
        """The actors that have started (at least 1): awaited runs beyond them wait in the executor's queue."""
        with self._lock:
            return max(1, sum(slot.probe is None for slot in self._slots))

    def actors(self) -> list[tuple[str, int]]:
        """(node id, process id) of each actor that has started: where the runs go now."""
        with self._lock:
            return [(slot.node, slot.pid) for slot in self._slots if slot.probe is None]

    def close(self) -> None:
        """Stop the actors (their sandboxes first; those still starting too) and the watching thread, and shut Ray
        down if this executor started it. Idempotent."""
        if self._closed or os.getpid() != self._pid:  # a forked copy owns nothing
            return
        with self._lock:
            self._closed = True
            slots, self._slots = self._slots, []
            self._idle.clear()
            self._freed.notify_all()
        self._wake.set()
        if self._ray.is_initialized():
            started = [slot.actor.close.remote() for slot in slots if slot.probe is None]
            try:
                self._ray.get(started, timeout=30)
            except Exception:  # noqa: BLE001 - an actor already gone is fine: it is killed below
                pass
            for slot in slots:
                self._kill(slot)
        self._watcher.join(timeout=WATCH_S + 5)
        if self._owns_ray and self._ray.is_initialized():
            self._ray.shutdown()
        self._owns_ray = False


def _first_line(text: str, limit: int = 500) -> str:
    """The first line of ``text`` (Ray's errors carry a traceback), at most ``limit`` characters."""
    return text.strip().splitlines()[0][:limit] if text.strip() else text


def make_ray_executor(address: str, limits: Limits | None = None, **kwargs: Any) -> RayExecutor:
    """The executor behind ``--ray ADDRESS``: connect to the cluster at ``address``.

    ``address="local"`` starts a Ray instance on this machine (for trying it out).
    """
    if not address:
        raise ValueError("--ray needs a cluster address, e.g. ray://head-node:10001, or 'local'")
    return RayExecutor(None if address == "local" else address, limits=limits, **kwargs)
