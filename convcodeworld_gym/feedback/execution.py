"""Execution feedback (EF): the text a model sees about its failing tests.

Format, as in the reference: one block per entry of unittest's ``failures`` and ``errors`` lists, its name
upper-cased (``TEST_CASE_1``; a subtest's with its parameters, ``TEST_A (X=1)``) on one line and its traceback
below, each block ending in a newline and the blocks joined by newlines; ``Passed all test runs`` when nothing
(shown) failed. Blocks come in the reference's order (its eval: ``failures + errors``, bigcodebench/eval/__init__.py
in its fork): every failure first, then every error, each in unittest's run order (alphabetical). A failure outside
the tests is the block ``ALL``.

Texts of 8000 characters or more are cut to a few lines from the front (2000 characters
at most) and the back (4000 at most), with ``...`` between, as the reference does.

Three styles of the same run (``FEEDBACK_STYLES``):

* ``"reference"`` (default): the text the reference's model saw (pot.py ``get_execution_feedback``, 449-494, on its
  fork's eval). The program and the tests ran as module ``__test__``, which exists nowhere on disk, so frames of
  ``__test__.py`` show no source lines (library frames keep theirs); a crash outside the tests is ``ALL`` and
  ``str(exception)`` alone. Blocks are keyed as the reference's ``details`` were: ``test.id().split(".")[-1]``, a
  later entry of the same key replacing the earlier's text in its place. Its suite timer raised ``TimeoutException``
  in the test that was running and the suite went on, so a test stopped by a time limit is a block ending in
  ``TimeoutException: Timed out!`` among the others, the tests after it run apart (``rest``); a second stop, or
  one outside any test, left no details: an empty text. Partial coverage keeps the blocks whose key is one of
  the first 3 *function names* of the test source (:func:`reference_partial_names`: ``setUp`` and helpers
  included), so an ``ALL`` block, a stopped suite and subtest blocks leave ``Passed all test runs`` there. Code
  that does not compile gets ``ALL`` and its SyntaxError's text, as the reference's run of it reported
  (``expected ':' (__test__.py, line 3)``).
* ``"corrected"``: the reference's text with its defects fixed: partial coverage shows the first 3 *test
  methods* of ``TestCases`` (their subtests' blocks included) and always shows a crash (``ALL``); every entry
  keeps its block (a subtest is named by its whole description, never cut at a dot); every test a time limit
  stopped gets its ``TimeoutException`` block, and a test that never ran a block saying so.
* ``"rich"``: the corrected blocks with source lines in every frame, the whole traceback of a crash, and the
  sandbox's own texts for a test a time limit stopped or that never ran; no EF for code that does not compile
  (CF says it all).

The reference's block for a test its timer stopped shows the frames the test was in; the sandbox stops a test
from outside, so ours shows the timer's frame alone (:data:`TIMED_OUT`)."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from ..sandbox.result import ExecutionResult, Outcome, TestResult
from ..sandbox.run.iocheck import trim_text  # the one cut, which the judge's I/O failure texts use too
from ..sandbox.run.events import MODULE_NAME
from ..tasks import PUBLIC_TEST_COUNT, TEST_CLASS, Task
from ..tasks.record import quiet_compiling

__all__ = [
    "PASSED_ALL_TEST_RUNS",
    "PARTIAL_TEST_COUNT",
    "TRIM_THRESHOLD",
    "FEEDBACK_STYLES",
    "CRASH_BLOCK",
    "TIMED_OUT",
    "execution_feedback",
    "compile_error_feedback",
    "reference_partial_names",
    "visible_tests",
    "public_reported",
    "stopped_test",
    "rest_after_stop",
    "shows_failure",
    "failing_tests",
    "trim_feedback",
    "retrim_windows",
    "Coverage",
    "FeedbackStyle",
]

PASSED_ALL_TEST_RUNS = "Passed all test runs"
PARTIAL_TEST_COUNT = PUBLIC_TEST_COUNT
TRIM_THRESHOLD = 8000
FRONT_CHARS = 2000
REAR_CHARS = 4000

Coverage = Literal["full", "partial"]
FeedbackStyle = Literal["reference", "corrected", "rich"]
FEEDBACK_STYLES: tuple[str, ...] = ("reference", "corrected", "rich")
#: The name of the block that reports a failure outside any test.
CRASH_BLOCK = "ALL"
#: The traceback of a test the suite's time limit stopped, as the reference's timer wrote it (its signal handler,
#: ``bigcodebench/eval/utils.py`` line 83 in its fork, path normalised to the package), without the frames the test
#: was in: the sandbox stops a test from outside.
TIMED_OUT = (
    "Traceback (most recent call last):\n"
    '  File "bigcodebench/eval/utils.py", line 83, in signal_handler\n'
    '    raise TimeoutException("Timed out!")\n'
    "bigcodebench.eval.utils.TimeoutException: Timed out!\n"
)
_MODULE_FILE = f'  File "{MODULE_NAME}.py"'
#: Limits that stop a run by time (per test or whole suite): the reference had one suite timer.
_TIMEOUT_LIMITS = frozenset({"suite_timeout", "test_timeout"})
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?:: (.*))?$", re.DOTALL)
_ID_PREFIX = f"{MODULE_NAME}.{TEST_CLASS}."
_LISTS = ("failures", "errors", "not_run")  # the reference's order, failures + errors; then tests that never ran


@dataclass(frozen=True)
class _Entry:
    """One block: an entry of unittest's ``listed`` list about ``test`` (or its subtest), keyed ``key``."""

    test: str
    listed: str
    key: str
    text: str


