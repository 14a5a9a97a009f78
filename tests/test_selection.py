"""What a default task set leaves out, worked out once per task set and runtime: a second ``gym.make`` reuses it, the
warning is one line said once that names ``convcodeworld tasks``, and that command lists each task left out, why, and
how to get it back. The tasks here really need a module no interpreter has (a fresh name per test), judged by the
runtime interpreter in a subprocess."""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path

import gymnasium as gym
import pytest

import convcodeworld_gym  # noqa: F401 - registers the ids
from convcodeworld_gym.cli import main as cli_main
from convcodeworld_gym.sandbox import SandboxExecutor
from convcodeworld_gym.sandbox.host.forgeable import SPLIT_UNJUDGEABLE
from convcodeworld_gym.sandbox.runtimes.needs import LOGGER
from convcodeworld_gym.selection import TASKS_COMMAND, select_tasks
from convcodeworld_gym.tasks import Task, TaskSet
from convcodeworld_gym.tasks.files import _load_task_file_cached

ENV_ID = "ConvCodeWorld-CF-EF_full-v0"
_TEST = "import unittest\nclass TestCases(unittest.TestCase):\n    def test_one(self):\n        self.assertEqual(task_func(1), 2)\n"


def _record(task_id: str, header: str = "") -> dict:
    return {"task_id": task_id, "instruct_prompt": "Add one.", "code_prompt": header + "def task_func(x):\n",
            "canonical_solution": "    return x + 1\n", "test": _TEST, "entry_point": "task_func"}


@pytest.fixture
def absent() -> str:
    """A module name no interpreter has (unique per test, so each task file and warning is new)."""
    return f"ccw_absent_{uuid.uuid4().hex[:10]}"


@pytest.fixture
def task_file(tmp_path: Path, absent: str) -> str:
    """Three tasks; the second imports ``absent``."""
    path = tmp_path / f"needs-{absent[-6:]}.jsonl"
    records = [_record("needs/0"), _record("needs/1", f"import {absent}\n"), _record("needs/2")]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def shared_executor():
    with SandboxExecutor(workers=1, preload=(), calibrate=False) as ex:
        yield ex


def test_a_second_make_reuses_the_loaded_set_and_what_it_left_out(task_file, shared_executor):
    first = gym.make(ENV_ID, dataset=task_file, executor=shared_executor)
    reads = _load_task_file_cached.cache_info().misses
    again = [gym.make(ENV_ID, dataset=task_file, executor=shared_executor) for _ in range(3)]
    humaneval = [gym.make(ENV_ID, dataset="humaneval", executor=shared_executor) for _ in range(2)]
    try:
        assert _load_task_file_cached.cache_info().misses == reads  # the file was not read again
        assert all(env.unwrapped.tasks is first.unwrapped.tasks for env in again)  # nor its selection made again
        assert humaneval[0].unwrapped.tasks is humaneval[1].unwrapped.tasks
        assert first.unwrapped.tasks.ids == ("needs/0", "needs/2") and "needs/1" in first.unwrapped.missing
        limited = gym.make(ENV_ID, dataset=task_file, executor=shared_executor, limit=1)  # a limit cuts the same set
        assert limited.unwrapped.tasks.tasks[0] is first.unwrapped.tasks[0]
        limited.close()
    finally:
        for env in (first, *again, *humaneval):
            env.close()


def test_the_warning_is_one_line_said_once_that_names_the_tasks_command(task_file, absent, shared_executor, caplog):
    caplog.set_level(logging.WARNING, logger=LOGGER.name)
    envs = [gym.make(ENV_ID, dataset=task_file, executor=shared_executor) for _ in range(3)]
    for env in envs:
        env.close()
    warnings = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert len(warnings) == 1, warnings  # three envs on one task set and runtime: said once
    (warning,) = warnings
    assert "\n" not in warning and len(warning) < 400
    assert "left out 1 of 3 tasks" in warning and f"{absent} (1)" in warning
    assert f"`{TASKS_COMMAND} --dataset {task_file}`" in warning


def test_the_tasks_command_lists_each_task_left_out_why_and_how_to_get_it_back(task_file, absent, shared_executor,
                                                                               capsys):
    assert cli_main(["tasks", "--dataset", task_file]) == 0
    text = capsys.readouterr().out
    assert "played by default: 2; left out: 1" in text
    assert [line.split() for line in text.splitlines() if line.startswith("needs/")] == [["needs/1", "runtime", "module", absent]]
    python = shared_executor.runtime_probe().python  # the command asks the same default runtime the env does
    assert f"install: {python} -m pip install {absent}" in text

    assert cli_main(["tasks", "--dataset", task_file, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert (listed["tasks"], listed["played"], listed["runtime"]) == (3, 2, python)
    (item,) = listed["left_out"]
    assert (item["task_id"], item["kind"], item["detail"]) == ("needs/1", "runtime", f"module {absent}")
    assert f"{python} -m pip install {absent}" in item["why"] and "task_ids=['needs/1']" in item["why"]


def test_tasks_asked_for_by_id_are_kept_and_say_what_they_lack(task_file, absent, shared_executor):
    chosen = select_tasks(task_file, shared_executor.runtime_probe(), task_ids=["needs/1", "needs/0"])
    assert chosen.tasks.ids == ("needs/1", "needs/0") and chosen.left_out == () and chosen.warning() is None
    assert chosen.missing["needs/1"].modules == (absent,)


def test_the_judge_s_left_out_tasks_are_listed_with_its_reason(bigcodebench):
    listed_id = next(iter(SPLIT_UNJUDGEABLE))
    listed = bigcodebench[listed_id]
    copy = Task("mine/copy", listed.prompt, listed.code_prompt, listed.entry_point, listed.canonical_solution,
                listed.test, listed.libs, source="test")
    chosen = select_tasks(TaskSet((bigcodebench["BigCodeBench/0"], copy), name="mine"), None)
    (item,) = chosen.left_out
    assert (item.task_id, item.kind, item.detail) == ("mine/copy", "judge", SPLIT_UNJUDGEABLE[listed_id].reason)
    assert "allow_forgeable=True" in item.why and chosen.tasks.ids == ("BigCodeBench/0",)
    assert "1 the split judge cannot judge" in chosen.warning() and "env.unwrapped.tasks.left_out" in chosen.warning()
    assert select_tasks(TaskSet((copy,), name="mine"), None, allow_forgeable=True).left_out == ()
