"""The LLM-simulated user against a real HTTP server speaking the OpenAI API (real openai client, real sqlite)."""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from convcodeworld_gym import ConvCodeWorldEnv, SimulatorError
from convcodeworld_gym.feedback.verbal import FeedbackCache, LLMSimulator, OfflineSimulator, make_simulator
from convcodeworld_gym.feedback.verbal import _warn_offline_once
from convcodeworld_gym.feedback.verbal import cache as cache_module
from convcodeworld_gym.feedback.verbal.leak import nontrivial_lines
from convcodeworld_gym.testing import Reply, ScriptedOpenAIServer

TASK = "HumanEval/0"
WRONG = "def has_close_elements(numbers, threshold):\n    return False"
SECRET = "sk-test-SECRET-1234567890"
REPLY = "Reasoning: the loop is wrong.\nUser Feedback: Compare every pair of numbers.\n```python\nfor a in numbers:\n    pass\n```\nThanks."


@pytest.fixture(autouse=True)
def _no_simulator_env(monkeypatch):
    for var in ("CONVCODEWORLD_SIMULATOR_MODEL", "CONVCODEWORLD_SIMULATOR_BASE_URL", "CONVCODEWORLD_SIMULATOR_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)


def _env(feedback: str, server: ScriptedOpenAIServer, cache_path, **kwargs) -> ConvCodeWorldEnv:
    options = {"backend": "llm", "base_url": server.base_url, "api_key": SECRET, "cache_path": str(cache_path),
               "model": "sim-model", "backoff_s": 0.01, **kwargs}
    return ConvCodeWorldEnv(feedback, dataset="humaneval", task_ids=[TASK], simulator_kwargs=options)


def _play(env: ConvCodeWorldEnv, actions: list[str]) -> list:
    """Reset, play ``actions`` and close the env; returns the reset result and every step result."""
    trace = [env.reset(options={"task_id": TASK})]
    for action in actions:
        trace.append(env.step(action))
    env.close()
    return trace


def test_novice_request_content_and_reply_cleanup(tmp_path):
    with ScriptedOpenAIServer([REPLY]) as server:
        env = _env("CF-EF_full-SNF", server, tmp_path / "c.sqlite")
        _, (obs, _, _, _, info) = _play(env, [WRONG])
    (request,) = server.chat_requests
    assert request["model"] == "sim-model" and request["temperature"] == 0.0 and request["max_tokens"] == 2048
    prompt = "\n".join(m["content"] for m in request["messages"])
    assert WRONG in prompt and obs["execution_feedback"] in prompt and "No syntax errors" in prompt
    assert env.task.prompt in prompt
    assert "Ground Truth Code" not in prompt
    assert not [line for line in nontrivial_lines(env.task.canonical_solution, env.task.prompt) if line in prompt]
    assert server.requests[0]["headers"]["authorization"] == f"Bearer {SECRET}"
    assert obs["verbal_feedback"] == "Compare every pair of numbers.\n\nThanks."
    assert info["verbal_feedback_source"] == "llm:sim-model"
    details = info["verbal_feedback_details"]
    assert details["cached"] is False and details["usage"]["api_calls"] == 1 and details["usage"]["total_tokens"] > 0
    assert info["timings"].verbal_s > 0


def test_expert_request_carries_ground_truth_and_ef(tmp_path):
    with ScriptedOpenAIServer([REPLY]) as server:
        env = _env("CF-EF_partial-SEF", server, tmp_path / "c.sqlite")
        _, (obs, *_) = _play(env, [WRONG])
        env.close()
    prompt = "\n".join(m["content"] for m in server.chat_requests[0]["messages"])
    assert env.task.ground_truth.strip() in prompt and "Ground Truth Code" in prompt
    assert obs["execution_feedback"] in prompt
    assert "```" not in obs["verbal_feedback"]


def test_silent_turns_make_no_request(tmp_path):
    with ScriptedOpenAIServer([]) as server:
        env = _env("CF-SNF", server, tmp_path / "c.sqlite")  # compiles: a novice without EF has nothing to say
        _, (obs, _, _, _, info) = _play(env, [WRONG])
        env.close()
        env = _env("CF-SEF", server, tmp_path / "c.sqlite")  # does not compile: the expert is not asked
        _, (obs2, *_) = _play(env, ["def has_close_elements(:"])
        env.close()
    assert server.requests == []
    assert obs["verbal_feedback"] == "" == obs2["verbal_feedback"]
    assert info["verbal_feedback_source"] is None


def test_retries_then_success(tmp_path):
    script = [
        Reply(status=429),
        Reply(status=503),
        Reply(raw_body=b"{not json"),
        Reply(raw_body=b'{"choices": 5}'),
        Reply(content="late", delay_s=1.5),
        REPLY,
    ]
    with ScriptedOpenAIServer(script) as server:
        env = _env("CF-EF_full-SNF", server, tmp_path / "c.sqlite", timeout_s=0.5, retries=5)
        _, (obs, *_) = _play(env, [WRONG])
        env.close()
    assert len(server.chat_requests) == 6
    assert obs["verbal_feedback"].startswith("Compare every pair")


@pytest.mark.parametrize("failure", [Reply(status=500), Reply(status=429), Reply(content="")], ids=["500", "429", "empty"])
def test_dead_endpoint_is_a_clear_error(tmp_path, failure):
    with ScriptedOpenAIServer([], fallback=failure) as server:
        env = _env("CF-EF_full-SEF", server, tmp_path / "c.sqlite", retries=2)
        env.reset(options={"task_id": TASK})
        with pytest.raises(SimulatorError) as info:
            env.step(WRONG)
        env.close()
        base_url = server.base_url
    assert len(server.chat_requests) == 3
    assert base_url in str(info.value) and "3 tries" in str(info.value)
    assert info.value.endpoint == base_url
    if failure.status != 200:
        assert f"HTTP {failure.status}" in str(info.value) and info.value.status == failure.status
    assert SECRET not in str(info.value)


def test_client_error_is_not_retried(tmp_path):
    with ScriptedOpenAIServer([], fallback=Reply(status=401)) as server:
        env = _env("CF-EF_full-SNF", server, tmp_path / "c.sqlite")
        env.reset(options={"task_id": TASK})
        with pytest.raises(SimulatorError, match="HTTP 401.*check the model name, the key and the base URL"):
            env.step(WRONG)
        env.close()
    assert len(server.chat_requests) == 1


def test_second_run_is_cached_and_byte_identical(tmp_path):
    actions = [WRONG, "def has_close_elements(:", "def has_close_elements(numbers, threshold):\n    return True"]
    replies = iter(f"User Feedback: answer {i}" for i in range(100))
    with ScriptedOpenAIServer(lambda body: next(replies)) as server:
        first = _play(_env("CF-EF_full-SNF", server, tmp_path / "shared.sqlite"), actions)
        calls = len(server.chat_requests)
        second = _play(_env("CF-EF_full-SNF", server, tmp_path / "shared.sqlite"), actions)
    assert calls == 3 and len(server.chat_requests) == 3  # zero requests on the second run
    for a, b in zip(first[1:], second[1:], strict=True):
        assert a[0] == b[0] and a[0]["verbal_feedback"].encode() == b[0]["verbal_feedback"].encode()
        assert b[4]["verbal_feedback_details"]["cached"] is True
        assert b[4]["verbal_feedback_details"]["usage"]["api_calls"] == 0
    assert [t[0]["verbal_feedback"] for t in first[1:]] == ["answer 0", "answer 1", "answer 2"]
    raw = (tmp_path / "shared.sqlite").read_bytes()
    assert SECRET.encode() not in raw and b"127.0.0.1" not in raw
    with sqlite3.connect(tmp_path / "shared.sqlite") as conn:
        assert conn.execute("SELECT COUNT(*) FROM answers").fetchone()[0] == 3


def test_cache_shared_by_processes(tmp_path):
    path = tmp_path / "multi.sqlite"
    code = (  # cache.py stands alone: load just it, so the two writers start fast and overlap
        "import os, sys, time, importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('cache', {cache_module.__file__!r})\n"
        "mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)\n"
        "open(sys.argv[1] + '.ready' + sys.argv[2], 'w').close()\n"
        "while not os.path.exists(sys.argv[1] + '.go'): time.sleep(0.0005)\n"
        "c = mod.FeedbackCache(sys.argv[1])\n"
        "for i in range(200):\n    c.put(f'k{i % 150}-{sys.argv[2] if i >= 150 else 0}', 'm', sys.argv[2], 1, 1)\n"
    )
    # Four writers open the new file at once: the switch to WAL races (it failed ~6% of runs before _set_up retried).
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path), str(n)]) for n in (1, 2, 3, 4)]
    deadline = time.monotonic() + 60
    while not all(Path(f"{path}.ready{n}").exists() for n in (1, 2, 3, 4)) and time.monotonic() < deadline:
        time.sleep(0.001)
    Path(f"{path}.go").touch()  # all four open the new file within a millisecond or so
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0, 0]
    with FeedbackCache(path) as cache:
        assert len(cache) == 150 + 4 * 50  # shared keys stored once, first writer wins
        assert cache.get("k0-0")[0] in ("1", "2", "3", "4")


