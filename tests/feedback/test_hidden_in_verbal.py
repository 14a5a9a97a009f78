"""Issue 48, item 3: a simulated user never states a hidden test.

Under partial execution feedback (and without EF, where every test is hidden) the words of the offline expert hold no
literal of a hidden test and no line of the canonical solution, on every HumanEval and BigCodeBench task, for
programs that are wrong only on hidden inputs; and whatever a provider writes (an LLM, a provider of the user's), the
env redacts every hidden test's literal from it before the model sees it.
"""

from __future__ import annotations

import unittest

import pytest

from convcodeworld_gym import ConvCodeWorldEnv
from convcodeworld_gym.combos import FeedbackConfig
from convcodeworld_gym.feedback.context import TurnContext
from convcodeworld_gym.feedback.execution import execution_feedback, visible_tests
from convcodeworld_gym.feedback.verbal import OfflineSimulator
from convcodeworld_gym.feedback.verbal.leak import REDACTED, hidden_literals, mentions, nontrivial_lines
from convcodeworld_gym.sandbox import ExecutionResult, LocalExecutor
from convcodeworld_gym.sandbox.result import Outcome, TestResult
from convcodeworld_gym.tasks import Task


class _CountingExecutor(LocalExecutor):
    """A real local executor that counts the runs asked of it (the expert's probes)."""

    def __init__(self) -> None:
        super().__init__()
        self.runs = 0

    def run(self, task, program):
        self.runs += 1
        return super().run(task, program)


def _wrong_on_hidden(task: Task) -> ExecutionResult:
    """The result of a program right on every public test and wrong on every hidden one, each hidden failure's text
    quoting the hidden test's literals (as an assertion message would)."""
    literals = hidden_literals(task, task.test_names[len(task.public_tests):])
    quoted = " != ".join(literals[:2]) or "False"
    tests = tuple(TestResult(name, Outcome.PASSED) if name in task.public_tests else
                  TestResult(name, Outcome.FAILED, f'Traceback (most recent call last):\n  File "__test__.py", line 9, '
                             f"in {name}\nAssertionError: {quoted}\n")
                  for name in task.test_names)
    return ExecutionResult(tests=tests, executed=True)


def _context(task: Task, combo: str, result: ExecutionResult) -> TurnContext:
    config = FeedbackConfig.parse(combo)
    ef = (execution_feedback(result, config.execution, visible_tests(task, "reference"))
          if config.execution != "none" else None)
    return TurnContext(task, 1, task.code_prompt + "    return None\n", True, "No syntax errors", ef, result, config)


def _secrets(task: Task, context: TurnContext) -> list[str]:
    public = "\n".join((task.prompt, context.code, context.execution_feedback or "", task.ground_truth))
    return hidden_literals(task, context.hidden_tests, public)


def _check_every_task(tasks) -> int:
    executor = _CountingExecutor()
    expert = OfflineSimulator("expert", executor=executor)
    checked = 0
    for task in tasks:
        if len(task.test_names) <= len(task.public_tests):
            continue  # no hidden test
        result = _wrong_on_hidden(task)
        for combo in ("CF-EF_partial-SEF", "CF-SEF"):
            context = _context(task, combo, result)
            reply = expert(context)
            assert reply is not None, (task.task_id, combo)  # a failed program that compiled: the expert speaks
            told = [s for s in _secrets(task, context) if mentions(reply.text, s)]
            assert not told, (task.task_id, combo, told, reply.text)
            squashed = " ".join(reply.text.split())
            quoted = [line for line in nontrivial_lines(task.canonical_solution, task.prompt) if line in squashed]
            assert not quoted, (task.task_id, combo, quoted)
        checked += 1
    assert executor.runs == 0  # no probe ran: every failing test is hidden
    return checked


def test_the_offline_expert_tells_no_hidden_test_of_any_humaneval_task(humaneval):
    assert _check_every_task(humaneval) >= 130  # 140 of the 164 have more tests than the 3 public ones


def test_the_offline_expert_tells_no_hidden_test_of_any_bigcodebench_task(bigcodebench):
    assert _check_every_task(bigcodebench) >= 1100


