"""Runs in the host and a Ray actor per node: executions sent to a Ray cluster, each run by a warm local sandbox on a
node.

Only Ray does the distribution. The executor starts ``slots`` Ray actors (by default one
per ``num_cpus`` CPUs of the cluster, spread over its nodes); each actor holds one warm
:class:`~convcodeworld_gym.sandbox.SandboxExecutor` (its confinement, split judge, calibrated
time limits and result cache) that it reuses for every execution sent to it. A call takes an
idle actor, so each actor runs one execution at a time and ``run_many`` keeps all of them busy.

No task data in a run (:mod:`..confinement.view`): each run is the node's local sandbox's, which shows a run only the
system's dirs, its runtime and the package, with task data masked; Ray's own files on the node (its session dir
under ``/tmp/ray``, spilled objects that hold the tasks sent to the actors, the object store in ``/dev/shm``) are
out of a run's view, since a run gets a fresh ``/tmp`` and ``/dev/shm`` and every top-level dir but the system's is
covered. A ``--temp-dir`` inside the runtime's own paths would be visible: keep it elsewhere.

Holds:
    RayExecutor         the backend (``pip install 'convcodeworld-gym[ray]'``)
    make_ray_executor   factory for ``convcodeworld evaluate --ray ADDRESS``
    RayUnavailable      ray is not installed or the cluster cannot be reached
"""

from __future__ import annotations

import functools
import os
import queue
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ...errors import ExecutorError
from ...tasks import Task
from ..host.executor import Executor
from ..host.pool import SandboxExecutor
from ..limits import Limits
from ..result import ExecutionResult

__all__ = ["RayExecutor", "RayUnavailable", "make_ray_executor"]

#: The default node-side executor of one actor: the sandbox with one warm worker (one actor per CPU).
NODE_SANDBOX: Callable[[Limits], Executor] = functools.partial(SandboxExecutor, workers=1)


class RayUnavailable(ExecutorError):
    """``ray`` is not installed, or no cluster answers at the given address."""


class _NodeSandbox:
    """Body of one Ray actor: a node-local executor kept warm across executions."""

    def __init__(self, factory: Callable[[Limits], Executor], limits: Limits) -> None:
        import ray

        self._executor = factory(limits)
        self._node = ray.get_runtime_context().get_node_id()

    def run(self, task: Task, program: str, derived_from: Task | None = None) -> ExecutionResult:
        if derived_from is not None:  # this actor's profiles: told before its first run of the derived task
            self._executor.derive(derived_from, task)
        result = self._executor.run(task, program)
        result.details["ray_node"] = self._node
        return result

    def close(self) -> None:
        self._executor.close()


