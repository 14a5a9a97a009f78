"""A run that waits on nothing lends its place (:mod:`convcodeworld_gym.sandbox.host.lending`): with one slot, a program
that sleeps does not hold back the next run, a program that computes does, and a sleeper that wakes up to compute
takes its place back. Real runs in real slots whose cgroups count their CPU (as root, with cgroups); elsewhere the
executor never lends, and these skip saying so.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest

from convcodeworld_gym.sandbox import Limits, SandboxExecutor
from convcodeworld_gym.sandbox.confinement.slot_cgroup import CgroupUnavailable, SlotCgroup, find_tree
from convcodeworld_gym.sandbox.host.lending import RunTokens

from hostile_programs import SQUARE, texts

LIMITS = Limits(suite_timeout_s=20.0, test_timeout_s=20.0)
RIGHT = SQUARE.ground_truth
SLEEPER = "import time\ntime.sleep(6)\ndef task_func(x):\n    return x * x\n"
BUSY = "import time\nend = time.monotonic() + 5\nwhile time.monotonic() < end:\n    pass\ndef task_func(x):\n    return x * x\n"
WAKER = ("import time\ntime.sleep(2.5)\nend = time.monotonic() + 5\nwhile time.monotonic() < end:\n    pass\n"
         "def task_func(x):\n    return x * x\n")


def _counts_cpu() -> bool:
    """A slot's cgroup can be made here and counts its CPU."""
    if os.geteuid() != 0:
        return False
    try:
        slot = SlotCgroup.make(find_tree(), f"ccw-test-lending-{os.getpid()}", 1.0, 64)
    except (CgroupUnavailable, OSError):
        return False
    try:
        return slot.cpu_seconds() is not None
    finally:
        slot.remove()


pytestmark = pytest.mark.skipif(not _counts_cpu(), reason="LOUD SKIP: no slot cgroup with a CPU count here (root, "
                                                           "cgroup v2, or v1 with cpuacct): the executor never lends")


def _one_slot(lend_idle: bool = True) -> SandboxExecutor:
    return SandboxExecutor(LIMITS, workers=1, preload=(), calibrate=False, cache=False, lend_idle=lend_idle)


def _alongside(ex: SandboxExecutor, slow: str, after_s: float) -> tuple[float, float, object]:
    """Run ``slow``; ``after_s`` later, run the right program. Returns (seconds until the right one was done,
    seconds until the slow one was done, both from the start; the slow one's result)."""
    ex.run(SQUARE, RIGHT)  # the slot's worker is warm
    started = time.monotonic()
    slow_result: list = []

    def run_slow() -> None:
        slow_result.append(ex.run(SQUARE, slow))
        slow_result.append(time.monotonic() - started)

    thread = threading.Thread(target=run_slow)
    thread.start()
    time.sleep(after_s)
    right = ex.run(SQUARE, RIGHT)
    right_s = time.monotonic() - started
    thread.join()
    assert right.passed, texts(right)
    return right_s, slow_result[1], slow_result[0]


def test_a_sleeping_program_lends_its_place_and_keeps_its_own_verdict():
    with _one_slot() as ex:
        right_s, slow_s, slept = _alongside(ex, SLEEPER, after_s=0.5)
    assert slept.passed, texts(slept)  # its own run is untouched: same limits, same slot
    assert right_s < 4.5 < slow_s, (right_s, slow_s)  # done while the sleeper slept, on a second slot
    assert slept.details["lent_s"] > 2.5, slept.details
    assert slept.details["worker"] == 0


def test_awaited_runs_behind_a_sleeper_start_once_it_lends_its_place():
    """The awaited path's queue (one call per slot, first come first served) grows by the places lent."""
    done: list[tuple[str, float]] = []
    with _one_slot() as ex:
        ex.run(SQUARE, RIGHT)

        async def run(name: str, program: str) -> None:
            result = await ex.arun(SQUARE, program)
            assert result.passed, texts(result)
            done.append((name, time.monotonic() - started))

        async def main() -> None:
            await asyncio.gather(run("sleeper", SLEEPER), *(run(f"right {i}", RIGHT) for i in range(3)))

        started = time.monotonic()
        asyncio.run(main())
    assert [name for name, _ in done][-1] == "sleeper" and done[-2][1] < 4.5, done


