"""A Ray cluster of several nodes on this machine, for the tests and benchmarks of the Ray backend.

``ray.cluster_utils.Cluster`` starts real nodes (each its own raylet, object store and worker processes, sharing the
head's GCS), so node loss and node arrival happen as on a cluster of machines: :meth:`NodeCluster.remove` kills a
node's processes (SIGKILL by default, as a preempted machine goes), :meth:`NodeCluster.add` starts one.

Holds:
    NodeCluster   a head node and worker nodes of this machine, each with its own CPUs; this process its driver
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from .infra import descendants

__all__ = ["NodeCluster"]


class NodeCluster:
    """A head node of ``head_cpus`` CPUs, and worker nodes added and removed at will; this process is connected to
    it as its driver (``ray.init``). Close it (or use it as a context manager) to stop every node.

    The head checks its nodes' health every 0.5 s and counts a node dead after 3 missed checks (Ray's defaults: 3 s and
    5), so that it lists a killed node as dead within about 2 s instead of 15: the runs on a lost node's actors fail at
    once either way (their connections break); what the head lists decides where new actors go.

    ``Cluster`` writes its address to Ray's ``/tmp/ray/ray_current_cluster``, where any later ``ray.init()`` on this
    machine would find it and join it instead of starting an instance of its own: it is forgotten at once (the driver
    is given the address), so a test or a process beside this one is not sent to this cluster.
    """

    def __init__(self, head_cpus: float = 1) -> None:
        import ray
        from ray.cluster_utils import Cluster

        if ray.is_initialized():
            ray.shutdown()
        self._ray = ray
        self.cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": head_cpus, "include_dashboard": False,
            "_system_config": {"health_check_period_ms": 500, "health_check_failure_threshold": 3}})
        self._forget_address()
        self.workers: list[Any] = []
        ray.init(address=self.cluster.address, log_to_driver=False)

    @property
    def address(self) -> str:
        """The head's GCS address (what ``RayExecutor(address)`` and ``ray start --address`` take)."""
        return self.cluster.address

    @property
    def head_id(self) -> str:
        return self.cluster.head_node.node_id

    def add(self, cpus: float = 1) -> Any:
        """Start a worker node of ``cpus`` CPUs and wait until the cluster lists it; the node."""
        node = self.cluster.add_node(num_cpus=cpus)
        self.cluster.wait_for_nodes()
        self.workers.append(node)
        return node

    def remove(self, node: Any, graceful: bool = False, timeout_s: float = 60.0) -> None:
        """Stop worker ``node`` and wait until the head lists it as dead. Unless ``graceful``, as a machine is lost:
        every process of the node at once, its workers (the actors and their sandboxes) with its raylet, by SIGKILL
        (Ray's own removal kills the raylet first, and an actor may answer a call in the moment it outlives it)."""
        self.workers.remove(node)
        if not graceful:
            (raylet,) = node.all_processes["raylet"]
            for pid in descendants(raylet.process.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.cluster.remove_node(node, allow_graceful=graceful)
        deadline = time.monotonic() + timeout_s
        while any(n["NodeID"] == node.node_id and n["Alive"] for n in self._ray.nodes()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the head still lists node {node.node_id} as alive {timeout_s:g} s after its removal")
            time.sleep(0.1)

    def cpus(self) -> tuple[float, float]:
        """(CPUs free, CPUs in all) of the live nodes, as the cluster counts them."""
        return self._ray.available_resources().get("CPU", 0.0), self._ray.cluster_resources().get("CPU", 0.0)

    def gcs_pause(self, paused: bool) -> None:
        """Stop (SIGSTOP) or resume (SIGCONT) the head's GCS server: every node's and the driver's connection to the
        head flaps, as in a network hiccup or a head under load."""
        (gcs,) = self.cluster.head_node.all_processes["gcs_server"]
        os.kill(gcs.process.pid, signal.SIGSTOP if paused else signal.SIGCONT)

    def _forget_address(self) -> None:
        try:  # Ray 2.60 (older Rays: ray._private.utils)
            from ray._common.utils import get_ray_address_file
        except ImportError:
            from ray._private.utils import get_ray_address_file
        path = get_ray_address_file(None)
        try:
            with open(path) as fh:
                ours = fh.read().strip() == self.cluster.address  # another cluster's is not ours to remove
            if ours:
                os.remove(path)
        except OSError:
            pass

    def close(self) -> None:
        """Disconnect the driver and stop every node. Idempotent."""
        if self._ray.is_initialized():
            self._ray.shutdown()
        self.cluster.shutdown()
        self.workers = []

    def __enter__(self) -> NodeCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
