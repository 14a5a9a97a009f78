"""The episode server against a client it does not trust (issue 39): sessions made over HTTP ``/mcp``, a session id
used from another connection, a flood of messages while a step runs, half-open connections, and errors that would
tell a caller the operator's internals. Real servers on 127.0.0.1, real WebSockets and raw sockets, the real sandbox.
(A client killed mid-step and SIGTERM: test_server_cleanup.py.)"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from server_helpers import INSTALL, run

pytest.importorskip("openenv", reason=f"the episode server's tests need the 'openenv' extra: {INSTALL}")

import httpx  # noqa: E402 - OpenEnv's dependency
from websockets.asyncio.client import connect  # noqa: E402 - OpenEnv's dependency
from websockets.exceptions import ConnectionClosed  # noqa: E402

from convcodeworld_gym.errors import ServerError  # noqa: E402
from convcodeworld_gym.service import ConvCodeWorldClient  # noqa: E402
from convcodeworld_gym.testing.episode_server import EpisodeServer  # noqa: E402

pytestmark = pytest.mark.openenv

MAX_SESSIONS, IDLE_S, MAX_BYTES = 2, 3.0, 1 << 20
#: The server's default time for a request's headers and an HTTP body (ServerLimits.request_timeout_s).
REQUEST_TIMEOUT_S = 10.0


@pytest.fixture(scope="module")
def guarded() -> Iterator[EpisodeServer]:
    with EpisodeServer(["CF-EF_full", "--dataset", "humaneval", "--max-sessions", str(MAX_SESSIONS),
                        "--idle-timeout-s", str(IDLE_S), "--max-request-bytes", str(MAX_BYTES)]) as running:
        yield running


def _ws(server: EpisodeServer, path: str = "/ws") -> str:
    return server.base_url.replace("http://", "ws://") + path


def _rpc(method: str, params: dict | None = None, id_: int = 1) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params or {}}


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def _until_idle(server: EpisodeServer, timeout_s: float = 10.0) -> dict:
    """``/sessions`` once no session and no episode is open (or as it stands after ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        now = server.sessions()
        if (now["active_sessions"], now["live_episodes"]) == (0, 0) or time.monotonic() > deadline:
            return now
        time.sleep(0.1)


async def _play(server: EpisodeServer, task_id: str, program: str) -> float | None:
    async with ConvCodeWorldClient(base_url=server.base_url) as client:
        await client.reset(task_id=task_id)
        return (await client.step(program)).reward


# ----------------------------------------------------------------------------------------- 1. sessions over HTTP /mcp


def test_no_session_is_made_over_http_mcp_and_tools_list_still_answers(guarded, humaneval):
    """Issue 39, defect 1: ``openenv/session/create`` over HTTP held a slot for ever (the idle timeout watched only
    WebSockets), and every WebSocket client got CAPACITY_REACHED. A session is its connection: over HTTP none is made."""
    with httpx.Client(base_url=guarded.base_url, timeout=30) as http:
        made = [http.post("/mcp", json=_rpc("openenv/session/create", id_=i)).json() for i in range(MAX_SESSIONS + 1)]
        listed = http.post("/mcp", json=_rpc("tools/list", id_=9)).json()
    assert all(m.get("error", {}).get("code") == -32601 for m in made), made  # JSON-RPC's "method not found"
    assert "/ws" in made[0]["error"]["message"], made[0]  # where sessions are made
    assert guarded.sessions()["active_sessions"] == 0
    assert listed["jsonrpc"] == "2.0" and listed["id"] == 9 and ("result" in listed or "error" in listed), listed
    task = humaneval["HumanEval/0"]
    assert run(_play(guarded, task.task_id, task.ground_truth)) == 1.0  # the slots are free for WebSocket sessions


def test_an_idle_mcp_websocket_session_is_closed_too(guarded):
    async def idle():
        async with connect(_ws(guarded, "/mcp")) as ws:
            await ws.send(json.dumps(_rpc("tools/list")))
            await ws.recv()
            held = guarded.sessions()["active_sessions"]
            frames = []
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    frames.append(await asyncio.wait_for(ws.recv(), IDLE_S + 10))
        return held, frames, closed.value

    held, frames, closed = run(idle())
    assert held == 1 and closed.rcvd is not None and closed.rcvd.code == 1008, (held, closed)
    assert _until_idle(guarded)["active_sessions"] == 0


# --------------------------------------------------------------------------- 2. a session id bound to its connection


def test_a_session_id_cannot_be_used_from_another_connection(guarded, humaneval):
    """Issue 39, defect 2: a WebSocket session asked its own id over an ``mcp`` message, closed it over HTTP
    (freeing its slot while it played on: --max-sessions bypassed) and its next env was never released."""
    task = humaneval["HumanEval/0"]

    async def attack():
        async with connect(_ws(guarded)) as ws:
            await ws.send(json.dumps({"type": "reset", "data": {"task_id": task.task_id}}))
            await ws.recv()
            await ws.send(json.dumps({"type": "mcp", "data": _rpc("openenv/session/create")}))
            asked = json.loads(await ws.recv())
            sid = (asked.get("data", {}).get("result") or {}).get("session_id") or str(uuid.uuid4())
            async with httpx.AsyncClient(base_url=guarded.base_url, timeout=30) as http:
                over_http = (await http.post("/mcp", json=_rpc("openenv/session/close", {"session_id": sid}))).json()
                used_over_http = (await http.post("/mcp", json=_rpc("tools/list", {"session_id": sid}))).json()
            await ws.send(json.dumps({"type": "mcp", "data": _rpc("openenv/session/close", {"session_id": sid})}))
            over_ws = json.loads(await ws.recv())
            async with connect(_ws(guarded, f"/ws?session_id={sid}")) as other:
                attached = json.loads(await other.recv())
            during = guarded.sessions()
            await ws.send(json.dumps({"type": "reset", "data": {"task_id": task.task_id}}))  # plays on
            await ws.recv()
            await ws.send(json.dumps({"type": "step", "data": {"reply": task.ground_truth}}))
            stepped = json.loads(await ws.recv())
        return asked, over_http, used_over_http, over_ws, attached, during, stepped

    asked, over_http, used_over_http, over_ws, attached, during, stepped = run(attack())
    assert during["active_sessions"] == 1, during  # the session held its slot all along
    assert stepped["data"]["reward"] == 1.0, stepped
    assert _until_idle(guarded) == {"active_sessions": 0, "max_sessions": MAX_SESSIONS, "live_episodes": 0}
    assert "error" in asked.get("data", {}), asked  # no session id is handed out
    assert over_http.get("error", {}).get("code") == -32601, over_http
    assert used_over_http.get("error", {}).get("code") == -32602, used_over_http  # invalid params: no session ids
    assert "error" in over_ws.get("data", {}), over_ws
    assert attached["type"] == "error" and attached["data"]["code"] == "SESSION_ERROR", attached


# -------------------------------------------------------------------------- 3. bounded buffering while a step runs


FLOOD = 48


def test_a_client_that_sends_while_its_step_runs_is_cut_off_and_memory_stays_bounded(guarded, humaneval):
    """Issue 39, defect 3: the guard queued every message under the size limit while a step ran (300 x 4 MiB took the
    server from 217 MB to 1382 MB). Now a connection holds a few messages at most; one that sends more is closed."""
    task = humaneval["HumanEval/0"]
    slow = f"import time\ntime.sleep(4)\n{task.ground_truth}"
    pad = "x" * (MAX_BYTES - 200)

    async def flood():
        async with connect(_ws(guarded), max_size=None) as ws:
            await ws.send(json.dumps({"type": "reset", "data": {"task_id": task.task_id}}))
            await ws.recv()
            await ws.send(json.dumps({"type": "step", "data": {"reply": slow}}))
            await asyncio.sleep(0.5)
            before = _rss_mb(guarded.pid)
            sent = 0
            try:
                for _ in range(FLOOD):
                    await ws.send(json.dumps({"type": "state", "pad": pad}))
                    sent += 1
                    await asyncio.sleep(0)
            except ConnectionClosed:
                pass
            await asyncio.sleep(0.5)
            grown = _rss_mb(guarded.pid) - before
            frames = []
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    frames.append(json.loads(await asyncio.wait_for(ws.recv(), 30)))
        return sent, grown, frames, closed.value

    sent, grown, frames, closed = run(flood())
    assert grown < 24, f"the server's RSS grew by {grown:.0f} MB while {sent} messages of 1 MiB came in"
    errors = [f["data"] for f in frames if f.get("type") == "error"]
    assert any(e.get("code") == "TOO_MANY_MESSAGES" for e in errors), [e.get("code") for e in errors]
    assert closed.rcvd is not None and closed.rcvd.code == 1008, closed
    assert _until_idle(guarded) == {"active_sessions": 0, "max_sessions": MAX_SESSIONS, "live_episodes": 0}
    assert run(_play(guarded, task.task_id, task.ground_truth)) == 1.0


# ----------------------------------------------------------------------------------------- 5. half-open connections


def _open(server: EpisodeServer, first: bytes) -> socket.socket:
    host, port = server.base_url.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=30)
    sock.sendall(first)
    return sock


