"""A deterministic stand-in for a real executor, for tests that are not about the sandbox.

:class:`FakeExecutor` implements the :class:`~convcodeworld_gym.sandbox.host.executor.Executor`
contract without running anything: it never raises because of the program, a test it gives no
outcome is not passed (it reports it ``not_run``), and the same (task, program) always gives the
same outcomes. Which tests pass is decided by a pure-Python *rule* over the task and the program
text: by default :func:`canonical_rule` (every test passes exactly when the program is the
task's canonical solution, modulo blank lines and trailing spaces), or a table
``{code: outcomes}`` through :func:`table_rule`. The size guard of every executor applies.

Use it where what a test checks is the env, the feedback texts' plumbing, the runner, the
metrics or the protocol, and the outcome is only the input; tests of what a program does in
the sandbox keep the real :class:`~convcodeworld_gym.sandbox.SandboxExecutor`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from ..extract import build_program
from ..sandbox.host.executor import Executor
from ..sandbox.limits import Limits
from ..sandbox.result import ExecutionResult, Outcome, TestResult
from ..tasks import Task

__all__ = ["FakeExecutor", "Rule", "canonical_rule", "table_rule", "FAKE_BACKEND"]

#: ``details["backend"]`` of the fake's results.
FAKE_BACKEND = "fake"
#: ``details["confinement"]`` of the fake's results: nothing runs, so nothing is confined.
_CONFINEMENT = {"level": "none", "features": [], "missing": ["nothing runs: the FakeExecutor judges by a rule"]}

#: A rule: (task, program) -> the outcome of each test (by name; a test left out is ``not_run``).
Rule = Callable[[Task, str], Mapping[str, Outcome]]

_TESTS = "import unittest\nclass TestCases(unittest.TestCase):\n    def test_a(self): pass\n    def test_b(self): pass\n"  # doctests


def _normal(code: str) -> str:
    return "\n".join(line.rstrip() for line in code.strip().splitlines() if line.strip())


def canonical_rule(task: Task, program: str) -> dict[str, Outcome]:
    """Every test passes when ``program`` is the task's canonical program (as the env builds it
    from the ground truth), else every test fails.

    >>> t = Task("t/0", "p", "def task_func():\\n", "task_func", "    return 1\\n", _TESTS)
    >>> [o.value for o in canonical_rule(t, t.ground_truth + "\\n").values()], [o.value for o in canonical_rule(t, "def task_func():\\n    return 2").values()]
    (['passed', 'passed'], ['failed', 'failed'])
    """
    right = _normal(program) in (_normal(task.ground_truth), _normal(build_program(task, task.ground_truth)))
    return {name: Outcome.PASSED if right else Outcome.FAILED for name in task.test_names}


def table_rule(table: Mapping[str, Mapping[str, Outcome] | bool], default: Rule = canonical_rule) -> Rule:
    """A rule from a table: code (the program with or without the task's header, compared modulo
    blank lines and trailing spaces) -> ``True`` (all pass), ``False`` (all fail) or each test's
    outcome; programs not in the table go to ``default``.

    >>> t = Task("t/0", "p", "def task_func():\\n", "task_func", "    return 1\\n", _TESTS)
    >>> rule = table_rule({"def task_func():\\n    return 3": {"test_a": Outcome.PASSED, "test_b": Outcome.FAILED}})
    >>> [o.value for o in rule(t, "def task_func():\\n    return 3\\n").values()]
    ['passed', 'failed']
    """
    normal = {_normal(code): outcome for code, outcome in table.items()}

    def rule(task: Task, program: str) -> Mapping[str, Outcome]:
        key = _normal(program)
        header = _normal(task.header)
        entry = normal.get(key, normal.get(_normal(program[len(task.header):]) if header and key.startswith(header) else None))
        if entry is None:
            return default(task, program)
        if isinstance(entry, bool):
            return {name: Outcome.PASSED if entry else Outcome.FAILED for name in task.test_names}
        return dict(entry)

    return rule


def _traceback(name: str, outcome: Outcome) -> str:
    if outcome.ok:
        return ""
    if outcome is Outcome.NOT_RUN:
        return "Not run: the fake executor's rule gave this test no outcome."
    kind = "AssertionError" if outcome is Outcome.FAILED else "RuntimeError"
    return (
        "Traceback (most recent call last):\n"
        f'  File "__test__.py", line 1, in {name}\n'
        f"{kind}: the fake executor's rule says {name} {outcome.value}"
    )


class FakeExecutor(Executor):
    """An :class:`Executor` that judges by a rule instead of running the program (see the module).

    Args:
        rule: (task, program) -> each test's outcome; default :func:`canonical_rule`.
        limits: the limits reported (only ``max_code_chars`` acts: longer programs are refused).
        lost: (task, program) -> None, or the reason the infrastructure lost that run (also on its retry): the
            run then comes back :meth:`~convcodeworld_gym.sandbox.result.ExecutionResult.lost`, as a real
            executor's would (for tests of what the env, the runner and the metrics do with such a step).

    Attributes:
        calls: every (task id, program) judged, in order (thread-safe), for tests that count runs.
    """

    def __init__(self, rule: Rule = canonical_rule, limits: Limits | None = None,
                 lost: Callable[[Task, str], str | None] | None = None) -> None:
        self.rule = rule
        self.limits = limits or Limits()
        self.lost = lost
        self.calls: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def run(self, task: Task, program: str) -> ExecutionResult:
        if (refused := self.refuse_oversized(task, program)) is not None:
            return refused
        with self._lock:
            self.calls.append((task.task_id, program))
        if self.lost is not None and (reason := self.lost(task, program)) is not None:
            return ExecutionResult.lost(task.test_names, reason, details=self._details())
        try:
            outcomes = self.rule(task, program)
        except Exception as exc:  # noqa: BLE001  the contract: the program never makes an executor raise
            return ExecutionResult(
                tests=tuple(TestResult(n, Outcome.NOT_RUN, "Not run: the rule raised.") for n in task.test_names),
                crash=f"the fake executor's rule raised {type(exc).__name__}: {exc}",
                details=self._details(),
            )
        names = list(task.test_names) + [n for n in outcomes if n not in task.test_names]
        tests = tuple(TestResult(n, outcomes.get(n, Outcome.NOT_RUN), _traceback(n, outcomes.get(n, Outcome.NOT_RUN))) for n in names)
        return ExecutionResult(tests=tests, details=self._details())

    @staticmethod
    def _details() -> dict:
        return {"backend": FAKE_BACKEND, "confinement": {**_CONFINEMENT, "features": [], "missing": list(_CONFINEMENT["missing"])}}

    def default_concurrency(self) -> int:
        return 1
