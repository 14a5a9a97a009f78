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

Two styles of the same facts (``FEEDBACK_STYLES``):

* ``"reference"`` (default): the text the reference's model saw. The program and the tests
  ran as module ``__test__``, which exists nowhere on disk, so frames of ``__test__.py``
  show no source lines (library frames keep theirs); a crash outside the tests is ``ALL``
  and ``str(exception)`` alone; a run stopped by a time limit (per test or per suite: the
  reference had one timer for the suite) gives an empty text; code
  that does not compile gets ``ALL`` and its SyntaxError's text, as the reference's run of
  it reported (``expected ':' (__test__.py, line 3)``).
* ``"rich"``: source lines in every frame, the whole traceback of a crash, a block per test
  stopped by a time limit; no EF for code that does not compile (CF says it all)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Literal

from ..sandbox.local import MODULE_NAME
from ..sandbox.result import ExecutionResult, Outcome, TestResult
from ..tasks.record import quiet_compiling

__all__ = [
    "PASSED_ALL_TEST_RUNS",
    "PARTIAL_TEST_COUNT",
    "TRIM_THRESHOLD",
    "FEEDBACK_STYLES",
    "CRASH_BLOCK",
    "execution_feedback",
    "compile_error_feedback",
    "shows_failure",
    "failing_tests",
    "trim_feedback",
    "retrim_windows",
    "Coverage",
    "FeedbackStyle",
]

PASSED_ALL_TEST_RUNS = "Passed all test runs"
PARTIAL_TEST_COUNT = 3
TRIM_THRESHOLD = 8000
FRONT_CHARS = 2000
REAR_CHARS = 4000

Coverage = Literal["full", "partial"]
FeedbackStyle = Literal["reference", "rich"]
FEEDBACK_STYLES: tuple[str, ...] = ("reference", "rich")
#: The name of the block that reports a failure outside any test.
CRASH_BLOCK = "ALL"
_MODULE_FILE = f'  File "{MODULE_NAME}.py"'
#: Limits that stop a run by time (per test or whole suite): the reference had one suite timer.
_TIMEOUT_LIMITS = frozenset({"suite_timeout", "test_timeout"})
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?:: (.*))?$", re.DOTALL)

# Reference order: unittest's failures list, then its errors list. Tests that never
# reported (timeouts, not run) are errors of this run, listed after them.
_ORDER = {Outcome.FAILED: 0, Outcome.ERROR: 1, Outcome.TIMEOUT: 1, Outcome.NOT_RUN: 2}


def _block(name: str, text: str) -> str:
    return f"{name.upper()}\n{text}\n"


def _failing(tests: Sequence[TestResult]) -> list[TestResult]:
    bad = [t for t in tests if not t.outcome.ok]
    return sorted(bad, key=lambda t: (_ORDER[t.outcome], t.name))


def _check_style(style: str) -> None:
    if style not in FEEDBACK_STYLES:
        raise ValueError(f"feedback style must be one of {FEEDBACK_STYLES}, got {style!r}")


def _without_module_source(traceback_text: str) -> str:
    r"""Drop the source lines (and caret lines) under frames of ``__test__.py``, as a
    traceback of a module that exists nowhere on disk shows them.

    >>> tb = 'Traceback (most recent call last):\n  File "__test__.py", line 3, in test_a\n    f()\n    ^^^\nAssertionError'
    >>> _without_module_source(tb).splitlines()
    ['Traceback (most recent call last):', '  File "__test__.py", line 3, in test_a', 'AssertionError']
    """
    out, in_module_frame = [], False
    for line in traceback_text.split("\n"):
        if line.startswith("  File "):
            in_module_frame = line.startswith(_MODULE_FILE)
        elif in_module_frame and line.startswith("    "):
            continue
        else:
            in_module_frame = False
        out.append(line)
    return "\n".join(out)


def _exception_message(crash: str) -> str:
    r"""``str(exception)`` of the last exception in a traceback text; the text itself when it is
    no traceback (a process that died, say).

    >>> _exception_message('Traceback (most recent call last):\n  File "x.py", line 1, in <module>\nValueError: bad\n')
    'bad'
    >>> _exception_message("Traceback (most recent call last):\n  File 'x', line 1\nKeyError\n"), _exception_message("killed by signal 9")
    ('', 'killed by signal 9')
    """
    lines = crash.rstrip("\n").split("\n")
    if not lines or not lines[0].startswith("Traceback (most recent call last):"):
        return crash.rstrip("\n")
    start = len(lines)
    for index in range(len(lines) - 1, 0, -1):  # the exception part: after the last frame's lines
        if lines[index].startswith(" "):
            break
        start = index
    match = _EXCEPTION_LINE.match("\n".join(lines[start:]))
    return (match.group(2) or "") if match else "\n".join(lines[start:])


