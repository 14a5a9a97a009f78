"""What the static replay and the trainers' adapter do with a step the infrastructure lost (``infra_error``): no
reward of 0 ever stands for it. The executor's verdicts come from the fake (:class:`FakeExecutor` with ``lost=``),
which returns a lost result as the sandbox does after a lost retry (the sandbox side is proved with real kills in
``tests/sandbox/host/test_infra_loss.py``); here only what is built on the result is checked.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import convcodeworld_gym  # noqa: F401 - registers the ids
from convcodeworld_gym import RecordEpisodes, StaticReplay
from convcodeworld_gym.env import ConvCodeWorldEnv
from convcodeworld_gym.errors import InfrastructureError
from convcodeworld_gym.tasks import Task
from convcodeworld_gym.testing import FakeExecutor
from convcodeworld_gym.training.choice import CandidateChoiceEnv

TASK = "HumanEval/2"


def wrong(task: Task) -> str:
    return f"{task.code_prompt.rstrip()}\n    pass\n"


def losing(times: int, which: Callable[[str], bool] = lambda program: True) -> Callable[[Task, str], str | None]:
    """A ``lost=`` rule: the first ``times`` runs of programs ``which`` picks are lost."""
    left = [times]

    def lost(task: Task, program: str) -> str | None:
        if which(program) and left[0] > 0:
            left[0] -= 1
            return "the sandbox worker was killed by signal SIGKILL; the worker was replaced"
        return None

    return lost


@pytest.fixture
def reference_log(tmp_path, humaneval):
    """The reference fails TASK at turns 0 and 1 (max_turns 2)."""
    live = RecordEpisodes(ConvCodeWorldEnv("CF-EF_full", dataset=humaneval, executor=FakeExecutor(), max_turns=1), tmp_path)
    live.reset(options={"task_id": TASK})
    live.step(wrong(live.unwrapped.task))
    live.step(wrong(live.unwrapped.task))
    live.close()
    return tmp_path


def test_a_static_step_lost_ends_the_episode_with_infra_error(reference_log, humaneval):
    env = StaticReplay("CF-EF_full", reference_log, humaneval, executor=FakeExecutor(lost=losing(1)), max_turns=2)
    env.reset(options={"task_id": TASK})
    _, reward, terminated, truncated, info = env.step(humaneval[TASK].ground_truth)
    assert (reward, terminated, truncated, info["episode_end"], info["passed"]) == (0.0, False, True, "infra_error", False)
    assert "SIGKILL" in info["infra_error"]
    env.reset(options={"task_id": TASK})
    _, reward, terminated, _, info = env.step(humaneval[TASK].ground_truth)
    assert (reward, terminated, info["infra_error"]) == (1.0, True, None)
    env.close()


def test_a_bandit_score_of_a_lost_run_raises_instead_of_scoring_0(reference_log, humaneval):
    env = StaticReplay("CF-EF_full", reference_log, humaneval, executor=FakeExecutor(lost=losing(1)), max_turns=2)
    first = next(env.rounds())
    with pytest.raises(InfrastructureError, match="lost to the infrastructure") as caught:
        env.score(first, humaneval[TASK].ground_truth)
    assert caught.value.task_id == TASK and "SIGKILL" in caught.value.reason
    assert env.score(first, humaneval[TASK].ground_truth) == 1.0
    env.close()


class _Fixed:
    """Candidates: always the same ``k`` replies (the first wrong, the second correct)."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = replies

    def candidates(self, task, observation, previous_code, k, rng):
        return list(self.replies)


def _choice_env(humaneval, executor) -> CandidateChoiceEnv:
    task = humaneval[TASK]
    live = ConvCodeWorldEnv("CF-EF_full", dataset=humaneval.subset(task_ids=[TASK]), executor=executor, max_turns=3)
    return CandidateChoiceEnv(live, _Fixed([wrong(task), task.ground_truth]), k=2)


def test_the_choice_env_takes_a_lost_step_again_so_no_0_is_learned(humaneval):
    truth = humaneval[TASK].ground_truth
    executor = FakeExecutor(lost=losing(1, lambda program: "pass" not in program))  # the correct one's first run
    env = _choice_env(humaneval, executor)
    env.reset(seed=0)
    _, reward, terminated, truncated, info = env.step(0)  # wrong: a real 0
    assert (reward, terminated, truncated, info["infra_error"]) == (0.0, False, False, None)
    obs, reward, terminated, truncated, info = env.step(1)  # correct: lost, taken again after the wrong one
    assert (reward, terminated, info["infra_error"], info["turn"]) == (1.0, True, None, 1)
    assert "SIGKILL" in info["step_replayed"] and isinstance(obs, np.ndarray)
    programs = [program for _, program in executor.calls]
    assert len(programs) == 4 and truth in programs[1] and truth in programs[3] and "pass" in programs[2]
    env.close()


def test_the_choice_env_raises_when_a_step_is_lost_again(humaneval):
    env = _choice_env(humaneval, FakeExecutor(lost=losing(2)))
    env.reset(seed=0)
    with pytest.raises(InfrastructureError, match="was lost too"):
        env.step(1)
    env.close()
