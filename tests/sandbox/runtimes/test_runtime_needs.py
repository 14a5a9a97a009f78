"""Tasks whose needs the runtime does not meet are never scored silently.

Default task sets leave them out with one warning (how many, which modules, the install command);
asked for by id they run and say what is missing; ``strict_runtime=True`` raises. The modules here
are really absent (a fresh, unique name per test), judged by the runtime interpreter in a subprocess.
"""

from __future__ import annotations

import json
import logging
import sys
import uuid

import gymnasium as gym
import pytest

import convcodeworld_gym  # noqa: F401 - registers the ids
from convcodeworld_gym.errors import MissingRuntimeDependencies
from convcodeworld_gym.policies import make_policy
from convcodeworld_gym.runs.evaluate import EvalConfig, run_evaluation
from convcodeworld_gym.runs.selfcheck import run_selfcheck
from convcodeworld_gym.sandbox import SandboxExecutor
from convcodeworld_gym.sandbox.runtimes.needs import LOGGER, Lacking, RuntimeProbe, nltk_data_needed
from convcodeworld_gym.tasks import Task, TaskSet

_TEST = """import unittest
class TestCases(unittest.TestCase):
    def test_one(self):
        self.assertEqual(task_func(1), 2)
"""


def _task(task_id: str, header: str = "") -> Task:
    return Task(task_id, "Add one.", header + "def task_func(x):\n", "task_func", "    return x + 1\n", _TEST, source="test")


@pytest.fixture
def absent() -> str:
    """A module name no interpreter has (unique per test, so each warning is new)."""
    return f"ccw_absent_{uuid.uuid4().hex[:10]}"


@pytest.fixture
def task_set(absent) -> TaskSet:
    tag = absent[-6:]
    return TaskSet((_task(f"needs/{tag}/0"), _task(f"needs/{tag}/1", f"import {absent}\n"), _task(f"needs/{tag}/2")),
                   name=f"needs-{tag}")


@pytest.fixture(scope="module")
def shared_executor():
    with SandboxExecutor(workers=1, preload=(), calibrate=False) as ex:
        yield ex


def _left_out_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER.name and "left out" in r.getMessage()]


def test_a_default_set_leaves_the_task_out_with_one_warning(task_set, absent, shared_executor, caplog):
    caplog.set_level(logging.WARNING, logger=LOGGER.name)
    envs = [gym.make("ConvCodeWorld-CF-EF_full-v0", dataset=task_set, executor=shared_executor) for _ in range(3)]
    try:
        assert [len(env.unwrapped.tasks) for env in envs] == [2, 2, 2]
        assert task_set[1].task_id not in envs[0].unwrapped.tasks
    finally:
        for env in envs:
            env.close()
    (warning,) = _left_out_warnings(caplog)  # three envs on the same set: one warning, one line
    assert "left out 1 of 3 tasks" in warning and absent in warning and "\n" not in warning
    assert "env.unwrapped.tasks.left_out" in warning  # where the details are (a set passed in: no CLI command)
    why = envs[0].unwrapped.tasks.left_out[task_set[1].task_id]
    assert f"{shared_executor.runtime_probe().python} -m pip install {absent}" in why


def test_asked_for_by_id_it_runs_and_says_what_is_missing(task_set, absent, shared_executor, caplog):
    caplog.set_level(logging.WARNING, logger=LOGGER.name)
    lacking_id = task_set[1].task_id
    env = gym.make("ConvCodeWorld-CF-EF_full-v0", dataset=task_set, task_ids=[lacking_id], executor=shared_executor)
    try:
        env.reset(options={"task_id": lacking_id})
        obs, reward, terminated, _, info = env.step(task_set[1].ground_truth)
    finally:
        env.close()
    assert reward == 0.0 and not terminated
    assert info["missing_modules"] == [absent] and info["missing_data"] == []
    assert obs["execution_feedback"].startswith(f"Note: the runtime that runs these tests lacks the module {absent}")
    assert f"No module named '{absent}'" in obs["execution_feedback"]
    assert not _left_out_warnings(caplog)


def test_tasks_whose_needs_are_met_report_nothing_missing(task_set, shared_executor):
    env = gym.make("ConvCodeWorld-CF-v0", dataset=task_set, executor=shared_executor)
    try:
        env.reset(options={"task_id": task_set[0].task_id})
        _, reward, _, _, info = env.step(task_set[0].ground_truth)
    finally:
        env.close()
    assert (reward, info["missing_modules"], info["missing_data"]) == (1.0, [], [])


@pytest.mark.parametrize("by_id", [False, True])
def test_strict_runtime_raises_naming_the_task_and_the_fix(task_set, absent, shared_executor, by_id):
    kwargs = {"task_ids": [task_set[1].task_id]} if by_id else {}
    with pytest.raises(MissingRuntimeDependencies, match=rf"{task_set[1].task_id} \(module {absent}\).*pip install {absent}"):
        gym.make("ConvCodeWorld-CF-v0", dataset=task_set, executor=shared_executor, strict_runtime=True, **kwargs)