def test_without_lending_the_sleeper_holds_the_only_slot():
    with _one_slot(lend_idle=False) as ex:
        right_s, slow_s, slept = _alongside(ex, SLEEPER, after_s=0.5)
    assert right_s > 6.0 and "lent_s" not in slept.details, (right_s, slept.details)


def test_a_program_that_computes_never_lends():
    with _one_slot() as ex:
        right_s, slow_s, busy = _alongside(ex, BUSY, after_s=0.5)
    assert busy.passed and "lent_s" not in busy.details, busy.details
    assert right_s >= slow_s - 0.5 and right_s > 5.0, (right_s, slow_s)  # it waited for the one slot


def test_a_sleeper_that_wakes_up_takes_its_place_back():
    with _one_slot() as ex:
        right_s, slow_s, woke = _alongside(ex, WAKER, after_s=4.0)  # asked for while the waker computes
    assert woke.passed, texts(woke)
    assert 0.5 < woke.details["lent_s"] < 3.5, woke.details  # lent while it slept, no longer
    assert right_s >= slow_s - 0.5, (right_s, slow_s)  # the slot was its own again: the right one waited


def test_tokens_taken_back_into_debt_hold_new_runs_until_paid():
    tokens = RunTokens(1)
    tokens.take()
    tokens.give()  # a run lends its token
    tokens.take()  # the next run starts
    tokens.take_back()  # the lender computes again: -1
    started = threading.Event()

    def third() -> None:
        tokens.take()
        started.set()

    threading.Thread(target=third, daemon=True).start()
    tokens.give()  # one run ends: the debt is paid, nothing free yet
    assert not started.wait(0.3)
    tokens.give()  # the other ends
    assert started.wait(2.0)


# Red team: a program that falls idle to be lent a place, then computes just under the share that takes it back,
# many at once, to crowd a correct CPU-bound program out of the CPUs it was promised.
SNEAK = ("import time\ntime.sleep(1.6)\nend = time.monotonic() + 6\nwhile time.monotonic() < end:\n"
         "    t = time.monotonic() + 0.045\n    while time.monotonic() < t:\n        pass\n    time.sleep(0.205)\n"
         "def task_func(x):\n    return x * x\n")
N = 1_500_000
SUM = type(SQUARE)("lend/sum_of_squares", "Sum of the squares below n.", "def task_func(n):\n", "task_func",
                   "    return sum(i * i for i in range(n))\n",
                   "import unittest\nclass TestCases(unittest.TestCase):\n    def test_sum(self):\n"
                   f"        self.assertEqual(task_func({N}), {sum(i * i for i in range(N))})\n")


def test_sneaks_that_stay_lent_take_little_from_a_correct_neighbour():
    with SandboxExecutor(LIMITS, workers=2, preload=(), calibrate=False, cache=False) as ex:
        quiet = [ex.run(SUM, SUM.ground_truth) for _ in range(3)]
        quiet_s = sorted(r.details["run_s"] for r in quiet)[1]
        sneaks: list = []
        threads = [threading.Thread(target=lambda: sneaks.append(ex.run(SQUARE, SNEAK))) for _ in range(6)]
        for thread in threads:
            thread.start()
        time.sleep(2.5)  # the first ones have been lent places, the next ones started in them
        loaded = []
        while any(thread.is_alive() for thread in threads):
            loaded.append(ex.run(SUM, SUM.ground_truth))
        for thread in threads:
            thread.join()
    assert len(loaded) >= 3 and all(r.passed for r in loaded), [texts(r) for r in loaded if not r.passed][:1]
    loaded_s = sorted(r.details["run_s"] for r in loaded)[len(loaded) // 2]
    assert loaded_s <= 1.5 * quiet_s, f"lent sneaks slowed a correct run from {quiet_s:.3f} to {loaded_s:.3f} s"
    assert all(r.passed for r in sneaks) and any(r.details.get("lent_s", 0) > 3 for r in sneaks), \
        [r.details.get("lent_s") for r in sneaks]
    assert max(r.details["worker"] for r in sneaks + loaded) < 4  # never more than 2 x workers slots
