"""Turn-by-turn regressions: the tests an episode's program passed at an earlier turn and fails now.

A rewrite after feedback can fix one test and break another that already passed. The envs name those tests in
each step's ``info["regressed_tests"]`` (the live env, and ConvCodeBench's replay for the evaluated model's own
programs); ``convcodeworld report`` gives the share of episodes with a regression, per id and per turn. It is a
fact for users to read: the reward never depends on it.

A test *passed* when its outcome was ``passed`` or ``skipped`` (unittest's success, the reward's too); it *fails
now* when its outcome is anything else (failed, error, timeout, or not run: a program that does not compile, or
that crashes before the tests, breaks every test it passed before). A step whose run the infrastructure lost
(``info["infra_error"]``) is no verdict: it names no regression and leaves the history as it was.

Holds:
    passed_names     the names of the tests that passed, from test results or their info dicts
    regressed_tests  the tests passed before and failing now, in the order of the results
    TestHistory      one episode's tests passed so far; each judged step asks it what regressed
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Union

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the scoring side reads logs without loading the sandbox (tests/runs/test_scoring_imports.py)
    from .sandbox.result import TestResult

#: The outcomes a test's dict may name that count as passing (``sandbox.result.Outcome.ok``'s values: a test in
#: tests/test_regressions.py keeps the two the same).
OK_OUTCOMES = frozenset({"passed", "skipped"})

__all__ = ["passed_names", "regressed_tests", "TestHistory"]

#: One test's result: a :class:`~.sandbox.result.TestResult`, or the ``{"name", "outcome", ...}`` dict that
#: ``info["tests"]`` and the log rows hold.
AnyTest = Union["TestResult", Mapping[str, Any]]


def _name_and_ok(test: AnyTest) -> tuple[str, bool]:
    """``(name, passed)`` of a test result or its dict.

    Raises:
        TypeError: ``test`` is neither (the message names its type).
    """
    if isinstance(test, Mapping):
        return str(test["name"]), str(test["outcome"]) in OK_OUTCOMES
    if hasattr(test, "outcome") and hasattr(test, "name"):  # a TestResult
        return test.name, test.outcome.ok
    raise TypeError(f"a test result is a TestResult or a {{'name', 'outcome'}} dict (info['tests']), got {type(test).__name__}")


def passed_names(tests: Iterable[AnyTest]) -> frozenset[str]:
    """The names of the tests that passed (outcome ``passed`` or ``skipped``).

    >>> sorted(passed_names([{"name": "test_a", "outcome": "passed"}, {"name": "test_b", "outcome": "failed"}]))
    ['test_a']
    """
    return frozenset(name for name, ok in map(_name_and_ok, tests) if ok)


def regressed_tests(passed_before: Iterable[str], tests: Iterable[AnyTest]) -> list[str]:
    """The names among ``passed_before`` whose result in ``tests`` is not a pass, in the order of ``tests``.

    >>> regressed_tests({"test_a", "test_b"}, [{"name": "test_a", "outcome": "failed"},
    ...                                       {"name": "test_b", "outcome": "passed"},
    ...                                       {"name": "test_c", "outcome": "error"}])
    ['test_a']
    """
    before = set(passed_before)
    return [name for name, ok in map(_name_and_ok, tests) if name in before and not ok]


class TestHistory:
    """The tests an episode's programs have passed so far, turn by turn.

    :meth:`judge` takes the results of the turn just judged and returns the tests it broke (passed at an earlier
    turn, not now), then adds the tests it passed. A turn without a verdict (``lost``: the infrastructure lost its
    run) breaks nothing and adds nothing. :meth:`clear` starts a new episode.

    >>> history = TestHistory()
    >>> history.judge([{"name": "t1", "outcome": "failed"}, {"name": "t2", "outcome": "failed"}])
    []
    >>> history.judge([{"name": "t1", "outcome": "passed"}, {"name": "t2", "outcome": "failed"}])
    []
    >>> history.judge([{"name": "t1", "outcome": "failed"}, {"name": "t2", "outcome": "passed"}])
    ['t1']
    >>> history.judge([{"name": "t1", "outcome": "not_run"}, {"name": "t2", "outcome": "not_run"}])
    ['t1', 't2']
    """

    __test__ = False  # not a pytest test class

    def __init__(self) -> None:
        self._passed: set[str] = set()

    def judge(self, tests: Iterable[AnyTest], *, lost: bool = False) -> list[str]:
        """The tests of ``tests`` passed at an earlier turn and failing now; then remember those passed now."""
        if lost:
            return []
        tests = list(tests)
        regressed = regressed_tests(self._passed, tests)
        self._passed |= passed_names(tests)
        return regressed

    def clear(self) -> None:
        """Forget every turn: a new episode begins."""
        self._passed.clear()
