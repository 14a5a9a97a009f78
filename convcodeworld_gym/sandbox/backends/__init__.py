"""Runs in the host: the executors other than the default pool, each an ``Executor`` of its own.

Holds:
    local   ``LocalExecutor``: one fresh, unconfined interpreter per run (a baseline, and the reference's way)
    docker  ``DockerExecutor``: the pool's workers inside locked-down containers
    ray     ``RayExecutor``: pools on a Ray cluster's nodes
"""

__all__ = ["local", "docker", "ray"]
