"""Process bookkeeping of the sandbox: workers outlive the threads that start them, and no
signal is ever sent to a pid that is no longer our own child."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

from convcodeworld_gym.sandbox import SandboxExecutor
from convcodeworld_gym.sandbox.reap import guard_child, has_exited, kill_group


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0]


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


def test_guard_child_kills_the_group_on_sigterm_and_reports_the_signal():
    """The helper pattern: SIGTERM to the guarding process kills its child's whole group, then it reaps."""
    read_fd, write_fd = os.pipe()
    guard = os.fork()
    if guard == 0:  # the guarding process (as a run's helper is)
        try:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
            child = os.fork()
            if child == 0:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
                os.setsid()
                grandchild = subprocess.Popen(["sleep", "600"])  # in the child's group
                os.write(write_fd, f"{grandchild.pid}\n".encode())
                time.sleep(600)
                os._exit(0)
            status = guard_child(child)
            os._exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else 1)
        except BaseException:  # noqa: BLE001
            os._exit(2)
    os.close(write_fd)
    with os.fdopen(read_fd) as fh:
        grandchild = int(fh.readline())
    os.kill(guard, signal.SIGTERM)  # our own unreaped child: a safe target
    code = os.waitstatus_to_exitcode(os.waitpid(guard, 0)[1])
    assert code == 128 + signal.SIGKILL
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{grandchild}") and _state(grandchild) != "Z":
        assert time.monotonic() < deadline, "the child's group outlived the guard"
        time.sleep(0.01)


def test_sweep_uid_ends_every_process_and_file_of_the_uid_and_nothing_else():
    """Level ``uid`` (no PID namespace per run, as in a container): what a run left under its uid is swept."""
    import shutil
    import tempfile
    from pathlib import Path

    import pytest

    from convcodeworld_gym.sandbox.pool import _claim_uid
    from convcodeworld_gym.sandbox.sweep import sweep_uid

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
