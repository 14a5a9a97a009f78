"""Reasoning replies (issue 49, item 1): the code judged is the answer's, never a thought's.

A reasoning model writes ``<think>...</think>`` before its answer (Qwen3, DeepSeek-R1), or starts inside the thought
and closes it with ``</think>`` alone (R1-Distill: its chat template opens the thought in the prompt); an endpoint with
a reasoning parser returns the thought apart (``reasoning_content``). Here: how a reply is read (the edge cases a
reward hacker would try), every live and ConvCodeBench id, ``reasoning="keep"`` (the reference's extraction), the
reference protocol's compile fixes, vector envs, the rollout driver and the runner over the real ``openai`` client
against the scripted server, with the real sandbox.
"""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import convcodeworld_gym  # noqa: F401 - registers the ids
from convcodeworld_gym.extract import ONLY_A_THOUGHT, UNCLOSED_THOUGHT, extract_code, read_reply, reply_code
from convcodeworld_gym.policies import OpenAIPolicy
from convcodeworld_gym.protocol import ReferenceProtocol
from convcodeworld_gym.records import TURNS_FILE, iter_jsonl
from convcodeworld_gym.registration import BENCH_IDS, LIVE_IDS, env_id
from convcodeworld_gym.rollouts import EpisodeJob, play, rollouts
from convcodeworld_gym.testing import Reply, ScriptedOpenAIServer
from convcodeworld_gym.wrappers import RecordEpisodes

TASK_ID = "HumanEval/0"


def fenced(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


def programs(humaneval) -> tuple[str, str]:
    """HumanEval/0's right program (its canonical solution) and a wrong one."""
    task = humaneval[TASK_ID]
    return task.ground_truth, task.code_prompt + "    return False\n"


def thinking(draft: str, answer: str) -> str:
    """A Qwen3 / R1 reply: a thought holding a fenced draft, then the answer."""
    return f"<think>\nLet me draft it.\n{fenced(draft)}\nHmm, let me check that again.\n</think>\n\n{fenced(answer)}"


# ------------------------------------------------------------------------------------------- reading a reply

#: (reply, the answer read under "strip", or None when it has none)
READINGS = [
    ("<think>\n```python\nwrong\n```\n</think>\n\n```python\nright\n```", "\n\n```python\nright\n```"),  # Qwen3 / R1
    ("Okay, so ```python\nwrong\n``` fails.\n</think>\n\n```python\nright\n```", "\n\n```python\nright\n```"),  # R1-Distill
    ("<think>\n\n</think>\n\n```python\nright\n```", "\n\n```python\nright\n```"),  # Qwen3 with thinking off
    ("<THINK>```python\nwrong\n```</Think>```python\nright\n```", "```python\nright\n```"),  # the tags in any case
    ("<think>a <think>```python\nwrong\n```</think> b ```python\nwrong\n```</think>```python\nright\n```",
     "```python\nright\n```"),  # nested tags: all of it up to the last close (outside the answer's code) is thought
    ("<think>I must not print <think> tags.</think>```python\nright\n```", "```python\nright\n```"),  # text in a thought
    ("<think>a <think>b</think>```python\nright\n```", "```python\nright\n```"),  # the first close ends it
    ("<think>one</think>\n<think>```python\nwrong\n```</think>\n```python\nright\n```", "\n\n```python\nright\n```"),
    ("Sure. <think>```python\nwrong\n```</think> Here: ```python\nright\n```", "Sure.  Here: ```python\nright\n```"),
    ("<think>t</think>```python\ns = '<think>'\n```", "```python\ns = '<think>'\n```"),  # the answer's code mentions a tag
    ("<think>t</think>```python\ns = x.split('</think>')[-1]\n```",
     "```python\ns = x.split('</think>')[-1]\n```"),  # a closing tag inside a string of the answer
    ("<think>a</think>```python\nwrong\n```\n</think>```python\nright\n```", "```python\nright\n```"),  # a stray close
    ("```python\ns = '<think>'\n```", "```python\ns = '<think>'\n```"),  # no thought: the reply itself
    ("x = 1", "x = 1"),
    ("<think>```python\nright\n```", None),  # the thought never closes: no answer
    ("<think>done</think>```python\nright\n```<think>and more", None),  # a later thought never closes
    ("<think>```python\nright\n```</think>", None),  # only a thought
    ("<think>```python\nright\n```</think>\n  \n", None),  # a thought and whitespace
    ("```python\nright\n```</think>", None),  # R1-Distill: all of it was the thought
]


@pytest.mark.parametrize(("reply", "answer"), READINGS)
def test_a_reply_is_read_for_its_answer(reply, answer):
    reading = read_reply(reply)
    assert reading.answer == answer
    assert (reading.no_answer is None) == (answer is not None)
    if answer is not None and "wrong" in reply:  # a draft in a thought: the answer's block is judged
        assert reply_code(reply) == "right" and "wrong" not in answer


def test_a_reply_without_an_answer_says_why_in_one_line():
    unclosed = read_reply("<think>\n```python\nx = 1\n```\nstill going")
    assert unclosed.no_answer == UNCLOSED_THOUGHT and "\n" not in UNCLOSED_THOUGHT
    assert "x = 1" in unclosed.thought and "still going" in unclosed.thought
    only = read_reply("<think>```python\nx = 1\n```</think>\n")
    assert only.no_answer == ONLY_A_THOUGHT and "\n" not in ONLY_A_THOUGHT


@pytest.mark.parametrize(("reply", "answer"), READINGS)
def test_keep_reads_the_reply_as_the_reference_extraction_did(reply, answer):
    """``reasoning="keep"``: the reply as it is, extracted by the same function as before reasoning replies were read
    (byte for byte), a thought's draft included."""
    assert read_reply(reply, "keep").answer is reply
    assert reply_code(reply, "keep") == extract_code(reply)


def test_an_unknown_mode_is_refused_naming_the_modes(humaneval):
    with pytest.raises(ValueError, match=r"reasoning must be one of \('strip', 'keep'\), got 'drop'"):
        read_reply("x", "drop")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="reasoning must be one of"):
        gym.make("ConvCodeWorld-CF-v0", dataset=humaneval, reasoning="drop")


