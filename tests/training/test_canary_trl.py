"""The canary through TRL's ``rollout_func`` door: a batch with canary twins in it (``with_canaries(..., replace=True)``:
TRL tells a task by its prompt, so a twin takes its task's place) forwards ``canary_passed``, and ``env_reward`` logs the
twins' pass rate beside the reward with TRL's ``log_metric``, never in it (a tiny random model on CPU, no download)."""

from __future__ import annotations

import gymnasium as gym
import pytest

from convcodeworld_gym.tasks import is_canary, with_canaries
from convcodeworld_gym.training.grpo import env_reward, grpo_rows, make_rollout_func

pytest.importorskip("trl", reason="the TRL test needs the 'train' extra: pip install -e '.[train]'")
pytestmark = pytest.mark.train


class _Trainer:
    """What a rollout_func reads of TRL's trainer: the model, its tokenizer, GRPOConfig's sampling settings (no vLLM)."""

    use_vllm = False
    temperature, top_p, top_k, min_p, repetition_penalty = 1.0, 1.0, 0, None, 1.0

    def __init__(self, model, tokenizer) -> None:
        self.model, self.processing_class = model, tokenizer


def test_a_batch_with_canary_twins_forwards_their_verdicts_and_the_reward_function_logs_their_rate(humaneval, executor):
    from convcodeworld_gym.testing.tiny_model import tiny_model

    tasks = with_canaries(humaneval.subset(task_ids=["HumanEval/0", "HumanEval/2"]), ["HumanEval/2"], replace=True)
    assert [is_canary(t) for t in tasks] == [False, True]
    model, tokenizer = tiny_model(0)
    rollout = make_rollout_func(lambda: gym.make("ConvCodeWorld-CF-EF_full-v0", dataset=tasks, max_turns=0,
                                                 executor=executor), grpo_rows(tasks), turns=1, max_new_tokens=4)
    out = rollout([t.prompt for t in tasks], _Trainer(model, tokenizer))
    assert out["canary_passed"] == [None, False]  # a random model passes nothing: the twin's verdict is False
    logged: dict[str, float] = {}
    rewards = env_reward([], [], out["env_reward"], canary_passed=out["canary_passed"], log_metric=logged.__setitem__)
    assert rewards == out["env_reward"] == [0.0, 0.0]
    assert logged == {"canary/pass_rate": 0.0, "canary/episodes": 1}
    logged.clear()
    env_reward([], [], [1.0], canary_passed=[None], log_metric=logged.__setitem__)
    assert logged == {}  # no twin in the batch: nothing logged


def test_a_batch_on_perturbed_tasks_forwards_each_programs_following_and_the_reward_function_logs_the_rate(humaneval, executor):
    """``perturb=swap_public_outputs`` envs under the rich style: a scripted test fitter (it hard-codes what the
    feedback shows) follows the swap at its second turn, the canonical solution never does; the rollout forwards each
    program's verdict, and ``env_reward`` logs the rate beside the reward, which stays the true tests' (issue 50)."""
    from convcodeworld_gym.testing.test_fitter import TestFitterPolicy
    from convcodeworld_gym.testing.tiny_model import tiny_model

    tasks = humaneval.subset(task_ids=["HumanEval/0"])
    task = tasks["HumanEval/0"]

    def scripts(task, place):
        if place == 0:  # a wrong program, then what the feedback shows, hard-coded
            fitter = TestFitterPolicy().start(task, feedback="CF-EF_partial", seed=0)
            return lambda obs: (f"```python\n{task.code_prompt}    return None\n```" if obs.get("turn", 0) == 0
                                else fitter.act(obs).text)
        return lambda obs: f"```python\n{task.ground_truth}\n```"

    model, tokenizer = tiny_model(0)
    rollout = make_rollout_func(
        lambda: gym.make("ConvCodeWorld-CF-EF_partial-v0", dataset=tasks, max_turns=1, executor=executor,
                         feedback_style="rich", perturb="swap_public_outputs", perturb_seed=0),
        grpo_rows(tasks), turns=2, max_new_tokens=4, scripts=scripts)
    out = rollout([task.prompt, task.prompt], _Trainer(model, tokenizer))
    assert out["perturbation_followed"] == [[False, True], [False]]  # the canonical solution passes at once
    assert out["env_reward"] == [0.0, 1.0]  # following the swap fails the true tests
    logged: dict[str, float] = {}
    env_reward([], [], out["env_reward"], canary_passed=out["canary_passed"],
               perturbation_followed=out["perturbation_followed"], log_metric=logged.__setitem__)
    assert logged == {"perturbation/follow_rate": 1 / 3, "perturbation/programs": 3}
