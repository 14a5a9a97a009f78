"""The episode server's limits (sessions, request size, episode time, idle time) refuse with a message that names the
limit and its flag, and leave the server serving. A real server with small limits, real WebSockets, the real sandbox."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import pytest

from server_helpers import INSTALL, run, wrong_program

pytest.importorskip("openenv", reason=f"the episode server's tests need the 'openenv' extra: {INSTALL}")

import httpx  # noqa: E402 - OpenEnv's dependency
from websockets.exceptions import ConnectionClosed  # noqa: E402 - OpenEnv's dependency

from convcodeworld_gym.errors import ServerError  # noqa: E402
from convcodeworld_gym.service import ConvCodeWorldClient  # noqa: E402
from convcodeworld_gym.testing.episode_server import EpisodeServer  # noqa: E402

pytestmark = pytest.mark.openenv

MAX_SESSIONS, MAX_BYTES, IDLE_S, EPISODE_S = 2, 4096, 2.0, 3.0


@pytest.fixture(scope="module")
def limited() -> Iterator[EpisodeServer]:
    with EpisodeServer(["CF-EF_full", "--dataset", "humaneval", "--max-sessions", str(MAX_SESSIONS),
                        "--max-request-bytes", str(MAX_BYTES), "--idle-timeout-s", str(IDLE_S),
                        "--max-episode-s", str(EPISODE_S)]) as running:
        yield running


def test_one_session_over_the_limit_is_refused_until_one_ends(limited):
    async def sessions():
        first, second = ConvCodeWorldClient(base_url=limited.base_url), ConvCodeWorldClient(base_url=limited.base_url)
        await first.reset(task_id="HumanEval/0")
        await second.reset(task_id="HumanEval/1")
        third = ConvCodeWorldClient(base_url=limited.base_url)
        with pytest.raises(ServerError) as caught:
            await third.reset(task_id="HumanEval/2")
        await first.close()
        for _ in range(50):  # the server sees the close
            if limited.sessions()["active_sessions"] < MAX_SESSIONS:
                break
            await asyncio.sleep(0.1)
        fourth = ConvCodeWorldClient(base_url=limited.base_url)
        result = await fourth.reset(task_id="HumanEval/2")
        await second.close()
        await fourth.close()
        return caught.value, result

    refused, result = run(sessions())
    assert (refused.kind, refused.code) == ("ServerLimitError", "CAPACITY_REACHED")
    assert f"{MAX_SESSIONS}/{MAX_SESSIONS} sessions" in str(refused) and "--max-sessions" in str(refused)
    assert result.observation.task_id == "HumanEval/2"


def test_an_oversized_message_or_body_is_refused_and_the_session_goes_on(limited, humaneval):
    task = humaneval["HumanEval/0"]

    async def session():
        async with ConvCodeWorldClient(base_url=limited.base_url) as client:
            await client.reset(task_id=task.task_id)
            with pytest.raises(ServerError) as caught:
                await client.step("#" * (MAX_BYTES + 10))
            after = await client.step(task.ground_truth)  # the same session
        return caught.value, after

    refused, after = run(session())
    assert (refused.kind, refused.code) == ("ServerLimitError", "REQUEST_TOO_LARGE")
    assert f"limit of {MAX_BYTES} bytes" in str(refused) and "--max-request-bytes" in str(refused)
    assert after.reward == 1.0 and after.done
    big = httpx.post(f"{limited.base_url}/reset", json={"task_id": "x" * MAX_BYTES}, timeout=30)
    assert big.status_code == 413 and "--max-request-bytes" in big.json()["detail"], big.text


def test_an_idle_session_is_closed_with_a_message_but_time_in_a_step_is_no_idleness(limited, humaneval):
    from websockets.asyncio.client import connect

    task = humaneval["HumanEval/0"]
    slow = f"import time\ntime.sleep({IDLE_S + 0.5})\n{task.ground_truth}"  # a step longer than the idle limit
    ws_url = limited.base_url.replace("http://", "ws://") + "/ws"

    async def session():
        async with connect(ws_url) as ws:
            await ws.send(json.dumps({"type": "reset", "data": {"task_id": task.task_id}}))
            reset = json.loads(await ws.recv())
            await ws.send(json.dumps({"type": "step", "data": {"reply": slow}}))
            stepped = json.loads(await ws.recv())  # the server waited on the sandbox, not on the client
            open_then = limited.sessions()["active_sessions"]
            closed = json.loads(await asyncio.wait_for(ws.recv(), IDLE_S + 5))  # then nothing comes from the client
            with pytest.raises(ConnectionClosed) as gone:
                await ws.recv()
        return reset, stepped, open_then, closed, gone.value

    reset, stepped, open_then, closed, gone = run(session())
    assert reset["type"] == "observation" and stepped["data"]["reward"] == 1.0 and open_then == 1
    assert closed["type"] == "error" and closed["data"]["code"] == "IDLE_TIMEOUT", closed
    assert f"sent nothing for {IDLE_S:g} s" in closed["data"]["message"] and "--idle-timeout-s" in closed["data"]["message"]
    assert gone.rcvd is not None and gone.rcvd.code == 1008
    assert limited.sessions()["active_sessions"] == 0

    async def typed():  # OpenEnv's client opens a new session on its next call: the old episode is gone
        async with ConvCodeWorldClient(base_url=limited.base_url) as client:
            await client.reset(task_id=task.task_id)
            await asyncio.sleep(IDLE_S + 1.0)
            with pytest.raises(ServerError) as caught:
                await client.step(task.ground_truth)
        return caught.value

    assert run(typed()).kind == "ResetNeeded"


def test_an_episode_past_its_time_is_over_its_step_cancelled(limited, humaneval):
    task = humaneval["HumanEval/0"]
    sleeper = f"import time\ntime.sleep(4.5)\n{wrong_program(task).strip('`').removeprefix('python')}"

    async def session():
        async with ConvCodeWorldClient(base_url=limited.base_url) as client:
            await client.reset(task_id=task.task_id)
            started = time.monotonic()
            with pytest.raises(ServerError) as caught:
                await client.step(sleeper)
            took = time.monotonic() - started
            with pytest.raises(ServerError) as again:
                await client.step(task.ground_truth)
            replayed = await client.reset(task_id=task.task_id)
            passed = await client.step(task.ground_truth)
        return caught.value, took, again.value, replayed, passed

    refused, took, again, replayed, passed = run(session())
    assert (refused.kind, refused.code) == ("ServerLimitError", "EPISODE_TIMEOUT")
    assert f"limit of {EPISODE_S:g} s" in str(refused) and "--max-episode-s" in str(refused)
    assert took < 4.5, took  # cut at the limit, not when the program ended
    assert again.kind == "ResetNeeded" and "is over" in str(again)
    assert replayed.observation.turn == 0 and passed.reward == 1.0


def test_an_http_reset_counts_against_max_sessions_beside_the_websocket_sessions(limited):
    """An HTTP ``/reset`` makes an env for its request (OpenEnv's stateless routes): with ``--max-sessions`` envs open
    by WebSocket sessions it is refused with 503 ``CAPACITY_REACHED`` naming the flag, and goes through once one
    ends. Before, HTTP resets made envs past the limit (bounded by nothing but the request timeout)."""
    async def sessions():
        first, second = ConvCodeWorldClient(base_url=limited.base_url), ConvCodeWorldClient(base_url=limited.base_url)
        await first.reset(task_id="HumanEval/0")
        await second.reset(task_id="HumanEval/1")
        async with httpx.AsyncClient(timeout=30) as http:
            over = await http.post(f"{limited.base_url}/reset", json={"task_id": "HumanEval/2"})
            await first.close()
            for _ in range(50):  # the server sees the close and gives the env back
                if limited.sessions()["live_episodes"] < MAX_SESSIONS:
                    break
                await asyncio.sleep(0.1)
            under = await http.post(f"{limited.base_url}/reset", json={"task_id": "HumanEval/2"})
        await second.close()
        return over, under

    over, under = run(sessions())
    assert over.status_code == 503, over.text
    body = over.json()
    assert (body["kind"], body["code"]) == ("ServerLimitError", "CAPACITY_REACHED")
    assert "--max-sessions" in body["detail"] and f"{MAX_SESSIONS}/{MAX_SESSIONS}" in body["detail"]
    assert under.status_code == 200, under.text
    assert under.json()["observation"]["task_id"] == "HumanEval/2"
    assert limited.sessions()["live_episodes"] == 0  # the HTTP reset's env was given back
