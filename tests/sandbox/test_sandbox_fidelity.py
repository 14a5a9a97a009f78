"""The sandbox's split judge shows the same execution feedback, byte for byte, as program and tests
run in one module (LocalExecutor, the reference harness's way), for programs that fail in
different ways."""

from __future__ import annotations

import pytest

from convcodeworld_gym import ConvCodeWorldEnv, Task

HE0 = "def has_close_elements(numbers, threshold):\n"
CASES = [
    ("HumanEval/0", "def wrong():\n    return None\n"),  # no entry point: NameError in every test
    ("HumanEval/0", HE0 + "    return numbers[99]"),  # last line without a newline (traceback carets)
    ("HumanEval/0", HE0 + "    return False"),  # wrong answers
    ("HumanEval/0", "x = 1/0\n" + HE0 + "    return False\n"),  # fails at import
    ("HumanEval/14", "def all_prefixes(string):\n    result = [string[:i + 1] for i in range(len(string))]\n    return result[5]"),
]


def _feedback(task, program: str, executor) -> tuple[str, float]:
    env = ConvCodeWorldEnv("CF-EF_full", dataset=[task], executor=executor, feedback_style="rich")  # every line compared
    env.reset()
    obs, reward, *_ = env.step(program)
    env.close()
    return obs["execution_feedback"], reward


@pytest.mark.parametrize("task_id, program", CASES, ids=["no_entry_point", "no_final_newline", "wrong", "import_error", "index_error"])
def test_split_judge_feedback_matches_one_module(task_id, program, humaneval, executor, local_executor):
    task = humaneval[task_id]
    sandboxed, local = _feedback(task, program, executor), _feedback(task, program, local_executor)
    assert sandboxed == local
    assert sandboxed[1] == 0.0 and sandboxed[0].strip()


def test_tracebacks_keep_their_line_numbers_when_the_program_is_only_its_imports(executor, local_executor):
    # The judge's module puts the task's imports first; with a program no longer than them (here: only
    # them, no final newline) the tests must still sit on the lines they have in program + tests.
    test = "import unittest\n\nclass TestCases(unittest.TestCase):\n    def test_a(self):\n        self.assertEqual(probe(), 1)\n"
    task = Task(task_id="probe/imports", prompt="p", code_prompt="import os\nimport re\ndef probe():\n",
                entry_point="probe", canonical_solution="    return 1\n", test=test)
    program = "import os\nimport re"
    sandboxed, local = executor.run(task, program), local_executor.run(task, program)
    assert sandboxed.details["judge"] == "split"
    assert sandboxed.tests[0].traceback == local.tests[0].traceback
    assert 'File "__test__.py", line 7' in local.tests[0].traceback and "NameError" in local.tests[0].traceback


# BigCodeBench/147's canonical solution scans a /24 with a thread per address, each calling the judge's mocked
# socket. Here the 256 threads are all alive at once (a barrier), each calling a mock of the judge.
THREADS_TESTS = """
import unittest
from unittest.mock import patch
class TestCases(unittest.TestCase):
    @patch("os.getpid", return_value=7)
    def test_all_at_once(self, getpid):
        self.assertEqual(task_func(256), 256 * 7)
        self.assertEqual(getpid.call_count, 256)
"""
THREADS = Task("threads/256", "Call os.getpid from n threads alive at once.",
               "import os, threading\ndef task_func(n):\n", "task_func",
               "    barrier, out = threading.Barrier(n), []\n"
               "    def work():\n"
               "        barrier.wait()\n"
               "        out.append(os.getpid())\n"
               "    threads = [threading.Thread(target=work) for _ in range(n)]\n"
               "    for t in threads:\n"
               "        t.start()\n"
               "    for t in threads:\n"
               "        t.join()\n"
               "    return sum(out)\n", THREADS_TESTS)


def test_a_program_with_256_threads_alive_at_once_passes(executor):
    """The process limit leaves room for BigCodeBench/147's 256 threads next to the run's own processes: at 256 a
    verdict of that task depended on how many of its threads were alive at once (its probe failed with "can't start
    new thread" on a loaded machine)."""
    result = executor.run(THREADS, THREADS.ground_truth)
    assert result.passed, result.tests or result.crash


FLOAT_TESTS = "import unittest\nclass TestCases(unittest.TestCase):\n    def test_one(self):\n        self.assertEqual(task_func(), 3.0)\n"
FLOAT = Task("fidelity/numpy_value", "Three.", "def task_func():\n", "task_func", "    return 3.0\n", FLOAT_TESTS, source="test")
#: A standard-library task's program that returns a numpy value, with an expression nested deep enough that the
#: host cannot build its tree from a caller deep in its stack (a fresh process can).
DEEP_NUMPY = "import numpy as np\ndef task_func():\n    x = " + "-" * 400 + "1\n    return np.float64(3.0)\n"


def test_a_deeply_nested_program_gets_the_same_verdict_wherever_the_caller_is_in_its_stack():
    """The run's worker group (whose judge must have numpy loaded to read the program's numpy value) is chosen
    from the program's imports; read from a tree, they were lost where the host's stack was deep, and the same
    program failed there and passed elsewhere."""
    import sys

    from convcodeworld_gym.sandbox import SandboxExecutor

    pytest.importorskip("numpy")
    with SandboxExecutor(workers=1, cache=False) as ex:  # no cached verdict answers the second run

        def nested(n: int):
            return ex.run(FLOAT, DEEP_NUMPY) if n == 0 else nested(n - 1)

        shallow, deep = ex.run(FLOAT, DEEP_NUMPY), nested(sys.getrecursionlimit() - 100)
    assert shallow.passed, shallow.tests
    assert deep.passed and deep.details["worker_group"] == shallow.details["worker_group"], deep.tests
