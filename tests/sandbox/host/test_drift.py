"""Issue 48, item 4: a correct program passes whatever the installed library releases, or its task is left out of the
default set with the reason (sandbox/host/drift.py, selection's ``versions`` kind)."""

from __future__ import annotations

import os
import sys

import pytest

from convcodeworld_gym.runs.selfcheck import classify_failure
from convcodeworld_gym.sandbox import SandboxExecutor, TimePolicy
from convcodeworld_gym.sandbox.host.drift import Drift, drift_table, drifted, pinned_releases
from convcodeworld_gym.sandbox.host.profile import task_digest
from convcodeworld_gym.sandbox.runtimes.install import KNOWN_RUNTIMES
from convcodeworld_gym.sandbox.runtimes.needs import RuntimeProbe
from convcodeworld_gym.selection import select_tasks
from convcodeworld_gym.tasks import BIGCODEBENCH_ENV

PINNED = pinned_releases(KNOWN_RUNTIMES["bigcodebench"])


@pytest.fixture(scope="module")
def bigcodebench_path() -> str:
    path = os.environ.get(BIGCODEBENCH_ENV)
    if not path:
        pytest.skip(f"set ${BIGCODEBENCH_ENV} to a local BigCodeBench.jsonl.gz")
    return path


def test_an_entry_applies_only_where_a_library_the_task_uses_is_not_pinned():
    entry = Drift("BigCodeBench/35", {"pandas": "2.0.3", "numpy": "1.21.2"}, {"pandas": "3.1.1"},
                  "AttributeError: 'DataFrame' object has no attribute 'applymap'")
    assert entry.differing({"pandas": "2.0.3", "numpy": "1.21.2", "scipy": "1.17.1"}) == {}
    assert entry.differing({"Pandas": "3.1.1", "numpy": "1.21.2"}) == {"pandas": "3.1.1"}
    assert entry.differing({}) == {}  # a runtime without pandas: the runtime kind leaves the task out, not this one
    why = entry.why({"pandas": "3.1.1"})
    assert "pandas 3.1.1 (pinned 2.0.3)" in why and "applymap" in why and "task_ids" in why


def test_the_pinned_releases_are_read_from_the_requirements():
    assert PINNED["pandas"] and PINNED["matplotlib"] and PINNED["numpy"]
    assert all("=" not in version for version in PINNED.values())


def test_the_shipped_table_names_tasks_that_passed_pinned_and_failed_newer(bigcodebench):
    table = drift_table()
    assert len(table) >= 30, len(table)
    by_id = {entry.task_id: (digest, entry) for digest, entry in table.items()}
    digest, entry = by_id["BigCodeBench/35"]  # pandas 3 removed DataFrame.applymap
    assert digest == task_digest(bigcodebench["BigCodeBench/35"]) and "applymap" in entry.failure
    assert entry.pinned["pandas"] == PINNED["pandas"] and entry.seen["pandas"] != PINNED["pandas"]
    assert drifted(bigcodebench["BigCodeBench/35"], PINNED) is None  # the pinned runtime plays it
    assert drifted(bigcodebench["BigCodeBench/35"], {**PINNED, "pandas": "3.1.1"}) is entry
    for figure_task in ("BigCodeBench/20", "BigCodeBench/99", "BigCodeBench/142"):  # the judge's to fix, not drift
        assert figure_task not in by_id


def test_a_default_set_leaves_drifted_tasks_out_with_the_failure_on_a_runtime_of_other_releases(bigcodebench_path):
    probe = RuntimeProbe.shared(sys.executable)
    installed = probe.describe()["packages"]
    chosen = select_tasks("bigcodebench", probe, warn=False)
    versions = {item.task_id: item for item in chosen.of_kind("versions")}
    expected = {entry.task_id for entry in drift_table().values() if entry.differing(installed)}
    assert set(versions) == expected - {item.task_id for item in chosen.left_out if item.kind != "versions"}
    played = {task.task_id for task in chosen.tasks}
    for task_id, item in versions.items():
        assert task_id not in played and item.detail and "pinned" in item.why
    if versions:
        assert "fail with the library releases" in chosen.warning()
        assert "canonical solutions fail with this runtime's library releases" in chosen.render()


@pytest.mark.slow
def test_canonical_solutions_pass_on_this_runtime_or_are_left_out(bigcodebench_path):
    """The default set on the interpreter running the tests (in CI: the newest releases pip found, no pinned runtime):
    every 12th task's canonical solution passes, or its failure is the network's (no run has one)."""
    python = sys.executable
    probe = RuntimeProbe.shared(python)
    chosen = list(select_tasks("bigcodebench", probe, warn=False).tasks)
    sample = chosen[::12]
    with SandboxExecutor(runtime=python, time_policy=TimePolicy(floor_s=30.0, cap_s=121.0)) as executor:
        results = executor.run_many([(task, task.ground_truth) for task in sample])
    failed = {task.task_id: classify_failure(result, (), python) for task, result in zip(sample, results)
              if not result.passed}
    assert {k: v for k, v in failed.items() if v[0] != "network"} == {}, failed
    assert len(sample) >= 70
