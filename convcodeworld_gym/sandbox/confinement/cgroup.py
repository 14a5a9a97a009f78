"""Runs in the warm worker: the memory cgroup it has to itself: how many processes the kernel's OOM killer ended in it.

A run that outgrows a cgroup's memory limit (a Docker container's ``memory``) is not told so:
the kernel's out-of-memory killer ends one of its processes with SIGKILL. The only trace is a
counter the kernel keeps per cgroup, ``oom_kill`` in ``memory.events`` (cgroup v2) or in
``memory.oom_control`` (v1, Linux 4.13+). A worker whose cgroup is its own (one container per
worker) reads it before and after each run: a rise means the run was ended at the memory limit.

Holds:
    OomCounter        one cgroup's ``oom_kill`` counter
    find_oom_counter  the counter of this process's memory cgroup, where it can be read
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["OomCounter", "find_oom_counter"]

_ROOT = "/sys/fs/cgroup"


@dataclass(frozen=True)
class OomCounter:
    """The ``oom_kill`` line of one cgroup file (``path``)."""

    path: str

    def count(self) -> int:
        """Processes of the cgroup the OOM killer has ended so far; -1 if the file can no longer be read."""
        try:
            with open(self.path) as fh:
                for line in fh:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            pass
        return -1


def find_oom_counter(proc_cgroup: str = "/proc/self/cgroup", root: str = _ROOT) -> OomCounter | None:
    """The counter of this process's memory cgroup (v2 ``memory.events``, else v1 ``memory.oom_control``),
    or None where no readable file has one.

    Each place is tried under the path ``/proc/self/cgroup`` names, then at the root of the mount:
    in a container the mount shows the container's own cgroup at its root whatever the path says.
    """
    for path in _candidates(proc_cgroup, root):
        counter = OomCounter(path)
        if counter.count() >= 0:
            return counter
    return None


def _candidates(proc_cgroup: str, root: str) -> Iterator[str]:
    v2 = v1 = None
    try:
        with open(proc_cgroup) as fh:
            for line in fh:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if controllers == "":
                    v2 = path
                elif "memory" in controllers.split(","):
                    v1 = path
    except (OSError, ValueError):
        pass
    if v2 is not None:
        yield os.path.join(root, v2.lstrip("/"), "memory.events")
        yield os.path.join(root, "memory.events")
    if v1 is not None:
        yield os.path.join(root, "memory", v1.lstrip("/"), "memory.oom_control")
        yield os.path.join(root, "memory", "memory.oom_control")
