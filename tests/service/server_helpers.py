"""Helpers of the episode server's tests (imported by them; no OpenEnv here)."""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from convcodeworld_gym.tasks import Task
from convcodeworld_gym.testing.infra import until  # noqa: F401 - the tests import it from here

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

