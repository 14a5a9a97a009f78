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