# ------------------------------------------------------------------------------------------- every id


@pytest.fixture(scope="module")
def reference_logs(tmp_path_factory, humaneval, executor):
    """A reference log of each combination: one wrong program of HumanEval/0, judged live (ConvCodeBench replays it)."""
    _, wrong = programs(humaneval)
    logs = {}
    for combination in LIVE_IDS:
        name = combination.removeprefix("ConvCodeWorld-").removesuffix("-v0")
        logs[name] = tmp_path_factory.mktemp(f"log-{name}")
        live = RecordEpisodes(gym.make(combination, dataset=humaneval, max_turns=1, executor=executor), logs[name])
        live.reset(options={"task_id": TASK_ID})
        live.step(wrong)
        live.step(wrong)
        live.close()
    return logs


def _make(gym_id, humaneval, executor, logs, **kwargs):
    if gym_id.startswith("ConvCodeBench"):
        name = gym_id.removeprefix("ConvCodeBench-").removesuffix("-v0")
        return gym.make(gym_id, log=logs[name], dataset=humaneval, max_turns=1, executor=executor, **kwargs)
    return gym.make(gym_id, dataset=humaneval, max_turns=1, executor=executor, **kwargs)


def _judged(env, reply):
    """The reward, info and the texts on the judged program (a ConvCodeBench step shows the reference's turn and
    keeps the texts on the model's own program in ``info["judged"]``)."""
    env.reset(options={"task_id": TASK_ID})
    obs, reward, _, _, info = env.step(reply)
    return reward, info, info.get("judged") or obs


