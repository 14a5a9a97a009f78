"""``convcodeworld evaluate --concurrency 64``: 64 episodes in flight on the rollout driver against a real local
OpenAI-compatible server (the real ``openai`` async client), the log in task order, and a resume that asks the
model nothing more."""

from __future__ import annotations

import json
import time

from convcodeworld_gym.cli import main
from convcodeworld_gym.records import TURNS_FILE, read_turns
from convcodeworld_gym.testing import CoderScript, ScriptedOpenAIServer


LATENCY_S = 0.5


class _Timed(CoderScript):
    """The scripted coder, noting when each request arrived."""

    def __call__(self, body):  # noqa: ANN001 - the script's signature
        self.arrivals.append(time.monotonic())  # type: ignore[attr-defined]
        return super().__call__(body)


def _most_within(times: list[float], window_s: float) -> int:
    """The most arrivals within any ``window_s`` seconds: requests the server held at once, as every reply waits that long."""
    times = sorted(times)
    return max(sum(1 for t in times[i:] if t < start + window_s) for i, start in enumerate(times))


def test_evaluate_with_64_in_flight_finishes_in_task_order_and_resumes_without_a_model_call(tmp_path, humaneval, capsys):
    tasks = humaneval.subset(limit=64)
    out = tmp_path / "run"
    command = ["evaluate", "ConvCodeWorld-CF-EF_full-v0", "--dataset", "humaneval", "--limit", "64", "--concurrency", "64",
               "--policy", "openai", "--model", "coder", "--out", str(out), "--no-progress", "--no-report"]
    script = _Timed(tasks, wrong_turns=1, latency_s=LATENCY_S)
    object.__setattr__(script, "arrivals", [])
    with ScriptedOpenAIServer(script) as server:
        assert main([*command, "--base-url", server.base_url]) == 0
        asked = len(server.chat_requests)
        log = (out / TURNS_FILE).read_bytes()
        assert main([*command, "--base-url", server.base_url]) == 0  # resumed: every episode is there
        asked_again = len(server.chat_requests) - asked
    assert asked == 128 and asked_again == 0
    assert _most_within(script.arrivals, LATENCY_S) >= 32  # episodes in flight at once (one at a time: 1)
    assert (out / TURNS_FILE).read_bytes() == log
    rows = read_turns(out)
    assert [(r.task_id, r.turn) for r in rows] == [(t.task_id, k) for t in tasks for k in (0, 1)]  # task order
    assert [r.passed for r in rows] == [False, True] * 64 and all(r.model_calls == 1 for r in rows)
    assert json.loads((out / "metadata.json").read_text())["concurrency"] == 64
    capsys.readouterr()
