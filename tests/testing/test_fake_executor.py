"""The FakeExecutor keeps the Executor contract and judges canonical and wrong programs as the sandbox does."""

from __future__ import annotations

import gymnasium as gym
import pytest

import convcodeworld_gym  # noqa: F401  (registers the ids)
from convcodeworld_gym.extract import build_program
from convcodeworld_gym.sandbox import Executor, Limits, Outcome
from convcodeworld_gym.testing import FakeExecutor
from convcodeworld_gym.testing.executor import table_rule

IDS = ["HumanEval/0", "HumanEval/2", "HumanEval/7"]


def _wrong(task) -> str:
    return build_program(task, f"{task.code_prompt.rstrip()}\n    return None\n")


def test_it_is_an_executor_and_deterministic(humaneval) -> None:
    fake = FakeExecutor()
    assert isinstance(fake, Executor)
    task = humaneval["HumanEval/0"]
    assert fake.run(task, task.ground_truth).passed and not fake.run(task, _wrong(task)).passed
    assert fake.run(task, _wrong(task)) == fake.run(task, _wrong(task))
    assert [t.name for t in fake.run(task, _wrong(task)).tests] == list(task.test_names)
    assert len(fake.calls) == 5 and fake.calls[0] == (task.task_id, task.ground_truth)


@pytest.mark.parametrize("task_id", IDS)
def test_it_agrees_with_the_sandbox_on_canonical_and_wrong_programs(task_id, humaneval, executor) -> None:
    task = humaneval[task_id]
    for program in (task.ground_truth, build_program(task, task.ground_truth), _wrong(task)):
        fake, real = FakeExecutor().run(task, program), executor.run(task, program)
        assert fake.passed == real.passed
        assert [t.outcome.ok for t in fake.tests] == [t.outcome.ok for t in real.tests]


def test_a_raising_rule_is_a_failed_result_not_a_crash_of_the_caller(humaneval) -> None:
    def rule(task, program):
        raise ZeroDivisionError("boom")

    result = FakeExecutor(rule).run(humaneval["HumanEval/0"], "x = 1")
    assert not result.passed and "ZeroDivisionError: boom" in result.crash
    assert {t.outcome for t in result.tests} == {Outcome.NOT_RUN}


def test_a_test_the_rule_leaves_out_is_not_passed_and_the_size_guard_holds(humaneval) -> None:
    task = humaneval["HumanEval/0"]
    first = task.test_names[0]
    result = FakeExecutor(lambda t, p: {first: Outcome.PASSED}).run(task, "x = 1")
    assert not result.passed and result.by_name()[task.test_names[1]].outcome is Outcome.NOT_RUN
    small = FakeExecutor(limits=Limits(max_code_chars=3))
    assert not small.run(task, task.ground_truth).executed and small.calls == []


def test_the_table_and_the_env_use_it(humaneval) -> None:
    code = "def has_close_elements(numbers, threshold):\n    return True\n"
    rule = table_rule({code: {name: Outcome.PASSED if i < 3 else Outcome.FAILED for i, name in enumerate(humaneval["HumanEval/0"].test_names)}})
    env = gym.make("ConvCodeWorld-CF-EF_partial-v0", dataset="humaneval", executor=FakeExecutor(rule))
    env.reset(options={"task_id": "HumanEval/0"})
    obs, reward, terminated, _, info = env.step(code)
    assert reward == 0.0 and not terminated and obs["execution_feedback"] == "Passed all test runs"  # the 3 shown pass
    assert info["confinement"]["level"] == "none"
    env.close()