def _block(name: str, text: str) -> str:
    return f"{name.upper()}\n{text}\n"


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


@functools.lru_cache(maxsize=4096)  # a task's tests are parsed once, not at every step
def reference_partial_names(test_source: str) -> tuple[str, ...]:
    """Every function name defined in a class of ``test_source``, as the reference lists them for partial coverage
    (its ``extract_methods_from_class``, extract_methods.py:4-18): classes in ``ast.walk`` order, each class's
    functions depth-first in source order (nested ones too; a class inside a class is listed twice); ``setUp`` and
    helpers are names like any other. The reference showed the blocks of the first 3 (:data:`PARTIAL_TEST_COUNT`).

    >>> reference_partial_names("class TestCases:\\n    def setUp(self):\\n        def helper(): pass\\n    def test_a(self): pass")
    ('setUp', 'helper', 'test_a')
    """
    def functions(node: ast.AST) -> Iterator[str]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef):
                yield child.name
            yield from functions(child)

    with quiet_compiling():
        tree = ast.parse(test_source)
    return tuple(name for node in ast.walk(tree) if isinstance(node, ast.ClassDef) for name in functions(node))


def visible_tests(task: Task, style: FeedbackStyle = "reference") -> tuple[str, ...]:
    """What partial coverage shows of ``task``: in the reference style the first 3 function names of its test source
    (:func:`reference_partial_names`, block keys); in the others its public tests (:attr:`~..tasks.Task.public_tests`:
    the first 3 test methods). Either way no test outside the public ones, which every executor runs first."""
    _check_style(style)
    if style == "reference":  # a hidden test's name among them (never so in HumanEval or BigCodeBench) is not shown
        hidden = set(task.test_names) - set(task.public_tests)
        return tuple(n for n in reference_partial_names(task.test)[:PARTIAL_TEST_COUNT] if n not in hidden)
    return task.public_tests


def stopped_test(result: ExecutionResult) -> str | None:
    """The test a time limit stopped in ``result`` (where the reference's suite timer would have raised), or None:
    no time limit stopped the run, or it stopped it outside any test (while loading)."""
    return next((t.name for t in result.tests if t.outcome is Outcome.TIMEOUT), None)


def rest_after_stop(task: Task, result: ExecutionResult) -> Task | None:
    """The task to run for the tests a time limit kept from running in ``result``: ``task`` with every test that
    reported, and the one that was stopped, taken out of ``TestCases`` (set to None after the class, so the loader
    skips them, inherited or not). None when no test was stopped or none is left to run.

    The reference's timer stopped the test and the suite went on (its fork's ``time_limit``, eval/utils.py:81-90);
    run the rest with the task's judge mode and limits (:meth:`..sandbox.host.executor.Executor.derive`), and pass its result to
    :func:`execution_feedback` as ``rest``.
    """
    stopped = stopped_test(result)
    left = [t.name for t in result.tests if t.outcome is Outcome.NOT_RUN]
    if stopped is None or not left or result.crash is not None:
        return None
    done = [t.name for t in result.tests if t.name in task.test_names and t.outcome is not Outcome.NOT_RUN]
    hide = "".join(f"setattr({TEST_CLASS}, {name!r}, None)\n" for name in done)
    return replace(task, test=task.test + "\n\n" + hide)


def _key(entry_id: str, style: FeedbackStyle) -> str:
    """A block's name (before upper-casing) from the unittest id of its test or subtest: the reference's
    ``id.split(".")[-1]``; otherwise the id without its module and class."""
    if style == "reference":
        return entry_id.split(".")[-1]
    return entry_id[len(_ID_PREFIX):] if entry_id.startswith(_ID_PREFIX) else entry_id


