"""Ray executor: executions sent to a Ray cluster, each run by the local sandbox on a node.

Only Ray does the distribution: each execution is one Ray task (``num_cpus`` each, 1 by
default) that builds the node-side executor and runs the program there; ``run_many``
submits every job at once and the cluster schedules them over all its CPUs.

Holds:
    RayExecutor         the backend (``pip install 'convcodeworld-gym[ray]'``)
    make_ray_executor   factory for ``convcodeworld evaluate --ray ADDRESS``
    RayUnavailable      ray is not installed or the cluster cannot be reached
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import ExecutorError
from ..tasks import Task
from .executor import Executor, Limits
from .local import LocalExecutor
from .result import ExecutionResult

__all__ = ["RayExecutor", "RayUnavailable", "make_ray_executor"]


class RayUnavailable(ExecutorError):
    """``ray`` is not installed, or no cluster answers at the given address."""


def _run_on_node(factory: Callable[[Limits], Executor], limits: Limits, task: Task, program: str) -> ExecutionResult:
    """Body of the Ray task: run one job with a node-local executor."""
    import ray

    with factory(limits) as executor:
        result = executor.run(task, program)
    result.details["ray_node"] = ray.get_runtime_context().get_node_id()
    return result


class RayExecutor(Executor):
    """Runs each execution as a Ray task on a cluster; every node uses ``node_executor`` (local sandbox).

    Args:
        address: the cluster (``"ray://head:10001"``, ``"auto"``, ``"host:6379"``); ``None``
            connects to the Ray instance already initialised in this process, or starts a
            local one.
        limits: passed to the node-side executor.
        num_cpus: CPUs reserved per execution (the cluster runs ``CPUs / num_cpus`` at once).
        node_executor: builds the executor on a node from the limits; must be importable
            there (the package installed on every node).
        init_kwargs: extra ``ray.init`` arguments (``num_cpus=2`` for a local test instance,
            ``runtime_env=...``).

    Contract: as every executor; results are identical to the node executor's (the details
    gain ``ray_node``). ``close()`` shuts Ray down only when this executor started it.

    >>> ex = RayExecutor("ray://head-node:10001")  # doctest: +SKIP
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        limits: Limits | None = None,
        num_cpus: float = 1.0,
        node_executor: Callable[[Limits], Executor] = LocalExecutor,
        init_kwargs: dict[str, Any] | None = None,
    ) -> None:
        try:
            import ray
        except ImportError as exc:
            raise RayUnavailable("the Ray backend needs ray: pip install 'convcodeworld-gym[ray]'") from exc
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
        self._factory = node_executor
        self._pid = os.getpid()
        self._remote = ray.remote(num_cpus=num_cpus, max_retries=0)(_run_on_node)

    def run(self, task: Task, program: str) -> ExecutionResult:
        return self.run_many([(task, program)])[0]

    def run_many(self, jobs: Sequence[tuple[Task, str]], max_workers: int | None = None) -> list[ExecutionResult]:
        """Submit every job to the cluster at once; results come back in job order.

        ``max_workers`` is ignored: the cluster's CPUs bound the concurrency.
        """
        if os.getpid() != self._pid:
            raise ExecutorError(
                "this RayExecutor was created in another process (e.g. copied into an AsyncVectorEnv worker); "
                "pass a factory instead: executor=functools.partial(RayExecutor, address)"
            )
        if self._owns_ray is False and not self._ray.is_initialized():
            raise ExecutorError("Ray was shut down under this RayExecutor; create a new one")
        limits_ref = self._ray.put(self.limits)
        refs = [self._remote.remote(self._factory, limits_ref, task, program) for task, program in jobs]
        return list(self._ray.get(refs))

    def default_concurrency(self) -> int:
        return max(1, int(self._ray.cluster_resources().get("CPU", 1)))

    def close(self) -> None:
        """Shut Ray down if this executor started it. Idempotent."""
        if self._owns_ray and self._ray.is_initialized():
            self._ray.shutdown()
        self._owns_ray = False


def make_ray_executor(address: str, limits: Limits | None = None, **kwargs: Any) -> RayExecutor:
    """The executor behind ``--ray ADDRESS``: connect to the cluster at ``address``.

    ``address="local"`` starts a Ray instance on this machine (for trying it out).
    """
    if not address:
        raise ValueError("--ray needs a cluster address, e.g. ray://head-node:10001, or 'local'")
    return RayExecutor(None if address == "local" else address, limits=limits, **kwargs)
