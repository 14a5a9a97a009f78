"""Runs in every process: what an execution returns, per-test outcomes and the facts around them.

Holds:
    Outcome          passed / failed / error / timeout / not_run / skipped
    TestResult       one test method's outcome and traceback text
    TestFault        one entry of unittest's failures or errors that a test's outcome alone does not tell (a subtest's)
    ExecutionResult  the whole run: tests, crash text, limits hit, wall time; or the infrastructure's loss of it
    cut_middle       a long text cut to its first and last characters (tracebacks, crash texts)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

__all__ = ["Outcome", "TestResult", "TestFault", "ExecutionResult", "cut_middle"]


class Outcome(str, Enum):
    """Outcome of one test method. Only ``PASSED`` and ``SKIPPED`` count as passing."""

    PASSED = "passed"
    SKIPPED = "skipped"  # unittest counts a skip as success, and so did the reference
    FAILED = "failed"  # an assertion failed
    ERROR = "error"  # the test raised something other than an assertion error
    TIMEOUT = "timeout"  # the test was running when a time limit stopped the suite
    NOT_RUN = "not_run"  # the test never reported: compile error, crash, or an earlier stop

    @property
    def ok(self) -> bool:
        return self in (Outcome.PASSED, Outcome.SKIPPED)


@dataclass(frozen=True)
class TestFault:
    """One entry of unittest's ``failures`` or ``errors`` list (``listed``) about a test or one of its subtests
    (``id``: the unittest id, ``__test__.TestCases.test_a (x=1)``), with its traceback text. Feedback only: the
    reference's execution feedback had one block per entry; the verdict is the test's outcome.
    """

    __test__ = False  # not a pytest test class

    listed: str
    id: str
    traceback: str


@dataclass(frozen=True)
class TestResult:
    """One test method: its name, outcome and the traceback (or reason) when it did not pass.

    ``faults``: the test's entries of unittest's failures and errors, in order, where its outcome and traceback alone
    do not tell them (a failing subtest, or more than one entry); empty otherwise.
    """

    __test__ = False  # not a pytest test class

    name: str
    outcome: Outcome
    traceback: str = ""
    faults: tuple[TestFault, ...] = ()


@dataclass(frozen=True)
class ExecutionResult:
    """The result of running a program against a task's test suite.

    A test that did not report is never passed. ``passed`` is the reward signal: the
    program ran, nothing crashed outside the tests, and every test passed.

    A result with ``infra_error`` is no verdict at all: the infrastructure lost the run (its worker,
    actor or container died from outside, or the sandbox refused to start it) and lost it again when
    it was retried on a fresh worker. It says nothing about the program: it is never passed, never
    cached, and whoever counts rewards leaves it out (see :meth:`lost`).

    Attributes:
        tests: one entry per test, in the order of the test source (then any unexpected entries).
        executed: False when the program was not run (it did not compile, or was rejected).
        crash: traceback of a failure outside any test (module-level error, dead process), else None.
        limits_hit: names of the limits that stopped the run, e.g. ``("suite_timeout",)``.
        infra_error: why the infrastructure lost the run (after its retry); None for a real verdict.
        wall_time_s: seconds spent, excluded from equality (timings are measurements, not state).
        details: executor-specific facts (backend, confinement level, ...), excluded from equality.
    """

    tests: tuple[TestResult, ...]
    executed: bool = True
    crash: str | None = None
    limits_hit: tuple[str, ...] = ()
    infra_error: str | None = None
    wall_time_s: float = field(default=0.0, compare=False)
    details: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def passed(self) -> bool:
        return (self.executed and self.infra_error is None and self.crash is None and bool(self.tests)
                and all(t.outcome.ok for t in self.tests))

    @property
    def timed_out(self) -> bool:
        return any(t.outcome is Outcome.TIMEOUT for t in self.tests)

    @property
    def pass_fraction(self) -> float:
        """Share of tests that passed (0.0 for an empty or unexecuted suite)."""
        return sum(t.outcome.ok for t in self.tests) / len(self.tests) if self.tests else 0.0

    def pass_fraction_of(self, names: Iterable[str]) -> float | None:
        """Share of the tests named ``names`` that passed (None when none of them is in this result).

        >>> r = ExecutionResult((TestResult("a", Outcome.PASSED), TestResult("b", Outcome.FAILED)), executed=True)
        >>> r.pass_fraction_of(["a", "b"]), r.pass_fraction_of(["a"]), r.pass_fraction_of([])
        (0.5, 1.0, None)
        """
        wanted = set(names)
        chosen = [t for t in self.tests if t.name in wanted]
        return sum(t.outcome.ok for t in chosen) / len(chosen) if chosen else None

    def by_name(self) -> dict[str, TestResult]:
        return {t.name: t for t in self.tests}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (outcomes as strings; ``infra_error`` kept, None for a real verdict)."""
        data = asdict(self)
        data["tests"] = [{"name": t.name, "outcome": t.outcome.value, "traceback": t.traceback,
                          **({"faults": [asdict(f) for f in t.faults]} if t.faults else {})} for t in self.tests]
        data["limits_hit"] = list(self.limits_hit)
        data["passed"] = self.passed
        return data

    @classmethod
    def not_executed(cls, test_names: tuple[str, ...], reason: str) -> ExecutionResult:
        """Every test ``NOT_RUN`` with ``reason``: for programs that were never started."""
        return cls(tests=tuple(TestResult(n, Outcome.NOT_RUN, reason) for n in test_names), executed=False)

    @classmethod
    def lost(cls, test_names: tuple[str, ...], reason: str, **kwargs: Any) -> ExecutionResult:
        """The result of a run the infrastructure lost (``reason``), also on its retry: no verdict.

        Every test is ``NOT_RUN`` and the crash text says the run says nothing about the program;
        ``kwargs`` (``wall_time_s``, ``details``) are passed on.

        >>> r = ExecutionResult.lost(("test_a",), "the sandbox worker was killed by signal SIGKILL")
        >>> r.passed, r.infra_error, r.tests[0].outcome.value
        (False, 'the sandbox worker was killed by signal SIGKILL', 'not_run')
        """
        text = (f"SandboxLost: the run was lost to the infrastructure, and again when retried on a fresh worker "
                f"({reason}); this says nothing about the program.")
        return cls(tests=tuple(TestResult(n, Outcome.NOT_RUN, f"Not run: {text}") for n in test_names),
                   crash=text, infra_error=reason, **kwargs)


def cut_middle(text: str, limit: int, *, own_lines: bool = False) -> str:
    """``text`` when it has at most ``limit`` characters, else its first and last ``limit // 2``
    characters around a marker saying how many were cut (on lines of its own with ``own_lines``).
    The one helper for every long text an executor reports (tracebacks, crash texts).

    >>> cut_middle("abcdefghij", 4)
    'ab... [6 characters cut] ...ij'
    >>> print(cut_middle("abcdefghij", 4, own_lines=True))
    ab
    ... [6 characters cut] ...
    ij
    >>> cut_middle("short", 10)
    'short'
    """
    if len(text) <= limit:
        return text
    half = limit // 2
    gap = "\n" if own_lines else ""
    return f"{text[:half]}{gap}... [{len(text) - 2 * half} characters cut] ...{gap}{text[-half:]}"