def test_a_providers_words_lose_every_hidden_literal(humaneval, executor):
    """A provider that quotes the hidden tests' source (as a careless LLM user might) reaches the model redacted."""
    task = humaneval["HumanEval/0"]
    hidden = task.test_names[len(task.public_tests):]

    class Quoter:
        expertise = "expert"
        source = "quoter"

        def __call__(self, context):
            return "Look at these checks:\n" + task.test

    wrong_on_hidden = "def has_close_elements(numbers, threshold):\n    return threshold in (0.3, 0.95)"
    with ConvCodeWorldEnv("CF-EF_partial-SEF", dataset=[task], executor=executor, verbal_feedback=Quoter()) as env:
        env.reset()
        obs, reward, *_, info = env.step(wrong_on_hidden)
    assert reward == 0.0 and obs["execution_feedback"] == "Passed all test runs"
    text = obs["verbal_feedback"]
    secrets = hidden_literals(task, hidden, task.prompt + wrong_on_hidden)
    assert secrets and REDACTED in text
    assert not [s for s in secrets if mentions(text, s)], text
    assert "assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True" in text  # a public test's stays


def _calls_by_public_tests(task: Task) -> int:
    """How many times the public tests of ``task`` call its entry point (its canonical solution run in this process:
    HumanEval's trusted code)."""
    namespace: dict = {}
    exec(compile(task.ground_truth, "truth.py", "exec"), namespace)
    real, count = namespace[task.entry_point], [0]

    def counted(*args, **kwargs):
        count[0] += 1
        return real(*args, **kwargs)

    namespace[task.entry_point] = counted
    exec(compile(task.test, "tests.py", "exec"), namespace)
    cases = namespace["TestCases"]
    unittest.TestSuite(cases(name) for name in task.public_tests).run(unittest.TestResult())
    return count[0]


def _wrong_after(task: Task, calls: int) -> str:
    """The canonical solution, which answers ``None`` once it has been called ``calls`` times: right on the public
    tests (executors run them first), wrong on the hidden ones."""
    return (task.ground_truth + f"\n_ccw_real = {task.entry_point}\n_ccw_calls = [0]\n"
            f"def {task.entry_point}(*args, **kwargs):\n    _ccw_calls[0] += 1\n"
            f"    return _ccw_real(*args, **kwargs) if _ccw_calls[0] <= {calls} else None\n")


def _real_wrong_on_hidden_programs(humaneval, executor, task_ids) -> int:
    played = 0
    for task_id in task_ids:
        task = humaneval[task_id]
        if len(task.test_names) <= len(task.public_tests):
            continue
        program = _wrong_after(task, _calls_by_public_tests(task))
        for combo in ("CF-EF_partial-SEF", "CF-EF_partial-SNF", "CF-SEF"):
            with ConvCodeWorldEnv(combo, dataset=[task], executor=executor,
                                  simulator_kwargs={"backend": "offline"}) as env:
                env.reset()
                obs, reward, *_, info = env.step(program)
            outcomes = {t["name"]: t["outcome"] for t in info["tests"]}
            assert all(outcomes[name] == "passed" for name in task.public_tests), (task_id, outcomes)
            if reward == 1.0:
                break  # the hidden tests do not notice a None (they check nothing of it)
            text = obs["verbal_feedback"]
            context = TurnContext(task, 0, program, True, "", obs["execution_feedback"] or None,
                                  ExecutionResult(()), FeedbackConfig.parse(combo))
            told = [s for s in _secrets(task, context) if mentions(text, s)]
            assert not told, (task_id, combo, told, text)
            if "EF_partial" in combo:
                assert obs["execution_feedback"] == "Passed all test runs", (task_id, obs["execution_feedback"])
        played += 1
    return played


def test_real_programs_wrong_only_on_hidden_inputs_sample(humaneval, executor):
    assert _real_wrong_on_hidden_programs(humaneval, executor, [f"HumanEval/{i}" for i in range(0, 160, 8)]) >= 15


@pytest.mark.slow
def test_real_programs_wrong_only_on_hidden_inputs_every_humaneval_task(humaneval, executor):
    assert _real_wrong_on_hidden_programs(humaneval, executor, [task.task_id for task in humaneval]) >= 120
