"""Task loading: real BigCodeBench and HumanEval, custom files, subsets, left-out tasks, malformed records."""

from __future__ import annotations

import gzip
import json
import pickle
from pathlib import Path

import pytest

from convcodeworld_gym.errors import DatasetError, LeftOutTaskError, MalformedRecordError, UnknownTaskError
from convcodeworld_gym.tasks import Task, TaskSet, imported_modules, load_tasks, test_method_names


def _record(task_id: str = "custom/0", **overrides) -> dict:
    record = {
        "task_id": task_id,
        "instruct_prompt": "Return x plus one.",
        "code_prompt": "import math\ndef task_func(x):\n",
        "canonical_solution": "    return x + 1\n",
        "test": "import unittest\nclass TestCases(unittest.TestCase):\n    def test_one(self):\n        self.assertEqual(task_func(1), 2)\n",
        "entry_point": "task_func",
        "libs": "['math']",
        "complete_prompt": "",
        "doc_struct": "{}",
    }
    record.update(overrides)
    return record


def _write_jsonl(path: Path, records: list, gz: bool = False) -> Path:
    text = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_bigcodebench_real_file(bigcodebench):
    assert len(bigcodebench) == 1140
    assert bigcodebench.ids[0] == "BigCodeBench/0" and bigcodebench.ids[-1] == "BigCodeBench/1139"
    task = bigcodebench["BigCodeBench/0"]
    assert task.entry_point == "task_func"
    assert task.header == "import itertools\nfrom random import shuffle\n"
    assert task.ground_truth.startswith(task.code_prompt)
    assert task.prompt.rstrip().endswith("```")
    assert task.source == "bigcodebench:v0.1.0_hf"
    counts = [len(t.test_names) for t in bigcodebench]
    assert min(counts) == 3 and max(counts) == 15  # REFERENCE.md says 14; task 956 has 15
    assert 5.0 < sum(counts) / len(counts) < 6.0


def test_stdlib_subset_is_300(bigcodebench):
    stdlib = bigcodebench.subset(stdlib_only=True)
    assert len(stdlib) == 300
    # the libs field alone says 327: 27 tasks import third-party modules in their tests
    libs_only = [t for t in bigcodebench if all(m in __import__("sys").stdlib_module_names for m in t.libs)]
    assert len(libs_only) == 327
    assert all(t.stdlib_only for t in stdlib)


def test_humaneval_conversion(humaneval):
    assert len(humaneval) == 164
    task = humaneval["HumanEval/0"]
    assert task.test_names == tuple(f"test_{i}" for i in range(1, 8))
    assert task.entry_point == "has_close_elements"
    assert task.header.startswith("from typing import List")
    # HumanEval/53: 5 plain asserts then a loop with asserts -> 6 tests, preamble 'import random' in each
    t53 = humaneval["HumanEval/53"]
    assert len(t53.test_names) == 6
    assert t53.test.count("import random") == 6
    # trivial `assert True` lines are dropped
    assert all("assert True" not in t.test for t in humaneval)
    # names sort alphabetically in source order (unittest's run order)
    for t in humaneval:
        assert list(t.test_names) == sorted(t.test_names)


def test_custom_jsonl_gz_and_parquet(tmp_path):
    import datasets

    records = [_record("custom/0"), _record("custom/1")]
    for path in (_write_jsonl(tmp_path / "a.jsonl", records), _write_jsonl(tmp_path / "b.jsonl.gz", records, gz=True)):
        ts = load_tasks(path)
        assert ts.ids == ("custom/0", "custom/1")
        assert ts[0].libs == ("math",)
    parquet = tmp_path / "c.parquet"
    datasets.Dataset.from_list(records).to_parquet(str(parquet))
    assert load_tasks(parquet).ids == ("custom/0", "custom/1")