def test_leak_guard_regenerates_then_redacts(tmp_path):
    with ScriptedOpenAIServer([]) as server:
        env = _env("CF-EF_full-SEF", server, tmp_path / "c.sqlite")
        env.reset(options={"task_id": TASK})
        line = nontrivial_lines(env.task.canonical_solution, env.task.prompt)[0]
        server.add(f"User Feedback: You should write `{line}` there.", "User Feedback: Compare each pair once.")
        obs, *_, info = env.step(WRONG)
        assert obs["verbal_feedback"] == "Compare each pair once."
        assert info["verbal_feedback_details"]["leak"] == {"detected": True, "regenerated": True, "redacted_lines": 0}
        retry = server.chat_requests[1]["messages"]
        assert retry[-2]["role"] == "assistant" and "ground truth code" in retry[-1]["content"]

        server.add(f"User Feedback: Use {line}!", f"User Feedback: Really, use {line}!")
        obs, *_, info = env.step(WRONG.replace("False", "True"))
        env.close()
    assert line not in obs["verbal_feedback"] and "[...]" in obs["verbal_feedback"]
    assert info["verbal_feedback_details"]["leak"] == {"detected": True, "regenerated": True, "redacted_lines": 1}
    assert info["verbal_feedback_details"]["usage"]["api_calls"] == 2


