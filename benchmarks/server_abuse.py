"""Runs in a client process of its own (and starts its abusers and the server as processes of theirs): N honest
clients of the episode server beside K abusive ones (issue 39), then SIGTERM.

The server (``convcodeworld serve``, HumanEval, CF-EF_full) runs in a process of its own with its own TMPDIR. The
honest clients (``ConvCodeWorldClient``, all at once on one event loop) each play one episode: a wrong program (reward
0.0), then the canonical solution (reward 1.0). Beside them, ``--abusers`` processes, each doing one of the attacks of
issue 39 over and over, until the honest episodes are done:

* ``mcp-hoard``: ``openenv/session/create`` over HTTP ``/mcp`` (a session that held its slot for ever);
* ``steal-id``: a WebSocket session asks its id, closes it over HTTP ``/mcp``, attaches another WebSocket to it;
* ``flood``: messages of ``--max-request-bytes`` while its step runs (the queue grew without bound);
* ``half-open``: 20 connections with unfinished headers, reopened as they are dropped;
* ``slow-body``: an HTTP body that trickles in;
* ``oversized``: WebSocket messages over the size limit;
* ``idle``: a WebSocket session that sends nothing (holds a slot until the idle timeout);
* ``vanish``: a step of a 20 s program, then the connection dropped without a close (a killed client).

Measured: the honest episodes' rewards and time, the server's RSS (sampled every 0.1 s: before, peak, after), what the
abusers were answered; then SIGTERM mid-episode of one more honest client: the server's exit status and what it
left (processes, slot cgroups, TMPDIR entries). The RSS bound checked is the idle server's RSS plus
``--mb-per-session`` per honest session plus, per abusive connection, what the guard and uvicorn may hold
(2 x max_request_bytes waiting, one message handed over and one arriving of at most ws_max_size = 4 x
max_request_bytes: 10 x max_request_bytes).

    python benchmarks/server_abuse.py                       # 256 honest, 16 abusive (2 of each attack)
    python benchmarks/server_abuse.py --honest 32 --abusers 8

Needs the ``openenv`` extra (``pip install -e '.[openenv]'``). Only ever targets 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from convcodeworld_gym.service import ConvCodeWorldClient
from convcodeworld_gym.tasks import load_tasks
from convcodeworld_gym.testing.episode_server import EpisodeServer, slot_cgroups

ATTACKS = ("mcp-hoard", "steal-id", "flood", "half-open", "slow-body", "oversized", "idle", "vanish")
CORES = len(os.sched_getaffinity(0))


# ------------------------------------------------------------------------------------------------------- the abusers


def _ws(url: str, path: str = "/ws") -> str:
    return url.replace("http://", "ws://") + path


async def _mcp_hoard(url: str, tally: Counter) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        answer = (await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create",
                                                "params": {}})).json()
        tally["refused" if "error" in answer else "session made"] += 1
    await asyncio.sleep(0.1)


async def _steal_id(url: str, tally: Counter) -> None:
    async with connect(_ws(url)) as ws:
        await ws.send(json.dumps({"type": "reset", "data": {"task_id": "HumanEval/0"}}))
        await ws.recv()
        await ws.send(json.dumps({"type": "mcp", "data": {"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create",
                                                           "params": {}}}))
        asked = json.loads(await ws.recv())
        sid = (asked.get("data", {}).get("result") or {}).get("session_id")
        tally["id refused" if sid is None else "id handed out"] += 1
        sid = sid or "00000000-0000-0000-0000-000000000000"
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            closed = (await http.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "openenv/session/close",
                                                    "params": {"session_id": sid}})).json()
        tally["close refused" if "error" in closed else "closed from elsewhere"] += 1
        async with connect(_ws(url, f"/ws?session_id={sid}")) as other:
            attached = json.loads(await other.recv())
        tally["attach refused" if attached.get("type") == "error" else "attached"] += 1
    await asyncio.sleep(0.2)


async def _flood(url: str, tally: Counter, max_bytes: int) -> None:
    pad = "x" * (max_bytes - 200)
    task = load_tasks("humaneval")["HumanEval/0"]
    async with connect(_ws(url), max_size=None) as ws:
        await ws.send(json.dumps({"type": "reset", "data": {"task_id": task.task_id}}))
        await ws.recv()
        await ws.send(json.dumps({"type": "step", "data": {"reply": f"import time\ntime.sleep(2)\n{task.ground_truth}"}}))
        try:
            for _ in range(64):
                await ws.send(json.dumps({"type": "state", "pad": pad}))
            while True:  # what came back, until the server closes the connection (or 30 s of silence)
                frame = json.loads(await asyncio.wait_for(ws.recv(), 30))
                tally[frame.get("data", {}).get("code") or frame.get("type", "?")] += 1
        except ConnectionClosed as closed:
            tally[f"cut off ({closed.rcvd.code if closed.rcvd else 'no close frame'})"] += 1


def _open_partial(url: str, first: bytes) -> socket.socket:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.sendall(first)
    sock.setblocking(False)
    return sock


def _dropped(sock: socket.socket) -> bool:
    try:
        while True:
            if not sock.recv(65536):
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True


async def _half_open(url: str, tally: Counter, held: list[socket.socket]) -> None:
    for sock in [s for s in held if _dropped(s)]:
        held.remove(sock)
        sock.close()
        tally["dropped by the server"] += 1
    while len(held) < 20:
        held.append(_open_partial(url, b"GET /health HTTP/1.1\r\nHost: x\r\n"))
        tally["opened"] += 1
    await asyncio.sleep(0.5)


async def _slow_body(url: str, tally: Counter) -> None:
    sock = await asyncio.to_thread(_open_partial, url, b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                                   b"\r\nContent-Length: 1048576\r\n\r\n{")
    try:
        for _ in range(60):
            await asyncio.sleep(0.5)
            if _dropped(sock):
                tally["dropped by the server"] += 1
                return
            try:
                sock.send(b" ")
            except OSError:
                tally["dropped by the server"] += 1
                return
        tally["still open after 30 s"] += 1
    finally:
        sock.close()


async def _oversized(url: str, tally: Counter, max_bytes: int) -> None:
    async with connect(_ws(url), max_size=None) as ws:
        for _ in range(8):
            await ws.send("x" * (2 * max_bytes))
            answer = json.loads(await ws.recv())
            tally[answer.get("data", {}).get("code", answer.get("type"))] += 1
    await asyncio.sleep(0.2)


async def _idle(url: str, tally: Counter) -> None:
    try:
        async with connect(_ws(url)) as ws:
            tally["opened"] += 1
            while True:
                frame = json.loads(await ws.recv())
                tally[frame.get("data", {}).get("code", "?")] += 1
    except ConnectionClosed as closed:
        tally[f"closed ({closed.rcvd.code if closed.rcvd else 'no close frame'})"] += 1


async def _vanish(url: str, tally: Counter) -> None:
    task = load_tasks("humaneval")["HumanEval/1"]
    ws = await connect(_ws(url))
    await ws.send(json.dumps({"type": "reset", "data": {"task_id": task.task_id}}))
    await ws.recv()
    await ws.send(json.dumps({"type": "step", "data": {"reply": f"import time\ntime.sleep(20)\n{task.ground_truth}"}}))
    await asyncio.sleep(0.5)
    ws.transport.abort()  # gone without a close, as a killed process goes
    tally["vanished mid-step"] += 1
    await asyncio.sleep(0.2)


async def abuse(url: str, attack: str, max_bytes: int, stop_file: str) -> Counter:
    """Run ``attack`` against ``url`` over and over until ``stop_file`` exists; what the server answered, counted."""
    tally: Counter = Counter()
    held: list[socket.socket] = []
    print("ready", flush=True)
    while not os.path.exists(stop_file):
        try:
            if attack == "mcp-hoard":
                await _mcp_hoard(url, tally)
            elif attack == "steal-id":
                await _steal_id(url, tally)
            elif attack == "flood":
                await _flood(url, tally, max_bytes)
            elif attack == "half-open":
                await _half_open(url, tally, held)
            elif attack == "slow-body":
                await _slow_body(url, tally)
            elif attack == "oversized":
                await _oversized(url, tally, max_bytes)
            elif attack == "idle":
                await _idle(url, tally)
            elif attack == "vanish":
                await _vanish(url, tally)
        except (ConnectionClosed, InvalidStatus, OSError, httpx.HTTPError, asyncio.TimeoutError, ValueError) as exc:
            tally[f"error: {type(exc).__name__}"] += 1
            await asyncio.sleep(0.2)
    for sock in held:
        sock.close()
    return tally


# -------------------------------------------------------------------------------------------------- the measurement


class RssSampler(threading.Thread):
    """The server's RSS every 0.1 s: ``peak`` (MB) since started."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self.stop = pid, 0.0, threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.peak = max(self.peak, rss_mb(self.pid))
            except (OSError, AssertionError):
                return
            self.stop.wait(0.1)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def wrong(task) -> str:  # noqa: ANN001 - a Task
    return f"```python\n{task.code_prompt.rstrip()}\n    return None\n```"


