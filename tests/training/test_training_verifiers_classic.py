"""The verifiers environment through verifiers' classic API (verifiers <= 0.3; tested with 0.3.1): classic ``vf-eval``
imports the module ``convcodeworld`` and calls its ``load_environment(**env_args)``, and plays the classic
``vf.MultiTurnEnv`` it returns (integrations/verifiers/convcodeworld/classic.py).

``vf-eval`` runs as a subprocess (its env server in worker processes, as by default), the coder is the scripted
OpenAI-compatible server on 127.0.0.1, and every program is judged by the confined sandbox; the rewards it saved are
checked against a replay of the same replies in a fresh gym env, here, in both variants (fenced programs, and
``submit_program`` tool calls).

These need verifiers 0.3.1 and the environment installed: ``pip install -e '.[test]' 'verifiers==0.3.1' -e
integrations/verifiers``; CI runs them in a venv of their own (``.ci/run``). test_training_verifiers.py tests the v1 door (verifiers 0.4).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

INSTALL = "pip install -e '.[test]' 'verifiers==0.3.1' -e integrations/verifiers"
convcodeworld = pytest.importorskip("convcodeworld", reason=f"the classic verifiers tests need: {INSTALL}")
if not convcodeworld.CLASSIC_API:
    pytest.skip("verifiers' v1 API is installed (0.4): test_training_verifiers.py tests that door",
                allow_module_level=True)

import convcodeworld_gym  # noqa: E402,F401 - registers the ids
from convcodeworld_gym.policies.prompts import refinement_prompt  # noqa: E402
from convcodeworld_gym.tasks import Task  # noqa: E402
from convcodeworld_gym.testing import ScriptedOpenAIServer  # noqa: E402
from convcodeworld_gym.training.tools import tool_answer  # noqa: E402

pytestmark = pytest.mark.verifiers
ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SIMULATOR_VARS = ("CONVCODEWORLD_SIMULATOR_MODEL", "CONVCODEWORLD_SIMULATOR_BASE_URL", "CONVCODEWORLD_SIMULATOR_API_KEY")


def _example():
    spec = importlib.util.spec_from_file_location("verifiers_rollouts", ROOT / "training" / "verifiers_rollouts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


EXAMPLE = _example()


def _passes_at_turn_1(task: Task) -> bool:
    return int(task.task_id.split("/")[1]) % 2 == 0  # HumanEval/0, 2 pass after one feedback turn; 1, 3 never


def _program(task: Task, turn: int) -> str:
    return task.ground_truth if turn >= 1 and _passes_at_turn_1(task) else EXAMPLE.wrong_program(task)


def _classic_vf_eval(server: ScriptedOpenAIServer, out: Path, env_args: dict, n: int) -> list[dict]:
    """Classic vf-eval on ``convcodeworld`` with ``env_args`` against ``server``, ``n`` examples, the episodes' state
    saved (``-C convcodeworld``); its rows, by task id."""
    cmd = [str(BIN / "vf-eval"), "convcodeworld", "-a", json.dumps(env_args), "-m", "scripted", "-b", server.base_url,
           "-k", EXAMPLE.API_KEY_VAR, "-n", str(n), "-r", "1", "-s", "-C", "convcodeworld", "-o", str(out), "-d"]
    env = {k: v for k, v in os.environ.items() if k not in SIMULATOR_VARS}
    done = subprocess.run(cmd, env={**env, EXAMPLE.API_KEY_VAR: "scripted-key"}, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    (results,) = out.glob("evals/*/*/results.jsonl")
    rows = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    return sorted(rows, key=lambda row: json.loads(row["info"]["convcodeworld"])["task_id"])


@pytest.mark.parametrize("tools", [False, True], ids=["chat", "tools"])
def test_classic_vf_eval_loads_load_environment_and_records_the_envs_rewards(tmp_path, humaneval, executor, tools):
    gym_id, max_turns, n = "ConvCodeWorld-CF-EF_full-SNF-v0", 1, 4
    tasks = humaneval.subset(limit=n)
    coder = (EXAMPLE.scripted_tool_coder if tools else EXAMPLE.scripted_coder)(tasks, _program)
    env_args = {"feedback": gym_id, "dataset": "humaneval", "limit": n, "max_turns": max_turns, "tools": tools}
    with ScriptedOpenAIServer(coder) as server:
        rows = _classic_vf_eval(server, tmp_path, env_args, n)
    assert [json.loads(row["info"]["convcodeworld"])["task_id"] for row in rows] == [t.task_id for t in tasks]

    replay = gym.make(gym_id, dataset=humaneval, executor=executor, max_turns=max_turns)
    for row, task in zip(rows, tasks):
        assert not row["error"], row["error"]
        replay.reset(options={"task_id": task.task_id})
        rewards, shown = [], []
        for turn in range(max_turns + 1):
            program = _program(task, turn)
            obs, reward, terminated, truncated, info = replay.step(program if tools else EXAMPLE.fenced(program))
            rewards.append(reward)
            if terminated or truncated:
                break
            shown.append(tool_answer(obs, info, terminated=False, left=max_turns + 1 - len(rewards)) if tools
                         else refinement_prompt(obs))
        expected = 1.0 if _passes_at_turn_1(task) else 0.0
        assert [step["reward"] for step in row["convcodeworld"]["steps"]] == rewards, task.task_id
        assert row["reward"] == row["env_reward"] == sum(rewards) == expected, (task.task_id, row["reward"])
        assert row["programs"] == len(rewards)
        roles = [m["role"] for m in row["completion"]]
        assert roles == ["assistant", "tool" if tools else "user"] * len(shown) + ["assistant"], roles
        assert [m["content"] for m in row["completion"] if m["role"] != "assistant"] == shown, task.task_id
    replay.close()


def test_a_task_set_that_cannot_load_fails_at_load_in_one_line(monkeypatch):
    monkeypatch.delenv("CONVCODEWORLD_BIGCODEBENCH_PATH", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # a hub that refuses connections
    with pytest.raises(convcodeworld.DatasetUnavailable) as caught:
        convcodeworld.load_environment()
    line = str(caught.value)
    assert "\n" not in line and "'bigcodebench' cannot be loaded" in line, line
    assert "CONVCODEWORLD_BIGCODEBENCH_PATH" in line and "dataset='humaneval'" in line, line


@pytest.mark.parametrize("coder", ["honest", "test-fitter"])
def test_classic_vf_eval_records_the_canary_as_weight_0_metrics(tmp_path, humaneval, coder):
    """canary=0.5 on 3 tasks adds their 3 twins (rows after the tasks: -n 6 plays them all). The honest coder plays
    the canonical solution, which fails every twin; the test fitter hard-codes the expected values the rich feedback
    shows and passes the twins of HumanEval/0-2 after one feedback turn. The rubric's weight-0 metrics say so
    (canary_passed), and the reward of a twin stays 0.0 either way."""
    tasks = humaneval.subset(limit=3)
    script = (EXAMPLE.scripted_fitter_coder(tasks) if coder == "test-fitter"
              else EXAMPLE.scripted_coder(tasks, lambda task, turn: task.ground_truth))
    env_args = {"feedback": "CF-EF_full", "dataset": "humaneval", "limit": 3, "max_turns": 1, "feedback_style": "rich",
                "canary": 0.5}
    with ScriptedOpenAIServer(script) as server:
        rows = _classic_vf_eval(server, tmp_path, env_args, 6)
    recorded = {json.loads(row["info"]["convcodeworld"])["task_id"]: (row["reward"], row["canary"], row["canary_passed"])
                for row in rows if not row["error"]}
    fitted = 1.0 if coder == "test-fitter" else 0.0
    assert recorded == {**{t.task_id: (1.0, 0.0, 0.0) for t in tasks},
                        **{f"{t.task_id}/canary": (0.0, 1.0, fitted) for t in tasks}}, recorded
    rate = sum(r["canary_passed"] for r in rows) / sum(r["canary"] for r in rows)
    (metadata,) = tmp_path.glob("evals/*/*/metadata.json")
    averages = json.loads(metadata.read_text())["avg_metrics"]  # what vf-eval reports: the means, beside avg_reward
    assert rate == averages["canary_passed"] / averages["canary"] == fitted, averages


def test_load_environment_takes_canary_and_canary_seed():
    env = convcodeworld.load_environment(dataset="humaneval", limit=3, canary=0.25, canary_seed=1)
    expected = gym.make("ConvCodeWorld-CF-EF_full-v0", dataset="humaneval", limit=3, canary=0.25, canary_seed=1)
    assert list(env.eval_dataset["task"]) == list(expected.unwrapped.tasks.ids)
    expected.close()
    assert [f.__name__ for f in env.rubric.rubrics[0].funcs] == ["env_reward", "programs", "pass_fraction", "canary",
                                                                 "canary_passed"]
    assert env.rubric.rubrics[0].weights == [1.0, 0.0, 0.0, 0.0, 0.0]  # the canary never enters the reward
    with pytest.raises(ValueError, match=r"share must be in \[0, 1\)"):
        convcodeworld.load_environment(dataset="humaneval", canary=1.5)


@pytest.mark.parametrize(("reasoning", "reward"), [("strip", 1.0), ("keep", 0.0)])
def test_the_classic_environment_reads_a_reasoning_reply_as_its_reasoning_option_says(reasoning, reward):
    """``load_environment(reasoning=)`` reaches each episode's env: a reply with a wrong draft in its thought and the
    canonical solution as its answer is judged on the answer (``"strip"``, the default) or on the draft (``"keep"``)."""
    import asyncio

    import verifiers as vf

    from convcodeworld_gym.tasks import load_tasks
    from convcodeworld_gym.training.smoke import reasoning_reply, smoke_programs

    env = convcodeworld.load_environment(feedback="CF", dataset="humaneval", limit=1, max_turns=0, reasoning=reasoning)
    state = asyncio.run(env.setup_state({"info": env.eval_dataset[0]["info"], "trajectory_id": "t"}))
    right, wrong = smoke_programs(load_tasks("humaneval")["HumanEval/0"])
    asyncio.run(env.env_response([vf.AssistantMessage(content=reasoning_reply(wrong, right))], state))
    asyncio.run(env.close_env(state))
    assert [step["reward"] for step in state["convcodeworld"]["steps"]] == [reward]
