"""When each simulated user speaks, and which failures it may react to.

The rules follow the reference implementation:

* Nobody speaks about a program that passed every test: the episode is over.
* **Novice** (SNF) never sees the ground truth. It reacts only to what it is shown:
  without EF it speaks only when the code does not compile; with EF it is silent when the
  shown tests pass (``Passed all test runs``), also under partial coverage where hidden
  tests may still fail.
* **Expert** (SEF) sees the ground truth. It speaks on every failed program that compiled,
  also when the shown tests pass (hidden tests failed). On a program that does not compile
  it is silent: in the reference the model then refines from the compilation feedback
  alone, and the expert is not asked."""

from __future__ import annotations

from typing import Literal

from ...sandbox.result import TestResult
from ..context import TurnContext
from ..execution import CRASH_BLOCK, failing_tests, shows_failure

__all__ = ["Expertise", "EXPERTISE_LEVELS", "should_speak", "shown_failures", "check_expertise"]

Expertise = Literal["novice", "expert"]
EXPERTISE_LEVELS: tuple[str, ...] = ("novice", "expert")


def check_expertise(expertise: str) -> Expertise:
    """Return ``expertise`` if it is ``"novice"`` or ``"expert"``, else raise a ``ValueError`` saying so."""
    if expertise not in EXPERTISE_LEVELS:
        raise ValueError(f"expertise must be 'novice' or 'expert', got {expertise!r}")
    return expertise  # type: ignore[return-value]


def should_speak(expertise: Expertise, context: TurnContext) -> bool:
    """Whether the simulated user of ``expertise`` gives feedback on this turn.

    >>> from convcodeworld_gym.combos import FeedbackConfig
    >>> from convcodeworld_gym.sandbox import ExecutionResult
    >>> from convcodeworld_gym.tasks import Task
    >>> task = Task("t/0", "p", "def f():\\n", "f", "    return 1\\n", "")
    >>> failed = ExecutionResult.not_executed(("test_1",), "Not run")
    >>> ctx = TurnContext(task, 0, "def f(:", False, "SyntaxError", None, failed, FeedbackConfig("none", "novice"))
    >>> should_speak("novice", ctx), should_speak("expert", ctx)
    (True, False)
    """
    if context.result.passed:
        return False
    if expertise == "expert":
        return context.compile_ok
    if not context.compile_ok:
        return True
    if context.config.execution == "none":
        return False
    return shows_failure(context.execution_feedback)


def shown_failures(context: TurnContext) -> tuple[list[TestResult], str | None]:
    """The failing tests whose blocks the shown execution feedback holds, and the crash text if shown.

    The shown EF text is the source of truth (partial coverage shows fewer tests; a subtest's block,
    ``TEST_A (X=1)``, shows its test); with EF off or on a compile error nothing is shown and the lists are empty.
    """
    shown = {name.split(" (", 1)[0] for name in failing_tests(context.execution_feedback)}  # a subtest's: its test
    failing = [t for t in context.result.tests if not t.outcome.ok and t.name.upper() in shown]
    crash = context.result.crash if context.result.crash is not None and CRASH_BLOCK in shown else None
    return failing, crash