async def honest(url: str, n: int) -> tuple[list[tuple[float | None, float | None]], float]:
    """``n`` episodes at once, a wrong program then the canonical one each; their rewards and the seconds it took."""
    tasks = load_tasks("humaneval")
    errors: Counter = Counter()

    async def episode(i: int) -> tuple[float | None, float | None]:
        task = tasks[i % len(tasks)]
        try:
            async with ConvCodeWorldClient(base_url=url) as client:
                await client.reset(task_id=task.task_id)
                first = await client.step(wrong(task))
                second = await client.step(task.ground_truth)
        except Exception as exc:  # noqa: BLE001 - refused (the server full, the session cut): not an episode that finished
            errors[f"{type(exc).__name__}: {str(exc)[:80]}"] += 1
            return None, None
        return first.reward, second.reward

    started = time.monotonic()
    rewards = await asyncio.gather(*(episode(i) for i in range(n)))
    for error, count in errors.most_common(5):
        print(f"honest episodes that ended with {error}: {count}")
    return list(rewards), time.monotonic() - started


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def run_benchmark(args: argparse.Namespace) -> int:
    files = Path(tempfile.mkdtemp(prefix="ccw-abuse-tmp-"))
    stop_file = str(files.parent / f"{files.name}.stop")
    max_bytes = args.max_request_bytes
    serve_args = ["CF-EF_full", "--dataset", "humaneval", "--max-sessions", str(args.honest + 4 * args.abusers + 8),
                  "--max-request-bytes", str(max_bytes), "--idle-timeout-s", str(args.idle_timeout_s)]
    print(f"# episode server under abuse: {CORES} cores, {args.honest} honest sessions (CF-EF_full, HumanEval, a wrong "
          f"program then the canonical one) beside {args.abusers} abusive clients, --max-request-bytes {max_bytes}, "
          f"--idle-timeout-s {args.idle_timeout_s:g}\n")
    with EpisodeServer(serve_args, env={**os.environ, "TMPDIR": str(files)}) as server:
        asyncio.run(honest(server.base_url, 2))  # warm: workers up, task set chosen
        time.sleep(1.0)
        idle_rss = rss_mb(server.pid)
        sampler = RssSampler(server.pid)
        sampler.start()
        attacks = [ATTACKS[i % len(ATTACKS)] for i in range(args.abusers)]
        abusers = [subprocess.Popen([sys.executable, __file__, "--abuse", attack, "--url", server.base_url,
                                     "--max-request-bytes", str(max_bytes), "--stop-file", stop_file],
                                    stdout=subprocess.PIPE, text=True) for attack in attacks]
        for proc in abusers:  # each has started its attack
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(args.head_start_s)  # the attacks under way
        rewards, seconds = asyncio.run(honest(server.base_url, args.honest))
        Path(stop_file).touch()
        tallies = []
        for attack, proc in zip(attacks, abusers):
            try:
                out, _ = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate()
            tallies.append((attack, out.strip().splitlines()[-1] if out.strip() else "{}"))
        sampler.stop.set()
        sampler.join()
        after_rss = rss_mb(server.pid)
        # SIGTERM mid-episode: one more honest client steps a program that runs for 20 s
        name = "ccw-abuse-last"
        client = subprocess.Popen([sys.executable, __file__, "--last-client", name, "--url", server.base_url],
                                  stdout=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        running: list[int] = []
        while time.monotonic() < deadline and not running:
            running = [p for p in server.descendants() if Path(f"/proc/{p}/comm").exists()
                       and Path(f"/proc/{p}/comm").read_text().strip() == name]
            time.sleep(0.05)
        processes = server.descendants()
        cgroups = slot_cgroups(processes)
        started = time.monotonic()
        status = server.stop_with(signal.SIGTERM, timeout_s=60)
        stop_s = time.monotonic() - started
        client.kill()
        client.wait()
    left_processes = [p for p in processes if alive(p)]
    left_cgroups = sorted(c for c in cgroups if os.path.exists(c))
    left_files = os.listdir(files)
    os.rmdir(files) if not left_files else None
    Path(stop_file).unlink(missing_ok=True)

    correct = sum(r == (0.0, 1.0) for r in rewards)
    abusive_connections = args.abusers + 19 * attacks.count("half-open")  # a half-open abuser holds 20
    bound = idle_rss + args.mb_per_session * args.honest + abusive_connections * 10 * max_bytes / 2**20
    print("| honest episodes | correct rewards (0.0 then 1.0) | seconds | episodes/min |")
    print("|---:|---:|---:|---:|")
    print(f"| {len(rewards)} | {correct} | {seconds:.1f} | {60 * len(rewards) / seconds:.0f} |\n")
    print("| server RSS, MB: idle (warm) | peak under load | after | bound |")
    print("|---:|---:|---:|---:|")
    print(f"| {idle_rss:.0f} | {sampler.peak:.0f} | {after_rss:.0f} | {bound:.0f} |\n")
    print("| abuser | what the server answered |")
    print("|---|---|")
    for attack, tally in tallies:
        print(f"| {attack} | {tally} |")
    print(f"\nSIGTERM mid-episode (the run under way: {bool(running)}): exit status {status}, {stop_s:.1f} s; left: "
          f"{len(left_processes)} processes, {len(left_cgroups)} slot cgroups (of {len(cgroups)}), "
          f"{len(left_files)} TMPDIR entries")
    ok = (correct == len(rewards) and sampler.peak <= bound and status == -signal.SIGTERM and bool(running)
          and not left_processes and not left_cgroups and not left_files)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def last_client(url: str, name: str) -> None:
    """One more honest client: reset, then a step whose program names its process and runs for 20 s."""
    task = load_tasks("humaneval")["HumanEval/0"]
    program = (f"import ctypes, time\nctypes.CDLL(None).prctl(15, {name.encode()!r}, 0, 0, 0)\ntime.sleep(20)\n"
               + task.ground_truth)

    async def play() -> None:
        async with ConvCodeWorldClient(base_url=url) as client:
            await client.reset(task_id=task.task_id)
            await client.step(program)

    try:
        asyncio.run(play())
    except Exception:  # noqa: BLE001 - the server stops under it: that is the point
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--honest", type=int, default=256, help="honest sessions, all at once")
    parser.add_argument("--abusers", type=int, default=16, help="abusive client processes (the attacks in turn)")
    parser.add_argument("--max-request-bytes", type=int, default=1 << 20)
    parser.add_argument("--idle-timeout-s", type=float, default=30.0)
    parser.add_argument("--mb-per-session", type=float, default=1.0, help="RSS bound: MB per honest session")
    parser.add_argument("--head-start-s", type=float, default=5.0, help="seconds the abusers attack before the honest start")
    parser.add_argument("--abuse", choices=ATTACKS, help=argparse.SUPPRESS)
    parser.add_argument("--last-client", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--stop-file", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.url is not None and not args.url.startswith("http://127.0.0.1:"):
        raise SystemExit("only ever against 127.0.0.1")
    if args.abuse:
        tally = asyncio.run(abuse(args.url, args.abuse, args.max_request_bytes, args.stop_file))
        print(json.dumps(dict(tally), sort_keys=True))
        return 0
    if args.last_client:
        last_client(args.url, args.last_client)
        return 0
    return run_benchmark(args)


if __name__ == "__main__":
    sys.exit(main())