def _closed_by_server(sock: socket.socket) -> bool:
    """Has the server closed ``sock`` (EOF or reset; a response before it is read and dropped)? Never blocks."""
    sock.setblocking(False)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def test_half_open_connections_are_dropped(guarded):
    """Issue 39, defect 5: 300 connections with unfinished headers were all still open after 80 s."""
    partial = [
        b"GET /health HTTP/1.1\r\nHost: x\r\n",  # headers never finished
        b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n",  # an upgrade never finished
        b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"ta",  # body
        b"GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHo",  # a second request never finished
        b"",  # nothing at all
    ]
    socks = [_open(guarded, first) for first in partial for _ in range(4)]
    started = time.monotonic()
    try:
        open_ = list(range(len(socks)))
        while open_ and time.monotonic() - started < REQUEST_TIMEOUT_S + 8:
            open_ = [i for i in open_ if not _closed_by_server(socks[i])]
            if open_:
                time.sleep(0.25)
            if time.monotonic() - started < 1.0:
                assert httpx.get(f"{guarded.base_url}/health", timeout=10).status_code == 200  # others are served
        took = time.monotonic() - started
    finally:
        for sock in socks:
            sock.close()
    assert not open_, f"still open after {took:.0f} s: {[partial[i // 4] for i in open_]}"


