"""``run_many``: the longest expected jobs start first, and the results still come back in job order."""

from __future__ import annotations

import pytest

from convcodeworld_gym.sandbox import SandboxExecutor
from convcodeworld_gym.tasks import Task, load_tasks
from convcodeworld_gym.testing.executor import FakeExecutor

TASKS = [Task(f"t/{i}", "p", "def f():\n", "f", "    return 1\n",
              "import unittest\nclass TestCases(unittest.TestCase):\n    def test_one(self):\n        self.assertEqual(f(), 1)\n",
              source="test") for i in range(6)]
EXPECTED = {"t/0": 0.1, "t/1": None, "t/2": 3.0, "t/3": 0.1, "t/4": 1.0, "t/5": 2.0}


class _Timed(FakeExecutor):
    def expected_seconds(self, task: Task) -> float | None:
        return EXPECTED[task.task_id]


def test_jobs_start_longest_expected_first_and_come_back_in_job_order():
    ex = _Timed()
    programs = ["def f():\n    return 1\n" if i % 2 else "def f():\n    return 2\n" for i in range(len(TASKS))]
    results = ex.run_many(list(zip(TASKS, programs)), max_workers=2)
    started = [task_id for task_id, _ in ex.calls]
    assert set(started[:2]) == {"t/1", "t/2"}  # no estimate first, then the longest (two workers: either may start first)
    assert started[2:] == ["t/5", "t/4", "t/0", "t/3"]
    assert [r.passed for r in results] == [i % 2 == 1 for i in range(len(TASKS))]  # each result is its own job's


def test_one_at_a_time_the_jobs_run_in_the_order_given():
    ex = _Timed()
    ex.run_many([(t, "def f():\n    return 1\n") for t in TASKS], max_workers=1)
    assert [task_id for task_id, _ in ex.calls] == [t.task_id for t in TASKS]


def test_the_sandbox_expects_a_task_to_take_its_shipped_canonical_time_and_knows_nothing_of_a_new_one():
    with SandboxExecutor(workers=1) as ex:
        task = load_tasks("humaneval")["HumanEval/0"]
        shipped = ex.shipped.lookup(task) if ex.shipped is not None else None
        if shipped is None:
            pytest.skip("no shipped profile for this HumanEval data")
        assert shipped.canonical_s is not None
        assert ex.expected_seconds(task) == shipped.canonical_s
        assert ex.expected_seconds(TASKS[0]) is None  # nothing was run to find out