class RayExecutor(Executor):
    """Runs each execution on a Ray cluster, in a warm sandbox held by one of ``slots`` actors.

    Args:
        address: the cluster (``"ray://head:10001"``, ``"auto"``, ``"host:6379"``); ``None``
            connects to the Ray instance already initialised in this process, or starts a
            local one.
        limits: passed to the node-side executor (its limits for uncalibrated tasks).
        num_cpus: CPUs each actor reserves.
        slots: number of actors (default: the cluster's CPUs / ``num_cpus``, at least 1).
        node_executor: builds an actor's executor from the limits (default: a
            :class:`SandboxExecutor` with one worker); must be importable on every node
            (the package installed there).
        init_kwargs: extra ``ray.init`` arguments (``num_cpus=2`` for a local test instance,
            ``runtime_env=...``).

    Contract: as every executor; outcomes are those of the node executor (the details gain
    ``ray_node``), which retries a run whose sandbox worker it lost. An actor lost during an
    execution (its node, or its process, died) is replaced, and the execution retried once on the
    fresh actor (``details["retried"]`` names the loss); lost again, it comes back
    :meth:`~..result.ExecutionResult.lost` (``infra_error``: no verdict), never as a failure of the
    program. ``close()`` stops the actors, and shuts Ray down only when this executor started it.

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
    ) -> None:
        try:
            import ray
        except ImportError as exc:
            raise RayUnavailable("the Ray backend needs ray: pip install 'convcodeworld-gym[ray]'") from exc
        if not num_cpus > 0:
            raise ValueError(f"num_cpus must be > 0 (CPUs per actor), got {num_cpus!r}")
        if slots is not None and slots < 1:
            raise ValueError(f"slots must be >= 1 (actors to start) or None for one per num_cpus CPUs, got {slots!r}")
        self.limits = limits or Limits()
        self._ray = ray
        self._owns_ray = False
        if not ray.is_initialized():
            try:
                ray.init(address=address, **(init_kwargs or {}))
            except Exception as exc:  # ConnectionError, RuntimeError, ...
                raise RayUnavailable(
                    f"could not connect to the Ray cluster at {address!r} ({exc}); check the address "
                    "(`ray status` on the head node shows it) or pass address=None for a local instance"
                ) from exc
            self._owns_ray = True
        self._pid = os.getpid()
        self._actor_class = ray.remote(num_cpus=num_cpus, max_restarts=0, max_task_retries=0)(_NodeSandbox)
        self._factory = node_executor
        n = slots or max(1, int(ray.cluster_resources().get("CPU", 1) // num_cpus))
        self._actors = [self._new_actor() for _ in range(n)]
        self._idle: queue.SimpleQueue[Any] = queue.SimpleQueue()
        for actor in self._actors:
            self._idle.put(actor)
        self._closed = False
        self._derived: dict[Task, Task] = {}  # derived task -> the task whose profile it takes (see derive)

    def _new_actor(self) -> Any:
        return self._actor_class.options(scheduling_strategy="SPREAD").remote(self._factory, self.limits)

    def run(self, task: Task, program: str) -> ExecutionResult:
        if os.getpid() != self._pid:
            raise ExecutorError(
                "this RayExecutor was created in another process (e.g. copied into an AsyncVectorEnv worker); "
                "pass a factory instead: executor=functools.partial(RayExecutor, address)"
            )
        if self._closed:
            raise ExecutorError("the RayExecutor is closed; create a new one")
        actor = self._idle.get()
        started = time.monotonic()
        retried: dict[str, Any] | None = None  # the first loss, once the execution was lost
        try:
            while True:
                try:
                    result = self._ray.get(actor.run.remote(task, program, self._derived.get(task)))
                except self._ray.exceptions.RayActorError as exc:
                    lost = f"the Ray actor running this execution was lost ({_first_line(str(exc))}); it was replaced"
                    actor = self._replace(actor)
                    if retried is None:  # retried once, on the fresh actor
                        retried = {"lost": lost, "lost_s": round(time.monotonic() - started, 3)}
                        continue
                    return ExecutionResult.lost(task.test_names, lost, wall_time_s=time.monotonic() - started,
                                                details={"backend": "ray", "retried": retried})
                if retried is not None:
                    result = replace(result, details={**result.details, "retried": retried},
                                     wall_time_s=time.monotonic() - started)
                return result
        finally:
            self._idle.put(actor)

    def derive(self, task: Task, derived: Task) -> None:
        """Each actor keeps its own profiles: the pair is sent with every run of ``derived``, and the actor that
        runs it derives the profile there (see :meth:`~..host.executor.Executor.derive`), so no actor calibrates the probe."""
        self._derived[derived] = task

    def _replace(self, actor: Any) -> Any:
        self._ray.kill(actor)
        fresh = self._new_actor()
        self._actors[self._actors.index(actor)] = fresh
        return fresh

    def default_concurrency(self) -> int:
        """The number of actors: the inherited ``run_many`` keeps every one busy."""
        return len(self._actors)

    def close(self) -> None:
        """Stop the actors (their sandboxes first) and shut Ray down if this executor started it. Idempotent."""
        if self._closed or os.getpid() != self._pid:  # a forked copy owns nothing
            return
        self._closed = True
        if self._ray.is_initialized():
            try:
                self._ray.get([actor.close.remote() for actor in self._actors], timeout=30)
            except Exception:  # noqa: BLE001 - an actor already gone is fine: it is killed below
                pass
            for actor in self._actors:
                self._ray.kill(actor)
        self._actors = []
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
