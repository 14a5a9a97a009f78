"""Runs in every process: the time and size limits of one execution.

The host sets them, the worker and the run's parent keep the clock by them (:class:`~.run.events.SuiteClock`).
Standard library only: a runtime interpreter without this project imports it.

Holds:
    Limits   time and size limits of one execution
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Limits"]


@dataclass(frozen=True)
class Limits:
    """Limits of one execution.

    Attributes:
        suite_timeout_s: wall-clock limit of the whole suite. The reference allowed 121 s.
        test_timeout_s: wall-clock limit of one test method; ``None`` means only the suite limit.
        max_code_chars: programs longer than this are rejected without running.
    """

    suite_timeout_s: float = 121.0
    test_timeout_s: float | None = None
    max_code_chars: int = 1_000_000

    def __post_init__(self) -> None:
        if not self.suite_timeout_s > 0:
            raise ValueError(f"Limits.suite_timeout_s must be > 0, got {self.suite_timeout_s}")
        if self.test_timeout_s is not None and not self.test_timeout_s > 0:
            raise ValueError(f"Limits.test_timeout_s must be > 0 or None, got {self.test_timeout_s}")

    def covering(self, least: tuple[float, float] | None) -> Limits:
        """These limits raised where needed to ``least``, ``(each test, the whole suite)`` in seconds: a task's own
        limits (:attr:`~convcodeworld_gym.tasks.Task.own_time_limits`: an input/output task's per-case limit for each
        test, and for all its cases together), which no calibrated limit may go below. ``None``: these limits.

        >>> Limits(suite_timeout_s=5.0, test_timeout_s=5.0).covering((7.0, 40.0))
        Limits(suite_timeout_s=40.0, test_timeout_s=7.0, max_code_chars=1000000)
        >>> Limits(suite_timeout_s=60.0).covering((7.0, 40.0))  # no per-test limit stays none
        Limits(suite_timeout_s=60.0, test_timeout_s=None, max_code_chars=1000000)
        """
        if least is None:
            return self
        test_s, suite_s = least
        test = None if self.test_timeout_s is None else round(max(self.test_timeout_s, test_s), 3)
        return Limits(suite_timeout_s=round(max(self.suite_timeout_s, suite_s), 3), test_timeout_s=test,
                      max_code_chars=self.max_code_chars)
