"""Perturbed public tests (issue 50, item 4): two public tests swap their expected values in what the feedback shows;
the reward stays on the true tests; a program that follows the shown expectation is counted beside the reward."""

from __future__ import annotations

import gymnasium as gym
import pytest

import convcodeworld_gym  # noqa: F401 - registers the ids
from convcodeworld_gym.policies.base import fenced
from convcodeworld_gym.records import turn_record
from convcodeworld_gym.runs.watch import follow_rates
from convcodeworld_gym.tasks.perturb import FollowRate, expected_values, perturbation, perturbations
from convcodeworld_gym.testing.test_fitter import TestFitterPolicy


def test_the_swap_is_of_two_public_literals_that_differ(humaneval):
    task = humaneval["HumanEval/0"]
    found = perturbation(task, "swap_public_outputs", 0)
    a, b = found.swapped
    assert {a.test, b.test} <= set(task.public_tests) and a.value != b.value
    shown = found.shown
    assert shown.task_id == task.task_id and shown.test_names == task.test_names
    # exactly the two literals changed places; the rest of the source is byte for byte the task's
    first, second = sorted(found.swapped, key=lambda e: e.start)
    assert shown.test == task.test[:first.start] + second.text + task.test[first.end:second.start] + first.text \
        + task.test[second.end:]
    # seeded: the same seed the same pair; over seeds, more than one pair
    assert perturbation(task, "swap_public_outputs", 0) is found
    assert len({perturbation(task, "swap_public_outputs", s).tests for s in range(8)}) > 1
    # HumanEval/2's second and third public tests compare abs(f(x) - c) < 1e-6: one literal to swap, no perturbation
    assert len(expected_values(humaneval["HumanEval/2"])) == 1 and perturbation(humaneval["HumanEval/2"]) is None
    with pytest.raises(ValueError, match="no perturbation"):
        perturbation(task, "shuffle_everything")


def _step(env, reply):
    obs, reward, terminated, truncated, info = env.step(reply)
    return obs, reward, info


def test_feedback_shows_the_swap_reward_stays_true_and_a_follower_is_counted(humaneval):
    """HumanEval/0 under the rich style (a bare assert shows its expected value only in its source line): the
    canonical solution is rewarded 1.0 though the feedback says two public tests fail; the test fitter, which
    hard-codes what the feedback shows, follows the swap: reward 0.0 (the true tests), followed True."""
    env = gym.make("ConvCodeWorld-CF-EF_partial-v0", dataset="humaneval", feedback_style="rich", max_turns=2,
                   perturb="swap_public_outputs", perturb_seed=0)
    task = humaneval["HumanEval/0"]
    found = perturbation(task, "swap_public_outputs", 0)
    obs, info = env.reset(options={"task_id": task.task_id})
    assert info["perturbation"] == {"kind": "swap_public_outputs", "seed": 0, "tests": list(found.tests), "followed": None}
    wrong = task.code_prompt + "    return None\n"
    obs, reward, info = _step(env, fenced(wrong))
    for expected in found.swapped:  # each swapped test's block shows the other one's expected value
        other = next(e for e in found.swapped if e is not expected)
        block = obs["execution_feedback"].split(expected.test.upper(), 1)[1].split("TEST_", 1)[0]
        assert f"== {other.text}" in block and f"== {expected.text}" not in block
    assert reward == 0.0 and info["perturbation"]["followed"] is False
    fitter = TestFitterPolicy().start(task, feedback="CF-EF_partial", seed=0)
    fitted = fitter.act(obs).text
    obs, reward, info = _step(env, fitted)
    assert info["perturbation"]["followed"] is True and reward == 0.0 and not info["passed"]
    assert info["public_pass_fraction"] == pytest.approx(1 / 3)  # the one public test it was shown truly
    row = turn_record(feedback="CF-EF_partial", reply=fitted, obs=obs, reward=reward, info=info)
    assert row.perturbation["followed"] is True and follow_rates([row]) == {"CF-EF_partial": FollowRate(1, 1)}
    env.reset(options={"task_id": task.task_id})
    obs, reward, info = _step(env, fenced(task.ground_truth))
    assert reward == 1.0 and info["passed"] and info["perturbation"]["followed"] is False
    assert "TEST_" in obs["execution_feedback"]  # the feedback still says the two swapped tests fail
    # a task without a perturbation is played as it is
    env.reset(options={"task_id": "HumanEval/2"})
    _, reward, info = _step(env, fenced(humaneval["HumanEval/2"].ground_truth))
    assert info["perturbation"] == {} and reward == 1.0
    env.close()
    with pytest.raises(ValueError, match="no perturbation"):
        gym.make("ConvCodeWorld-CF-v0", dataset="humaneval", perturb="nonsense")


def test_bigcodebench_assert_equal_shows_the_swapped_expectation(bigcodebench):
    """BigCodeBench's assertEqual says ``first != second`` in the reference style: the canonical solution's feedback
    names the swapped expected values, and it is still rewarded 1.0."""
    task = bigcodebench["BigCodeBench/8"]
    found = perturbation(task)
    env = gym.make("ConvCodeWorld-CF-EF_partial-v0", dataset="bigcodebench", task_ids=[task.task_id],
                   perturb="swap_public_outputs")
    env.reset(options={"task_id": task.task_id})
    obs, reward, info = _step(env, fenced(task.ground_truth))
    env.close()
    a, b = found.swapped
    assert reward == 1.0 and info["perturbation"]["followed"] is False
    assert f"AssertionError: {a.text} != {b.text}" in obs["execution_feedback"]
    assert f"AssertionError: {b.text} != {a.text}" in obs["execution_feedback"]
    assert len(perturbations(bigcodebench, "swap_public_outputs")) > 300


def _canonical_fails_both(executor, tasks) -> list[str]:
    """The perturbed tasks whose canonical solution passes a swapped test of the perturbed copy (the swap then
    contradicts nothing)."""
    found = list(perturbations(tasks, "swap_public_outputs").values())
    for p in found:
        executor.derive(p.task, p.shown)
    results = executor.run_many([(p.shown, p.task.ground_truth) for p in found])
    return [p.task.task_id for p, result in zip(found, results) if p.followed(result.tests)]


def test_canonical_solutions_fail_the_swapped_tests_sample(humaneval, executor):
    assert _canonical_fails_both(executor, humaneval.subset(limit=12)) == []


@pytest.mark.slow
def test_canonical_solutions_fail_the_swapped_tests_humaneval(humaneval, executor):
    assert _canonical_fails_both(executor, humaneval) == []
