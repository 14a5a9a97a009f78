"""Scoring a log loads neither Gymnasium nor the sandbox: the scoring modules' own imports.

The package root registers the env ids (so it imports Gymnasium and the executors); the
check therefore loads the scoring modules under an empty stand-in for the root package, in
a fresh interpreter, and looks at what their own imports pulled in.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_PROBE = """
import importlib, json, sys, types
root = types.ModuleType("convcodeworld_gym")
root.__path__ = [{package!r}]
sys.modules["convcodeworld_gym"] = root
importlib.import_module({module!r})
print(json.dumps(sorted(m for m in sys.modules if m == "gymnasium" or m.startswith(("gymnasium.", "convcodeworld_gym.")))))
"""

SCORING = (
    "convcodeworld_gym.reference",
    "convcodeworld_gym.records",
    "convcodeworld_gym.metrics",
    "convcodeworld_gym.runs.log_scores",
    "convcodeworld_gym.runs.correlation",
    "convcodeworld_gym.runs.report",
)


def _imported_by(module: str) -> list[str]:
    code = _PROBE.format(package=str(ROOT / "convcodeworld_gym"), module=module)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("module", SCORING)
def test_scoring_imports_neither_gymnasium_nor_the_sandbox(module: str) -> None:
    loaded = _imported_by(module)
    assert module in loaded  # the probe did import it
    offending = [m for m in loaded if m == "gymnasium" or m.startswith(("gymnasium.", "convcodeworld_gym.sandbox", "convcodeworld_gym.env"))]
    assert offending == [], f"{module} imports {offending}"


def test_the_probe_sees_an_env_module_import_gymnasium() -> None:
    """The probe can fail: the static-replay env does import Gymnasium and the sandbox."""
    loaded = _imported_by("convcodeworld_gym.static")
    assert "gymnasium" in loaded and "convcodeworld_gym.sandbox" in loaded
