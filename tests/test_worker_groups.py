"""Workers by import profile: a run forks from the smallest warm worker that holds what its task imports.

Real confined workers; each program reports which libraries its own process holds, and the tests judge it.
"""

from __future__ import annotations

import pytest

from convcodeworld_gym.sandbox import SandboxExecutor
from convcodeworld_gym.sandbox.profile import import_profile
from convcodeworld_gym.tasks import Task

pytest.importorskip("pandas")
pytest.importorskip("matplotlib")

_TEST = """import unittest
class TestCases(unittest.TestCase):
    def test_loaded(self):
        self.assertEqual(task_func(), {expected!r})
"""


def _task(name: str, header: str, expected: list[str]) -> Task:
    return Task(f"groups/{name}", "Which heavy libraries are loaded?", header + "def task_func():\n", "task_func",
                "    import sys\n    return [m for m in ('numpy', 'pandas', 'matplotlib') if m in sys.modules]\n",
                _TEST.format(expected=expected))


STDLIB = _task("stdlib", "import json\n", [])
NUMPY = _task("numpy", "import numpy as np\n", ["numpy"])
PANDAS = _task("pandas", "import pandas as pd\n", ["numpy", "pandas"])
PLOTS = _task("plots", "import pandas as pd\nimport matplotlib.pyplot as plt\n", ["numpy", "pandas", "matplotlib"])


def test_import_profiles_of_tasks():
    assert [import_profile(t) for t in (STDLIB, NUMPY, PANDAS, PLOTS)] == ["stdlib", "numpy", "pandas", "pandas+matplotlib"]
    scipy = Task("groups/own", "", "import scipy\ndef f():\n", "f", "    pass\n", "import unittest\n")
    assert import_profile(scipy) == "own"


def test_each_run_forks_from_the_smallest_worker_that_holds_its_imports():
    with SandboxExecutor(workers=1, cache=False) as ex:
        results = {t.task_id: ex.run(t, t.ground_truth) for t in (STDLIB, NUMPY, PANDAS, PLOTS)}
        profiles = {t.task_id: ex.profile(t).imports for t in (STDLIB, PANDAS)}
        groups = sorted(ex._groups)  # noqa: SLF001 - which groups were started
    failed = {tid: r.tests[0].traceback[-300:] for tid, r in results.items() if not r.passed}
    assert not failed  # each program saw exactly its profile's libraries: a pandas+matplotlib worker fails STDLIB
    assert [r.details["worker_group"] for r in results.values()] == ["stdlib", "numpy", "pandas", "pandas+matplotlib"]
    assert profiles == {"groups/stdlib": "stdlib", "groups/pandas": "pandas"}  # cached with the task's profile
    assert groups == ["numpy", "pandas", "pandas+matplotlib", "stdlib"]


def test_explicit_preload_keeps_one_group():
    with SandboxExecutor(workers=1, preload=("numpy",), cache=False) as ex:
        result = ex.run(NUMPY, NUMPY.ground_truth)
        other = ex.run(STDLIB, STDLIB.ground_truth)
    assert result.passed and result.details["worker_group"] == "all"
    assert not other.passed  # numpy is loaded in the one group's worker, the stdlib task sees it


def test_results_carry_the_stages_of_their_run(humaneval):
    task = humaneval["HumanEval/0"]
    with SandboxExecutor(workers=1, cache=False) as ex:
        first, second = ex.run(task, task.ground_truth), ex.run(task, task.code_prompt + "    return 1\n")
    for result in (first, second):
        stages = result.details["stages"]
        assert {"fork_s", "confine_s", "program_fork_s", "import_s", "handoff_s", "tests_s", "previous_teardown_s"} <= set(stages)
        assert all(0 <= v < 30 for v in stages.values()), stages
    assert first.details["stages"]["previous_teardown_s"] == 0 < second.details["stages"]["previous_teardown_s"]
