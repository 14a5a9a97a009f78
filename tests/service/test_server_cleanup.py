"""A client killed mid-episode leaves no session, process or file behind on the episode server: its run is killed
at once, and a run still queued never runs. SIGTERM or SIGINT mid-episode closes the backend: no process, cgroup or
file of the server is left. A real server (its own TMPDIR, so that its files can be counted), a real client process
killed with SIGKILL while its step runs in the real sandbox."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from server_helpers import INSTALL, run, until

pytest.importorskip("openenv", reason=f"the episode server's tests need the 'openenv' extra: {INSTALL}")

from convcodeworld_gym.service import ConvCodeWorldClient  # noqa: E402
from convcodeworld_gym.tasks import Task  # noqa: E402
from convcodeworld_gym.testing.episode_server import EpisodeServer, slot_cgroups  # noqa: E402

pytestmark = pytest.mark.openenv

RUN_S = 4.0  # how long the killed client's program runs (under HumanEval's 5 s floor)

#: The client: one session, reset, then (on a line from stdin) a step whose program names its process (so the test
#: sees it run) and sleeps.
CLIENT = """
import sys
from convcodeworld_gym.service import ConvCodeWorldClient
from convcodeworld_gym.tasks import load_tasks
url, name, sleep_s = sys.argv[1], sys.argv[2], float(sys.argv[3])
task = load_tasks("humaneval")["HumanEval/0"]
program = (f"import ctypes, time\\nctypes.CDLL(None).prctl(15, {name.encode()!r}, 0, 0, 0)\\ntime.sleep({sleep_s})\\n"
           + task.ground_truth)
with ConvCodeWorldClient(base_url=url).sync() as client:
    client.reset(task_id=task.task_id)
    print("ready", flush=True)
    sys.stdin.readline()
    print("stepping", flush=True)
    client.step(program)
    print("returned", flush=True)
"""


def _named(server: EpisodeServer, name: str) -> list[int]:
    """The server's descendants whose process name is ``name`` (a run of a named program)."""
    found = []
    for pid in server.descendants():
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == name:
                found.append(pid)
        except OSError:
            continue
    return found



