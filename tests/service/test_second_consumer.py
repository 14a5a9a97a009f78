"""A second consumer plays episodes against the episode server: verifiers' own ``openenv`` taskset (``vf-eval``,
verifiers 0.4.0 with its ``openenv`` extra), which reads the server's ``/schema``, resets with the taskset's arguments
and steps the model's replies through OpenEnv's generic client, summing the rewards into ``openenv_reward``.

verifiers 0.4.0 pins mcp 2.0.0 and OpenEnv 0.10 needs mcp < 2 (through fastmcp 3), so they cannot share a venv: the
server runs from this venv (the ``openenv`` extra), ``vf-eval`` from another whose ``bin`` directory
``$CONVCODEWORLD_VERIFIERS_BIN`` names (``pip install -e . -e integrations/verifiers 'verifiers[openenv]==0.4.0'``:
OpenEnv's client 0.4.1 there, and the ``convcodeworld`` in-process chat harness for the model's turns). .ci/run sets
it; elsewhere the test skips, saying so. The model is the scripted OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import gymnasium as gym
import pytest

from server_helpers import INSTALL, wrong_program

pytest.importorskip("openenv", reason=f"the episode server's tests need the 'openenv' extra: {INSTALL}")

from convcodeworld_gym.testing import Reply, ScriptedOpenAIServer  # noqa: E402
from convcodeworld_gym.testing.episode_server import EpisodeServer  # noqa: E402

pytestmark = pytest.mark.openenv

VERIFIERS_BIN = os.environ.get("CONVCODEWORLD_VERIFIERS_BIN", "")
EPISODES = [("ConvCodeWorld-CF-EF_full-v0", "HumanEval/0"), ("ConvCodeWorld-CF-EF_partial-SNF-v0", "HumanEval/1")]


def _config(server: str, coder: str, out: Path) -> str:
    """vf-eval's config: the openenv taskset on ``server`` (one task per reset), the coder at ``coder`` through the
    in-process chat harness. (A config file: vf-eval's command line cannot name the openenv taskset's required
    ``base_url`` before it validates the taskset's defaults.)"""
    resets = ", ".join(f'{{env_id = "{gym_id}", task_id = "{task_id}"}}' for gym_id, task_id in EPISODES)
    return (f'model = "scripted"\nmax_concurrent = 2\npush = false\noutput_dir = "{out}"\n[run]\nname = "run"\n'
            f'[client]\nbase_url = "{coder}"\napi_key_var = "CODER_KEY"\n'
            f'[env.taskset]\nid = "openenv"\nbase_url = "{server}"\nresets = [{resets}]\n'
            '[env.player.harness]\nid = "convcodeworld"\n[env.player.runtime]\ntype = "subprocess"\n')


@pytest.mark.skipif(not (Path(VERIFIERS_BIN) / "vf-eval").exists(), reason=(
    "set $CONVCODEWORLD_VERIFIERS_BIN to the bin directory of a venv with verifiers[openenv]==0.4.0 and "
    "integrations/verifiers (verifiers and OpenEnv 0.10 cannot share one; .ci/run makes it)"))
def test_verifiers_openenv_taskset_plays_episodes_against_the_server(tmp_path, humaneval, executor):
    def coder(body: dict) -> Reply:  # the model: a wrong program first, then the canonical one
        observation = json.loads(body["messages"][-1]["content"])["observation"]
        task = humaneval[observation["task_id"]]
        return Reply(wrong_program(task) if observation["turn"] == 0 else f"```python\n{task.ground_truth}\n```")

    with ScriptedOpenAIServer(coder) as model, EpisodeServer(["CF-EF_full", "--dataset", "humaneval"]) as server:
        config = tmp_path / "eval.toml"
        config.write_text(_config(server.base_url, model.base_url, tmp_path / "out"))
        done = subprocess.run([str(Path(VERIFIERS_BIN) / "vf-eval"), "@", str(config), "--no-rich", "--clean"],
                              env={**os.environ, "CODER_KEY": "scripted"}, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-4000:]
        left = server.sessions()
    episodes = [json.loads(line) for line in (tmp_path / "out" / "run" / "traces.jsonl").read_text().splitlines() if line]
    assert len(episodes) == len(EPISODES) and left["active_sessions"] == 0

    for episode in episodes:
        assert episode["ok"] and not episode["errors"], episode["errors"]
        (trace,) = episode["traces"]
        assert trace["rewards"]["openenv_reward"]["score"] == 1.0  # 0.0 for the wrong program + 1.0
        turns = [(node["message"]["role"], node["message"]["content"]) for node in trace["nodes"]]
        assert [role for role, _ in turns] == ["user", "assistant", "user", "assistant"]
        first, feedback = json.loads(turns[0][1]), json.loads(turns[2][1])
        gym_id = first["observation"]["env_id"]
        task = humaneval[first["observation"]["task_id"]]
        assert (gym_id, task.task_id) in EPISODES
        assert first["action_schema"]["required"] == ["reply"]  # what made the raw reply the action
        local = gym.make(gym_id, dataset=humaneval, executor=executor)  # the same program, in-process
        local.reset(options={"task_id": task.task_id})
        obs, reward, *_ = local.step(wrong_program(task))
        local.close()
        shown = feedback["observation"]
        assert reward == 0.0 and shown["turn"] == 1
        assert {key: shown[key] for key in obs} == obs  # the id's feedback reached the consumer as the env gives it
