"""The parent-side clock of one execution, driven by the runner's events.

Any backend that reads the runner's event stream (:mod:`.messages`: ``Start`` / ``End`` / ``Crash`` /
``Done``) feeds each decoded event to :class:`SuiteClock` and asks it for the next deadline: the suite
limit always, the per-test limit while a test runs.

Holds:
    SuiteClock   deadlines of one execution and whether the suite has reported its end
"""

from __future__ import annotations

import time

from .executor import Limits
from .messages import Crash, Done, End, Event, Start

__all__ = ["SuiteClock"]


class SuiteClock:
    """Deadlines of one execution, started at construction.

    >>> clock = SuiteClock(Limits(suite_timeout_s=10, test_timeout_s=1))
    >>> clock.observe(Start("test_a")), clock.deadline()[1]
    (False, 'test_timeout')
    >>> clock.observe(End("test_a", "passed", "")), clock.deadline()[1]
    (False, 'suite_timeout')
    >>> clock.observe(Done())
    True
    """

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.suite_deadline = time.monotonic() + limits.suite_timeout_s
        self.test_deadline: float | None = None

    def observe(self, event: Event) -> bool:
        """Account for one runner event; True when it ends the suite (``Done`` or ``Crash``)."""
        if isinstance(event, Start) and self.limits.test_timeout_s is not None:
            self.test_deadline = time.monotonic() + self.limits.test_timeout_s
        elif isinstance(event, End):
            self.test_deadline = None
        return isinstance(event, (Done, Crash))

    def deadline(self) -> tuple[float, str]:
        """The next monotonic deadline and the limit it stands for (``suite_timeout`` / ``test_timeout``)."""
        if self.test_deadline is not None and self.test_deadline < self.suite_deadline:
            return self.test_deadline, "test_timeout"
        return self.suite_deadline, "suite_timeout"