@pytest.mark.parametrize("gym_id", LIVE_IDS + BENCH_IDS)
def test_a_draft_in_the_thought_never_decides_the_reward(gym_id, humaneval, executor, reference_logs):
    """On every id, with the default reading: a wrong draft in the thought before the right answer scores 1.0 (today's
    extraction judged the draft: 0.0), a right draft before a wrong answer scores 0.0, and the right program in a
    thought that never closes scores 0.0 with nothing run and one line of compilation feedback saying why."""
    right, wrong = programs(humaneval)
    env = _make(gym_id, humaneval, executor, reference_logs)
    try:
        reward, info, _ = _judged(env, thinking(wrong, right))
        assert (reward, info["passed"]) == (1.0, True), info["tests"]
        assert info["reasoning"]["answered"] and info["reasoning"]["thought_chars"] > len(wrong)

        reward, info, _ = _judged(env, thinking(right, wrong))
        assert (reward, info["passed"]) == (0.0, False)

        reward, info, judged = _judged(env, f"<think>\nI am sure of this one:\n{fenced(right)}")
        assert (reward, info["passed"], info["compile_ok"]) == (0.0, False, False)
        assert {t["outcome"] for t in info["tests"]} == {"not_run"}  # nothing ran
        assert (judged["compilation_feedback"], judged["code"], judged["execution_feedback"]) == (UNCLOSED_THOUGHT, "", "")
        assert info["reasoning"] == {"mode": "strip", "thought_chars": info["reasoning"]["thought_chars"], "answered": False}
        assert info["untrimmed_execution_feedback"] == ""  # no EF: nothing ran, also under the reference's EF style
    finally:
        env.close()


@pytest.mark.parametrize("gym_id", ["ConvCodeWorld-CF-EF_full-v0", "ConvCodeBench-CF-EF_full-SEF-v0"])
def test_keep_judges_the_first_fenced_block_anywhere_as_the_reference_did(gym_id, humaneval, executor, reference_logs):
    right, wrong = programs(humaneval)
    env = _make(gym_id, humaneval, executor, reference_logs, reasoning="keep")
    try:
        reward, info, _ = _judged(env, thinking(wrong, right))
        assert reward == 0.0 and info["reasoning"] == {"mode": "keep", "thought_chars": 0, "answered": True}
        reward, info, _ = _judged(env, thinking(right, wrong))  # the right draft is judged, the answer never
        assert reward == 1.0
    finally:
        env.close()


def test_the_observation_shows_the_answers_code_and_a_reply_that_is_only_a_thought_runs_nothing(humaneval, executor):
    right, wrong = programs(humaneval)
    env = gym.make("ConvCodeWorld-CF-EF_full-v0", dataset=humaneval, executor=executor)
    env.reset(options={"task_id": TASK_ID})
    obs, _, _, _, info = env.step(thinking(right, wrong))
    assert obs["code"] == wrong.rstrip() and obs["compilation_feedback"] == "No syntax errors"
    assert obs["execution_feedback"].startswith("TEST_")
    obs, reward, _, _, info = env.step(f"<think>{fenced(right)}</think>")
    assert (reward, obs["code"], obs["compilation_feedback"], obs["execution_feedback"]) == (0.0, "", ONLY_A_THOUGHT, "")
    assert not info["reasoning"]["answered"]
    env.close()


def test_vector_envs_take_the_reasoning_option(humaneval, executor):
    right, wrong = programs(humaneval)
    for mode, expected in (("strip", 1.0), ("keep", 0.0)):
        envs = gym.make_vec("ConvCodeWorld-CF-v0", 2, dataset=humaneval, executor=executor, reasoning=mode)
        envs.reset(options={"task_id": TASK_ID})
        _, rewards, *_ = envs.step([thinking(wrong, right)] * 2)
        assert list(rewards) == [expected, expected]
        envs.close()


def test_a_compile_fix_is_the_answers_code_not_the_thoughts(humaneval, executor):
    """The reference protocol's compile fixes read replies as the env does: a fix whose thought holds a draft that does
    not compile, and whose answer compiles, ends the fixes (one call) and the answer is judged."""
    right, _ = programs(humaneval)
    broken = "def has_close_elements(numbers, threshold):\n    return (\n"
    env = ReferenceProtocol(gym.make("ConvCodeWorld-CF-v0", dataset=humaneval, max_turns=2, executor=executor))
    env.reset(options={"task_id": TASK_ID})
    obs, _, _, _, info = env.step(fenced(broken))  # turn 0 does not compile: turn 1 asks for a fix
    assert [t["info"]["turn"] for t in info["turns"]] == [0] and "SyntaxError" in obs["compilation_feedback"]
    obs, reward, terminated, _, info = env.step(thinking(broken, right))  # the fix's answer compiles: judged at once
    assert (reward, terminated) == (1.0, True)
    assert [(t["info"]["turn"], t["model_calls"]) for t in info["turns"]] == [(1, 1)]
    env.close()


