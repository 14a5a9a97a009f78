"""What the trainers' doors share within a process: one sandbox executor per runtime, and task sets named by a
string loaded once. TRL's (:mod:`.tools`) and the verifiers environment (``integrations/verifiers``) make an env per
rollout; these keep that cheap: the executor's warm workers, calibrated profiles and result cache serve every
rollout of the process, and at most its ``workers`` programs run at once.

Holds:
    shared_executor  the process's sandbox executor for a runtime, made at first use, closed at the process's exit
    task_set         a task set, loaded once per process when named by a string
"""

from __future__ import annotations

import atexit
import functools
import os
import threading

from ..sandbox import SandboxExecutor
from ..tasks import DatasetSpec, TaskSet, load_tasks

__all__ = ["shared_executor", "task_set"]

_shared: dict[tuple[int, str | None], SandboxExecutor] = {}  # (pid, runtime) -> executor (a forked child makes its own)
_shared_lock = threading.Lock()


def shared_executor(runtime: str | None = None) -> SandboxExecutor:
    """The :class:`~convcodeworld_gym.sandbox.SandboxExecutor` every door of this process shares for ``runtime`` (the
    interpreter programs run with, as ``SandboxExecutor(runtime=...)`` takes it; None: its default), made at first
    use and closed at the process's exit. An env given it never closes it."""
    key = (os.getpid(), runtime)
    with _shared_lock:
        executor = _shared.get(key)
        if executor is None:
            executor = _shared[key] = SandboxExecutor(runtime=runtime)
            atexit.register(executor.close)
        return executor


def task_set(dataset: DatasetSpec) -> TaskSet:
    """``dataset`` as a task set, loaded once per process when it is named by a string (``"humaneval"``,
    ``"bigcodebench"``, a path).

    >>> task_set("humaneval") is task_set("humaneval")
    True
    """
    return _load_named(dataset) if isinstance(dataset, str) else load_tasks(dataset)


@functools.lru_cache(maxsize=8)
def _load_named(dataset: str) -> TaskSet:
    return load_tasks(dataset)