def compile_error_feedback(program: str, test: str) -> str:
    r"""The reference's EF of a program that does not compile: ``ALL`` and the SyntaxError's
    text, as compiling the program and the tests as one module ``__test__.py`` gives it.

    >>> print(compile_error_feedback("def f(x)\n    return x", "import unittest"), end="")
    ALL
    expected ':' (__test__.py, line 1)
    """
    try:
        with quiet_compiling():
            compile(program + "\n" + test, f"{MODULE_NAME}.py", "exec")
    except Exception as exc:  # SyntaxError, ValueError (NUL bytes), RecursionError, ...
        return _block(CRASH_BLOCK, str(exc))
    return PASSED_ALL_TEST_RUNS  # it compiles: nothing to report here


def shows_failure(text: str | None) -> bool:
    r"""Whether an EF text shows a failure, as the reference decides it: any shown text but
    ``Passed all test runs`` (an empty text, a suite timeout's, counts as a failure).

    >>> shows_failure(None), shows_failure(PASSED_ALL_TEST_RUNS), shows_failure(""), shows_failure("TEST_A\n...")
    (False, False, True, True)
    """
    return text is not None and text != PASSED_ALL_TEST_RUNS


def failing_tests(text: str | None) -> list[str]:
    r"""The block names an EF text shows failing, as the text writes them: each test method's
    name upper-cased, :data:`CRASH_BLOCK` (``ALL``) for a failure outside the tests; in order.

    >>> failing_tests("TEST_B\nTraceback ...\nAssertionError\n\nALL\nboom\n"), failing_tests(PASSED_ALL_TEST_RUNS)
    (['TEST_B', 'ALL'], [])
    """
    if not shows_failure(text):
        return []
    return [block.split("\n", 1)[0] for block in _blocks(str(text))]


def _blocks(text: str) -> Iterator[str]:
    r"""The ``NAME\n<body>\n`` blocks of an EF text (a name line is upper-case, starts at a block boundary)."""
    current: list[str] = []
    previous_blank = True
    for line in text.split("\n"):
        is_name = previous_blank and re.fullmatch(r"[A-Z_][A-Z0-9_]*", line) is not None
        if is_name and current:
            yield "\n".join(current)
            current = []
        if is_name or current:
            current.append(line)
        previous_blank = line == ""
    if current:
        yield "\n".join(current)


def execution_feedback(
    result: ExecutionResult,
    coverage: Coverage,
    visible_tests: Sequence[str] | None = None,
    *,
    trim: bool = True,
    style: FeedbackStyle = "reference",
) -> str:
    """Execution feedback text for ``result``.

    Args:
        result: the execution to describe (of a program that compiled; for one that did not,
            see :func:`compile_error_feedback`).
        coverage: ``"full"`` shows every failing test; ``"partial"`` only ``visible_tests``.
        visible_tests: for partial coverage, the test names shown: the task's first 3 test
            methods (``task.test_names[:3]``).
        trim: apply the reference's 8000-character trimming.
        style: ``"reference"`` (the reference's text) or ``"rich"`` (see the module's docstring).
    """
    _check_style(style)
    if result.passed:
        return PASSED_ALL_TEST_RUNS
    if coverage not in ("full", "partial"):
        raise ValueError(f"coverage must be 'full' or 'partial', got {coverage!r}")
    if style == "reference" and (result.timed_out or _TIMEOUT_LIMITS.intersection(result.limits_hit)):
        return ""  # the reference's one suite timer: a run stopped by time reports no details
    if coverage == "partial":
        if visible_tests is None:
            raise ValueError("partial coverage needs visible_tests (the task's first 3 test methods)")
        shown = set(visible_tests)
        tests = [t for t in result.tests if t.name in shown]
    else:
        tests = list(result.tests)

    reference = style == "reference"
    blocks = []
    if result.crash is not None:
        blocks.append(_block(CRASH_BLOCK, _exception_message(result.crash) if reference else result.crash))
    failing = _failing(tests)
    if result.crash is not None:  # every test is "not run" after a crash: the ALL block says why
        failing = [t for t in failing if t.outcome is not Outcome.NOT_RUN]
    blocks.extend(_block(t.name, _without_module_source(t.traceback) if reference else t.traceback) for t in failing)
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
    if threshold <= 0 and not text:
        return text
    lines = text.splitlines()
    if len(lines) >= 10:
        window = 5
    elif len(lines) == 1:
        window = 1
    else:
        window = len(lines) // 2
    front = "\n".join(lines[:window])[:front_chars]
    rear = "\n".join(lines[-window:])[-rear_chars:]  # as the reference slices: a 0 back window keeps it whole
    return front + "\n...\n" + rear


def retrim_windows(front_chars: int = FRONT_CHARS, rear_chars: int = REAR_CHARS) -> Iterator[tuple[int, int]]:
    """The (front, back) character windows the reference retries a call with when the model's
    context overflows: first the usual ones (trimming forced), then the larger window shrunk by
    1000 at a time (the back when they are equal), down to nothing.

    >>> list(retrim_windows())
    [(2000, 4000), (2000, 3000), (2000, 2000), (2000, 1000), (1000, 1000), (1000, 0), (0, 0)]
    """
    while front_chars >= 0 and rear_chars >= 0:
        yield front_chars, rear_chars
        if front_chars > rear_chars:
            front_chars -= 1000
        else:
            rear_chars -= 1000
