"""The side-by-side benchmark's driver protocol (``benchmarks/_timing.serve``), through the real unsafe driver in its
own interpreter, as the floor (a fork per run) and as the ceiling (reused processes): one job at a time and one
parallel pass, verdicts and times as the bench reads them.

Only the protocol is checked here; no speed is asserted (speed targets live in ``benchmarks/``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from convcodeworld_gym.tasks import Task

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

TEST = """import unittest
class TestCases(unittest.TestCase):
    def test_one(self):
        self.assertEqual(task_func(2), 4)
    def test_two(self):
        self.assertEqual(task_func(-3), 9)
"""


@pytest.fixture()
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import bench_sandbox

    return bench_sandbox


def _task() -> Task:
    return Task(task_id="Bench/0", prompt="square it", code_prompt="def task_func(x):\n", entry_point="task_func",
                canonical_solution="    return x * x\n", test=TEST)


@pytest.mark.parametrize("args", [(), ("--reuse", "2")], ids=["floor, a fork per run", "ceiling, reused processes"])
def test_the_floor_driver_answers_checks_and_parallel_passes_with_true_verdicts(bench, args):
    task = _task()
    right, wrong = (task, task.ground_truth), (task, task.code_prompt + "    return x + x\n")
    printing = (task, "print('{\"seconds\": 0, \"passed\": true}')\n" + task.ground_truth.replace("return", "print(x)\n    return"))
    crashing = (task, "raise SystemExit(0)\n" + task.ground_truth)  # a module that fails: not passed, and the driver goes on
    driver = bench.Driver(sys.executable, "_floor_driver.py", *args)
    try:
        seconds, passed = driver.check(right)
        assert passed is True and 0 < seconds < 60
        assert driver.check(wrong)[1] is False  # 2 + 2 == 4 passes test_one, test_two fails: not all pass
        assert driver.check(printing)[1] is True  # a program's prints do not reach the answers
        seconds, cpu_s = driver.parallel([right, wrong, right, wrong], 2)
        assert 0 < seconds < 60 and cpu_s >= 0
        assert driver.check(wrong)[1] is False  # still in step after the pass
        assert driver.check(crashing)[1] is False
        assert driver.check(right)[1] is True
    finally:
        driver.close()


@pytest.fixture()
def judge_rate(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import judge_rate

    return judge_rate


def test_the_judge_rates_rollout_mix_is_a_pass_a_failure_of_every_test_and_a_crash_before_any(judge_rate, executor):
    """judge_rate.py's rollout mix, through the real sandbox: per task, the canonical program passes, the wrong one
    runs every test and fails them, the crashing one ends before any test."""
    task = _task()
    jobs = judge_rate.rollout_mix([task])
    right, wrong, crashing = executor.run_many(jobs)
    assert [program for _, program in jobs][0] == task.ground_truth
    assert right.passed and len(right.tests) == 2
    assert not wrong.passed and [t.outcome.value for t in wrong.tests] == ["failed", "failed"]
    assert not crashing.passed and "crashed at import" in (crashing.crash or "")


def test_the_judge_rates_cpu_clock_counts_what_its_children_spend(judge_rate):
    """The CPU the benchmark divides by counts a child process's CPU (its own cgroup where it can make one, else the
    machine's): a child that spins 0.3 s of CPU moves it by at least 0.25 s."""
    import subprocess

    clock = judge_rate.CpuClock()
    try:
        before = clock()
        subprocess.run([sys.executable, "-c", "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"],
                       check=True, timeout=60)
        assert clock() - before >= 0.25, clock.source
    finally:
        clock.close()
