"""The parent-side clock of one execution, driven by the runner's events.

Any backend that reads the runner's event stream (``start`` / ``end`` / ``crash`` / ``done``)
feeds each decoded event to :class:`SuiteClock` and asks it for the next deadline: the suite
limit always, the per-test limit while a test runs.

Holds:
    SuiteClock   deadlines of one execution and whether the suite has reported its end
"""

from __future__ import annotations

import time

from .executor import Limits

__all__ = ["SuiteClock"]


class SuiteClock:
    """Deadlines of one execution, started at construction.

    >>> clock = SuiteClock(Limits(suite_timeout_s=10, test_timeout_s=1))
    >>> clock.observe({"e": "start", "name": "test_a"}), clock.deadline()[1]
    (False, 'test_timeout')
    >>> clock.observe({"e": "end", "name": "test_a"}), clock.deadline()[1]
    (False, 'suite_timeout')
    >>> clock.observe({"e": "done"})
    True
    """

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.suite_deadline = time.monotonic() + limits.suite_timeout_s
        self.test_deadline: float | None = None

    def observe(self, event: dict) -> bool:
        """Account for one runner event; True when it ends the suite (``done`` or ``crash``)."""
        kind = event.get("e")
        if kind == "start" and self.limits.test_timeout_s is not None:
            self.test_deadline = time.monotonic() + self.limits.test_timeout_s
        elif kind == "end":
            self.test_deadline = None
        return kind in ("done", "crash")

    def deadline(self) -> tuple[float, str]:
        """The next monotonic deadline and the limit it stands for (``suite_timeout`` / ``test_timeout``)."""
        if self.test_deadline is not None and self.test_deadline < self.suite_deadline:
            return self.test_deadline, "test_timeout"
        return self.suite_deadline, "suite_timeout"