@pytest.mark.parametrize(
    "bad, field",
    [
        ({"test": ""}, "test"),
        ({"entry_point": None}, "entry_point"),
        ({"libs": "not a list ["}, "libs"),
        ({"test": "import unittest\nclass Other(unittest.TestCase):\n    def test_a(self): pass\n"}, "test"),
        ({"code_prompt": "def other():\n"}, "code_prompt"),
    ],
)
def test_malformed_record_names_file_line_field(tmp_path, bad, field):
    path = _write_jsonl(tmp_path / "bad.jsonl", [_record("custom/0"), _record("custom/1", **bad)])
    with pytest.raises(MalformedRecordError) as info:
        load_tasks(path)
    err = info.value
    assert (err.line, err.field) == (2, field)
    assert "bad.jsonl" in str(err) and "line 2" in str(err)


def test_broken_json_line_is_located(tmp_path):
    path = _write_jsonl(tmp_path / "broken.jsonl", [_record("custom/0"), _record("custom/1"), '{"task_id": "x", oops'])
    with pytest.raises(MalformedRecordError, match=r"broken.jsonl, line 3"):
        load_tasks(path)


def test_duplicate_ids_rejected(tmp_path):
    path = _write_jsonl(tmp_path / "dup.jsonl", [_record("custom/0"), _record("custom/0")])
    with pytest.raises(MalformedRecordError, match="duplicate"):
        load_tasks(path)


def test_unknown_dataset_and_task_errors(humaneval, tmp_path):
    with pytest.raises(DatasetError, match="none of 'bigcodebench', 'humaneval', 'livecodebench'"):
        load_tasks("no-such-dataset")
    with pytest.raises(DatasetError, match="unsupported suffix"):
        (tmp_path / "x.csv").write_text("a")
        load_tasks(tmp_path / "x.csv")
    with pytest.raises(UnknownTaskError, match="HumanEval/999"):
        humaneval["HumanEval/999"]


def test_subsets(humaneval):
    sub = humaneval.subset(task_ids=["HumanEval/5", "HumanEval/1"])
    assert sub.ids == ("HumanEval/5", "HumanEval/1")
    assert len(humaneval.subset(limit=10)) == 10
    assert load_tasks(humaneval, task_ids=["HumanEval/3"]).ids == ("HumanEval/3",)
    with pytest.raises(ValueError):
        humaneval.subset(limit=-1)


def test_ids_is_the_old_spelling_of_task_ids_and_says_so(humaneval):
    with pytest.warns(DeprecationWarning, match=r"load_tasks\(ids=\.\.\.\) is deprecated: pass task_ids="):
        assert load_tasks(humaneval, ids=["HumanEval/3"]).ids == ("HumanEval/3",)
    with pytest.warns(DeprecationWarning, match=r"TaskSet.subset\(ids=\.\.\.\) is deprecated: pass task_ids="):
        assert humaneval.subset(ids=["HumanEval/4"]).ids == ("HumanEval/4",)
    with pytest.raises(TypeError, match="pass task_ids= only"):
        load_tasks(humaneval, task_ids=["HumanEval/3"], ids=["HumanEval/3"])


def test_a_set_named_by_a_string_is_loaded_once_until_its_file_changes(tmp_path):
    path = _write_jsonl(tmp_path / "once.jsonl", [_record("once/0")])
    first = load_tasks(str(path))
    assert load_tasks(path) is first and load_tasks("humaneval") is load_tasks("HumanEval")
    assert load_tasks(path, limit=1).tasks[0] is first[0]  # a subset is made from the same set
    _write_jsonl(path, [_record("once/0"), _record("once/1")])  # changed: size and mtime differ
    again = load_tasks(path)
    assert again is not first and again.ids == ("once/0", "once/1")


