"""Policies: the LLM policy over the real openai client and a real local HTTP server; the
SYNTHETIC coder's determinism, mutations and feedback coupling; replay and oracle."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import convcodeworld_gym  # noqa: F401
from convcodeworld_gym.runs.evaluate import play_episode
from convcodeworld_gym.policies import LLMError, OpenAIPolicy, OraclePolicy, ReplayError, ReplayPolicy, SyntheticCoder
from convcodeworld_gym.policies.synthetic import KINDS, Mutation, apply_mutations, inject_bugs
from convcodeworld_gym.testing import Reply, ScriptedOpenAIServer

SECRET = "sk-test-DO-NOT-LEAK-1234"
OBS0 = {"task": "Write f.", "code": "", "compilation_feedback": "", "execution_feedback": "", "verbal_feedback": "", "turn": 0}
OBS1 = {
    "task": "Write f.",
    "code": "def f():\n    return 0",
    "compilation_feedback": "No syntax errors",
    "execution_feedback": "TEST_1\nAssertionError: 0 != 1",
    "verbal_feedback": "",
    "turn": 1,
}


def test_llm_prompts_follow_the_reference_structure(humaneval):
    with ScriptedOpenAIServer(["```python\nA\n```", "```python\nB\n```"]) as server:
        policy = OpenAIPolicy("m", base_url=server.base_url, api_key=SECRET, max_tokens=77, temperature=0.2)
        episode = policy.start(humaneval[0], feedback="CF-EF_full", seed=0)
        first = episode.act(OBS0)
        second = episode.act(OBS1)
        policy.close()
    assert first.text == "```python\nA\n```" and second.text.endswith("B\n```")
    assert first.usage["total_tokens"] > 0 and first.latency_s > 0
    req0, req1 = server.chat_requests
    assert req0["model"] == "m" and req0["max_tokens"] == 77 and req0["temperature"] == 0.2
    assert [m["role"] for m in req0["messages"]] == ["system", "user"]
    assert "Write f." in req0["messages"][1]["content"] and "Previous code" not in req0["messages"][1]["content"]
    # refinement: task, previous code and this turn's feedback; only two messages (no history)
    user = req1["messages"][-1]["content"]
    assert len(req1["messages"]) == 2
    assert "Previous code:\n```python\ndef f():\n    return 0\n```" in user
    assert "AssertionError: 0 != 1" in user and "User feedback" not in user
    assert "No syntax errors" not in user and "Compilation feedback" not in user  # never shown, as in the reference
    assert server.requests[0]["headers"]["authorization"] == f"Bearer {SECRET}"
    assert SECRET not in json.dumps(policy.settings())


def test_llm_history_mode_sends_the_whole_conversation(humaneval):
    with ScriptedOpenAIServer(["first", "second"]) as server:
        policy = OpenAIPolicy("m", base_url=server.base_url, api_key="k", history=True)
        episode = policy.start(humaneval[0], feedback="CF", seed=0)
        episode.act(OBS0)
        episode.act(OBS1)
    roles = [m["role"] for m in server.chat_requests[1]["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert server.chat_requests[1]["messages"][2]["content"] == "first"


def test_llm_retries_then_names_endpoint_and_status():
    with ScriptedOpenAIServer([Reply(status=429), Reply(status=502), "ok"]) as server:
        policy = OpenAIPolicy("m", base_url=server.base_url, api_key=SECRET, max_retries=3, backoff_s=0.01)
        assert policy.complete([{"role": "user", "content": "q"}]).text == "ok"
        assert len(server.chat_requests) == 3
    with ScriptedOpenAIServer([], fallback=Reply(status=503, content="overloaded")) as server:
        policy = OpenAIPolicy("m", base_url=server.base_url, api_key=SECRET, max_retries=2, backoff_s=0.01)
        with pytest.raises(LLMError) as err:
            policy.complete([{"role": "user", "content": "q"}])
        assert len(server.chat_requests) == 3
        base_url = server.base_url
    message = str(err.value)
    assert base_url in message and "HTTP 503" in message and "overloaded" in message and "3 attempt" in message
    assert SECRET not in message and err.value.status == 503


def test_llm_client_errors_fail_at_once_and_timeouts_retry():
    with ScriptedOpenAIServer([Reply(status=401, content="bad key")]) as server:
        policy = OpenAIPolicy("m", base_url=server.base_url, api_key=SECRET, max_retries=5, backoff_s=0.01)
        with pytest.raises(LLMError, match="HTTP 401.*API key") as err:
            policy.complete([{"role": "user", "content": "q"}])
        assert len(server.chat_requests) == 1 and SECRET not in str(err.value)
    with ScriptedOpenAIServer([Reply(content="late", delay_s=1.5), "fast"]) as server:
        policy = OpenAIPolicy("m", base_url=server.base_url, api_key="k", max_retries=1, backoff_s=0.01, timeout_s=0.5)
        assert policy.complete([{"role": "user", "content": "q"}]).text == "fast"


def test_synthetic_coder_is_deterministic_and_seeded(humaneval):
    coder = SyntheticCoder(0.5)
    obs = dict(OBS1, compilation_feedback="No syntax errors", execution_feedback="TEST_1\nfail")
    def replies(seed: int) -> list[str]:
        out = []
        for task in humaneval.tasks[:20]:
            ep = coder.start(task, feedback="CF-EF_full", seed=seed)
            out += [ep.act(OBS0).text] + [ep.act(obs).text for _ in range(4)]
        return out
    assert replies(3) == replies(3)
    assert replies(3) != replies(4)
    assert all("SYNTHETIC" in r for r in replies(3))


def test_each_mutation_kind_changes_the_program(humaneval):
    import random

    seen = set()
    for task in humaneval.tasks[:60]:
        for bug in inject_bugs(task.ground_truth, random.Random(task.task_id), 3):
            code = apply_mutations(task.ground_truth, [bug])
            assert code.strip() != task.ground_truth.strip()
            if bug.kind == "syntax_slip":
                with pytest.raises(SyntaxError):
                    compile(code, "x", "exec")
            else:
                compile(code, "x", "exec")
            seen.add(bug.kind)
    assert seen == set(KINDS)
    assert apply_mutations("def f():\n    return 1\n", []) == "def f():\n    return 1\n"
    assert "range(n + 1)" in apply_mutations("def f(n):\n    return list(range(n))\n", [Mutation("off_by_one", 0)])


def test_more_precise_feedback_never_repairs_later(humaneval, executor):
    """Same seed: bugs and draws are shared, so full EF passes no later than CF alone, task by task."""
    coder = SyntheticCoder(0.6)
    firsts = {}
    for combo in ("CF", "CF-EF_full"):
        env = gym.make(f"ConvCodeWorld-{combo}-v0", dataset=humaneval.subset(limit=10), max_turns=5, executor=executor)
        for task in env.unwrapped.tasks:
            rows = play_episode(env, coder, task.task_id, feedback=combo, seed=7)
            firsts[combo, task.task_id] = next((r.turn for r in rows if r.passed), 99)
        env.close()
    ids = [t.task_id for t in humaneval.tasks[:10]]
    assert all(firsts["CF-EF_full", t] <= firsts["CF", t] for t in ids)
    assert sum(firsts["CF-EF_full", t] < firsts["CF", t] for t in ids) >= 1
    # turn 0 is the same program under every combination
    assert [firsts["CF", t] == 0 for t in ids] == [firsts["CF-EF_full", t] == 0 for t in ids]


def test_strength_zero_never_repairs(humaneval):
    coder = SyntheticCoder(0.0)
    for task in humaneval.tasks[:10]:
        ep = coder.start(task, feedback="CF-EF_full-SEF", seed=0)
        first = ep.act(OBS0).text
        assert all(ep.act(dict(OBS1, verbal_feedback="fix line 3")).text == first for _ in range(5))
    with pytest.raises(ValueError, match="strength"):
        SyntheticCoder(1.5)


def test_replay_formats_and_errors(tmp_path, humaneval):
    path = tmp_path / "replies.jsonl"
    rows = [
        {"task_id": "HumanEval/0", "solution": "A0"},
        {"task_id": "HumanEval/0", "turn": 2, "reply": "A2"},
        {"task_id": "HumanEval/0", "turn": 1, "reply": "A1-full", "feedback": "CF-EF_full"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    policy = ReplayPolicy(path)
    ep = policy.start(humaneval["HumanEval/0"], feedback="CF-EF_full", seed=0)
    assert [ep.act({"turn": t}).text for t in range(4)] == ["A0", "A1-full", "A2", "A2"]
    ep = policy.start(humaneval["HumanEval/0"], feedback="CF", seed=0)
    assert [ep.act({"turn": t}).text for t in range(3)] == ["A0", "A0", "A2"]
    with pytest.raises(ReplayError, match="HumanEval/1"):
        policy.start(humaneval["HumanEval/1"], feedback="CF", seed=0)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"turn": 0, "reply": "x"}\n')
    with pytest.raises(ReplayError, match="row 1"):
        ReplayPolicy(bad)


def test_oracle_passes_at_turn_zero(humaneval, executor):
    env = gym.make("ConvCodeWorld-CF-v0", dataset=humaneval.subset(limit=3), executor=executor)
    for task in env.unwrapped.tasks:
        rows = play_episode(env, OraclePolicy(), task.task_id, feedback="CF", seed=0)
        assert len(rows) == 1 and rows[0].passed and rows[0].policy == "oracle"
    env.close()
