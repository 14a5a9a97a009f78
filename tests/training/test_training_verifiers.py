"""The verifiers environment (integrations/verifiers, module ``convcodeworld``) through verifiers' own CLIs.

``vf-validate`` and ``vf-eval`` run as subprocesses, the coder is the scripted OpenAI-compatible server on 127.0.0.1
(a real socket, the chat API), and every program is judged by the confined sandbox; the env's rewards are checked
against a replay of the same replies in a fresh gym env, here. Runs lost to the infrastructure come from the
project's fake executor, with verifiers' eval runner in this process (see that test).

These need the ``verifiers`` extra and the environment installed (Python >= 3.11):
``pip install -e '.[verifiers]' -e integrations/verifiers``; CI runs them in a venv of their own (``.ci/run``).
They test the v1 door (verifiers 0.4); test_training_verifiers_classic.py tests the classic one (verifiers 0.3).
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

INSTALL = "pip install -e '.[verifiers]' -e integrations/verifiers"
pytest.importorskip("verifiers.v1", reason=f"the verifiers tests need the 'verifiers' extra: {INSTALL}")
convcodeworld = pytest.importorskip("convcodeworld", reason=f"the verifiers tests need the environment module 'convcodeworld': {INSTALL}")
if convcodeworld.CLASSIC_API:
    pytest.skip("verifiers' classic API is installed (<= 0.3): test_training_verifiers_classic.py tests that door",
                allow_module_level=True)

import convcodeworld_gym  # noqa: E402,F401 - registers the ids
from convcodeworld_gym.policies.prompts import refinement_prompt  # noqa: E402
from convcodeworld_gym.tasks import Task, load_tasks  # noqa: E402
from convcodeworld_gym.testing import ScriptedOpenAIServer  # noqa: E402
from convcodeworld_gym.training.tools import SUBMIT_PROGRAM_TOOL, tool_answer  # noqa: E402

pytestmark = pytest.mark.verifiers
ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
#: The simulated user must be the offline one here (no endpoint), in vf-eval as in the replay.
SIMULATOR_VARS = ("CONVCODEWORLD_SIMULATOR_MODEL", "CONVCODEWORLD_SIMULATOR_BASE_URL", "CONVCODEWORLD_SIMULATOR_API_KEY")


def _example():
    """training/verifiers_rollouts.py, the example program: its vf-eval command, scripted coder and trace reader."""
    spec = importlib.util.spec_from_file_location("verifiers_rollouts", ROOT / "training" / "verifiers_rollouts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


EXAMPLE = _example()


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SIMULATOR_VARS}
    env[EXAMPLE.API_KEY_VAR] = "scripted-key"
    return env


def _vf_eval(server: ScriptedOpenAIServer, out: Path, *, gym_id: str, limit: int, max_turns: int,
             extra: tuple[str, ...] = ()) -> list[dict]:
    """Run vf-eval on the first ``limit`` HumanEval tasks against ``server``; the episodes it wrote, by task id."""
    cmd = EXAMPLE.vf_eval_command(gym_id=gym_id, dataset="humaneval", limit=limit, max_turns=max_turns, model="scripted",
                                  base_url=server.base_url, out=out, run_name="run", extra=extra)
    done = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return sorted(EXAMPLE.read_episodes(out / "run"), key=lambda e: e["task"]["data"]["task_id"])


def _vf_validate(dataset: str, limit: int, out: Path) -> tuple[dict, list[dict]]:
    cmd = [str(BIN / "vf-validate"), "convcodeworld", "--taskset.dataset", dataset, "-n", str(limit),
           "--runtime.type", "subprocess", "--no-rich", "-o", str(out), "--run.name", "validate"]
    done = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    run = out / "validate"
    rows = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines() if line.strip()]
    return json.loads((run / "summary.json").read_text()), rows


def test_vf_validate_runs_the_canonical_solutions_of_5_tasks(tmp_path):
    summary, rows = _vf_validate("humaneval", 5, tmp_path)
    assert summary["outcomes"]["valid"] == 5 and summary["valid_rate"] == 1.0, summary
    assert summary["checks"]["gold"]["valid"] == 5, summary  # the canonical solution passes in the sandbox
    assert summary["checks"]["noop"]["valid"] == 5, summary  # no program, no reward
    assert sorted(row["name"] for row in rows) == [f"HumanEval/{i}" for i in range(5)]
    assert all(row["noop"]["rewards"] == {"env_reward": 0.0} for row in rows), rows


def test_vf_validate_says_invalid_when_a_canonical_solution_fails(tmp_path):
    header = "import unittest\nclass TestCases(unittest.TestCase):\n    def test_one(self):\n"
    records = [
        {"task_id": "demo/ok", "instruct_prompt": "Return x + 1.", "code_prompt": "def task_func(x):\n",
         "canonical_solution": "    return x + 1\n", "test": header + "        self.assertEqual(task_func(1), 2)\n",
         "entry_point": "task_func"},
        {"task_id": "demo/broken", "instruct_prompt": "Return x + 1.", "code_prompt": "def task_func(x):\n",
         "canonical_solution": "    return x - 1\n", "test": header + "        self.assertEqual(task_func(1), 2)\n",
         "entry_point": "task_func"},
    ]
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    summary, rows = _vf_validate(str(path), 2, tmp_path / "out")
    gold = {row["name"]: row["gold"]["reason"] for row in rows}
    assert gold == {"demo/ok": "valid", "demo/broken": "invalid"}, rows
    assert summary["outcomes"]["invalid"] == 1, summary


def _passes_at_turn_1(task: Task) -> bool:
    return int(task.task_id.split("/")[1]) % 2 == 0  # HumanEval/0, 2, 4 pass after one feedback turn; 1, 3 never


def _program(task: Task, turn: int) -> str:
    return task.ground_truth if turn >= 1 and _passes_at_turn_1(task) else EXAMPLE.wrong_program(task)


def _messages(trace: dict) -> list[tuple[str, str]]:
    return [(node["message"]["role"], node["message"]["content"]) for node in trace["nodes"]]


def test_vf_eval_of_5_tasks_records_the_envs_rewards_and_shows_its_feedback(tmp_path, humaneval, executor):
    """One id with all three kinds of feedback; each episode replayed here, reply for reply, in a fresh env."""
    gym_id, max_turns = "ConvCodeWorld-CF-EF_partial-SEF-v0", 1
    tasks = humaneval.subset(limit=5)
    with ScriptedOpenAIServer(EXAMPLE.scripted_coder(tasks, _program)) as server:
        episodes = _vf_eval(server, tmp_path, gym_id=gym_id, limit=5, max_turns=max_turns)
    assert [e["task"]["data"]["task_id"] for e in episodes] == [t.task_id for t in tasks]

    replay = gym.make(gym_id, dataset=humaneval, executor=executor, max_turns=max_turns)
    for episode, task in zip(episodes, tasks):
        assert episode["ok"] and not episode["errors"], episode["errors"]
        (trace,) = episode["traces"]
        recorded = trace["info"]["convcodeworld"]
        assert (recorded["gym_id"], recorded["task_id"]) == (gym_id, task.task_id)

        obs, _ = replay.reset(options={"task_id": task.task_id})
        rewards, prompts = [], []
        for turn in range(max_turns + 1):
            obs, reward, terminated, truncated, info = replay.step(EXAMPLE.fenced(_program(task, turn)))
            rewards.append(reward)
            if terminated or truncated:
                break
            prompts.append(refinement_prompt(obs))  # what the id shows the coder after this program
        expected = 1.0 if _passes_at_turn_1(task) else 0.0
        assert sum(rewards) == expected

        # The rewards the rollout recorded are the env's, step by step and in sum.
        assert [step["reward"] for step in recorded["steps"]] == rewards, (task.task_id, recorded["steps"])
        assert trace["rewards"]["env_reward"]["score"] == sum(rewards) == expected, (task.task_id, trace["rewards"])
        assert trace["metrics"]["programs"] == len(rewards)
        # The conversation: the task, then each program and the feedback the env showed on it.
        roles = [role for role, _ in _messages(trace)]
        assert roles == ["system", "user"] + ["assistant", "user"] * len(prompts) + ["assistant"], roles
        feedback = [text for role, text in _messages(trace)[3::2]]
        assert feedback == prompts, task.task_id
        replies = [text for role, text in _messages(trace) if role == "assistant"]
        assert replies == [EXAMPLE.fenced(_program(task, turn)) for turn in range(len(rewards))]
        assert all("Execution feedback" in text and "User feedback" in text for text in prompts)
    replay.close()


def _losing(times: int):
    """A ``FakeExecutor(lost=...)`` rule: the first ``times`` runs are lost (each, as the sandbox reports a run lost
    also on its own retry: its worker killed twice)."""
    left = [times]

    def lost(task: Task, program: str) -> str | None:
        if left[0] > 0:
            left[0] -= 1
            return "the sandbox worker was killed by signal SIGKILL; the worker was replaced"
        return None

    return lost


@pytest.mark.parametrize(("lost_runs", "ok", "reward"), [(1, True, 1.0), (2, False, None)],
                         ids=["lost-once-played-again", "lost-twice-no-reward"])
def test_a_run_the_sandbox_lost_is_never_scored_0(tmp_path, humaneval, monkeypatch, lost_runs, ok, reward):
    """The coder answers the canonical solution; its run is lost (``info["infra_error"]``). The rollout fails with
    InfraError instead of recording a 0, and the episode is played again once: its replay scores 1.0, or, lost
    again, the episode stays failed with no reward at all.

    verifiers' own eval runner runs in this process (what ``vf-eval`` runs, with the same config) so that the
    process's shared executor can be the fake that loses runs (:class:`FakeExecutor`, as the project's other
    infra-loss tests above the sandbox; ``tests/sandbox/host/test_infra_loss.py`` proves the sandbox side with real kills).
    """
    import asyncio

    from verifiers.v1.cli.eval.runner import run_eval
    from verifiers.v1.configs.cli.eval import EvalConfig

    from convcodeworld_gym.testing import FakeExecutor
    from convcodeworld_gym.training import shared

    fake = FakeExecutor(lost=_losing(lost_runs))
    monkeypatch.setitem(shared._shared, (os.getpid(), None), fake)  # the process's shared executor, for runtime None
    monkeypatch.setenv(EXAMPLE.API_KEY_VAR, "scripted-key")
    task = humaneval[0]
    with ScriptedOpenAIServer(EXAMPLE.scripted_coder([task], lambda t, turn: t.ground_truth)) as server:
        config = EvalConfig.model_validate({
            "env": {"taskset": {"id": "convcodeworld", "dataset": "humaneval", "limit": 1, "max_turns": 1}},
            "model": "scripted", "client": {"base_url": server.base_url, "api_key_var": EXAMPLE.API_KEY_VAR},
            "push": False, "rich": None, "output_dir": str(tmp_path), "run": {"name": "run"},
        })
        (episode,) = asyncio.run(run_eval(config))
    assert episode.ok is ok, episode.errors
    assert {error.type for error in episode.errors} == {"InfraError"}, episode.errors  # each lost attempt says why
    (trace,) = episode.traces  # the last attempt's
    if reward is None:
        assert not trace.ok and trace.stop_condition == "infra_error", trace.stop_condition
        assert "env_reward" not in trace.rewards, trace.rewards  # no reward at all, not 0.0
        assert trace.info["convcodeworld"]["steps"] == []  # the lost step is not recorded as a verdict
    else:
        assert trace.ok and trace.rewards["env_reward"].score == reward
        assert [step["reward"] for step in trace.info["convcodeworld"]["steps"]] == [reward]
    assert len(fake.calls) == 2, fake.calls  # the lost run, then the replay's (lost again or not)
    # What vf-eval writes is what the runner returned.
    (written,) = EXAMPLE.read_episodes(tmp_path / "run")
    assert written["ok"] is ok and (written["traces"][0]["rewards"].get("env_reward") or {}).get("score") == reward


@pytest.mark.parametrize("variant", [[], ["--tools"]], ids=["chat", "tools"])
def test_the_example_programs_smoke_run(tmp_path, variant):
    done = subprocess.run([sys.executable, str(ROOT / "training" / "verifiers_rollouts.py"), "--smoke", "--out", str(tmp_path),
                           *variant], env=_env(), capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    summary = json.loads((tmp_path / "convcodeworld-summary.json").read_text())
    assert (summary["completed"], summary["failed"], summary["mean_env_reward"]) == (5, 0, 1.0), summary
    assert all(row["step_rewards"] == [0.0, 1.0] for row in summary["episodes"]), summary
    assert "mean env_reward over 5 completed episodes: 1.0" in done.stdout


def test_load_environment_builds_the_env_vf_eval_runs(humaneval):
    """The classic entry, as loaders of that API call it (import the module by the environment's id, call its
    load_environment with the run's arguments): the v1 env vf-eval builds from the same --env.taskset.* values."""
    import importlib

    import verifiers.v1 as vf

    env_args = {"feedback": "CF-EF_partial", "dataset": "humaneval", "limit": 2, "max_turns": 1, "tools": True}
    env = importlib.import_module("convcodeworld").load_environment(**env_args)
    cli = vf.resolve_env_config({"taskset": {"id": "convcodeworld", "gym_id": "ConvCodeWorld-CF-EF_partial-v0",
                                             "dataset": "humaneval", "limit": 2, "max_turns": 1, "tools": True}})
    assert isinstance(env, convcodeworld.ConvCodeWorldLoop) and env.config == cli
    tasks = list(env.taskset)
    assert [t.data.task_id for t in tasks] == ["HumanEval/0", "HumanEval/1"]
    assert all(t.data.tools == [SUBMIT_PROGRAM_TOOL] and t.data.prompt == humaneval[t.data.task_id].prompt.strip()
               for t in tasks)
    same = convcodeworld.load_environment(gym_id="ConvCodeWorld-CF-EF_partial-v0", dataset="humaneval", limit=2,
                                          max_turns=1, tools=True)
    assert same.config == env.config  # feedback= and gym_id= are one setting
    with pytest.raises(TypeError, match=r"unknown keyword\(s\) datset; it takes feedback, gym_id, dataset"):
        convcodeworld.load_environment(datset="humaneval")
    with pytest.raises(ValueError, match="'CF-XF' is no feedback combination"):
        convcodeworld.load_environment(feedback="CF-XF", dataset="humaneval")


def _offline(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """No local BigCodeBench and a hub that refuses connections (a closed port here): the default task set cannot load."""
    monkeypatch.delenv("CONVCODEWORLD_BIGCODEBENCH_PATH", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    return {**_env(), "HF_ENDPOINT": "http://127.0.0.1:9"}


def _says_the_fix(line: str) -> None:
    assert "'bigcodebench' cannot be loaded" in line and "CONVCODEWORLD_BIGCODEBENCH_PATH" in line, line
    assert "dataset='humaneval'" in line and "--env.taskset.dataset humaneval" in line, line


def test_a_task_set_that_cannot_load_fails_at_load_in_one_line(tmp_path, monkeypatch):
    env = _offline(monkeypatch)
    with pytest.raises(convcodeworld.DatasetUnavailable) as caught:
        convcodeworld.load_environment()
    assert "\n" not in str(caught.value)
    _says_the_fix(str(caught.value))
    cmd = [str(BIN / "vf-eval"), "convcodeworld", "-m", "scripted", "--client.base-url", "http://127.0.0.1:9/v1",
           "--client.api-key-var", EXAMPLE.API_KEY_VAR, "--no-push", "--no-rich", "-o", str(tmp_path), "--run.name", "r"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    (line,) = done.stderr.strip().splitlines()  # one line: no traceback wall
    _says_the_fix(line)


def test_vf_eval_of_the_tool_variant_records_the_envs_rewards_and_answers_with_its_feedback(tmp_path, humaneval,
                                                                                             executor):
    """--env.taskset.tools true: the coder calls submit_program (wrong, then the canonical solution on HumanEval/0, 2,
    4); each program is stepped as it is, and the tool's answer is the feedback the env gave, in TRL's tool door's
    words. A replay of the same programs in a fresh env gives the same rewards and answers."""
    gym_id, max_turns = "ConvCodeWorld-CF-EF_full-v0", 1
    tasks = humaneval.subset(limit=5)
    with ScriptedOpenAIServer(EXAMPLE.scripted_tool_coder(tasks, _program)) as server:
        episodes = _vf_eval(server, tmp_path, gym_id=gym_id, limit=5, max_turns=max_turns,
                            extra=("--env.taskset.tools", "true"))
        requests = server.chat_requests
    assert requests and all(body["tools"][0]["function"] == SUBMIT_PROGRAM_TOOL["function"] for body in requests)
    replay = gym.make(gym_id, dataset=humaneval, executor=executor, max_turns=max_turns)
    for episode, task in zip(episodes, tasks):
        assert episode["ok"] and not episode["errors"], episode["errors"]
        (trace,) = episode["traces"]
        replay.reset(options={"task_id": task.task_id})
        rewards, answers = [], []
        for turn in range(max_turns + 1):
            obs, reward, terminated, truncated, info = replay.step(_program(task, turn))
            rewards.append(reward)
            if terminated or truncated:
                break
            answers.append(tool_answer(obs, info, terminated=False, left=max_turns + 1 - len(rewards)))
        expected = 1.0 if _passes_at_turn_1(task) else 0.0
        assert [step["reward"] for step in trace["info"]["convcodeworld"]["steps"]] == rewards, task.task_id
        assert trace["rewards"]["env_reward"]["score"] == sum(rewards) == expected, (task.task_id, trace["rewards"])
        messages = [node["message"] for node in trace["nodes"]]
        assert [m["role"] for m in messages] == ["system", "user"] + ["assistant", "tool"] * len(answers) + ["assistant"]
        assert [m["content"] for m in messages if m["role"] == "tool"] == answers, task.task_id
        calls = [m["tool_calls"][0] for m in messages if m["role"] == "assistant"]
        assert [json.loads(c["arguments"])["code"] for c in calls] == [_program(task, t) for t in range(len(rewards))]
    replay.close()


def _canary_rows(episodes: list[dict]) -> dict[str, tuple[float, float, float]]:
    """Task id -> (env_reward, canary, canary_passed) as each trace recorded them."""
    rows = {}
    for episode in episodes:
        assert episode["ok"] and not episode["errors"], episode["errors"]
        (trace,) = episode["traces"]
        rows[episode["task"]["data"]["task_id"]] = (trace["rewards"]["env_reward"]["score"], trace["metrics"]["canary"],
                                                    trace["metrics"]["canary_passed"])
    return rows


def test_vf_eval_records_the_canary_beside_the_reward_never_in_it(tmp_path, humaneval):
    """--env.taskset.canary 0.5 on 5 tasks adds the twins of all 5. The coder is the test fitter (the canonical
    solution, then every expected value the rich feedback shows hard-coded): it passes the tasks at once, and the
    twins of HumanEval/0-3 after one feedback turn (HumanEval/4's twin inverts an assertion: no value to copy).
    Each twin's pass is its metric canary_passed; its reward stays 0.0."""
    tasks = humaneval.subset(limit=5)
    with ScriptedOpenAIServer(EXAMPLE.scripted_fitter_coder(tasks)) as server:
        episodes = _vf_eval(server, tmp_path, gym_id="ConvCodeWorld-CF-EF_full-v0", limit=5, max_turns=1,
                            extra=(*EXAMPLE.canary_flags(0.5), "--env.taskset.feedback-style", "rich"))
    rows = _canary_rows(episodes)
    fitted = {f"HumanEval/{i}/canary" for i in range(4)}
    assert rows == {**{t.task_id: (1.0, 0.0, 0.0) for t in tasks},
                    **{f"{t.task_id}/canary": (0.0, 1.0, float(f"{t.task_id}/canary" in fitted)) for t in tasks}}, rows
    for episode in episodes:  # the twins' steps: the canonical solution fails, the fitted program passes, no reward
        steps = episode["traces"][0]["info"]["convcodeworld"]["steps"]
        if episode["task"]["data"]["task_id"] in fitted:
            assert [(s["canary"], s["passed"], s["reward"]) for s in steps] == [(True, False, 0.0), (True, True, 0.0)]
    summary = EXAMPLE.summarise(episodes)
    assert (summary["mean_env_reward"], summary["canary_twins"], summary["canary_passed"], summary["canary_rate"]) == \
        (0.5, 5, 4, 0.8), summary


def test_the_example_programs_smoke_run_reports_an_honest_canary_rate_of_0(tmp_path):
    """--canary 0.5: the twins of the 5 smoke tasks beside them; the smoke coder plays a wrong program, then the
    canonical solution, which fails every twin: the canary pass rate printed beside the reward is 0."""
    done = subprocess.run([sys.executable, str(ROOT / "training" / "verifiers_rollouts.py"), "--smoke", "--out", str(tmp_path),
                           "--canary", "0.5"], env=_env(), capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    summary = json.loads((tmp_path / "convcodeworld-summary.json").read_text())
    twins = [row for row in summary["episodes"] if row["canary"]]
    assert sorted(row["task_id"] for row in twins) == [f"HumanEval/{i}/canary" for i in range(5)], summary
    assert all(row["step_rewards"] == [0.0, 0.0] and row["canary_passed"] is False for row in twins), summary
    assert all(row["step_rewards"] == [0.0, 1.0] for row in summary["episodes"] if not row["canary"]), summary
    assert (summary["completed"], summary["mean_env_reward"], summary["canary_rate"]) == (10, 0.5, 0.0), summary
    assert "mean env_reward over 10 completed episodes: 0.5 (0 failed); canary pass rate: 0 (0 of 5 twins" in done.stdout


def test_load_environment_mixes_canary_twins_in_and_vf_validate_checks_them(humaneval):
    """canary= and canary_seed= are the gym env's; a twin's gold check holds when its canonical solution fails it."""
    import asyncio

    env = convcodeworld.load_environment(dataset="humaneval", limit=3, canary=0.25, canary_seed=1, max_turns=1)
    assert (env.config.taskset.canary, env.config.taskset.canary_seed) == (0.25, 1)
    expected = gym.make("ConvCodeWorld-CF-EF_full-v0", dataset=humaneval, limit=3, canary=0.25, canary_seed=1)
    ids = [t.data.task_id for t in env.taskset]
    assert ids == list(expected.unwrapped.tasks.ids) and len(ids) == 4 and ids[-1].endswith("/canary"), ids
    expected.close()
    named = convcodeworld.load_environment(dataset="humaneval", limit=2, canary=["HumanEval/1"], max_turns=1)
    by_id = {t.data.task_id: t for t in named.taskset}
    assert list(by_id) == ["HumanEval/0", "HumanEval/1", "HumanEval/1/canary"], list(by_id)
    twin, task = by_id["HumanEval/1/canary"], by_id["HumanEval/1"]
    assert twin.data.prompt == task.data.prompt  # the same task as the model sees it
    assert asyncio.run(twin.validate(None)) is True and asyncio.run(task.validate(None)) is True
    with pytest.raises(ValueError, match=r"canary must be a share in \[0, 1\)"):
        convcodeworld.load_environment(dataset="humaneval", canary=1.5)


def test_a_thought_is_never_judged_through_vf_eval(tmp_path, humaneval):
    """A reasoning model's thought, returned apart from the reply (``reasoning_content``) with the canonical solution
    in it, beside a wrong reply: reward 0.0, and the trace keeps the thought on the assistant message. A reply with
    the thought inside it (a wrong draft in ``<think>``, the canonical solution as the answer) scores 1.0 (the first
    fenced block anywhere was judged before: 0.0); with ``--env.taskset.reasoning keep`` the draft is judged, as the
    reference judged it: 0.0."""
    from convcodeworld_gym.training.smoke import reasoning_reply

    tasks = humaneval.subset(limit=2)
    thought = lambda task, turn: f"Let me write it:\n{EXAMPLE.fenced(task.ground_truth)}"  # noqa: E731
    apart = EXAMPLE.scripted_coder(tasks, lambda task, turn: EXAMPLE.wrong_program(task), thought)
    with ScriptedOpenAIServer(apart) as server:
        episodes = _vf_eval(server, tmp_path / "apart", gym_id="ConvCodeWorld-CF-v0", limit=2, max_turns=0)
    for episode, task in zip(episodes, tasks):
        (trace,) = episode["traces"]
        assert episode["ok"] and trace["rewards"]["env_reward"]["score"] == 0.0, trace["rewards"]
        (reply,) = [node["message"] for node in trace["nodes"] if node["message"]["role"] == "assistant"]
        assert reply["content"] == EXAMPLE.fenced(EXAMPLE.wrong_program(task))
        assert reply["reasoning_content"] == thought(task, 0)

    inside = EXAMPLE._by_task(tasks, lambda task, messages: reasoning_reply(EXAMPLE.wrong_program(task), task.ground_truth))
    for mode, expected in (("strip", 1.0), ("keep", 0.0)):
        with ScriptedOpenAIServer(inside) as server:
            episodes = _vf_eval(server, tmp_path / mode, gym_id="ConvCodeWorld-CF-v0", limit=2, max_turns=0,
                                extra=("--env.taskset.reasoning", mode))
        assert [e["traces"][0]["rewards"]["env_reward"]["score"] for e in episodes] == [expected, expected], mode


def test_vf_eval_plays_an_io_task_set_and_records_the_envs_rewards(tmp_path):
    """LiveCodeBench's schema (tests/fixtures/io), a standard-input and a call task: wrong at turn 0, right after the
    feedback; the rewards vf-eval records are the env's, and the feedback shown holds the public test's input."""
    fixtures = ROOT / "tests" / "fixtures" / "io"
    dataset = str(fixtures / "livecodebench.jsonl")
    programs = json.loads((fixtures / "programs.json").read_text())["livecodebench.jsonl"]
    tasks = load_tasks(dataset).subset(limit=2)

    def program(task: Task, turn: int) -> str:
        return programs[task.task_id]["right" if turn >= 1 else "wrong"][0]

    gym_id = "ConvCodeWorld-CF-EF_partial-v0"
    with ScriptedOpenAIServer(EXAMPLE.scripted_coder(tasks, program)) as server:
        cmd = EXAMPLE.vf_eval_command(gym_id=gym_id, dataset=dataset, limit=2, max_turns=1, model="scripted",
                                      base_url=server.base_url, out=tmp_path, run_name="run")
        done = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    episodes = sorted(EXAMPLE.read_episodes(tmp_path / "run"), key=lambda e: e["task"]["data"]["task_id"])
    assert [e["task"]["data"]["task_id"] for e in episodes] == sorted(tasks.ids)
    for episode in episodes:
        (trace,) = episode["traces"]
        assert [step["reward"] for step in trace["info"]["convcodeworld"]["steps"]] == [0.0, 1.0]
        assert trace["rewards"]["env_reward"]["score"] == 1.0
        feedback = [text for role, text in _messages(trace) if role == "user"][1]
        assert "Input:" in feedback and "Expected output:" in feedback
