"""Execution feedback (EF): the text a model sees about its failing tests.

Format, as in the reference: for every failing test, its method name upper-cased
(``TEST_CASE_1``) on one line and its traceback below, each block ending in a newline and
the blocks joined by newlines; ``Passed all test runs`` when nothing (shown) failed. Blocks
come in the reference's order: assertion failures first, then errors, each in unittest's
run order (alphabetical). A failure outside the tests is the block ``ALL``.

Partial coverage shows only the first 3 *test methods* of ``TestCases`` in source order.
The reference took the first 3 function names, ``setUp`` and helpers included, and showed
"Passed all test runs" for timeouts and crashes; here timeouts and crashes are reported.

Texts of 8000 characters or more are cut to a few lines from the front (2000 characters
at most) and the back (4000 at most), with ``...`` between, as the reference does.

Holds:
    PASSED_ALL_TEST_RUNS, PARTIAL_TEST_COUNT
    execution_feedback   ExecutionResult -> text (full or partial)
    trim_feedback        the reference's front/back trimming
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from ..sandbox.result import ExecutionResult, Outcome, TestResult

__all__ = [
    "PASSED_ALL_TEST_RUNS",
    "PARTIAL_TEST_COUNT",
    "TRIM_THRESHOLD",
    "execution_feedback",
    "trim_feedback",
    "Coverage",
]

PASSED_ALL_TEST_RUNS = "Passed all test runs"
PARTIAL_TEST_COUNT = 3
TRIM_THRESHOLD = 8000
FRONT_CHARS = 2000
REAR_CHARS = 4000

Coverage = Literal["full", "partial"]

# Reference order: unittest's failures list, then its errors list. Tests that never
# reported (timeouts, not run) are errors of this run, listed after them.
_ORDER = {Outcome.FAILED: 0, Outcome.ERROR: 1, Outcome.TIMEOUT: 1, Outcome.NOT_RUN: 2}


def _block(name: str, text: str) -> str:
    return f"{name.upper()}\n{text}\n"


def _failing(tests: Sequence[TestResult]) -> list[TestResult]:
    bad = [t for t in tests if not t.outcome.ok]
    return sorted(bad, key=lambda t: (_ORDER[t.outcome], t.name))


def execution_feedback(
    result: ExecutionResult,
    coverage: Coverage,
    visible_tests: Sequence[str] | None = None,
    *,
    trim: bool = True,
) -> str:
    """Execution feedback text for ``result``.

    Args:
        result: the execution to describe.
        coverage: ``"full"`` shows every failing test; ``"partial"`` only ``visible_tests``.
        visible_tests: for partial coverage, the test names shown: the task's first 3 test
            methods (``task.test_names[:3]``).
        trim: apply the reference's 8000-character trimming.
    """
    if result.passed:
        return PASSED_ALL_TEST_RUNS
    if coverage == "partial":
        if visible_tests is None:
            raise ValueError("partial coverage needs visible_tests (the task's first 3 test methods)")
        shown = set(visible_tests)
        tests = [t for t in result.tests if t.name in shown]
    elif coverage == "full":
        tests = list(result.tests)
    else:
        raise ValueError(f"coverage must be 'full' or 'partial', got {coverage!r}")

    blocks = [_block("ALL", result.crash)] if result.crash is not None else []
    failing = _failing(tests)
    if result.crash is not None:  # every test is "not run" after a crash: the ALL block says why
        failing = [t for t in failing if t.outcome is not Outcome.NOT_RUN]
    blocks.extend(_block(t.name, t.traceback) for t in failing)
    text = "\n".join(blocks) if blocks else PASSED_ALL_TEST_RUNS
    return trim_feedback(text) if trim else text


def trim_feedback(
    text: str, *, threshold: int = TRIM_THRESHOLD, front_chars: int = FRONT_CHARS, rear_chars: int = REAR_CHARS
) -> str:
    """Cut ``text`` of ``threshold`` characters or more to its first and last lines.

    The window is 5 lines when the text has 10 lines or more, 1 for a single line, else
    half the lines; the front keeps at most ``front_chars`` characters, the back at most
    ``rear_chars``, joined by a line ``...``.

    >>> trim_feedback("short")
    'short'
    >>> out = trim_feedback("\\n".join(f"line {i}" for i in range(2000)))
    >>> out.splitlines()[:2], out.splitlines()[5], out.splitlines()[-1]
    (['line 0', 'line 1'], '...', 'line 1999')
    """
    if len(text) < threshold:
        return text
    lines = text.splitlines()
    if len(lines) >= 10:
        window = 5
    elif len(lines) == 1:
        window = 1
    else:
        window = len(lines) // 2
    front = "\n".join(lines[:window])[:front_chars]
    rear = "\n".join(lines[-window:])[-rear_chars:]
    return front + "\n...\n" + rear