def test_a_set_remembers_what_it_left_out_and_says_why_when_asked_by_id(humaneval):
    kept = humaneval.leave_out({"HumanEval/1": "reason one", "HumanEval/99999": "not in the set"})
    assert len(kept) == 163 and "HumanEval/1" not in kept and kept.name == "humaneval"
    assert kept.left_out == {"HumanEval/1": "reason one"}  # ids the set does not hold are ignored
    again = kept.leave_out({"HumanEval/2": "reason two"})
    assert again.ids == tuple(i for i in humaneval.ids if i not in ("HumanEval/1", "HumanEval/2"))
    assert again.left_out == {"HumanEval/1": "reason one", "HumanEval/2": "reason two"}
    with pytest.raises(LeftOutTaskError, match=r"^task id 'HumanEval/1' was left out of task set 'humaneval' \(162 tasks\): "
                                               r"reason one$") as caught:
        again["HumanEval/1"]
    assert isinstance(caught.value, UnknownTaskError) and (caught.value.task_id, caught.value.reason) == ("HumanEval/1", "reason one")
    for derived in (again.subset(limit=5), again.subset(stdlib_only=True), pickle.loads(pickle.dumps(again))):
        assert derived.left_out == again.left_out
        with pytest.raises(LeftOutTaskError, match="reason two"):
            derived["HumanEval/2"]
    with pytest.raises(LeftOutTaskError, match="reason one"):  # subset by id looks each id up
        again.subset(task_ids=["HumanEval/0", "HumanEval/1"])
    with pytest.raises(UnknownTaskError, match="is not in task set") as unknown:  # any other id: as before
        again["HumanEval/99999"]
    assert not isinstance(unknown.value, LeftOutTaskError)
    assert humaneval.leave_out({}) is humaneval and again == TaskSet(again.tasks, name="humaneval")  # not compared
    with pytest.raises(ValueError, match="holds tasks it says were left out: HumanEval/0"):
        TaskSet(humaneval.tasks[:1], left_out={"HumanEval/0": "x"})


def test_test_method_names_skip_helpers_and_duplicates():
    source = (
        "class TestCases:\n    def setUp(self): pass\n    def helper(self): pass\n"
        "    def test_b(self): pass\n    def test_a(self): pass\n    def test_b(self): pass\n"
    )
    assert test_method_names(source) == ("test_b", "test_a")
    assert test_method_names("not python (") == ()


def test_task_is_immutable():
    task = Task("t", "p", "def f():\n", "f", "    return 1\n", "")
    with pytest.raises(AttributeError):
        task.task_id = "other"  # type: ignore[misc]


def test_imports_read_from_tokens_agree_with_the_tree_on_every_real_task(bigcodebench, humaneval):
    """The token reading (used where a program is nested too deep for a tree from where the host parses it) finds
    what the tree finds, on every canonical solution and test suite of both datasets."""
    from convcodeworld_gym.tasks.record import _imported_by_tokens

    texts = [text for ts in (bigcodebench, humaneval) for t in ts for text in (t.ground_truth, t.test)]
    differ = [text[:80] for text in texts if _imported_by_tokens(text) != imported_modules(text)]
    assert len(texts) > 2500 and differ == []


def test_imports_of_a_program_too_deep_for_a_tree_here_are_still_found():
    import sys

    deep = "import numpy as np\ndef f():\n    x = " + "-" * 5000 + "1\n    from pandas import DataFrame\n"
    assert imported_modules(deep) == {"numpy", "pandas"}

    def nested(n: int) -> frozenset[str]:  # the caller deep in its stack: 400 signs fail to parse there
        return imported_modules(deep.replace("-" * 5000, "-" * 400)) if n == 0 else nested(n - 1)

    assert nested(sys.getrecursionlimit() - 60) == {"numpy", "pandas"}


def test_third_party_imports_add_submodules_of_the_tasks_own_libraries_only(bigcodebench):
    """What a warm worker imports for a task: its third-party libraries and the submodules of those its texts name."""
    for task in bigcodebench:
        assert {m.split(".")[0] for m in task.third_party_imports} == set(task.third_party_modules), task.task_id
    assert {"scipy.stats"} <= bigcodebench["BigCodeBench/36"].third_party_imports
    assert sum(any("." in m for m in t.third_party_imports) for t in bigcodebench) > 300
