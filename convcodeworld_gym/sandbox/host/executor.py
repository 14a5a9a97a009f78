"""Runs in the host: the executor interface every backend implements.

Holds:
    Executor       abstract base: ``run(task, program)``, ``await arun(task, program)`` and ``run_many(jobs)``
    longest_first  the order in which ``run_many`` starts its jobs
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from ...aio import BoundedThreads
from ...tasks import Task
from ..limits import Limits
from ..result import ExecutionResult

if TYPE_CHECKING:
    from ..runtimes.needs import RuntimeProbe

__all__ = ["Executor", "longest_first"]

_THREADS_LOCK = threading.Lock()  # guards the first making of an executor's BoundedThreads (see Executor.arun)


def longest_first(expected: Sequence[float | None]) -> list[int]:
    """Job indices, those with no estimate first, then the longest expected first; ties keep the given order.

    >>> longest_first([0.1, None, 2.0, 0.1, 1.0])
    [1, 2, 4, 0, 3]
    """
    return sorted(range(len(expected)), key=lambda i: (expected[i] is not None, -(expected[i] or 0.0)))


class Executor(abc.ABC):
    """Runs a program against a task's unittest suite and reports per-test outcomes.

    Contract:
        * never raises because of the program under test: bad code gives a failed result;
        * a test that did not report is not passed;
        * the same (task, program) gives the same outcomes, apart from timings.

    Executors are context managers; ``close()`` releases workers and is idempotent.
    """

    limits: Limits

    @abc.abstractmethod
    def run(self, task: Task, program: str) -> ExecutionResult:
        """Execute ``program`` followed by ``task.test`` and return the outcomes.

        Implementations start with :meth:`refuse_oversized` (the one code-size guard)."""

    async def arun(self, task: Task, program: str) -> ExecutionResult:
        """:meth:`run`, awaited: the same result, and the event loop is never blocked while it runs.

        The default runs :meth:`run` in this executor's own FIFO pool of threads, at most :meth:`arun_capacity` at once
        (one per slot: worker, container or actor), so any number of episodes on one loop share the executor fairly,
        first come first served, and a slow run holds one thread and its own slot only. A backend with a native async
        path may override it."""
        return await self._threads().call(self.run, task, program)

    async def aprepare(self, task: Task) -> None:
        """:meth:`prepare`, awaited (a calibration runs off the event loop, in the pool of :meth:`arun`)."""
        await self._threads().call(self.prepare, task)

    def _threads(self) -> BoundedThreads:
        """The pool behind :meth:`arun`, made on first use (sized to the slots then)."""
        threads = self.__dict__.get("_async_threads")
        if threads is None:
            with _THREADS_LOCK:
                threads = self.__dict__.get("_async_threads")
                if threads is None:
                    threads = self.__dict__["_async_threads"] = BoundedThreads(self.default_concurrency(), "arun",
                                                                                capacity=self.arun_capacity)
        return threads

    def arun_capacity(self) -> int:
        """How many calls of :meth:`arun` may run at once now: by default one per slot (:meth:`default_concurrency`).
        An executor whose capacity rises calls :meth:`_arun_capacity_rose`."""
        return self.default_concurrency()

    def _arun_capacity_rose(self) -> None:
        """Start the awaited calls that wait, as many as :meth:`arun_capacity` allows now."""
        threads = self.__dict__.get("_async_threads")
        if threads is not None:
            threads.recheck()

    def prepare(self, task: Task) -> None:
        """Get ready to run ``task`` soon: the env calls it when an episode of ``task`` begins (``reset``), so
        that work a task's first run would do (a calibration, the judge's facts) is done then, off the step.
        Optional; the default does nothing."""

    def derive(self, task: Task, derived: Task) -> None:
        """``derived``'s tests are ``task``'s with more added (a probe that only reports, never passes): run it
        with ``task``'s judge mode and time limits instead of calibrating it (its canonical solution would fail
        by design). Optional; the default does nothing."""

    def refuse_oversized(self, task: Task, program: str) -> ExecutionResult | None:
        """The not-run result of a program longer than ``limits.max_code_chars``; None when it fits."""
        if len(program) <= self.limits.max_code_chars:
            return None
        return ExecutionResult.not_executed(
            task.test_names, f"Not run: the program has {len(program)} characters, over the limit of {self.limits.max_code_chars}."
        )

    def run_many(self, jobs: Sequence[tuple[Task, str]], max_workers: int | None = None) -> list[ExecutionResult]:
        """Run several (task, program) jobs concurrently; results come back in job order.

        Jobs start longest expected first (:meth:`expected_seconds`; those with no estimate before all, in the
        order given), so that the batch does not end with one long run going on alone while the other
        workers idle. One at a time (``max_workers=1``), they run in the order given.
        """
        if len(jobs) <= 1 or max_workers == 1:
            return [self.run(task, program) for task, program in jobs]
        order = longest_first([self.expected_seconds(task) for task, _program in jobs])
        with ThreadPoolExecutor(max_workers=max_workers or self.default_concurrency()) as pool:
            done = dict(zip(order, pool.map(lambda i: self.run(*jobs[i]), order)))
        return [done[i] for i in range(len(jobs))]

    def expected_seconds(self, task: Task) -> float | None:
        """About how long a run of ``task`` takes, where that is known without running anything; None if not.
        Only orders the jobs of :meth:`run_many`. The default knows nothing."""
        return None

    def runtime_probe(self) -> RuntimeProbe | None:
        """What tells which modules and data the runtime of this executor's runs lacks (:mod:`..runtimes.needs`);
        None when it cannot be asked (then no task is left out for what it lacks)."""
        return None

    def default_concurrency(self) -> int:
        import os

        return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)

    def __deepcopy__(self, memo: dict[int, object]) -> Executor:
        """An executor is a shared resource (workers, containers, a cluster), not a value:
        deep copies share it. ``gymnasium.make`` deep-copies an env spec's kwargs, so an
        env re-made from its spec keeps running on the executor it was given."""
        return self

    def close(self) -> None:
        """Release resources. Safe to call more than once."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
