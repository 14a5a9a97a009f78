"""Candidate choice for SB3 and contextual bandits: the candidate sources, SB3's check_env on the
wrapper, and the smoke runs of training/sb3_ppo.py and training/bandit.py (real sandbox runs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("stable_baselines3", reason="the SB3/bandit tests need the 'train' extra: pip install -e '.[train]'")
pytest.importorskip("mabwiser", reason="the bandit test needs the 'train' extra: pip install -e '.[train]'")

import convcodeworld_gym  # noqa: E402,F401 - registers the ids
from convcodeworld_gym.training.candidates import POOL, BugState, LLMCandidates, SyntheticCandidates, program  # noqa: E402
from convcodeworld_gym.training.choice import CandidateChoiceEnv  # noqa: E402
from convcodeworld_gym.extract import extract_code  # noqa: E402
from convcodeworld_gym.policies import OpenAIPolicy  # noqa: E402
from convcodeworld_gym.testing import Reply, ScriptedOpenAIServer  # noqa: E402

pytestmark = pytest.mark.train
ROOT = Path(__file__).resolve().parents[2]
PNG = b"\x89PNG\r\n\x1a\n"


def _choice_env(humaneval, executor, source, k=4, max_turns=3) -> CandidateChoiceEnv:
    live = gym.make("ConvCodeWorld-CF-EF_full-v0", dataset=humaneval.subset(limit=4), executor=executor, max_turns=max_turns)
    return CandidateChoiceEnv(live, source, k=k)


def test_sb3_check_env_passes_on_the_wrapper(humaneval, executor):
    from stable_baselines3.common.env_checker import check_env

    env = _choice_env(humaneval, executor, SyntheticCandidates())
    check_env(env, warn=True)  # raises on any violation of the Gymnasium/SB3 API
    env.close()


def test_synthetic_pool_repair_passes_and_is_deterministic(humaneval, executor):
    source = SyntheticCandidates(max_bugs=3)
    env = _choice_env(humaneval, executor, source, max_turns=4)
    first, info = env.reset(seed=7)
    again, info_again = env.reset(seed=7)
    assert np.array_equal(first, again) and info["candidates"] == info_again["candidates"]
    assert sorted(source.last_strategies) == sorted(POOL)
    # always taking the repair candidate passes within the bugs the episode started with (<= 3) + 1 turns
    total, steps, done = 0.0, 0, False
    while not done:
        obs, reward, terminated, truncated, info = env.step(source.last_strategies.index("repair"))
        total, steps, done = total + reward, steps + 1, terminated or truncated
    assert total == 1.0 and terminated and steps <= 4
    # the garbage candidate does not compile; keep resends the code judged last
    env.reset(seed=7)
    _, _, _, _, info = env.step(source.last_strategies.index("keep"))
    kept = extract_code(info["chosen"])
    _, _, _, _, info = env.step(source.last_strategies.index("keep"))
    assert extract_code(info["chosen"]) == kept
    _, _, _, _, info = env.step(source.last_strategies.index("garbage"))
    assert info["compile_ok"] is False
    env.close()


def test_program_of_a_correct_state_is_the_ground_truth(humaneval):
    task = humaneval["HumanEval/0"]
    assert program(task, BugState()) == task.ground_truth
    broken = program(task, BugState(broken=True))
    with pytest.raises(SyntaxError):
        compile(broken, "broken", "exec")


def test_llm_source_asks_for_k_samples_in_one_request(humaneval):
    task = humaneval["HumanEval/0"]
    replies = tuple(f"```python\n{task.code_prompt}    return {i}\n```" for i in range(3))
    obs = {"task": task.prompt, "code": "", "turn": 0, "compilation_feedback": "", "execution_feedback": "", "verbal_feedback": ""}
    with ScriptedOpenAIServer([Reply(choices=replies)]) as server:
        source = LLMCandidates(OpenAIPolicy("scripted", base_url=server.base_url, api_key="sk-secret", max_retries=0))
        got = source.candidates(task, obs, "", 3, np.random.default_rng(0))
        assert got == list(replies)
        (body,) = server.chat_requests
        assert body["n"] == 3 and isinstance(body["seed"], int)
        assert task.prompt.strip()[:40] in body["messages"][-1]["content"]


def test_llm_source_tops_up_when_the_endpoint_ignores_n(humaneval):
    task = humaneval["HumanEval/0"]
    obs = {"task": task.prompt, "code": "", "turn": 0, "compilation_feedback": "", "execution_feedback": "", "verbal_feedback": ""}
    with ScriptedOpenAIServer([Reply(choices=("a",)), Reply(choices=("b",)), Reply(choices=("c",))]) as server:
        source = LLMCandidates(OpenAIPolicy("scripted", base_url=server.base_url, max_retries=0), max_requests=2)
        with pytest.raises(ValueError, match="returned 2 of the k=3 candidates in 2 requests"):
            source.candidates(task, obs, "", 3, np.random.default_rng(0))
        assert [b["n"] for b in server.chat_requests] == [3, 2]


def _run(program_name: str, out: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, str(ROOT / "training" / program_name), "--smoke", "--out", str(out), *args],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return done.stdout


@pytest.mark.slow
def test_sb3_ppo_smoke_writes_numbers_and_curve(tmp_path):
    printed = _run("sb3_ppo.py", tmp_path)
    report = json.loads((tmp_path / "sb3_ppo.json").read_text())
    assert (tmp_path / "sb3_ppo.png").read_bytes()[:8] == PNG
    assert report["settings"]["timesteps"] == 128 and report["synthetic"] is True
    (seed,) = report["seeds"]
    assert len(seed["ppo_episode_rewards"]) == len(seed["random_episode_rewards"]) == 6
    assert seed["ppo_mean_episode_reward"] == pytest.approx(np.mean(seed["ppo_episode_rewards"]))
    assert all(r in (0.0, 1.0) for r in seed["ppo_episode_rewards"] + seed["random_episode_rewards"])
    steps = [t for t, _ in seed["learning_curve"]]
    assert steps == sorted(steps) and 0 < steps[-1] <= 128 and len(steps) == seed["training_episodes"] > 0
    assert report["summary"]["margin_mean"] == pytest.approx(seed["ppo_mean_episode_reward"] - seed["random_mean_episode_reward"])
    assert "mean PPO" in printed
    # PPO's training rollouts earned rewards (some chosen programs passed): the updates had a signal, which the 6
    # evaluation episodes are too few to show (docs/training.md says what the smoke proves)
    assert seed["training_mean_episode_reward"] > 0.0
    assert f"training: {seed['training_episodes']} episodes, mean reward {seed['training_mean_episode_reward']:.3f}" in printed


@pytest.mark.slow
def test_bandit_smoke_learns_better_than_random(tmp_path):
    printed = _run("bandit.py", tmp_path)
    report = json.loads((tmp_path / "bandit.json").read_text())
    assert (tmp_path / "bandit.png").read_bytes()[:8] == PNG
    summary, rounds = report["summary"], report["rounds"]
    assert summary["rounds"] == len(rounds) >= 30
    per_arm = {arm: sum(r["rewards"][arm] for r in rounds) for arm in report["arms"]}
    assert per_arm == summary["per_arm_cumulative_reward"] and per_arm["keep"] == 0.0  # the reference's own code failed
    assert summary["best_fixed_arm_cumulative_reward"] == max(per_arm.values())
    assert summary["regret_vs_best_fixed_arm_mean"] == pytest.approx(summary["best_fixed_arm_cumulative_reward"] - summary["linucb_cumulative_reward_mean"])
    # the learner beats random choice, in (nearly) every order of the rounds and on average by a wide margin
    assert summary["linucb_beats_random_in_orders"] >= 8
    assert summary["linucb_cumulative_reward_mean"] >= 1.5 * summary["random_cumulative_reward_expected"]
    assert "LinUCB" in printed


def test_replayed_state_rebuilds_the_logged_code_or_says_why(tmp_path, humaneval, executor):
    from convcodeworld_gym.training.candidates import replayed_state
    from convcodeworld_gym.runs.evaluate import EvalConfig, run_evaluation
    from convcodeworld_gym.policies import SyntheticCoder
    from convcodeworld_gym.records import group_episodes, read_turns

    coder = SyntheticCoder(0.3, max_bugs=2)
    config = EvalConfig(ids=("ConvCodeWorld-CF-EF_full-v0",), dataset="humaneval", limit=4, max_turns=2, seed=3, concurrency=1)
    run_evaluation(config, coder, tmp_path, executor=executor, progress=None, log=lambda line: None)
    episodes = group_episodes(read_turns(tmp_path))
    checked = 0
    for (_, task_id, _sample), rows in episodes.items():
        task = humaneval[task_id]
        for turn in range(len(rows)):
            state = replayed_state(coder, task, "CF-EF_full", 3, rows[:turn + 1])
            assert program(task, state).strip() == rows[turn].code.strip()
            assert state.correct == rows[turn].passed
            checked += 1
    assert checked >= 6
    (_, task_id, _), rows = next((key, rows) for key, rows in episodes.items() if not rows[0].passed)
    with pytest.raises(ValueError, match="does not rebuild the logged code; pass the strength, max_bugs and seed"):
        replayed_state(SyntheticCoder(0.3, max_bugs=2), humaneval[task_id], "CF-EF_full", 4, rows[:1])
