"""A separate runtime interpreter serves the runs: a venv with nothing of this project installed.

The venvs here are real (``python -m venv`` from the base interpreter, no system site-packages):
one bare (the standard library only), one with ``nltk`` (pip, from the configured index) and a
small stopwords corpus of our own under its prefix, where NLTK looks for data.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import convcodeworld_gym  # noqa: F401 - registers the ids
from convcodeworld_gym.cli import main as cli_main
from convcodeworld_gym.errors import ExecutorError
from convcodeworld_gym.sandbox import SandboxExecutor
from convcodeworld_gym.sandbox.host.launch import PACKAGE_DIR, worker_boot
from convcodeworld_gym.sandbox.runtimes.install import (MARKER_FILE, RUNTIME_PYTHON_ENV, RUNTIMES_DIR_ENV,
                                                        RuntimeNotInstalled, install_runtime, resolve_runtime)
from convcodeworld_gym.sandbox.runtimes.needs import LOGGER
from convcodeworld_gym.tasks import Task, TaskSet

_BASE = getattr(sys, "_base_executable", sys.executable)


def _task(task_id: str, body: str, test_body: str, header: str = "") -> Task:
    test = f"import unittest\nclass TestCases(unittest.TestCase):\n    def test_one(self):\n{test_body}"
    return Task(task_id, "p", header + "def task_func():\n", "task_func", body, test, source="test")


@pytest.fixture(scope="module")
def bare_runtime(tmp_path_factory) -> Path:
    """A venv with the standard library only (no pip even): nothing of this project, none of its dependencies."""
    venv = tmp_path_factory.mktemp("runtime") / "bare"
    subprocess.run([_BASE, "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv


@pytest.fixture(scope="module")
def bare_executor(bare_runtime):
    with SandboxExecutor(workers=1, calibrate=False, runtime=str(bare_runtime)) as ex:
        yield ex


def test_the_worker_imports_only_the_standard_library():
    code = "import sys\nbefore = set(sys.modules)\n" + worker_boot(PACKAGE_DIR, start=False) + (
        "import json\nprint(json.dumps(sorted({m.split('.')[0] for m in set(sys.modules) - before} - set(sys.stdlib_module_names))))")
    found = subprocess.run([_BASE, "-s", "-I", "-c", code], capture_output=True, text=True, check=True, cwd="/")
    assert json.loads(found.stdout) == ["convcodeworld_gym"], found.stdout


def test_runs_are_served_by_the_runtime_venv_and_see_none_of_the_envs_libraries(bare_runtime, bare_executor):
    task = _task("rt/prefix", "    import sys\n    return sys.prefix\n",
                 f"        self.assertEqual(task_func(), {str(bare_runtime)!r})\n"
                 "        with self.assertRaises(ImportError):\n            import gymnasium\n"
                 "        with self.assertRaises(ImportError):\n            import numpy\n")
    result = bare_executor.run(task, task.ground_truth)
    assert result.passed, (result.crash, [t.traceback for t in result.tests])
    assert bare_executor.preload == ()  # what the runtime holds, not what this interpreter holds


def test_missing_modules_are_judged_by_the_runtime_not_by_this_interpreter(bare_executor, caplog):
    pytest.importorskip("numpy")  # installed here, absent from the runtime
    caplog.set_level(logging.WARNING, logger=LOGGER.name)
    needs_numpy = _task("rt/numpy", "    return int(numpy.int64(2))\n", "        self.assertEqual(task_func(), 2)\n",
                        "import numpy\n")
    plain = _task("rt/plain", "    return 2\n", "        self.assertEqual(task_func(), 2)\n")
    tasks = TaskSet((needs_numpy, plain), name="rt-numpy")
    env = gym.make("ConvCodeWorld-CF-EF_full-v0", dataset=tasks, executor=bare_executor)
    assert env.unwrapped.tasks.ids == ("rt/plain",)
    env.close()
    assert any("numpy" in r.getMessage() and str(bare_executor.runtime_probe().python) in r.getMessage()
               for r in caplog.records)
    env = gym.make("ConvCodeWorld-CF-EF_full-v0", dataset=tasks, task_ids=["rt/numpy"], executor=bare_executor)
    env.reset()
    _, reward, _, _, info = env.step(needs_numpy.ground_truth)
    env.close()
    assert (reward, info["missing_modules"]) == (0.0, ["numpy"])


def test_the_runtime_is_found_from_the_environment_variable(bare_runtime, monkeypatch):
    monkeypatch.setenv(RUNTIME_PYTHON_ENV, str(bare_runtime / "bin" / "python"))
    assert resolve_runtime() == str(bare_runtime / "bin" / "python")
    monkeypatch.setenv(RUNTIME_PYTHON_ENV, str(bare_runtime / "nothing"))
    with pytest.raises(ExecutorError, match=RUNTIME_PYTHON_ENV):
        resolve_runtime()


def test_an_installed_runtime_is_found_without_flags(tmp_path, monkeypatch):
    monkeypatch.setenv(RUNTIMES_DIR_ENV, str(tmp_path / "runtimes"))
    monkeypatch.delenv(RUNTIME_PYTHON_ENV, raising=False)
    with pytest.raises(RuntimeNotInstalled, match="convcodeworld runtime install bigcodebench"):
        resolve_runtime("bigcodebench")
    assert resolve_runtime() is None  # nothing installed: this interpreter
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("# a runtime with the standard library only\n")
    python = install_runtime("bigcodebench", requirements=requirements, nltk_data=False, log=lambda line: None)
    assert python == tmp_path / "runtimes" / "bigcodebench" / "bin" / "python"
    assert json.loads((python.parents[1] / MARKER_FILE).read_text())["name"] == "bigcodebench"
    assert resolve_runtime() == str(python) == resolve_runtime("bigcodebench")
    task = _task("rt/found", "    import sys\n    return sys.prefix\n",
                 f"        self.assertEqual(task_func(), {str(python.parents[1])!r})\n")
    with SandboxExecutor(workers=1, calibrate=False) as ex:
        assert ex.run(task, task.ground_truth).passed


def test_runtime_and_executor_together_are_refused(bare_runtime, bare_executor):
    with pytest.raises(ValueError, match="runtime= or executor="):
        gym.make("ConvCodeWorld-CF-v0", dataset="humaneval", runtime=str(bare_runtime), executor=bare_executor)


@pytest.fixture(scope="module")
def nltk_runtime(tmp_path_factory) -> Path:
    """A venv with nltk from the package index (skips when it cannot be installed)."""
    venv = tmp_path_factory.mktemp("runtime") / "nltk"
    subprocess.run([_BASE, "-m", "venv", str(venv)], check=True)
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "nltk"], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"nltk could not be installed from the package index: {done.stderr[-300:]}")
    return venv


def test_nltk_data_is_checked_in_the_runtime_and_read_from_its_prefix(nltk_runtime, tmp_path, capsys):
    task = _task("rt/stopwords", "    return [w for w in ['a', 'cat'] if w not in stopwords.words('english')]\n",
                 "        self.assertEqual(task_func(), ['cat'])\n", "from nltk.corpus import stopwords\n")
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({"task_id": task.task_id, "instruct_prompt": task.prompt, "code_prompt": task.code_prompt,
                                "canonical_solution": task.canonical_solution, "test": task.test,
                                "entry_point": task.entry_point}) + "\n")
    argv = ["selfcheck", "--dataset", str(path), "--workers", "1", "--no-progress", "--runtime", str(nltk_runtime)]
    assert cli_main(argv) == 0  # left out (nothing run): the runtime lacks the data
    out = capsys.readouterr().out
    assert "selfcheck" in out and "0/0" in out and "NLTK data 'stopwords'" in out and str(nltk_runtime) in out
    assert cli_main([*argv, "--task-ids", task.task_id]) == 1  # asked for by id: run, fails, and says why
    out = capsys.readouterr().out
    assert "data files: 1" in out and f"-m nltk.downloader -d {nltk_runtime}/nltk_data stopwords" in out, out
    corpus = nltk_runtime / "nltk_data" / "corpora" / "stopwords"
    corpus.mkdir(parents=True)
    (corpus / "english").write_text("a\nthe\n")
    assert cli_main(argv) == 0
    assert "1/1 canonical solutions pass" in capsys.readouterr().out
