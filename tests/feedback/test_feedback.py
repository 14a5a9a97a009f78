"""Golden tests of the feedback texts, written from REFERENCE.md."""

from __future__ import annotations

import pytest

from convcodeworld_gym.extract import build_program, extract_code
from convcodeworld_gym.feedback import (
    NO_SYNTAX_ERRORS,
    PASSED_ALL_TEST_RUNS,
    compilation_feedback,
    compile_error_feedback,
    compiled,
    execution_feedback,
    failing_tests,
    visible_tests,
    shows_failure,
    trim_feedback,
)
from convcodeworld_gym.feedback.execution import TIMED_OUT
from convcodeworld_gym.sandbox import ExecutionResult, Outcome, TestResult
from convcodeworld_gym.tasks import Task

TEST_SOURCE = '''import unittest
class TestCases(unittest.TestCase):
    def setUp(self):
        self.x = 1
    def test_c(self):
        self.assertEqual(task_func(1), 2)
    def test_b(self):
        self.assertEqual(task_func(2), 3)
    def test_a(self):
        self.assertEqual(task_func(3), 4)
    def test_hidden(self):
        self.assertEqual(task_func(-1), 0)
'''

TASK = Task(
    task_id="golden/0",
    prompt="Return x + 1.",
    code_prompt="import math\ndef task_func(x):\n",
    entry_point="task_func",
    canonical_solution="    return x + 1\n",
    test=TEST_SOURCE,
)


def _ef(executor, code: str, coverage: str, style: str = "rich") -> tuple[str, ExecutionResult]:
    result = executor.run(TASK, build_program(TASK, code))
    return execution_feedback(result, coverage, TASK.test_names[:3], style=style), result


def test_compile_error_text():
    ok, text = compilation_feedback("def task_func(x)\n    return x")
    assert not ok
    assert text == (  # the reference's compile_code (pot.py:21-26): its own frame first, path normalised
        "Traceback (most recent call last):\n"
        '  File "pot.py", line 23, in compile_code\n'
        "    compile(code, 'tmp.py', mode='exec')\n"
        '  File "tmp.py", line 1\n'
        "    def task_func(x)\n"
        "                    ^\n"
        "SyntaxError: expected ':'\n"
    )
    assert compilation_feedback("def task_func(x):\n    return x") == (True, NO_SYNTAX_ERRORS)


def test_compile_nul_bytes_is_failed_not_raised():
    ok, text = compilation_feedback("x = 1\x00")
    assert not ok and text == (  # the reference's compile_code (pot.py:21-26) on the same code
        "Traceback (most recent call last):\n"
        '  File "pot.py", line 23, in compile_code\n'
        "    compile(code, 'tmp.py', mode='exec')\n"
        "SyntaxError: source code string cannot contain null bytes\n"
    )


def test_full_feedback_exact_golden(executor):
    code = "def task_func(x):\n    if x == 1:\n        return 2\n    return 0"
    text, result = _ef(executor, code, "full")
    reference = execution_feedback(result, "full")  # the default style
    # program = header (1 line) + code (4 lines), then "\n" + the test source: test_b's assert is line 13.
    # Blocks are "NAME\n<traceback>\n" joined by "\n", in unittest's run order (alphabetical).
    # The reference's text has no source lines: its module __test__ exists nowhere on disk.
    assert reference == (
        "TEST_A\n"
        "Traceback (most recent call last):\n"
        '  File "__test__.py", line 15, in test_a\n'
        "AssertionError: 0 != 4\n"
        "\n"
        "\n"
        "TEST_B\n"
        "Traceback (most recent call last):\n"
        '  File "__test__.py", line 13, in test_b\n'
        "AssertionError: 0 != 3\n"
        "\n"
    )
    assert text == (
        "TEST_A\n"
        "Traceback (most recent call last):\n"
        '  File "__test__.py", line 15, in test_a\n'
        "    self.assertEqual(task_func(3), 4)\n"
        "AssertionError: 0 != 4\n"
        "\n"
        "\n"
        "TEST_B\n"
        "Traceback (most recent call last):\n"
        '  File "__test__.py", line 13, in test_b\n'
        "    self.assertEqual(task_func(2), 3)\n"
        "AssertionError: 0 != 3\n"
        "\n"
    )
    assert not result.passed and result.by_name()["test_hidden"].outcome is Outcome.PASSED


def test_failing_test_among_first_three(executor):
    # test_c (1st in source) passes, test_b (2nd) fails, test_a passes, hidden passes
    code = "def task_func(x):\n    return 99 if x == 2 else x + 1"
    partial, result = _ef(executor, code, "partial")
    full = execution_feedback(result, "full", style="rich")
    assert partial == full
    assert partial.startswith("TEST_B\nTraceback (most recent call last):\n")
    assert partial.rstrip().endswith("AssertionError: 99 != 3")
    assert "TEST_C" not in partial and "TEST_A" not in partial


