"""The tasks only an in-process judge can judge are left out by content, and a left-out task asked for by id says why.

:data:`~convcodeworld_gym.sandbox.host.forgeable.SPLIT_UNJUDGEABLE` is keyed by task digest (tests + canonical
solution): BigCodeBench loaded from a file (source ``file:…``) loses the same tasks as loaded by name, a
renamed copy of a listed task is left out, a task whose tests changed is not. A default set remembers what
it left out (the judge's reason, or what the runtime lacks): ``env.reset(options={"task_id": ...})`` for
such a task raises :class:`~convcodeworld_gym.errors.LeftOutTaskError` naming the reason and the fix.
These tests read the real BigCodeBench file (``$CONVCODEWORLD_BIGCODEBENCH_PATH``; they skip without it)
and ask a real runtime what it lacks (a module no interpreter has).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pickle
import uuid

import gymnasium as gym
import pytest

import convcodeworld_gym  # noqa: F401 - registers the ids
from convcodeworld_gym.errors import LeftOutTaskError, UnknownTaskError
from convcodeworld_gym.sandbox import SandboxExecutor
from convcodeworld_gym.sandbox.host.forgeable import SPLIT_UNJUDGEABLE, Unjudgeable, default_task_set, judgeable_split
from convcodeworld_gym.sandbox.host.profile import task_digest
from convcodeworld_gym.sandbox.runtimes.needs import RUNTIME_INSTALL_COMMAND
from convcodeworld_gym.tasks import BIGCODEBENCH_ENV, Task, TaskSet, load_tasks

FORKED = "BigCodeBench/205"  # listed: its tests' mocks are called from processes the program forks


@pytest.fixture(scope="module")
def from_file(bigcodebench: TaskSet) -> TaskSet:
    """BigCodeBench loaded the README's way, from the file's path (source ``file:<name>``), not by name."""
    return load_tasks(os.environ[BIGCODEBENCH_ENV])


@pytest.fixture(scope="module")
def shared_executor():
    with SandboxExecutor(workers=1, preload=(), calibrate=False) as ex:
        yield ex


# ----------------------------------------------------------------------------- the list, by content


def test_every_listed_digest_is_that_of_the_real_task(bigcodebench):
    """The check to run after adding an entry: it names the digest to paste for each entry that lacks it."""
    wrong = {task_id: task_digest(bigcodebench[task_id]) for task_id, entry in SPLIT_UNJUDGEABLE.items()
             if task_digest(bigcodebench[task_id]) != entry.digest}
    assert not wrong, "paste these digests into SPLIT_UNJUDGEABLE:\n" + "\n".join(
        f'    "{task_id}": Unjudgeable("{digest}", ...),' for task_id, digest in wrong.items())
    assert all(isinstance(e, Unjudgeable) and e.reason.startswith("whose ") for e in SPLIT_UNJUDGEABLE.values())


def test_loaded_from_a_file_exactly_the_listed_tasks_are_left_out(bigcodebench, from_file, caplog):
    assert from_file[0].source.startswith("file:") and bigcodebench[0].source.startswith("bigcodebench:")
    with caplog.at_level(logging.WARNING):
        by_file = default_task_set(from_file)
    assert set(from_file.ids) - set(by_file.ids) == set(SPLIT_UNJUDGEABLE) == set(by_file.left_out)
    listed = len(SPLIT_UNJUDGEABLE)
    assert len(by_file) == len(from_file) - listed and f"left out {listed} task(s)" in caplog.text
    by_name = default_task_set(bigcodebench)
    assert by_file.ids == by_name.ids and by_file.left_out == by_name.left_out
    kept, note = judgeable_split(from_file)
    assert [t.task_id for t in kept] == list(by_file.ids) and note.startswith(f"left out {listed} task(s)")


def test_a_default_env_on_the_file_plays_the_same_tasks_as_on_the_name(from_file, shared_executor):
    """The user's paths: ``gym.make(..., dataset="…/BigCodeBench.jsonl.gz")`` and ``dataset="bigcodebench"``
    (same records; the runtime's needs are left out by content already)."""
    envs = [gym.make("ConvCodeWorld-CF-v0", dataset=spec, executor=shared_executor)
            for spec in (os.environ[BIGCODEBENCH_ENV], "bigcodebench")]
    try:
        by_file, by_name = (env.unwrapped.tasks for env in envs)
        assert by_file.ids == by_name.ids and by_file.left_out == by_name.left_out
        assert not set(by_file.ids) & set(SPLIT_UNJUDGEABLE) and set(SPLIT_UNJUDGEABLE) <= set(by_file.left_out)
    finally:
        for env in envs:
            env.close()


@pytest.mark.parametrize("field", ["test", "canonical_solution"])
def test_a_listed_id_whose_tests_or_solution_changed_is_kept(bigcodebench, field):
    listed = bigcodebench[FORKED]  # loaded by name: the source the list used to be keyed on
    changed = dataclasses.replace(listed, **{field: getattr(listed, field) + "\n# changed\n"})
    kept, note = judgeable_split([changed, bigcodebench["BigCodeBench/0"]])
    assert [t.task_id for t in kept] == [FORKED, "BigCodeBench/0"] and note is None
    tasks = TaskSet((changed,), name="changed")
    assert default_task_set(tasks) is tasks


def test_a_renamed_copy_of_a_listed_task_is_left_out(bigcodebench):
    """The digest decides, not the id: a listed task's tests and solution under another id and source are left
    out, and the reason names the entry whose content it has."""
    copy = dataclasses.replace(bigcodebench[FORKED], task_id="mine/forks", source="custom")
    kept, note = judgeable_split([bigcodebench["BigCodeBench/0"], copy])
    assert [t.task_id for t in kept] == ["BigCodeBench/0"] and note.startswith("left out 1 task(s)")
    tasks = default_task_set(TaskSet((bigcodebench["BigCodeBench/0"], copy), name="mine"))
    with pytest.raises(LeftOutTaskError, match=f"'mine/forks' was left out .*tests and canonical solution of {FORKED}"):
        tasks["mine/forks"]
    assert default_task_set(TaskSet((copy,)), allow_forgeable=True)[0] is copy


# ----------------------------------------------------------------------------- asked for by id, it says why


def test_a_task_left_out_for_the_judge_asked_for_by_id_says_why_and_how(from_file, shared_executor):
    env = gym.make("ConvCodeWorld-CF-v0", dataset=os.environ[BIGCODEBENCH_ENV], executor=shared_executor)
    try:
        with pytest.raises(LeftOutTaskError) as caught:
            env.reset(options={"task_id": FORKED})
    finally:
        env.close()
    message = str(caught.value)
    assert message.startswith(f"task id '{FORKED}' was left out of task set 'BigCodeBench.jsonl.gz'")
    assert SPLIT_UNJUDGEABLE[FORKED].reason in message and "passes only in-process" in message
    assert "allow_forgeable=True" in message and f"task_ids=['{FORKED}']" in message
    assert isinstance(caught.value, UnknownTaskError) and isinstance(caught.value, KeyError)  # caught as before
    assert caught.value.task_id == FORKED and caught.value.reason in message
    with gym.make("ConvCodeWorld-CF-v0", dataset=os.environ[BIGCODEBENCH_ENV], executor=shared_executor,
                  allow_forgeable=True) as env:  # the fix it names brings the task back
        assert env.reset(options={"task_id": FORKED})[1]["task_id"] == FORKED


def test_a_task_left_out_for_a_missing_module_asked_for_by_id_says_what_and_how(shared_executor):
    absent = f"ccw_absent_{uuid.uuid4().hex[:10]}"  # a module no interpreter has
    test = "import unittest\nclass TestCases(unittest.TestCase):\n    def test_one(self):\n        self.assertEqual(task_func(1), 2)\n"
    tasks = TaskSet(tuple(Task(f"needs/{i}", "Add one.", header + "def task_func(x):\n", "task_func", "    return x + 1\n",
                               test) for i, header in enumerate(("", f"import {absent}\n"))), name="needs")
    env = gym.make("ConvCodeWorld-CF-v0", dataset=tasks, executor=shared_executor)
    try:
        assert env.unwrapped.tasks.ids == ("needs/0",)
        with pytest.raises(LeftOutTaskError) as caught:
            env.reset(options={"task_id": "needs/1"})
        with pytest.raises(LeftOutTaskError, match="needs/1"):  # any lookup by id in the set says it
            env.unwrapped.tasks.subset(task_ids=["needs/1"])
    finally:
        env.close()
    python = shared_executor.runtime_probe().python
    message = str(caught.value)
    assert message.startswith("task id 'needs/1' was left out of task set 'needs' (1 tasks)")
    assert f"lacks the module {absent} that it needs" in message and f"{python} -m pip install {absent}" in message
    assert "task_ids=['needs/1']" in message and "allow_forgeable" not in message
    with gym.make("ConvCodeWorld-CF-v0", dataset=tasks, task_ids=["needs/1"], executor=shared_executor) as env:
        assert env.reset(options={"task_id": "needs/1"})[1]["task_id"] == "needs/1"  # the fix it names


def test_a_bigcodebench_task_from_the_file_left_out_for_this_runtime_names_the_runtime_install(from_file, shared_executor):
    env = gym.make("ConvCodeWorld-CF-v0", dataset=os.environ[BIGCODEBENCH_ENV], executor=shared_executor)
    try:
        missing = env.unwrapped.missing
        if not missing:
            pytest.skip("this runtime lacks nothing a BigCodeBench task needs")
        # a task that lacks modules, where there is one (the pinned runtime installed lacks only NLTK data)
        task_id, lacking = next(((i, item) for i, item in missing.items() if item.modules), next(iter(missing.items())))
        with pytest.raises(LeftOutTaskError) as caught:
            env.reset(options={"task_id": task_id})
    finally:
        env.close()
    message = str(caught.value)
    assert f"lacks the {lacking.describe()} that it needs" in message and f"task_ids=[{task_id!r}]" in message
    if lacking.modules:  # the pinned runtime has them: its install command
        assert f"`{RUNTIME_INSTALL_COMMAND}`" in message
    else:  # NLTK data, which no runtime install downloads: the downloader's command
        assert "-m nltk.downloader" in message and RUNTIME_INSTALL_COMMAND not in message


def test_the_error_pickles_whole():
    """Vector env workers send their errors back pickled: the message, id and reason survive."""
    error = LeftOutTaskError("task id 'a' was left out of task set 's' (1 tasks): why", "a", "why")
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.task_id, copy.reason) == (str(error), "a", "why")