def _text(traceback_text: str, style: FeedbackStyle) -> str:
    return traceback_text if style == "rich" else _without_module_source(traceback_text)


def _entries_of(test: TestResult, style: FeedbackStyle) -> list[_Entry]:
    """The entries a test left in unittest's failures and errors (its faults, else its outcome's one)."""
    if test.faults:
        return [_Entry(test.name, f.listed, _key(f.id, style), _text(f.traceback, style)) for f in test.faults]
    if test.outcome is Outcome.FAILED:
        return [_Entry(test.name, "failures", _key(test.name, style), _text(test.traceback, style))]
    if test.outcome is Outcome.ERROR:
        return [_Entry(test.name, "errors", _key(test.name, style), _text(test.traceback, style))]
    if test.outcome is Outcome.TIMEOUT:  # the timer raised in it: an error
        return [_Entry(test.name, "errors", _key(test.name, style), test.traceback if style == "rich" else TIMED_OUT)]
    if test.outcome is Outcome.NOT_RUN and style != "reference":
        return [_Entry(test.name, "not_run", _key(test.name, style), test.traceback)]
    return []


def _in_reference_order(tests: Iterable[TestResult], style: FeedbackStyle) -> list[_Entry]:
    entries = [e for t in sorted(tests, key=lambda t: t.name) for e in _entries_of(t, style)]
    return [e for listed in _LISTS for e in entries if e.listed == listed]


def _stopped(result: ExecutionResult) -> bool:
    return bool(_TIMEOUT_LIMITS.intersection(result.limits_hit)) or result.timed_out


def _with_rest(result: ExecutionResult, rest: ExecutionResult | None) -> tuple[ExecutionResult, bool]:
    """``result`` with the tests it did not run taken from ``rest``, and whether every test then ran or was the
    one stopped (as under the reference's single timer: the suite went on after it)."""
    if rest is None or rest.infra_error is not None:
        complete = not any(t.outcome is Outcome.NOT_RUN for t in result.tests)
        return result, complete and stopped_test(result) is not None
    ran = rest.by_name()
    tests = tuple(ran.get(t.name, t) if t.outcome is Outcome.NOT_RUN else t for t in result.tests)
    merged = ExecutionResult(tests=tests, crash=result.crash or rest.crash, limits_hit=result.limits_hit + rest.limits_hit)
    complete = rest.crash is None and not _stopped(rest) and not any(t.outcome is Outcome.NOT_RUN for t in tests)
    return merged, complete and stopped_test(result) is not None


def execution_feedback(
    result: ExecutionResult,
    coverage: Coverage,
    visible_tests: Sequence[str] | None = None,
    *,
    trim: bool = True,
    style: FeedbackStyle = "reference",
    rest: ExecutionResult | None = None,
) -> str:
    """Execution feedback text for ``result``.

    Args:
        result: the execution to describe (of a program that compiled; for one that did not,
            see :func:`compile_error_feedback`).
        coverage: ``"full"`` shows every failing test; ``"partial"`` only ``visible_tests``.
        visible_tests: for partial coverage, what is shown: :func:`visible_tests` of the task and style (the
            reference style compares block keys with them, the others test names).
        trim: apply the reference's 8000-character trimming.
        style: ``"reference"``, ``"corrected"`` or ``"rich"`` (see the module's docstring).
        rest: where a time limit stopped a test of ``result`` with tests left unrun, the run of those
            (:func:`rest_after_stop`); None when it was not run (the reference style then gives its empty text).
    """
    _check_style(style)
    if result.passed:
        return PASSED_ALL_TEST_RUNS
    if coverage not in ("full", "partial"):
        raise ValueError(f"coverage must be 'full' or 'partial', got {coverage!r}")
    if coverage == "partial" and visible_tests is None:
        raise ValueError("partial coverage needs visible_tests (visible_tests(task, style))")
    shown = set(visible_tests or ())
    if _stopped(result):
        result, went_on = _with_rest(result, rest)
        hidden_stop = coverage == "partial" and _public_reported(result, shown)  # the public tests' text stands
        if style == "reference" and not went_on and not hidden_stop:  # the reference's process was killed: no details
            return PASSED_ALL_TEST_RUNS if coverage == "partial" else ""
    entries: list[_Entry] = []
    if result.crash is not None:
        crash = result.crash if style == "rich" else _exception_message(result.crash)
        entries.append(_Entry(CRASH_BLOCK, "errors", CRASH_BLOCK, crash))
    tests = [t for t in result.tests if not (result.crash is not None and t.outcome is Outcome.NOT_RUN)]
    entries.extend(_in_reference_order(tests, style))  # after a crash the ALL block says why the rest did not run
    if style == "reference":
        details: dict[str, str] = {}
        for entry in entries:  # the reference's details dict: a repeated key keeps its place, takes the later text
            details[entry.key] = entry.text
        blocks = [_block(key, text) for key, text in details.items() if coverage == "full" or key in shown]
    else:
        crash_shown = coverage == "full" or not _public_reported(result, shown)
        blocks = [_block(e.key, e.text) for e in entries
                  if coverage == "full" or e.test in shown or (e.test == CRASH_BLOCK and crash_shown)]
    text = "\n".join(blocks) if blocks else PASSED_ALL_TEST_RUNS
    return trim_feedback(text) if trim else text


