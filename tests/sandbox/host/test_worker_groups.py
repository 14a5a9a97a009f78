"""Workers by import profile: a run forks from the smallest warm worker that holds what its task imports.

Real confined workers; each program reports which libraries its own process holds, and the tests judge it.
"""

from __future__ import annotations

import pytest

from convcodeworld_gym.sandbox import SandboxExecutor
from convcodeworld_gym.sandbox.host.profile import import_profile
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
                "    import sys\n    return [m for m in ('numpy', 'pandas', 'matp' + 'lotlib') if m in sys.modules]\n",
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
        assert {"fork_s", "confine_s", "program_fork_s", "import_s", "handoff_s", "tests_s", "previous_teardown_s",
                "round_trips", "round_trip_s"} <= set(stages)
        assert all(0 <= v < 30 for k, v in stages.items() if k != "round_trips"), stages
        # the split judge's requests to the program: one for the names the tests read, then one call per test
        assert stages["round_trips"] == 1 + len(task.test_names) and 0 < stages["round_trip_s"] < stages["handoff_s"] + stages["tests_s"]
        # the hand-off's parts, in order within it: the job read, the program started and its names fetched
        # (the program's start within that), the tests loaded
        parts = [stages[k] for k in ("job_s", "connect_s", "load_s")]
        assert all(v > 0 for v in parts) and sum(parts) < stages["handoff_s"], stages
        assert 0 < stages["program_start_s"] < stages["connect_s"]
    assert first.details["stages"]["previous_teardown_s"] == 0 < second.details["stages"]["previous_teardown_s"]
    with SandboxExecutor(workers=1, cache=False, judge="inprocess") as ex:
        stages = ex.run(task, task.ground_truth).details["stages"]
    assert "round_trips" not in stages and "program_start_s" not in stages  # one process: none
    assert 0 < stages["job_s"] and 0 < stages["load_s"] and stages["job_s"] + stages["load_s"] < stages["handoff_s"]


_SAME_TEST = """import unittest
class TestCases(unittest.TestCase):
    def test_value(self):
        self.assertEqual(task_func(), 2.0)
    def test_type(self):
        self.assertTrue(str(type(task_func())).endswith({suffix!r}))
"""


def test_a_program_that_imports_more_than_its_task_gets_a_judge_that_reads_its_values():
    """Verdicts do not depend on the worker a run forks from: the judge must hold the classes of the values."""
    numbers = Task("groups/number", "", "def task_func():\n", "task_func", "    return 2.0\n",
                   _SAME_TEST.format(suffix="float64'>"))
    numpy_program = "def task_func():\n    import numpy as np\n    return np.float64(2.0)\n"
    plot_test = ("import unittest\nclass TestCases(unittest.TestCase):\n    def test_axes(self):\n"
                 "        self.assertTrue(str(type(task_func())).endswith(\"matplotlib.axes._axes.Axes'>\"))\n")
    plots = Task("groups/pandas-plot", "", "import pandas as pd\ndef task_func():\n", "task_func",
                 "    return pd.DataFrame({'a': [1, 2]}).plot(y='a')\n", plot_test)
    with SandboxExecutor(workers=1, cache=False) as ex:
        by_numpy = ex.run(numbers, numpy_program)
        by_pandas = ex.run(plots, plots.ground_truth)  # pandas imports matplotlib on first use
    assert by_numpy.passed and by_numpy.details["worker_group"] == "numpy"
    assert by_pandas.passed and by_pandas.details["worker_group"] == "pandas+matplotlib"


SUBMODULE_TEST = """import unittest
from numpy import testing
class TestCases(unittest.TestCase):
    def test_loaded(self):
        self.assertEqual(task_func(), [True, True])
"""
#: numpy 2 loads numpy.polynomial and numpy.testing only when they are imported; the program looks before it does.
SUBMODULES = Task("groups/submodules", "Were the submodules loaded before the program imported them?",
                  "import sys\nLOADED = [m in sys.modules for m in ('numpy.polynomial', 'numpy.testing')]\n"
                  "import numpy as np\nfrom numpy import polynomial\ndef task_func():\n", "task_func", "    return LOADED\n",
                  SUBMODULE_TEST)


def test_the_submodules_a_task_imports_are_loaded_in_its_worker_before_the_run_forks():
    """A package's submodules load only when imported (scipy.stats: over a second, in each process of each run, before
    the worker imported them): the worker imports those the task's ground truth and tests name, before it forks."""
    assert {"numpy", "numpy.polynomial", "numpy.testing"} <= SUBMODULES.third_party_imports
    with SandboxExecutor(workers=1, cache=False) as ex:
        first, later = ex.run(SUBMODULES, SUBMODULES.ground_truth), ex.run(SUBMODULES, SUBMODULES.ground_truth)
    assert first.passed and later.passed, first.tests[0].traceback[-400:]


def test_an_io_tasks_run_forks_from_the_standard_library_worker():
    """An input/output task's program imports its runner from this package (``sandbox.run.ioprogram``), which every
    group preloads: it never widens the group (every I/O run forked from the heaviest worker, twice the CPU a run),
    and what the program itself imports still does."""
    from pathlib import Path

    from convcodeworld_gym.tasks import load_tasks

    task = load_tasks(str(Path(__file__).resolve().parents[2] / "fixtures" / "io" / "livecodebench.jsonl"))["abc900_a"]
    plain = "a, b = map(int, input().split())\nprint(a + b)\n"
    heavy = "import numpy as np\na, b = map(int, input().split())\nprint(int(np.int64(a) + b))\n"
    with SandboxExecutor(workers=1, cache=False) as ex:
        assert ex.group_of(task, task.program_for(plain)) == "stdlib"
        results = [ex.run(task, task.program_for(code)) for code in (plain, heavy)]
    assert [(r.passed, r.details["worker_group"]) for r in results] == [(True, "stdlib"), (True, "numpy")]
