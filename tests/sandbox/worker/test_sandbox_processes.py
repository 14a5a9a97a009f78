"""Process bookkeeping of the sandbox: workers outlive the threads that start them, and no
signal is ever sent to a pid that is no longer our own child."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from convcodeworld_gym.sandbox import SandboxExecutor
from convcodeworld_gym.sandbox.children import has_exited, kill_group
from convcodeworld_gym.sandbox.confinement.confine import RunNamespaces
from convcodeworld_gym.tasks import Task

from hostile_programs import SQUARE_TESTS


def _stat(pid: int) -> list[str]:
    """The fields of ``/proc/PID/stat`` after the command name: state, ppid, ..."""
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()


def _state(pid: int) -> str:
    return _stat(pid)[0]


def test_worker_started_from_a_short_lived_thread_survives_it(humaneval):
    """A worker dies with its parent *thread* (PR_SET_PDEATHSIG): it must not be that thread."""
    task = humaneval["HumanEval/0"]
    with SandboxExecutor(workers=1, preload=(), cache=False) as ex:
        results = []
        starter = threading.Thread(target=lambda: results.append(ex.run(task, task.ground_truth)))
        starter.start()
        starter.join()
        pid = ex._workers[0].proc.pid  # noqa: SLF001 - the real worker process
        time.sleep(0.5)  # the kernel's death signal, had it been armed on that thread, is delivered by now
        again = ex.run(task, task.ground_truth)
        assert results[0].passed and again.passed and again.crash is None
        assert ex.replaced_workers == 0 and ex._workers[0].proc.pid == pid  # noqa: SLF001


def test_has_exited_leaves_the_child_a_zombie_so_its_pid_stays_ours():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while not has_exited(proc.pid):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert _state(proc.pid) == "Z"  # not reaped: no other process can be given this pid yet
    kill_group(proc.pid)  # harmless on our zombie
    assert proc.wait() == 0


def _alive(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}") and _state(pid) != "Z"


@pytest.mark.skipif(os.geteuid() != 0, reason="a new PID namespace needs root")
def test_run_namespaces_forks_pid_1_again_and_again_and_killing_it_ends_the_run():
    """How a worker forks each run: straight into a fresh PID namespace, as its pid 1, while its own
    later children stay in its namespace; SIGKILL to that unreaped child ends every process of the run."""
    spawn = RunNamespaces()
    try:
        for _ in range(2):  # a second unshare(CLONE_NEWPID) works only if the first was undone
            read_fd, write_fd = os.pipe()
            child = spawn.fork()
            if child == 0:
                try:
                    grandchild = subprocess.Popen(["sleep", "600"], start_new_session=True)  # not even in its group
                    os.write(write_fd, f"{os.getpid()} {grandchild.pid}\n".encode())
                    time.sleep(600)
                finally:
                    os._exit(0)
            os.close(write_fd)
            with os.fdopen(read_fd) as fh:
                inside, _ = (int(x) for x in fh.readline().split())
            sleeper = next(int(p) for p in os.listdir("/proc") if p.isdigit() and _ppid(int(p)) == child)
            assert inside == 1
            kill_group(child)
            assert os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == -signal.SIGKILL
            deadline = time.monotonic() + 30
            while _alive(sleeper):
                assert time.monotonic() < deadline, "a process of the run outlived its pid 1"
                time.sleep(0.01)
        ordinary = os.fork()  # the caller's own children are back in its namespace
        if ordinary == 0:
            os._exit(0 if os.getpid() != 1 else 1)
        assert os.waitstatus_to_exitcode(os.waitpid(ordinary, 0)[1]) == 0
    finally:
        spawn.close()


def _ppid(pid: int) -> int | None:
    try:
        return int(_stat(pid)[1])
    except (OSError, ValueError):
        return None


_FORGE = """import unittest
unittest.TestCase.run = lambda self, result=None: None  # would pass every test if it ran in the judge
def task_func(x):
    return 0
"""


def test_spares_made_for_the_other_judge_mode_still_judge_right():
    """A worker makes its next spare for the last job's judge mode; jobs alternating between modes
    (the split judge's program process forked on demand, or ended unused) are judged as always."""
    split = Task("modes/split", "Square x.", "def task_func(x):\n", "task_func", "    return x * x\n", SQUARE_TESTS)
    # Its program sets an attribute of an object the tests made: only one process can judge that (forgeable).
    in_place = Task("modes/set_attribute", "Label a box.", "def task_func(box):\n", "task_func", "    box.label = 'x'\n",
                    "import unittest\nclass Box:\n    label = None\nclass TestCases(unittest.TestCase):\n"
                    "    def test_label(self):\n        box = Box()\n        task_func(box)\n"
                    "        self.assertEqual(box.label, 'x')\n")
    with SandboxExecutor(workers=1, preload=(), cache=False, allow_forgeable=True) as ex:
        assert ex.profile(split).mode.value == "split" and ex.profile(in_place).mode.value == "inprocess"
        for _ in range(2):
            for task in (split, in_place):
                right, wrong = ex.run(task, task.ground_truth), ex.run(task, "def task_func(x):\n    return x + 1\n")
                mode = "split" if task is split else "inprocess"
                assert right.details["forgeable"] is (mode == "inprocess")
                assert right.passed and not wrong.passed and right.details["judge"] == wrong.details["judge"] == mode
            forged = ex.run(split, _FORGE)  # right after an in-process job: its program process was forked on demand
            assert not forged.passed and forged.details["judge"] == "split"
            assert [t.outcome.value for t in forged.tests] == ["failed", "failed"]


def test_sweep_uid_ends_every_process_and_file_of_the_uid_and_nothing_else():
    """Level ``uid`` (no PID namespace per run, as in a container): what a run left under its uid is swept."""
    import shutil
    import tempfile
    from pathlib import Path

    from convcodeworld_gym.sandbox.confinement.sweep import sweep_uid
    from convcodeworld_gym.sandbox.host.pool import _claim_uid

    if os.geteuid() != 0:
        pytest.skip("LOUD SKIP: sweeping a uid needs root (to become it)")
    uid, lock = _claim_uid(62000)  # a uid no executor on this machine uses
    shared = Path(tempfile.mkdtemp(prefix="ccw_sweep_"))  # in /tmp: reachable for the uid
    try:
        os.chmod(shared, 0o777)
        (shared / "root_owned").write_text("x")
        # as the uid: a file, a dir it made unreadable with a file inside, and a sleeper in a session of its own
        script = "mkdir -p d/e && touch d/e/f && chmod 0 d && touch g && exec setsid sleep 60"
        daemon = subprocess.Popen(["/bin/sh", "-c", script], cwd=shared, user=uid, group=uid, extra_groups=[])
        deadline = time.monotonic() + 30
        while not (shared / "g").exists():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        bystander = subprocess.Popen(["sleep", "60"])  # root's: untouched
        assert sweep_uid(uid, [str(shared)])
        assert daemon.wait(10) == -signal.SIGKILL
        assert sorted(p.name for p in shared.iterdir()) == ["root_owned"] and bystander.poll() is None
        bystander.kill()
        bystander.wait()
    finally:
        os.close(lock)
        shutil.rmtree(shared, ignore_errors=True)