def test_evaluate_leaves_it_out_once_for_all_ids(task_set, absent, shared_executor, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger=LOGGER.name)
    config = EvalConfig(ids=("ConvCodeWorld-CF-v0", "ConvCodeWorld-CF-EF_full-v0"), dataset=task_set, max_turns=0,
                        concurrency=1)
    run_evaluation(config, make_policy("synthetic", strength=1.0), tmp_path / "run", executor=shared_executor,
                   progress=None)
    rows = [json.loads(line) for line in (tmp_path / "run" / "turns.jsonl").read_text().splitlines()]
    assert sorted({r["task_id"] for r in rows}) == sorted([task_set[0].task_id, task_set[2].task_id])
    assert len(_left_out_warnings(caplog)) == 1


def test_selfcheck_leaves_it_out_and_advises_the_runtime_it_checked(task_set, absent, shared_executor):
    report = run_selfcheck(task_set, shared_executor)
    assert (report.total, report.passed, list(report.left_out)) == (2, 2, [task_set[1].task_id])
    python = shared_executor.runtime_probe().python
    assert f"{python} -m pip install {absent}" in report.render()
    by_id = run_selfcheck(TaskSet((task_set[1],)), shared_executor, by_id=True)
    assert by_id.failures[task_set[1].task_id] == ("missing library", f"{absent} ({python} -m pip install {absent})")


def test_the_probe_asks_the_runtime_interpreter_itself(absent):
    probe = RuntimeProbe(sys.executable)
    tasks = [_task("p/0", f"import {absent}\nimport json\n"), _task("p/1", "import unittest\n")]
    assert probe.lacking(tasks) == {"p/0": Lacking(modules=(absent,))}
    assert len(probe.identity()) == 16


def test_nltk_data_needs_are_read_from_the_task_text():
    tokenize = _task("n/0", "from nltk.tokenize import word_tokenize\n")
    download = _task("n/1", "import nltk\nnltk.download('vader_lexicon')\n")
    no_data = _task("n/2", "import nltk\n")
    not_nltk = _task("n/3", "import re\nstopwords = ['a']\n")
    blob_tokens = _task("n/4", "from textblob import TextBlob\nN = len(TextBlob('a b').ngrams(n=2))\n")
    blob_sentiment = _task("n/5", "from textblob import TextBlob\nS = TextBlob('good').sentiment\n")
    assert [nltk_data_needed(t) for t in (tokenize, download, no_data, not_nltk, blob_tokens, blob_sentiment)] == [
        ("punkt",), ("vader_lexicon",), (), (), ("punkt",), ()]


@pytest.fixture
def bare_venv(tmp_path) -> str:
    """A fresh venv of this Python with nothing installed (no pip): an interpreter whose site-packages a test may
    change."""
    import subprocess
    import venv  # noqa: F401 - checks the module is there

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    return str(tmp_path / "venv" / "bin" / "python")


def test_executors_of_one_interpreter_share_its_probe_until_something_is_installed(bare_venv, absent, monkeypatch):
    """The second executor of an interpreter asks it nothing (a shared probe; each question is a subprocess of
    about 0.15 s, three for an env's executor); once a module is installed in it, or NLTK data is downloaded into
    it, the next executor asks again and sees it."""
    import subprocess
    from pathlib import Path

    asked: list[list[str]] = []
    real_run = subprocess.run

    def counting_run(command, *args, **kwargs):
        asked.append(command)
        return real_run(command, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", counting_run)
    first = RuntimeProbe.shared(bare_venv)
    assert first.lacking_modules([absent]) == (absent,)
    identity = first.identity()
    assert len(asked) == 1
    second = RuntimeProbe.shared(bare_venv)
    assert second is first and second.lacking_modules([absent]) == (absent,) and second.identity() == identity
    assert len(asked) == 1  # nothing asked again

    site = Path(bare_venv).parent.parent / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    (site / f"{absent}.py").write_text("X = 1\n")  # installed
    installed = RuntimeProbe.shared(bare_venv)
    assert installed is not first and installed.lacking_modules([absent]) == ()
    assert len(asked) == 2

    assert RuntimeProbe.shared(bare_venv) is installed
    corpora = Path(bare_venv).parent.parent / "nltk_data" / "corpora"
    corpora.mkdir(parents=True)  # a first NLTK download into the runtime
    assert RuntimeProbe.shared(bare_venv) is not installed
    fresh = RuntimeProbe.shared(bare_venv)
    fresh.identity()
    (corpora / "stopwords").mkdir()  # a later one, into a category dir that exists
    assert not fresh.unchanged() and RuntimeProbe.shared(bare_venv) is not fresh


def test_a_second_gym_make_with_its_own_executor_asks_the_runtime_nothing(monkeypatch):
    """``gym.make`` without ``executor=`` builds the env its own executor; the runtime's answers are the process's
    (it cost three probe subprocesses, 0.4-1.5 s, each time)."""
    import subprocess

    gym.make("ConvCodeWorld-CF-EF_full-v0", dataset="humaneval").close()
    asked: list[object] = []
    real_run = subprocess.run
    monkeypatch.setattr(subprocess, "run", lambda command, *a, **k: asked.append(command) or real_run(command, *a, **k))
    env = gym.make("ConvCodeWorld-CF-EF_full-v0", dataset="humaneval")
    try:
        assert env.unwrapped.executor.runtime_probe() is not None
        assert asked == []
    finally:
        env.close()