def _client(tmp_path: Path, server: EpisodeServer, name: str, sleep_s: float = RUN_S) -> subprocess.Popen[str]:
    """A client process with its episode reset, ready to step (:func:`_go`)."""
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    proc = subprocess.Popen([sys.executable, str(script), server.base_url, name, str(sleep_s)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def _go(client: subprocess.Popen[str]) -> None:
    """Let the client send its step."""
    assert client.stdin is not None and client.stdout is not None
    client.stdin.write("go\n")
    client.stdin.flush()
    assert client.stdout.readline().strip() == "stepping"


def _play_one(server: EpisodeServer, task: Task) -> None:
    async def episode():
        async with ConvCodeWorldClient(base_url=server.base_url) as client:
            await client.reset(task_id=task.task_id)
            assert (await client.step(task.ground_truth)).reward == 1.0

    run(episode())


def _steady(server: EpisodeServer, files: Path) -> tuple[int, int]:
    """Processes under the server and entries in its TMPDIR, once they stop changing (spares made, runs torn down)."""
    last, stable_since = None, time.monotonic()
    while time.monotonic() - stable_since < 1.5:
        now = (len(server.descendants()), len(os.listdir(files)))
        if now != last:
            last, stable_since = now, time.monotonic()
        time.sleep(0.1)
    return last  # type: ignore[return-value]


def _alive(pid: int) -> bool:
    """Is ``pid`` a live process (not a zombie)?"""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def test_a_client_killed_mid_step_leaves_no_session_process_or_file(tmp_path, humaneval):
    files = tmp_path / "server-tmp"
    files.mkdir()
    with EpisodeServer(["CF-EF_full", "--dataset", "humaneval"], env={**os.environ, "TMPDIR": str(files)}) as server:
        _play_one(server, humaneval["HumanEval/0"])  # the executor at its steady state
        baseline = _steady(server, files)
        name = "ccw-drop-1"
        client = _client(tmp_path, server, name)
        _go(client)
        until(lambda: bool(_named(server, name)), 30, "the client's program runs in the sandbox")
        os.kill(client.pid, signal.SIGKILL)
        client.wait()
        gone_s = until(lambda: server.sessions() == {"active_sessions": 0, "max_sessions": 256, "live_episodes": 0},
                        10, "the killed client's session and env are closed")
        killed_s = gone_s + until(lambda: not _named(server, name), RUN_S + 10, "the killed client's run ends")
        after = _steady(server, files)
    # The session, its env and its run were ended at once, not when the run would have ended (issue 39: a run whose
    # client was killed kept computing until its time limit).
    assert gone_s < RUN_S / 2 and killed_s < RUN_S / 2, (gone_s, killed_s)
    assert after == baseline, f"processes and TMPDIR entries before {baseline}, after {after}"
    assert "Exception in ASGI application" not in server.logs(), server.logs()[-3000:]


def test_a_killed_clients_run_still_queued_never_runs(tmp_path, humaneval):
    """One sandbox slot: another session's long run holds it; the killed client's run waits behind it, and is dropped."""
    with EpisodeServer(["CF-EF_full", "--dataset", "humaneval", "--workers", "1"]) as server:
        _play_one(server, humaneval["HumanEval/0"])
        holder = _client(tmp_path, server, "ccw-hold-slot", sleep_s=RUN_S)
        queued = _client(tmp_path, server, "ccw-queued")
        _go(holder)
        until(lambda: bool(_named(server, "ccw-hold-slot")), 30, "the first client's program holds the slot")
        _go(queued)
        time.sleep(0.5)  # its step is in the server, waiting for the slot
        assert server.sessions()["active_sessions"] == 2
        os.kill(queued.pid, signal.SIGKILL)
        queued.wait()
        until(lambda: server.sessions()["active_sessions"] == 1, 5, "the killed client's session is closed")
        assert holder.stdout is not None and holder.stdout.readline().strip() == "returned"
        holder.wait(timeout=30)
        seen = False
        deadline = time.monotonic() + 3.0  # the slot is free: a run still queued would start now
        while time.monotonic() < deadline and not seen:
            seen = bool(_named(server, "ccw-queued"))
            time.sleep(0.05)
        assert not seen, "the killed client's queued run ran"
        assert server.sessions() == {"active_sessions": 0, "max_sessions": 256, "live_episodes": 0}


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_mid_episode_closes_the_backend_and_leaves_no_process_cgroup_or_file(tmp_path, signum):
    """Issue 39, defect 4: uvicorn raised the signal again before the backend's close ran, so the executor's cgroups
    were left and its workers outlived the server. SIGTERM is what ``docker stop`` and systemd send."""
    files = tmp_path / "server-tmp"
    files.mkdir()
    name = "ccw-signal-run"
    with EpisodeServer(["CF-EF_full", "--dataset", "humaneval", "--workers", "1"],
                       env={**os.environ, "TMPDIR": str(files)}) as server:
        client = _client(tmp_path, server, name)
        _go(client)
        until(lambda: bool(_named(server, name)), 30, "the client's program runs in the sandbox")
        processes = server.descendants()
        cgroups = slot_cgroups(processes)
        started = time.monotonic()
        status = server.stop_with(signum, timeout_s=60)
        took = time.monotonic() - started
        client.kill()
        client.wait()
        logs = server.logs()
    alive = [pid for pid in processes if _alive(pid)]
    left = sorted(path for path in cgroups if os.path.exists(path))
    assert not alive, f"processes of the server still alive after it ended: {alive}"
    assert not left, f"slot cgroups left: {left}"
    assert os.listdir(files) == [], os.listdir(files)
    assert status == -signum, (status, logs[-3000:])  # the signal ends it, after the clean-up
    assert "the backend is closed" in logs, logs[-3000:]
    assert took < 30, took
    if os.geteuid() == 0:  # as root the sandbox gives each slot a cgroup: the run was in one
        assert cgroups, "the run was in no slot cgroup: nothing was checked"
