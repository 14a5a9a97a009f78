"""Nothing passes from one run to the next (item 4 of issue 13): each run has its own network and IPC
namespaces, made in the spare before its job, so what a run leaves in them dies with it.

Each test runs a *leaver* (a program that passes and leaves something behind in the kernel) and then a
*finder* on the same worker slot, written so that it earns a pass only if it finds what was left.
"""

from __future__ import annotations

import os
import shutil
import uuid

import pytest

from convcodeworld_gym.sandbox import SandboxExecutor
from convcodeworld_gym.sandbox.host.launch import LocalLauncher
from convcodeworld_gym.tasks import Task

from hostile_programs import SQUARE, assert_rejected, succeed_if, texts
from test_hostile import SETTINGS

IPC_CREAT = 0o1000
SYSV = {  # how to create one (leaver) and how to look it up without creating it (finder)
    "shared_memory": ("libc.shmget(KEY, 4096, IPC_CREAT | 0o666)", "libc.shmget(KEY, 0, 0)"),
    "message_queue": ("libc.msgget(KEY, IPC_CREAT | 0o666)", "libc.msgget(KEY, 0)"),
    "semaphore": ("libc.semget(KEY, 1, IPC_CREAT | 0o666)", "libc.semget(KEY, 0, 0)"),
}
# A task whose solution imports socket: its runs keep IP sockets on their own loopback.
LOOPBACK = Task("hostile/loopback", "Square x.", "import socket\ndef task_func(x):\n", "task_func", "    return x * x\n",
                SQUARE.test)


@pytest.fixture()
def one_slot():
    """One worker, so that the finder runs on the slot the leaver used; no cache, no calibration."""
    if os.geteuid() != 0:
        pytest.skip("LOUD SKIP: per-run namespaces need root")
    with SandboxExecutor(workers=1, settings=SETTINGS, preload=(), calibrate=False, cache=False) as ex:
        if "run_ipcns" not in ex.confinement["features"]:
            pytest.skip(f"LOUD SKIP: no per-run namespaces here ({ex.confinement['missing']})")
        yield ex


def leave(ex: SandboxExecutor, task: Task, setup: str) -> None:
    """Run a program that passes after ``setup`` (statements, run at the first call of task_func) succeeded."""
    body = "\n".join("        " + line for line in setup.strip("\n").splitlines())
    program = (f"import ctypes, os, socket, time\nlibc = ctypes.CDLL(None, use_errno=True)\nleft = []\n"
               f"def task_func(x):\n    if not left:\n        left.append(1)\n{body}\n    return x * x\n")
    result = ex.run(task, program)
    assert result.passed, f"the leaver itself failed, so the test proves nothing: {texts(result)}"


@pytest.mark.parametrize("kind", sorted(SYSV))
def test_sysv_ipc_objects_die_with_their_run(one_slot, kind):
    key = int(uuid.uuid4().hex[:7], 16)
    create, find = SYSV[kind]
    prelude = f"KEY, IPC_CREAT = {key}, {IPC_CREAT}\n"
    leave(one_slot, SQUARE, prelude + f"if {create} < 0:\n    raise OSError(ctypes.get_errno(), 'could not create')")
    finder = succeed_if("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n" + prelude + f"ok = {find} >= 0")
    assert_rejected(one_slot, finder, "attack blocked")


def test_an_abstract_unix_listener_dies_with_its_run(one_slot):
    name = f"\\0ccw-left-{uuid.uuid4().hex}"
    leave(one_slot, SQUARE, f"""
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind({name!r})
srv.listen(1)
if os.fork() == 0:  # a process that keeps the listener open after the run reported
    time.sleep(30)
    os._exit(0)
""")
    finder = succeed_if(f"import socket\ns = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\ns.connect({name!r})\nok = True")
    assert_rejected(one_slot, finder, "attack blocked")


def test_a_tcp_listener_dies_with_its_run(one_slot):
    port = 20000 + int(uuid.uuid4().hex[:4], 16) % 20000
    leave(one_slot, LOOPBACK, f"""
srv = socket.socket()
srv.bind(('127.0.0.1', {port}))
srv.listen(1)
if os.fork() == 0:
    time.sleep(30)
    os._exit(0)
""")
    finder = succeed_if(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2).close()\nok = True")
    assert_rejected(one_slot, finder, "attack blocked", task=LOOPBACK)


