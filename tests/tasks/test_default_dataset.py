"""One default task set for ``gym.make``, ``evaluate`` and ``demo``, and no silent wait when it cannot be had.

Offline is real here: the hub endpoint is a closed local port (and, where this machine has no
internet, also the real one); the error must come at once and name the fix.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import gymnasium as gym
import pytest

import convcodeworld_gym  # noqa: F401 - registers the ids
from convcodeworld_gym.errors import DatasetError
from convcodeworld_gym.runs.evaluate import EvalConfig
from convcodeworld_gym.tasks import BIGCODEBENCH_ENV, DEFAULT_DATASET, load_tasks
from convcodeworld_gym.tasks.files import hub_unreachable

_FIX = f"${BIGCODEBENCH_ENV}"


def _task_file(path, n: int = 2):
    rows = []
    for i in range(n):
        rows.append({"task_id": f"Default/{i}", "instruct_prompt": f"Return {i}.", "code_prompt": "def task_func():\n",
                     "canonical_solution": f"    return {i}\n", "entry_point": "task_func",
                     "test": f"import unittest\nclass TestCases(unittest.TestCase):\n    def test_1(self):\n"
                             f"        self.assertEqual(task_func(), {i})\n"})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again on exit: connecting is refused


def _cli(*args: str, env: dict[str, str], timeout: float = 120) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "convcodeworld_gym.cli", *args], capture_output=True, text=True,
                          env=env, timeout=timeout)
    return done, time.monotonic() - started


def test_gym_make_evaluate_and_demo_take_the_same_default(tmp_path, monkeypatch):
    path = _task_file(tmp_path / "bcb.jsonl")
    monkeypatch.setenv(BIGCODEBENCH_ENV, str(path))
    env = gym.make("ConvCodeWorld-CF-v0")
    assert env.unwrapped.tasks.ids == ("Default/0", "Default/1") and DEFAULT_DATASET == "bigcodebench"
    env.close()
    assert EvalConfig().dataset == DEFAULT_DATASET
    environ = {**os.environ, BIGCODEBENCH_ENV: str(path)}
    demo, _ = _cli("demo", "--episodes", "1", "--max-turns", "1", env=environ)
    assert demo.returncode == 0 and "on bigcodebench (2 tasks)" in demo.stdout and "[Default/0]" in demo.stdout, demo.stderr
    ev, _ = _cli("evaluate", "ConvCodeWorld-CF-v0", "--max-turns", "0", "--out", str(tmp_path / "run"), "--no-progress",
                 "--no-report", env=environ)
    assert ev.returncode == 0, ev.stderr
    rows = [json.loads(line) for line in (tmp_path / "run" / "turns.jsonl").read_text().splitlines()]
    assert sorted(r["task_id"] for r in rows) == ["Default/0", "Default/1"]


def test_an_unreachable_hub_fails_at_once_naming_the_fix(monkeypatch):
    monkeypatch.delenv(BIGCODEBENCH_ENV, raising=False)
    for flag in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(flag, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    started = time.monotonic()
    with pytest.raises(DatasetError, match=r"cannot reach the Hugging Face hub .*127\.0\.0\.1.*CONVCODEWORLD_BIGCODEBENCH_PATH"):
        gym.make("ConvCodeWorld-CF-v0")
    assert time.monotonic() - started < 5


def test_offline_cli_commands_fail_at_once_naming_the_fix(tmp_path):
    environ = {k: v for k, v in os.environ.items() if k not in (BIGCODEBENCH_ENV, "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
    environ["HF_ENDPOINT"] = f"http://127.0.0.1:{_closed_port()}"
    for args in (("demo",), ("evaluate", "--out", str(tmp_path / "run"), "--no-progress")):
        done, took = _cli(*args, env=environ)
        assert done.returncode == 2 and _FIX in done.stderr and "humaneval" in done.stderr, done.stderr
        assert took < 20, f"{args}: {took:.1f} s"  # interpreter start and imports; the probe itself takes < 3 s


def test_this_machine_without_internet_fails_at_once(monkeypatch):
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    if hub_unreachable() is None:
        pytest.skip("huggingface.co is reachable from here")
    monkeypatch.delenv(BIGCODEBENCH_ENV, raising=False)
    started = time.monotonic()
    with pytest.raises(DatasetError, match=r"huggingface\.co"):
        load_tasks("bigcodebench")
    assert time.monotonic() - started < 5


def test_offline_mode_with_an_empty_cache_fails_at_once_naming_the_fix(tmp_path, monkeypatch):
    env = {k: v for k, v in os.environ.items() if k != BIGCODEBENCH_ENV}
    env.update(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"))
    code = "from convcodeworld_gym.tasks import load_tasks\nload_tasks('bigcodebench')\n"
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode != 0 and "DatasetError" in done.stderr and "offline mode" in done.stderr and _FIX in done.stderr
    assert time.monotonic() - started < 20
