"""Everything downstream of the env takes input/output tasks as they are (issue 49, item 5), on the fixtures of
``tests/fixtures/io`` through the real sandbox: the rollout driver with the real ``openai`` client against a scripted
server on 127.0.0.1, a recorded live run replayed as ConvCodeBench (static), regressions, ``convcodeworld evaluate``
and its report, and TRL's two doors, ``environment_factory`` and ``rollout_func`` (the verifiers door and the episode
server have their own
tests beside theirs: ``tests/training/test_training_verifiers.py``, ``tests/service/test_server_io.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest

import convcodeworld_gym  # noqa: F401 - registers the ids
from convcodeworld_gym import RecordEpisodes
from convcodeworld_gym.cli import main
from convcodeworld_gym.policies import OpenAIPolicy
from convcodeworld_gym.records import read_turns
from convcodeworld_gym.rollouts import EpisodeJob, rollouts
from convcodeworld_gym.runs.log_scores import static_run_scores
from convcodeworld_gym.tasks import load_tasks
from convcodeworld_gym.testing.openai_server import ScriptedOpenAIServer
from convcodeworld_gym.training.tools import ConvCodeWorldTools, tool_rows

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "io"
LCB = str(FIXTURES / "livecodebench.jsonl")
TACO = str(FIXTURES / "taco.jsonl")
PROGRAMS = json.loads((FIXTURES / "programs.json").read_text())


def _fence(code: str) -> str:
    return f"```python\n{code}```"


def _right(file: str, task_id: str) -> str:
    return PROGRAMS[file][task_id]["right"][0]


def _wrong(file: str, task_id: str) -> str:
    return PROGRAMS[file][task_id]["wrong"][0]


def test_the_rollout_driver_plays_io_tasks_through_the_openai_client(executor):
    tasks = load_tasks(LCB)
    by_prompt = {task.prompt.strip(): task.task_id for task in tasks}

    def reply(body: dict) -> str:
        """Wrong first, right once the feedback came: the task is told by its statement in the first message."""
        text = "\n".join(str(m.get("content", "")) for m in body["messages"])
        task_id = next(task_id for prompt, task_id in by_prompt.items() if prompt[:60] in text)
        feedback = "Expected output" in text or "Wrong answer" in text
        return _fence(_right("livecodebench.jsonl", task_id) if feedback else _wrong("livecodebench.jsonl", task_id))

    with ScriptedOpenAIServer(reply) as server:
        policy = OpenAIPolicy("scripted", base_url=server.base_url, api_key="test-key", max_retries=0)
        done = rollouts([EpisodeJob(task_id) for task_id in tasks.ids],
                        lambda: gym.make("ConvCodeWorld-CF-EF_full-v0", dataset=LCB, executor=executor, max_turns=2),
                        policy, concurrency=3)
    assert [(t.task_id, t.reward, t.model_calls, [r.passed for r in t.rows]) for t in done] == [
        (task_id, 1.0, 2, [False, True]) for task_id in tasks.ids]
    first = done[0].rows[0]
    assert first.execution_feedback.startswith("TEST_01") and "Expected output" in first.execution_feedback


def test_a_recorded_live_run_replays_as_convcodebench(tmp_path, executor):
    tasks = load_tasks(TACO)
    reference = tmp_path / "reference"
    env = RecordEpisodes(gym.make("ConvCodeWorld-CF-EF_full-v0", dataset=TACO, executor=executor, max_turns=2),
                         reference, policy="reference")
    for task in tasks:  # wrong at turn 0, right at turn 1
        env.reset(options={"task_id": task.task_id})
        assert env.step(_fence(_wrong("taco.jsonl", task.task_id)))[1] == 0.0
        assert env.step(_fence(task.solution_code))[1] == 1.0
    env.close()
    static = RecordEpisodes(gym.make("ConvCodeBench-CF-EF_full-v0", log=reference, dataset=TACO, executor=executor,
                                     max_turns=2), tmp_path / "static", policy="always-right")
    ends = []
    for task in tasks:
        obs, _ = static.reset(options={"task_id": task.task_id})
        assert obs["turn"] == 1 and "Expected output" in obs["execution_feedback"]  # the reference's turn 0, frozen
        _, reward, terminated, _, info = static.step(_fence(_right("taco.jsonl", task.task_id)))
        ends.append((reward, terminated, info["episode_end"]))
    static.close()
    assert ends == [(1.0, True, "passed")] * 3
    scores = static_run_scores(read_turns(tmp_path / "static"), "CF-EF_full", turn0=read_turns(reference), max_turns=2)
    assert scores.recall == 1.0 and scores.mrr == pytest.approx(0.5)


def test_a_program_that_breaks_a_test_an_earlier_one_passed_is_a_regression(executor):
    env = gym.make("ConvCodeWorld-CF-EF_full-v0", dataset=LCB, executor=executor, max_turns=3)
    env.reset(options={"task_id": "abc900_a"})
    _, _, _, _, first = env.step(_fence("input()\nprint(8)\n"))  # the public case's answer only
    assert [t["outcome"] for t in first["tests"]] == ["passed", "failed", "failed", "failed"]
    _, _, _, _, second = env.step(_fence("print(0)\n"))  # right on the hidden -5 5 -> 0 only
    assert second["regressed_tests"] == ["test_01"] and second["public_pass_fraction"] == 0.0
    env.close()


def test_evaluate_plays_an_io_task_set_and_reports_it(tmp_path, capsys):
    replies = tmp_path / "replies.jsonl"
    with replies.open("w") as fh:
        for task_id in ("abc900_a", "3100", "1900_B"):
            fh.write(json.dumps({"task_id": task_id, "turn": 0, "reply": _fence(_wrong("livecodebench.jsonl", task_id))}) + "\n")
            fh.write(json.dumps({"task_id": task_id, "turn": 1, "reply": _fence(_right("livecodebench.jsonl", task_id))}) + "\n")
    out = tmp_path / "run"
    code = main(["evaluate", "CF-EF_full", "--dataset", LCB, "--policy", "replay", "--replay-file", str(replies),
                 "--max-turns", "1", "--out", str(out), "--no-progress"])
    assert code == 0
    rows = read_turns(out)
    assert sorted((r.task_id, r.turn, r.passed) for r in rows) == sorted(
        (task_id, turn, turn == 1) for task_id in ("abc900_a", "3100", "1900_B") for turn in (0, 1))
    report = (out / "report.md").read_text()
    assert "livecodebench.jsonl, 3 tasks" in report and "100.0" in report


def test_trls_tool_door_judges_an_io_task(executor):
    tasks = load_tasks(LCB)
    tools = ConvCodeWorldTools("ConvCodeWorld-CF-EF_full-v0", dataset=tasks, executor=executor)
    row = next(r for r in tool_rows(tasks) if r["task_id"] == "3100")
    tools.reset(**row)
    wrong = tools.submit_program(_wrong("livecodebench.jsonl", "3100"))
    assert tools.get_reward() == 0.0 and "Not all tests pass" in wrong and "Expected output" in wrong
    assert tools.submit_program(_right("livecodebench.jsonl", "3100")).startswith("All tests pass")
    assert tools.get_reward() == 1.0


@pytest.mark.train
def test_trls_rollout_func_door_plays_io_tasks(executor):
    """TRL's ``rollout_func`` door on LiveCodeBench's schema: each prompt plays its row's task (a tiny random model on
    CPU, no download: it writes no program, so every reward is 0.0, and each episode ran in the sandbox)."""
    pytest.importorskip("trl", reason="the TRL test needs the 'train' extra: pip install -e '.[train]'")
    from convcodeworld_gym.testing.tiny_model import tiny_model
    from convcodeworld_gym.training.grpo import grpo_rows, make_rollout_func

    class Trainer:  # what a rollout_func reads of TRL's trainer (no vLLM)
        use_vllm = False
        temperature, top_p, top_k, min_p, repetition_penalty = 1.0, 1.0, 0, None, 1.0

        def __init__(self, model, tokenizer) -> None:
            self.model, self.processing_class = model, tokenizer

    tasks = load_tasks(LCB)
    model, tokenizer = tiny_model(0)
    rollout = make_rollout_func(lambda: gym.make("ConvCodeWorld-CF-EF_full-v0", dataset=tasks, max_turns=0,
                                                 executor=executor), grpo_rows(tasks), turns=1, max_new_tokens=4)
    out = rollout([t.prompt for t in tasks], Trainer(model, tokenizer))
    assert out["env_reward"] == [0.0, 0.0, 0.0] and out["canary_passed"] == [None, None, None]
