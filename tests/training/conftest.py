"""Fixtures of the training tests: the programs of ``training/``, imported as modules."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

#: The repository's root (``training/`` is below it).
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def training_program(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], ModuleType]:
    """A loader of ``training/<name>.py`` as a fresh module (``program_<name>``), with ``training/`` on ``sys.path``
    for the test's duration, as when the program runs as a script (sb3_ppo and bandit import ``common.py`` so)."""
    monkeypatch.syspath_prepend(str(ROOT / "training"))

    def load(name: str) -> ModuleType:
        spec = importlib.util.spec_from_file_location(f"program_{name}", ROOT / "training" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        return module

    return load