def public_reported(outcomes: Iterable[tuple[str, Outcome]], shown: Collection[str]) -> bool:
    """Whether every shown test among ``outcomes`` (``(name, outcome)`` pairs) reported an outcome of its own.
    Executors run a task's public tests first (:attr:`~..tasks.Task.public_tests`), so a crash or a time limit that
    came after that came in a hidden test, and partial coverage must not show it: the public tests' text stays what
    they reported (else a program that loops or dies on one hidden input would tell a policy something of it).

    >>> public_reported([("a", Outcome.PASSED), ("b", Outcome.NOT_RUN)], {"a"})
    True
    >>> public_reported([("a", Outcome.TIMEOUT), ("b", Outcome.NOT_RUN)], {"a"})
    False
    """
    return all(outcome not in (Outcome.NOT_RUN, Outcome.TIMEOUT) for name, outcome in outcomes if name in shown)


def _public_reported(result: ExecutionResult, shown: Collection[str]) -> bool:
    return public_reported(((t.name, t.outcome) for t in result.tests), shown)


def compile_error_feedback(
    program: str, test: str, coverage: Coverage = "full", visible_tests: Sequence[str] | None = None,
    *, style: FeedbackStyle = "reference",
) -> str:
    r"""The reference's EF of a program that does not compile: ``ALL`` and the SyntaxError's
    text, as compiling the program and the tests as one module ``__test__.py`` gives it. Under partial coverage
    the reference style shows it only where ``ALL`` is one of ``visible_tests`` (else ``Passed all test runs``);
    the corrected style always shows it.

    >>> print(compile_error_feedback("def f(x)\n    return x", "import unittest"), end="")
    ALL
    expected ':' (__test__.py, line 1)
    >>> compile_error_feedback("def f(x)\n    return x", "import unittest", "partial", ("setUp", "test_a"))
    'Passed all test runs'
    """
    _check_style(style)
    try:
        with quiet_compiling():
            compile(program + "\n" + test, f"{MODULE_NAME}.py", "exec")
    except Exception as exc:  # SyntaxError, ValueError (NUL bytes), RecursionError, ...
        if coverage == "partial" and style == "reference" and CRASH_BLOCK not in set(visible_tests or ()):
            return PASSED_ALL_TEST_RUNS
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
    name upper-cased (a subtest's with its parameters), :data:`CRASH_BLOCK` (``ALL``) for a failure outside the
    tests; in order.

    >>> failing_tests("TEST_B\nTraceback ...\nAssertionError\n\nALL\nboom\n"), failing_tests(PASSED_ALL_TEST_RUNS)
    (['TEST_B', 'ALL'], [])
    >>> failing_tests("TEST_A (X=1)\nTraceback ...\nAssertionError\n")
    ['TEST_A (X=1)']
    """
    if not shows_failure(text):
        return []
    return [block.split("\n", 1)[0] for block in _blocks(str(text))]


_NAME_LINE = re.compile(r"[A-Z_][A-Z0-9_]*(?: \([^a-z]*\))?")


def _blocks(text: str) -> Iterator[str]:
    r"""The ``NAME\n<body>\n`` blocks of an EF text (a name line is upper-case, starts at a block boundary)."""
    current: list[str] = []
    previous_blank = True
    for line in text.split("\n"):
        is_name = previous_blank and _NAME_LINE.fullmatch(line) is not None
        if is_name and current:
            yield "\n".join(current)
            current = []
        if is_name or current:
            current.append(line)
        previous_blank = line == ""
    if current:
        yield "\n".join(current)


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
    return trim_text(text, threshold=threshold, front_chars=front_chars, rear_chars=rear_chars)


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
