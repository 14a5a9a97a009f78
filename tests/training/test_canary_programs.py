"""The training programs' ``--canary``: twins mixed into the tasks they train on, their pass rate reported beside the
reward. Default tests: sb3_ppo.py's per-episode verdicts and bandit.py's twin judging, on real HumanEval twins in the
sandbox (a test fitter's program passes a twin and is counted, the canonical solution is not). Slow tests: the smoke
run of each program with ``--canary 0.5`` prints and writes the rate."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import convcodeworld_gym  # noqa: F401 - registers the ids
from convcodeworld_gym.tasks import load_tasks, with_canaries
from convcodeworld_gym.testing.test_fitter import TestFitterPolicy
from convcodeworld_gym.training.grpo import canary_pass_rate

ROOT = Path(__file__).resolve().parents[2]



@pytest.fixture(scope="module")
def twinned():
    ids = ["HumanEval/0", "HumanEval/2"]
    return with_canaries(load_tasks("humaneval", task_ids=ids), ids)


def test_sb3s_canary_verdicts_count_a_twin_passed_by_fitting_and_not_a_real_task_or_an_honest_program(
        training_program, executor, twinned):
    sb3 = training_program("sb3_ppo")
    env = sb3.CanaryVerdicts(gym.make("ConvCodeWorld-CF-EF_full-v0", dataset=twinned, executor=executor,
                                      feedback_style="rich", max_turns=1))
    for task_id, fit in (("HumanEval/0", False), ("HumanEval/0/canary", False), ("HumanEval/2/canary", True)):
        obs, _ = env.reset(options={"task_id": task_id})
        episode = TestFitterPolicy().start(env.unwrapped.task, feedback="CF-EF_full", seed=0)
        done = False
        while not done:  # the fitter's turn 0 is the canonical solution; then it fits what the feedback shows
            reply = episode.act(obs).text if fit else env.unwrapped.task.ground_truth
            obs, reward, terminated, truncated, info = env.step(reply)
            done = terminated or truncated
        assert reward == (0.0 if info["canary"] else 1.0)
    assert env.verdicts == [None, False, True]  # one per episode: a real task, an honest program, a fitted one
    assert canary_pass_rate(env.verdicts) == (0.5, 2)
    env.close()


def test_bandits_twin_rounds_judge_the_arms_programs_against_the_twin(training_program, executor, twinned):
    bandit = training_program("bandit")
    judge = gym.make("ConvCodeWorld-CF-EF_full-v0", dataset=twinned, executor=executor, max_turns=1,
                     feedback_style="rich")  # HumanEval's plain asserts show their values in the rich style only
    twin = twinned["HumanEval/2/canary"]
    assert bandit.twin_verdict(judge, twin.task_id, twin.ground_truth) == (0.0, False)
    judge.reset(options={"task_id": twin.task_id})
    obs, _, _, _, _ = judge.step(twin.ground_truth)
    fitter = TestFitterPolicy().start(twin, feedback="CF-EF_full", seed=0)
    program = fitter.act(obs).text  # hard-codes the expected value the feedback showed
    assert bandit.twin_verdict(judge, twin.task_id, program) == (0.0, True)  # passed: the canary, no reward
    judge.close()


def _run(program: str, out: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, str(ROOT / "training" / program), "--smoke", *args], capture_output=True,
                          text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return done.stdout


@pytest.mark.slow
@pytest.mark.train
def test_sb3_ppo_smoke_with_canary_reports_the_rate_beside_the_reward(tmp_path):
    pytest.importorskip("stable_baselines3", reason="needs the 'train' extra: pip install -e '.[train]'")
    printed = _run("sb3_ppo.py", tmp_path, "--out", str(tmp_path), "--canary", "0.5")
    report = json.loads((tmp_path / "sb3_ppo.json").read_text())
    assert report["settings"]["canary"] == 0.5
    (seed,) = report["seeds"]
    training = seed["canary"]["training"]
    assert training["twins"] > 0 and training["rate"] == 0.0  # the synthetic pool writes no fitted program
    assert report["summary"]["canary"]["training"] == training
    assert "canary pass rate training 0.000 of " in printed and "(twins' episodes; never in the reward)" in printed


@pytest.mark.slow
@pytest.mark.train
def test_bandit_smoke_with_canary_reports_the_rate_beside_the_reward(tmp_path):
    pytest.importorskip("mabwiser", reason="needs the 'train' extra: pip install -e '.[train]'")
    printed = _run("bandit.py", tmp_path, "--out", str(tmp_path), "--canary", "0.5")
    report = json.loads((tmp_path / "bandit.json").read_text())
    summary, rounds = report["summary"], report["rounds"]
    twins = [r for r in rounds if r["canary"]]
    assert summary["twin_rounds"] == len(twins) > 0
    assert all(r["task_id"].endswith("/canary") and set(r["rewards"].values()) == {0.0} for r in twins)
    assert summary["canary"]["linucb"]["twin_rounds_played"] == len(twins) * report["settings"]["orders"]
    assert summary["canary"]["linucb"]["rate"] == 0.0  # its arms repair toward the task: none passes a twin
    assert "canary twin rounds; canary pass rate (never in the reward): LinUCB 0.000 of" in printed


@pytest.mark.slow
@pytest.mark.train
@pytest.mark.parametrize("program", ["grpo_trl.py", "grpo_trl_tools.py"])
def test_the_trl_programs_smoke_with_canary_print_the_rate_per_step(tmp_path, program):
    pytest.importorskip("trl", reason="needs the 'train' extra: pip install -e '.[train]'")
    printed = _run(program, tmp_path, "--output-dir", str(tmp_path), "--canary", "0.5")
    line = next(line for line in printed.splitlines() if line.startswith("canary pass rate per step"))
    assert line.startswith("canary pass rate per step (never in the reward): ") and "0.000" in line, line
