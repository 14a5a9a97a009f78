"""Runs lost to the infrastructure: a sandbox worker SIGKILLed from outside mid-run (as the OOM killer, a
preempted node or a person would) is no fault of the program. The run is retried once on a fresh worker;
lost again, it comes back with ``infra_error`` (no verdict, never cached), and the env says so. What a
program does to its own run (exit, crash, be killed by a signal it can send, exhaust its memory) stays its
failure: never retried, never flagged.

The worker is killed for real (:class:`~convcodeworld_gym.testing.infra.WorkerKiller`: SIGKILL to the worker
process holding the marked run); nothing of the sandbox is mocked. The Docker and Ray backends have the same
tests in ``test_docker.py`` and ``test_ray.py``.
"""

from __future__ import annotations

import pytest

from convcodeworld_gym import ConvCodeWorldEnv
from convcodeworld_gym.sandbox import Limits, Outcome, SandboxExecutor
from convcodeworld_gym.testing.infra import WorkerKiller, marked

from hostile_programs import SQUARE, texts

#: Long enough for a marked program's sleep, with no calibration: every run here is the program's own.
LIMITS = Limits(suite_timeout_s=20.0)
CORRECT = marked(SQUARE.ground_truth, sleep_s=1.0)


@pytest.fixture
def one_worker():
    """One warm worker and no cache: every run is really run, on the slot the killer kills."""
    with SandboxExecutor(LIMITS, workers=1, preload=(), calibrate=False, cache=False) as ex:
        assert ex.run(SQUARE, SQUARE.ground_truth).passed  # warm, so the first kill hits a run, not a start
        yield ex


def test_a_correct_program_is_not_failed_by_its_worker_killed_mid_run_it_is_retried(one_worker):
    assert one_worker.run(SQUARE, CORRECT).passed  # undisturbed, the marked program is correct
    with WorkerKiller(times=1) as killer:
        result = one_worker.run(SQUARE, CORRECT)
    assert len(killer.killed) == 1, "the killer never saw the run"
    assert result.passed and result.infra_error is None, texts(result)
    assert "killed by signal SIGKILL" in result.details["retried"]["lost"], result.details
    assert one_worker.replaced_workers == 1


def test_killed_twice_the_run_has_no_verdict_says_why_and_is_not_cached():
    with SandboxExecutor(LIMITS, workers=1, preload=(), calibrate=False) as ex:  # with its result cache
        assert ex.run(SQUARE, SQUARE.ground_truth).passed
        with WorkerKiller(times=2) as killer:
            lost = ex.run(SQUARE, CORRECT)
        assert len(killer.killed) == 2
        assert not lost.passed and "killed by signal SIGKILL" in (lost.infra_error or ""), lost
        assert "says nothing about the program" in lost.crash and all(t.outcome is Outcome.NOT_RUN for t in lost.tests)
        assert lost.details["retried"]["lost"] and lost.to_dict()["infra_error"] == lost.infra_error
        again = ex.run(SQUARE, CORRECT)  # the lost result was not cached: this one runs, and passes
        assert again.passed and again.details.get("cache") != "hit", again.details
        assert ex.run(SQUARE, CORRECT).details.get("cache") == "hit"  # a real verdict is cached


class _CountingUser:
    """A verbal-feedback provider that counts the turns it was asked about."""

    expertise = "expert"
    source = "test-counter"

    def __init__(self) -> None:
        self.asked = 0

    def __call__(self, context):
        self.asked += 1
        return "look again"


def test_the_env_says_infra_error_truncates_and_asks_no_user_about_a_lost_run(one_worker):
    user = _CountingUser()
    env = ConvCodeWorldEnv("CF-EF_full-SEF", dataset=[SQUARE], executor=one_worker, verbal_feedback=user)
    env.reset(options={"task_id": SQUARE.task_id})
    _, reward, terminated, truncated, info = env.step("def task_func(x):\n    return x\n")
    assert (reward, terminated, truncated, info["infra_error"], user.asked) == (0.0, False, False, None, 1)
    with WorkerKiller(times=2):
        _, reward, terminated, truncated, info = env.step(CORRECT)
    assert info["infra_error"] and "killed by signal SIGKILL" in info["infra_error"], info["crash"]
    assert (reward, terminated, truncated, info["passed"], info["episode_end"]) == (0.0, False, True, False, "infra_error")
    assert info["retried"]["lost"] and user.asked == 1  # no user was asked about a run that has no verdict
    env.reset(options={"task_id": SQUARE.task_id})
    _, reward, terminated, _, info = env.step(CORRECT)  # a new episode: the same program passes
    assert (reward, terminated, info["infra_error"], info["retried"]) == (1.0, True, None, {})


#: Programs that end or break their own run: the program's failure, whatever the process's end looks like.
OWN_CRASHES = {
    "os_exit": "import os\nos._exit(3)\ndef task_func(x):\n    return x * x\n",
    "segfault": "import ctypes\ndef task_func(x):\n    ctypes.string_at(0)\n    return x * x\n",
    "system_exit": "def task_func(x):\n    raise SystemExit(0)\n",
    "sigkill_itself": "import os, signal\ndef task_func(x):\n    os.kill(os.getpid(), signal.SIGKILL)\n",
    "sigkill_its_parent": "import os, signal\ndef task_func(x):\n    os.kill(os.getppid(), signal.SIGKILL)\n",
    "memory": "def task_func(x):\n    hog = [bytearray(64 << 20) for _ in range(1 << 10)]\n    return x * x\n",
}


@pytest.mark.parametrize("program", list(OWN_CRASHES.values()), ids=list(OWN_CRASHES))
def test_a_program_that_crashes_its_own_run_still_fails_and_is_not_retried(one_worker, program):
    result = one_worker.run(SQUARE, program)
    assert not result.passed and result.infra_error is None, texts(result)
    assert "retried" not in result.details and one_worker.replaced_workers == 0, result.details
    assert one_worker.run(SQUARE, SQUARE.ground_truth).passed
