"""Helpers of the episode server's tests (imported by them; no OpenEnv here)."""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from convcodeworld_gym.tasks import Task

T = TypeVar("T")
INSTALL = "pip install -e '.[openenv]'"
BIN = Path(sys.executable).parent


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


def wrong_program(task: Task) -> str:
    """A reply whose program compiles and fails every test (it returns None)."""
    return f"```python\n{task.code_prompt.rstrip()}\n    return None\n```"


def openenv_cli() -> str:
    """The ``openenv`` command beside this interpreter (else the one on PATH)."""
    beside = BIN / "openenv"
    return str(beside) if beside.exists() else (shutil.which("openenv") or "openenv")


def until(check: Callable[[], bool], timeout_s: float, what: str, every_s: float = 0.02) -> float:
    """Poll ``check`` every ``every_s`` seconds until it is true; the seconds that took.

    Raises:
        AssertionError: not true within ``timeout_s`` (the message says ``what`` was awaited).
    """
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"not within {timeout_s:g} s: {what}")
        time.sleep(every_s)
    return time.monotonic() - started