# ------------------------------------------------------------------------------------ 6. what errors tell a caller


def _task_file(path: Path) -> Path:
    """Two tasks: one the runtime serves, one that needs a module it lacks (the server leaves it out)."""
    test = ("import unittest\nclass TestCases(unittest.TestCase):\n    def test_1(self):\n"
            "        self.assertEqual(task_func(2), 4)\n")
    rows = [
        {"task_id": "Abuse/0", "instruct_prompt": "Double x.", "code_prompt": "def task_func(x):\n",
         "canonical_solution": "    return 2 * x\n", "test": test, "entry_point": "task_func", "libs": "[]"},
        {"task_id": "Abuse/1", "instruct_prompt": "Double x.",
         "code_prompt": "import ccw_no_such_module\ndef task_func(x):\n", "canonical_solution": "    return 2 * x\n",
         "test": test, "entry_point": "task_func", "libs": "['ccw_no_such_module']"},
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_errors_name_the_callers_mistake_and_keep_the_operators_internals_in_the_log(tmp_path):
    """Issue 39, defect 6: errors showed the runtime's path and pip lines, advice a caller cannot follow
    (``allow_forgeable``, ``task_ids=``), interpreter paths in feedback; caller mistakes came as EXECUTION_ERROR."""
    tasks = _task_file(tmp_path / "tasks.jsonl")
    with EpisodeServer(["CF-EF_full", "--dataset", str(tasks)]) as server:
        async def session():
            errors = {}
            async with ConvCodeWorldClient(base_url=server.base_url) as client:
                for name, call in [
                    ("left out", lambda: client.reset(task_id="Abuse/1")),
                    ("unknown task", lambda: client.reset(task_id="Abuse/9")),
                    ("unknown argument", lambda: client.reset(task="Abuse/0")),
                    ("step before reset", lambda: client.step("x")),
                ]:
                    with pytest.raises(ServerError) as caught:
                        await call()
                    errors[name] = caught.value
                await client.reset(task_id="Abuse/0")
                crashed = await client.step("import json\ndef task_func(x):\n    return json.loads('not json')\n")
            return errors, crashed

        errors, crashed = run(session())
        with httpx.Client(base_url=server.base_url, timeout=60) as http:
            over_http = http.post("/reset", json={"task_id": "Abuse/1"})
        logs = server.logs()
    internals = [sys.prefix, sys.base_prefix, str(Path(sys.executable).resolve().parent.parent), "pip install",
                 "allow_forgeable", "task_ids=", str(Path(__file__).resolve().parents[2])]
    texts = {name: str(error) for name, error in errors.items()}
    texts["crashed"] = crashed.observation.model_dump_json()
    texts["over_http"] = over_http.text
    leaked = {name: [i for i in internals if i in text] for name, text in texts.items()}
    assert not any(leaked.values()), leaked
    assert {name: (e.kind, e.code) for name, e in errors.items()} == {
        "left out": ("UnknownTaskError", "VALIDATION_ERROR"),
        "unknown task": ("UnknownTaskError", "VALIDATION_ERROR"),
        "unknown argument": ("ValueError", "VALIDATION_ERROR"),
        "step before reset": ("ResetNeeded", "VALIDATION_ERROR"),
    }
    assert "Abuse/1" in texts["left out"] and "another task" in texts["left out"]  # what the caller can change
    assert over_http.status_code == 400 and over_http.json()["code"] == "VALIDATION_ERROR", over_http.text
    assert "JSONDecodeError" in crashed.observation.execution_feedback  # the traceback is still there
    assert "ccw_no_such_module" in logs and "Abuse/1" in logs  # the operator's log has the whole reason
