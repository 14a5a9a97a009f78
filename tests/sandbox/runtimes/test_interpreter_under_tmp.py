"""An interpreter that lives under /tmp (a venv made there) is the same inside runs as outside.

Each run gets a fresh private /tmp; the interpreter's prefix, venv and sys.path entries under /tmp are
bound back into it read-only. The venv here is real (``python -m venv``); it reaches this project's
dependencies through a ``.pth`` file and holds one module of its own, which no worker preloads.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

from convcodeworld_gym.sandbox import SandboxExecutor
from convcodeworld_gym.sandbox.host.launch import PACKAGE_ROOT
from convcodeworld_gym.sandbox.runtimes.interpreter import paths_beneath
from convcodeworld_gym.tasks import Task

PROBE_VALUE = 4242
_TEST = f"""import unittest
class TestCases(unittest.TestCase):
    def test_value(self):
        self.assertEqual(task_func(), {PROBE_VALUE})
"""
_CHILD = "import ccw_tmp_probe; print(ccw_tmp_probe.VALUE)"
PROGRAMS = {
    "import": "def task_func():\n    import ccw_tmp_probe\n    return ccw_tmp_probe.VALUE\n",
    **{
        name: ("import subprocess, sys\ndef task_func():\n"
               f"    out = subprocess.run([{command}, '-c', {_CHILD!r}], capture_output=True, text=True, check=True)\n"
               "    return int(out.stdout)\n")
        for name, command in (("sys.executable", "sys.executable"), ("python", "'python'"), ("python3", "'python3'"))
    },
}


def _task(name: str) -> Task:
    program = PROGRAMS[name]
    return Task(f"tmpvenv/{name}", "Return the probe's value.", "def task_func():\n", "task_func",
                program.split("def task_func():\n", 1)[1], _TEST, source="test")


@pytest.fixture(scope="module")
def tmp_venv():
    """A venv under /tmp with a module of its own (``ccw_tmp_probe``) and this project on its path."""
    root = Path(tempfile.mkdtemp(prefix="ccw_tmpvenv_", dir="/tmp"))
    try:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
        python = root / "venv" / "bin" / "python"
        purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                 check=True, capture_output=True, text=True).stdout.strip()
        Path(purelib, "ccw_host.pth").write_text(f"{sysconfig.get_paths()['purelib']}\n{PACKAGE_ROOT}\n")
        Path(purelib, "ccw_tmp_probe.py").write_text(f"VALUE = {PROBE_VALUE}\n")
        yield python
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def tmp_venv_executor(tmp_venv):
    with SandboxExecutor(workers=1, preload=(), calibrate=False, python=str(tmp_venv)) as ex:
        yield ex


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_venv_under_tmp_serves_imports_and_python_subprocesses_in_runs(tmp_venv_executor, name):
    result = tmp_venv_executor.run(_task(name), PROGRAMS[name])
    failures = [t.traceback[-600:] for t in result.tests if not t.outcome.ok]
    assert result.passed, (result.crash, failures)
    assert result.details["confinement"]["level"] in ("full", "namespaces", "uid", "process")


def test_the_venv_under_tmp_is_read_only_inside_runs(tmp_venv, tmp_venv_executor):
    if os.geteuid() != 0:
        pytest.skip("read-only views need the namespaces (root)")
    target = str(tmp_venv.parent / "ccw_planted.py")
    program = (f"def task_func():\n    try:\n        open({target!r}, 'w').write('x')\n    except OSError:\n"
               f"        return {PROBE_VALUE}\n    return 0\n")
    task = Task("tmpvenv/write", "p", "def task_func():\n", "task_func", program.split("\n", 1)[1], _TEST, source="test")
    assert tmp_venv_executor.run(task, program).passed
    assert not os.path.exists(target)


def test_paths_beneath_keeps_only_the_outermost_existing_paths(tmp_path):
    (tmp_path / "venv" / "lib").mkdir(parents=True)
    (tmp_path / "other").mkdir()
    got = paths_beneath(str(tmp_path), [str(tmp_path / "venv" / "lib"), str(tmp_path / "venv"), str(tmp_path / "gone"),
                                        str(tmp_path), str(tmp_path / "other"), "/usr"])
    assert got == (str((tmp_path / "other").resolve()), str((tmp_path / "venv").resolve()))


def test_python_and_python3_start_the_runs_interpreter_where_its_dir_lacks_them(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the shims live in the worker's private /tmp (namespaces: root)")
    bindir = tmp_path / "bin"  # holds only python3.X: no `python`, no `python3` beside the interpreter
    bindir.mkdir()
    interpreter = bindir / f"python{sys.version_info.major}.{sys.version_info.minor}"
    interpreter.symlink_to(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))
    program = ("import subprocess\ndef task_func():\n    out = [subprocess.run([c, '-c', 'import sys; print(sys.executable)'],"
               " capture_output=True, text=True, check=True).stdout.strip() for c in ('python', 'python3')]\n"
               f"    return {PROBE_VALUE} if out == [{str(interpreter)!r}] * 2 else out\n")
    task = Task("shims/0", "p", "def task_func():\n", "task_func", program.split("def task_func():\n", 1)[1], _TEST,
                source="test")
    with SandboxExecutor(workers=1, preload=(), calibrate=False, runtime=str(interpreter)) as ex:
        result = ex.run(task, program)
    assert result.passed, [t.traceback[-400:] for t in result.tests]