def test_failure_only_in_hidden_tests(executor):
    code = "def task_func(x):\n    return x + 1 if x > 0 else 42"
    partial, result = _ef(executor, code, "partial")
    assert partial == PASSED_ALL_TEST_RUNS
    assert not result.passed  # the reward is judged on all tests
    full = execution_feedback(result, "full", style="rich")
    assert full.startswith("TEST_HIDDEN\n") and "42 != 0" in full


def test_passing_program(executor):
    text, result = _ef(executor, "def task_func(x):\n    return x + 1", "partial")
    assert result.passed and text == PASSED_ALL_TEST_RUNS


def test_failures_listed_before_errors(executor):
    # test_a raises (error), test_b fails (assertion): failures come first, as unittest lists them
    code = "def task_func(x):\n    if x == 3:\n        raise KeyError('boom')\n    return 0 if x == 2 else x + 1"
    text, _ = _ef(executor, code, "full")
    assert text.index("TEST_B") < text.index("TEST_A")
    assert "KeyError: 'boom'" in text


def test_timeout_reported_truthfully(quick_executor):
    code = "def task_func(x):\n    while x == 2:\n        pass\n    return x + 1"
    text, result = _ef(quick_executor, code, "partial")
    by_name = result.by_name()
    assert by_name["test_b"].outcome is Outcome.TIMEOUT
    assert by_name["test_a"].outcome is Outcome.PASSED  # ran before test_b (alphabetical run order)
    assert by_name["test_c"].outcome is Outcome.NOT_RUN
    assert result.limits_hit == ("test_timeout",)
    assert text.startswith("TEST_B\nTimeoutError: stopped after exceeding the per-test time limit of 2 s")
    assert "TEST_C\nNot run" in text
    assert text != PASSED_ALL_TEST_RUNS  # the reference showed "Passed all test runs" here


def test_module_level_crash_is_all_block(executor):
    text, result = _ef(executor, "raise RuntimeError('at import')\ndef task_func(x):\n    return x + 1", "partial")
    assert result.crash is not None and not result.passed
    assert text.startswith("ALL\nTraceback (most recent call last):\n")
    assert "RuntimeError: at import" in text
    assert "TEST_" not in text  # the not-run tests are explained by the ALL block
    # the reference: ALL and str(exception) alone; its partial coverage keeps only the blocks of its first 3
    # function names (setUp, test_c, test_b), so a crash reads "Passed all test runs" there (pot.py:454-459)
    assert execution_feedback(result, "full") == "ALL\nat import\n"
    assert execution_feedback(result, "partial", visible_tests(TASK)) == PASSED_ALL_TEST_RUNS
    assert execution_feedback(result, "partial", visible_tests(TASK, "corrected"), style="corrected") == "ALL\nat import\n"


def test_library_frames_keep_their_source_lines(executor):
    code = "import json\ndef task_func(x):\n    return json.loads('{')"
    text, result = _ef(executor, code, "full", style="reference")
    block = text.split("\n\n")[0].splitlines()
    frames = [i for i, line in enumerate(block) if line.startswith("  File ")]
    module_frames = [i for i in frames if block[i].startswith('  File "__test__.py"')]
    library_frames = [i for i in frames if "json" in block[i]]
    assert module_frames and library_frames
    assert all(block[i + 1].startswith("  File ") for i in module_frames)  # no source line below
    assert all(block[i + 1].startswith("    ") for i in library_frames)  # the library's source line
    assert block[-1].startswith("json.decoder.JSONDecodeError: Expecting property name")
    rich, _ = _ef(executor, code, "full", style="rich")
    assert "    return json.loads('{')" in rich and "    return json.loads('{')" not in text


def test_suite_timeout_texts():
    stopped = ExecutionResult(
        tests=(
            TestResult("test_a", Outcome.PASSED),
            TestResult("test_b", Outcome.TIMEOUT, "TimeoutError: stopped after exceeding the suite time limit of 121 s"),
            TestResult("test_c", Outcome.NOT_RUN, "Not run: the suite was stopped after exceeding the suite time limit of 121 s."),
        ),
        limits_hit=("suite_timeout",),
    )
    assert execution_feedback(stopped, "full") == ""  # test_c never ran: the reference's process was killed, no details
    assert execution_feedback(stopped, "partial", ["test_a", "test_b", "test_c"]) == PASSED_ALL_TEST_RUNS
    assert execution_feedback(stopped, "full", style="rich") == (
        "TEST_B\nTimeoutError: stopped after exceeding the suite time limit of 121 s\n\n"
        "TEST_C\nNot run: the suite was stopped after exceeding the suite time limit of 121 s.\n"
    )
    with pytest.raises(ValueError, match="feedback style must be one of"):
        execution_feedback(stopped, "full", style="terse")  # type: ignore[arg-type]
    # the last test stopped: the reference's timer raised in it and the suite ended there
    per_test = ExecutionResult(tests=(TestResult("test_a", Outcome.TIMEOUT, "TimeoutError: ..."),), limits_hit=("test_timeout",))
    assert execution_feedback(per_test, "full") == "TEST_A\n" + TIMED_OUT + "\n"
    assert execution_feedback(per_test, "full", style="rich") == "TEST_A\nTimeoutError: ...\n"


