"""Shipped task profiles: a shipped task's first step runs no canonical solution; anything else is calibrated.

Runs are counted (not timed) on a real :class:`SandboxExecutor`: each call of its ``_execute`` is one
program run in a confined worker.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from convcodeworld_gym.cli import main
from convcodeworld_gym.errors import ConvCodeWorldError
from convcodeworld_gym.sandbox import SandboxExecutor
from convcodeworld_gym.sandbox.host.profile import TaskProfile, import_profile, task_digest
from convcodeworld_gym.sandbox.host.shipped import (PROFILES_DIR, ShippedProfiles, shipped_profiles, tasks_hash,
                                                    write_profiles)
from convcodeworld_gym.sandbox.messages import Mode
from convcodeworld_gym.tasks import Task


class CountingExecutor(SandboxExecutor):
    """A real sandbox executor that records which programs it ran (canonical or not)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.ran: list[str] = []

    def _execute(self, task, program, *args, **kwargs):
        self.ran.append("canonical" if program == task.ground_truth else "program")
        return super()._execute(task, program, *args, **kwargs)


def _stub(task: Task) -> str:
    return task.code_prompt + "    return None\n"


def test_first_step_of_a_shipped_task_runs_no_canonical_solution(humaneval):
    task = humaneval["HumanEval/7"]
    with CountingExecutor(workers=1, preload=()) as ex:
        result = ex.run(task, _stub(task))
        profile = ex.profile(task)
    assert ex.ran == ["program"]  # no calibration run before the program's
    assert not result.passed and result.executed
    assert profile.note.startswith("shipped") and profile.mode is Mode.SPLIT and profile.imports == "stdlib"
    shipped_s = json.loads((PROFILES_DIR / "humaneval.json").read_text())["tasks"][task.task_id]["canonical_s"]
    assert profile.canonical_s == pytest.approx(shipped_s * 2)  # the shipped time, stretched for another machine


def test_a_changed_task_or_no_shipped_profiles_fall_back_to_calibration(humaneval):
    task = humaneval["HumanEval/8"]
    changed = replace(task, test=task.test + "\n# a changed test suite\n")
    with CountingExecutor(workers=1, preload=()) as ex:
        ex.run(changed, _stub(changed))
        assert ex.ran == ["canonical", "program"]
        assert not ex.profile(changed).note.startswith("shipped")
    with CountingExecutor(workers=1, preload=(), shipped=False) as ex:
        ex.run(task, _stub(task))
        assert ex.ran == ["canonical", "program"]


def test_the_shipped_humaneval_file_matches_the_dataset(humaneval):
    data = json.loads((PROFILES_DIR / "humaneval.json").read_text())
    assert data["tasks_hash"] == tasks_hash(humaneval)
    assert all(shipped_profiles().lookup(t) is not None for t in humaneval)


def test_write_and_read_a_profile_file(tmp_path, humaneval):
    tasks = list(humaneval.subset(limit=3))
    measured = {tasks[0].task_id: TaskProfile(Mode.SPLIT, 0.5, True, imports="stdlib"),
                tasks[1].task_id: TaskProfile(Mode.SPLIT, None, False, "canonical solution fails")}
    path = tmp_path / "set.json"
    assert write_profiles(path, tasks, measured, dataset="demo", made_with={"confinement": "full"}) == 1
    shipped = ShippedProfiles([path], time_scale=3)
    found = shipped.lookup(tasks[0])
    assert (found.mode, found.canonical_s, found.canonical_passed) == (Mode.SPLIT, 1.5, True)
    assert shipped.lookup(tasks[1]) is None and shipped.lookup(tasks[2]) is None  # failing, unmeasured
    assert shipped.lookup(replace(tasks[0], canonical_solution="    pass\n")) is None  # another solution
    assert json.loads(path.read_text())["tasks"][tasks[0].task_id]["digest"] == task_digest(tasks[0])
    (tmp_path / "bad.json").write_text('{"format": 99, "tasks": {}}')
    with pytest.raises(ConvCodeWorldError, match="bad.json.*--write-profiles"):
        ShippedProfiles([tmp_path / "bad.json"])


def test_selfcheck_writes_profiles(tmp_path, humaneval, capsys):
    path = tmp_path / "he.json"
    assert main(["selfcheck", "--dataset", "humaneval", "--limit", "2", "--workers", "1", "--no-progress",
                 "--write-profiles", str(path)]) == 0
    data = json.loads(path.read_text())
    assert sorted(data["tasks"]) == ["HumanEval/0", "HumanEval/1"] and data["tasks_total"] == len(humaneval)
    assert data["tasks"]["HumanEval/0"]["mode"] == "split" and data["tasks"]["HumanEval/0"]["canonical_s"] > 0


def test_the_shipped_bigcodebench_file_matches_the_dataset(bigcodebench):
    data = json.loads((PROFILES_DIR / "bigcodebench-v0.1.0_hf.json").read_text())
    assert data["tasks_hash"] == tasks_hash(bigcodebench) and data["tasks_total"] == len(bigcodebench)
    found = [shipped_profiles().lookup(t) for t in bigcodebench]
    assert sum(p is not None for p in found) == len(data["tasks"]) > 1000  # every shipped task is still the same
    assert {p.mode for p in found if p is not None} == {Mode.SPLIT}  # made without allow_forgeable
    assert all(p.imports == import_profile(t) for t, p in zip(bigcodebench, found) if p is not None)


def test_a_probe_of_a_task_runs_as_the_task_does_without_calibration(humaneval):
    """The offline expert's probes (a task's tests plus a reporting test that never passes) take the task's
    profile: no canonical run of the probe (it would fail by design, and retry in a fresh worker)."""
    from convcodeworld_gym.feedback.verbal.probe import probe_calls

    task = humaneval["HumanEval/7"]
    with CountingExecutor(workers=1, preload=()) as ex:
        calls = probe_calls(ex, task, _stub(task), task.test_names[0])
        assert ex.ran == ["program"]  # the task's shipped profile served the probe too
        assert calls and all(call.returned == "None" for call in calls)
    with CountingExecutor(workers=1, preload=(), shipped=False) as ex:
        probe_calls(ex, task, _stub(task), task.test_names[0])
        probe_calls(ex, task, _stub(task), task.test_names[1])
        assert ex.ran == ["canonical", "program", "program"]  # the task calibrated once; its probes not at all