# ------------------------------------------------------------------------------------------- driver and runner


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_the_driver_keeps_the_endpoints_reasoning_apart_and_never_judges_it(field, humaneval, executor):
    """The real openai client against the scripted server: the message's content is the answer, its reasoning field
    the thought (vLLM's reasoning parser). The thought's right program is never judged (reward 0.0 for a wrong
    answer), and the trajectory keeps it: each call's reasoning and each row's."""
    right, wrong = programs(humaneval)
    script = [Reply(fenced(wrong), reasoning=f"Draft:\n{fenced(right)}", reasoning_field=field),
              Reply(fenced(right), reasoning="Now the threshold.", reasoning_field=field)]
    with ScriptedOpenAIServer(script) as server:
        policy = OpenAIPolicy("coder", base_url=server.base_url, api_key="k")
        (trajectory,) = rollouts([EpisodeJob(TASK_ID)], lambda: gym.make(env_id("CF-EF_full"), dataset=humaneval,
                                 executor=executor), policy, concurrency=1)
        requests = server.chat_requests
        policy.close()
    assert [row.passed for row in trajectory.rows] == [False, True] and trajectory.reward == 1.0
    assert [c.reasoning for c in trajectory.calls] == [f"Draft:\n{fenced(right)}", "Now the threshold."]
    assert [row.reasoning for row in trajectory.rows] == [f"Draft:\n{fenced(right)}", "Now the threshold."]
    assert [c.reply for c in trajectory.calls] == [fenced(wrong), fenced(right)]
    assert all(right not in json.dumps(r["messages"]) for r in requests)  # the thought never went back to the model


def test_a_thought_with_no_content_is_judged_as_an_empty_reply(humaneval, executor):
    """vLLM returns content null when the thought ran out of tokens: the thought's program is not judged."""
    right, _ = programs(humaneval)
    with ScriptedOpenAIServer([Reply(None, reasoning=fenced(right))]) as server:
        policy = OpenAIPolicy("coder", base_url=server.base_url, api_key="k")
        env = gym.make(env_id("CF"), dataset=humaneval, max_turns=0, executor=executor)
        trajectory = play(env, policy, EpisodeJob(TASK_ID), protocol="always")
        env.close()
        policy.close()
    assert trajectory.reward == 0.0 and trajectory.rows[0].reply == "" and trajectory.rows[0].reasoning == fenced(right)


def test_the_runner_logs_the_reasoning_and_judges_the_answer(tmp_path, humaneval):
    """``convcodeworld evaluate`` against an endpoint that returns reasoning: the log's rows hold it, the answer alone
    is judged; the same replies with the thought inside the content are judged the same (the env removes it), and
    ``--env-kwarg reasoning=keep`` judges the thought's draft, as the reference did."""
    from convcodeworld_gym.cli import main

    right, wrong = programs(humaneval)

    def run(out, script, *extra):
        with ScriptedOpenAIServer(script) as server:
            assert main(["evaluate", "ConvCodeWorld-CF-v0", "--dataset", "humaneval", "--task-ids", TASK_ID,
                         "--max-turns", "0", "--policy", "openai", "--model", "m", "--base-url", server.base_url,
                         "--api-key", "k", "--out", str(out), "--no-progress", *extra]) == 0
        return list(iter_jsonl(out / TURNS_FILE))

    (row,) = run(tmp_path / "apart", [Reply(fenced(right), reasoning=f"Draft:\n{fenced(wrong)}")])
    assert (row["reward"], row["reasoning"], row["reply"]) == (1.0, f"Draft:\n{fenced(wrong)}", fenced(right))
    (row,) = run(tmp_path / "inside", [thinking(wrong, right)])
    assert (row["reward"], row["code"], row["reasoning"]) == (1.0, right.rstrip(), "")
    (row,) = run(tmp_path / "keep", [thinking(wrong, right)], "--env-kwarg", "reasoning=keep")
    assert (row["reward"], row["code"]) == (0.0, wrong.rstrip())