def test_compile_error_feedback_is_the_reference_text():
    program = build_program(TASK, "def task_func(x)\n    return x")
    # header "import math" is line 1, so the def is line 2
    assert compile_error_feedback(program, TASK.test) == "ALL\nexpected ':' (__test__.py, line 2)\n"
    # an unclosed bracket is reported where the tests that follow make it fail
    assert compile_error_feedback("x = (", "import unittest").startswith("ALL\n'(' was never closed (__test__.py, line 1)")


def test_readers_of_the_texts():
    assert shows_failure("TEST_A\nboom\n") and shows_failure("") and not shows_failure(PASSED_ALL_TEST_RUNS)
    assert not shows_failure(None)
    text = "TEST_B\nTraceback (most recent call last):\n  File \"__test__.py\", line 3, in test_b\nAssertionError\n\n\nALL\nboom\n"
    assert failing_tests(text) == ["TEST_B", "ALL"]
    assert failing_tests(PASSED_ALL_TEST_RUNS) == [] and failing_tests("") == []
    assert compiled(NO_SYNTAX_ERRORS) and not compiled("Traceback (most recent call last):\n...") and not compiled("")


def test_trimming_golden():
    lines = [f"line {i:04d} " + "x" * 40 for i in range(400)]
    text = "\n".join(lines)
    assert len(text) >= 8000
    trimmed = trim_feedback(text)
    assert trimmed == "\n".join(lines[:5]) + "\n...\n" + "\n".join(lines[-5:])
    # few long lines: window is half the lines; front capped at 2000 and back at 4000 characters
    long = "\n".join(["a" * 5000, "b" * 5000, "c" * 5000, "d" * 5000])
    cut = trim_feedback(long)
    assert cut == "a" * 2000 + "\n...\n" + ("c" * 5000 + "\n" + "d" * 5000)[-4000:]
    one_line = "z" * 9000
    assert trim_feedback(one_line) == "z" * 2000 + "\n...\n" + "z" * 4000
    assert trim_feedback("y" * 7999) == "y" * 7999


def test_long_execution_feedback_is_trimmed(executor):
    code = "def task_func(x):\n    raise ValueError('v' * 20000)"
    text, _ = _ef(executor, code, "full")
    assert "\n...\n" in text and len(text) <= 2000 + 4000 + 5
    assert text.startswith("TEST_A\nTraceback")


@pytest.mark.parametrize(
    "reply, code",
    [
        ("```python\ndef f():\n    return 1\n```", "def f():\n    return 1"),
        ("Out:\n```text\nx = 1\n```\nCode:\n```python\ny = 2\n```", "y = 2"),  # a python block wins
        ("```\nx = 3\n```", "x = 3"),
        ("```javascript\nlet x = 3;\n```", "let x = 3;"),
        ("def g():\n    return 2", "def g():\n    return 2"),
        ("```python\ndef h():\n    return 3", "def h():\n    return 3"),  # unterminated fence
        ("", ""),
    ],
)
def test_extract_code(reply, code):
    assert extract_code(reply) == code


def test_build_program_prepends_header():
    assert build_program(TASK, "def task_func(x):\n    return math.floor(x)") == "import math\ndef task_func(x):\n    return math.floor(x)"


def test_not_executed_result_has_no_passes():
    result = ExecutionResult.not_executed(("test_a",), "Not run: the code does not compile.")
    assert not result.passed and result.tests == (TestResult("test_a", Outcome.NOT_RUN, "Not run: the code does not compile."),)


INVALID_ESCAPE = 'import re\ndef task_func(x):\n    return re.sub("\\P", "", x)\n'


@pytest.mark.parametrize("host_filter", ["error", "always"])
def test_compilation_feedback_of_an_invalid_escape_does_not_depend_on_the_hosts_warning_filters(host_filter, executor):
    """A program with an invalid escape ('\\P') compiles, as in the reference's default interpreter, whatever
    the host's warning filters (``-W error`` turns that warning into a SyntaxError), and no warning of the
    host's parses of it (compilation feedback, the judge's facts, the run's group) reaches the host's stderr."""
    import warnings

    task = Task("escape/0", "Drop P.", "import re\ndef task_func(x):\n", "task_func", '    return re.sub("P", "", x)\n',
                "import unittest\nclass TestCases(unittest.TestCase):\n    def test_a(self):\n"
                "        self.assertEqual(task_func('aPb'), 'ab')\n")
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter(host_filter)
        assert compilation_feedback(INVALID_ESCAPE) == (True, NO_SYNTAX_ERRORS)
        result = executor.run(task, INVALID_ESCAPE)
    assert [str(w.message) for w in shown] == []
    assert not result.passed and result.tests  # it ran, and failed: re refuses the pattern \P
