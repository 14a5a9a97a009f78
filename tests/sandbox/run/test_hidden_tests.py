"""Issue 48, item 2: under partial execution feedback no hidden test's input, expected value or source reaches the
observation, whatever the program does in its own process.

The tasks here put their hidden tests first by name (unittest runs a class's tests by name), so that, run in
unittest's order, every hidden test's call reaches the program before any public test's. The program remembers what
it was called with and shows it in a public test's failure, loops forever on a hidden input, or kills its own process
there; the public tests' feedback must read the same as for a program that does none of that.
"""

from __future__ import annotations

import re

import pytest

from convcodeworld_gym import ConvCodeWorldEnv
from convcodeworld_gym.sandbox import SandboxExecutor, TimePolicy
from convcodeworld_gym.tasks import Task

#: Public tests are the first three in source order; hidden ones sort before them by name.
TESTS = """import unittest
class TestCases(unittest.TestCase):
    def test_z_public(self):
        self.assertEqual(task_func(1), 2)
    def test_y_public(self):
        self.assertEqual(task_func(2), 3)
    def test_x_public(self):
        self.assertEqual(task_func(3), 4)
    def test_a_hidden(self):
        self.assertEqual(task_func(77_123_457), 77_123_458)
    def test_b_hidden(self):
        self.assertEqual(task_func(88_654_321), 88_654_322)
"""
TASK = Task("hidden/0", "Add one to x.", "def task_func(x):\n", "task_func", "    return x + 1\n", TESTS)
SECRETS = ("77123457", "77_123_457", "77123458", "88654321", "88654322", "test_a_hidden", "test_b_hidden",
           "TEST_A_HIDDEN", "TEST_B_HIDDEN")

#: Wrong on the public input run last (1, of test_z_public) only; shows every argument it has seen in that failure.
REMEMBERS = """
SEEN = []
def task_func(x):
    SEEN.append(x)
    if x == 1:
        raise ValueError("seen so far: " + repr(SEEN))
    return x + 1
"""
#: The same, and it loops forever on a hidden input.
HANGS_ON_HIDDEN = REMEMBERS + """
_honest = task_func
def task_func(x):
    if x > 1000:
        while True:
            pass
    return _honest(x)
"""
#: The same, and it ends its own process on a hidden input.
DIES_ON_HIDDEN = REMEMBERS + """
import os
_honest = task_func
def task_func(x):
    if x > 1000:
        os._exit(3)
    return _honest(x)
"""
#: Wrong on the hidden inputs only, quietly: the baseline the others must read like (same frames as theirs).
WRONG_ON_HIDDEN = REMEMBERS + """
_honest = task_func
def task_func(x):
    if x > 1000:
        return 0
    return _honest(x)
"""


@pytest.fixture(scope="module")
def executor():
    with SandboxExecutor(workers=2, time_policy=TimePolicy(floor_s=3.0, cap_s=3.0)) as ex:
        yield ex


def _partial_feedback(executor, program: str, style: str) -> tuple[str, dict]:
    with ConvCodeWorldEnv("CF-EF_partial", dataset=[TASK], executor=executor, feedback_style=style) as env:
        env.reset(options={"task_id": TASK.task_id})
        obs, reward, *_, info = env.step(program)
    assert reward == 0.0
    return obs["execution_feedback"], info


@pytest.mark.parametrize("style", ["reference", "corrected", "rich"])
@pytest.mark.parametrize("program", [REMEMBERS, HANGS_ON_HIDDEN, DIES_ON_HIDDEN], ids=["remembers", "hangs", "dies"])
def test_no_hidden_test_reaches_partial_feedback(executor, program, style):
    text, info = _partial_feedback(executor, program, style)
    baseline, _ = _partial_feedback(executor, REMEMBERS if program is REMEMBERS else WRONG_ON_HIDDEN, style)
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} of a hidden test reached the feedback:\n{text}"
    assert "seen so far: [3, 2, 1]" in text, text  # the public failure is shown, with only public inputs in it
    # the programs differ in their lines (rich shows them): compare what the blocks say beside them
    same = ["\n".join(line for line in re.sub(r"line \d+", "line N", t).split("\n") if not line.startswith("    "))
            for t in (text, baseline)]
    assert same[0] == same[1], f"what the program did on hidden inputs changed the public feedback:\n{text}\n---\n{baseline}"
    outcomes = {t["name"]: t["outcome"] for t in info["tests"]}
    assert outcomes["test_z_public"] == "error" and outcomes["test_x_public"] == "passed", outcomes
    if program is not REMEMBERS:  # the reward still sees every test
        assert outcomes["test_a_hidden"] != "passed", outcomes


def test_public_tests_run_before_hidden_ones_in_every_executor(executor):
    from convcodeworld_gym.sandbox.backends.local import LocalExecutor

    order_probe = """
CALLS = []
def task_func(x):
    CALLS.append(x)
    if len(CALLS) == 5:
        raise ValueError("order " + repr(CALLS))
    return x + 1
"""
    for ex in (executor, LocalExecutor()):
        result = ex.run(TASK, order_probe)
        last = next(t for t in result.tests if t.outcome.value == "error")
        # unittest's order within each group: public x, y, z (inputs 3, 2, 1), then hidden a, b
        assert "order [3, 2, 1, 77123457, 88654321]" in last.traceback, (type(ex).__name__, last.traceback)
        assert last.name == "test_b_hidden"
