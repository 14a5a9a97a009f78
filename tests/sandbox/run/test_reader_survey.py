"""The reader survey (envs/bigcodebench/reader_survey.py): every reader a task set's tests call is reviewed."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from convcodeworld_gym.tasks import BIGCODEBENCH_ENV

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "envs" / "bigcodebench"))
try:
    import reader_survey as survey
finally:
    del sys.path[0]


def test_calls_resolve_through_the_tests_and_the_tasks_imports():
    tests = "import pandas as pd\nfrom yaml import load as yl\nclass T:\n def t(self):\n"
    tests += "  pd.read_pickle('x'); yl(open('y')); f = open('z'); f.read(); pickle.loads(b''); self.load()\n"
    assert sorted(set(survey.reader_calls(tests, prelude="import pickle\n"))) == [
        "open", "pandas.read_pickle", "pickle.loads", "yaml.load"]


@pytest.mark.parametrize("dataset", ["humaneval", "bigcodebench"])
def test_every_reader_a_task_sets_tests_call_is_reviewed(dataset, capsys):
    if dataset == "bigcodebench" and not os.environ.get(BIGCODEBENCH_ENV):
        pytest.skip(f"set ${BIGCODEBENCH_ENV} to a local BigCodeBench.jsonl.gz")
    assert survey.main(["--dataset", dataset, "--check"]) == 0, capsys.readouterr().err


def test_an_unreviewed_reader_fails_the_check(tmp_path, capsys):
    import json

    task = {"task_id": "x/0", "complete_prompt": "", "instruct_prompt": "Do.", "canonical_solution": "    return 1\n",
            "code_prompt": "import shelve\ndef task_func():\n", "entry_point": "task_func", "doc_struct": "{}", "libs": "[]",
            "test": "import unittest, somelib\nclass TestCases(unittest.TestCase):\n    def test_a(self):\n"
                    "        somelib.load_anything(task_func())\n"}
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(task) + "\n")
    assert survey.main(["--dataset", str(path), "--check"]) == 1
    assert "somelib.load_anything" in capsys.readouterr().err