def test_auto_backend_choice(monkeypatch, tmp_path, caplog):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)  # a key alone must not start paid calls
    _warn_offline_once.cache_clear()
    with caplog.at_level(logging.WARNING):
        assert isinstance(make_simulator("novice"), OfflineSimulator)
        assert isinstance(make_simulator("expert", seed=3), OfflineSimulator)
    warnings = [r for r in caplog.records if "no LLM endpoint configured" in r.getMessage()]
    assert len(warnings) == 1 and "CONVCODEWORLD_SIMULATOR_MODEL" in warnings[0].getMessage()
    with ScriptedOpenAIServer(["User Feedback: hi"]) as server:
        monkeypatch.setenv("CONVCODEWORLD_SIMULATOR_BASE_URL", server.base_url)
        monkeypatch.setenv("CONVCODEWORLD_SIMULATOR_CACHE", str(tmp_path / "auto.sqlite"))
        sim = make_simulator("expert")
        assert isinstance(sim, LLMSimulator) and sim.source == "llm:gpt-4o-2024-05-13"  # the paper's version by default
        assert SECRET not in repr(sim)
        sim.close()
    with pytest.raises(ValueError, match="backend must be"):
        make_simulator("novice", "gpt")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="expertise must be"):
        make_simulator("guru")  # type: ignore[arg-type]
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("CONVCODEWORLD_SIMULATOR_BASE_URL")
    with pytest.raises(ValueError, match="needs a key"):
        make_simulator("novice", "llm")