def test_a_socket_in_time_wait_does_not_reach_the_next_run(one_slot):
    port = 20000 + int(uuid.uuid4().hex[:4], 16) % 20000
    # The server side closes first: its end of the connection, on the fixed port, stays in TIME_WAIT for 60 s.
    leave(one_slot, LOOPBACK, f"""
srv = socket.socket()
srv.bind(('127.0.0.1', {port}))
srv.listen(1)
cli = socket.create_connection(('127.0.0.1', {port}))
conn, _ = srv.accept()
conn.close()
srv.close()
time.sleep(0.1)
cli.close()
""")
    # A later run that binds the same port without SO_REUSEADDR (as many programs do) must not meet it.
    victim = f"import socket\ndef task_func(x):\n    s = socket.socket()\n    s.bind(('127.0.0.1', {port}))\n    s.close()\n    return x * x\n"
    result = one_slot.run(LOOPBACK, victim)
    assert result.passed, texts(result)


class MarkingLauncher(LocalLauncher):
    """Local workers (real ones), each start counted; from the second start on, a file exists (``marker``) that
    the canonical solution of :func:`flaky_task` needs: its first calibration run fails, a fresh worker's passes."""

    def __init__(self, marker: str) -> None:
        super().__init__()
        self.marker, self.starts = marker, 0

    def readable(self) -> list[str]:
        return [*super().readable(), os.path.dirname(self.marker)]

    def start(self, config):
        self.starts += 1
        if self.starts >= 2:
            with open(self.marker, "w") as fh:
                fh.write("fresh")
        return super().start(config)


def flaky_task(marker: str) -> Task:
    solution = f"    return x * x if os.path.exists({marker!r}) else -1\n"
    return Task("hostile/flaky_canonical", "Square x.", "import os\ndef task_func(x):\n", "task_func", solution, SQUARE.test)


@pytest.mark.parametrize("first_mode_fails_for_good", [False, True], ids=["unlucky_first_run", "fails_for_good"])
def test_calibration_retries_a_failing_canonical_in_a_fresh_worker(first_mode_fails_for_good):
    from convcodeworld_gym import ConvCodeWorldEnv

    where = f"/var/tmp/ccw_calibration_{uuid.uuid4().hex}"
    os.makedirs(where, mode=0o755)
    marker = f"{where}/{'never' if first_mode_fails_for_good else 'fresh'}"
    try:
        launcher = MarkingLauncher(f"{where}/fresh")
        task = flaky_task(marker)
        with SandboxExecutor(workers=1, settings=SETTINGS, preload=(), launcher=launcher) as ex:
            profile = ex.profile(task)
            if first_mode_fails_for_good:  # split fails, also in a fresh worker: marked, and the note says so
                assert not profile.canonical_passed and "split: " in profile.note, profile
                assert profile.note.count("also in a fresh worker") == 1, profile
            else:  # the first run failed (the worker was 'polluted'); the retry in a fresh worker passed: still split
                assert profile.canonical_passed and profile.mode.value == "split", profile
                assert "failed once" in profile.note and "passed in a fresh worker" in profile.note, profile
            env = ConvCodeWorldEnv("CF-EF_full", dataset=[task], executor=ex)
            env.reset(options={"task_id": task.task_id})
            _, _, _, _, info = env.step(task.ground_truth)
            assert info["profile"]["note"] == profile.note
    finally:
        shutil.rmtree(where, ignore_errors=True)


def test_at_level_uid_the_sweep_removes_the_sysv_ipc_objects_of_the_slot_uid():
    """Where runs share one IPC namespace (level ``uid``, in a container), the sweep after each run removes them."""
    import subprocess

    from convcodeworld_gym.sandbox.confinement.sweep import sweep_uid, sysv_ipc_ids
    from convcodeworld_gym.sandbox.host.pool import _claim_uid

    if os.geteuid() != 0 or not shutil.which("ipcmk"):
        pytest.skip("LOUD SKIP: sweeping a uid needs root (to become it), and this test util-linux's ipcmk")
    uid, lock = _claim_uid(62100)
    try:
        # util-linux's ipcmk, as the uid: a shared memory segment, a message queue and a semaphore set
        subprocess.run(["ipcmk", "-M", "4096", "-Q", "-S", "1"], user=uid, group=uid, extra_groups=[], check=True,
                       capture_output=True)
        assert all(len(ids) == 1 for ids in sysv_ipc_ids(uid).values()), sysv_ipc_ids(uid)  # left: one of each
        assert sweep_uid(uid, [])
        assert sysv_ipc_ids(uid) == {"shm": [], "msg": [], "sem": []}
    finally:
        os.close(lock)
