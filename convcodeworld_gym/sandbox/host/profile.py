"""Runs in the host: per-task profiles, which judge mode serves a task and its time limit calibrated from the canonical
solution.

A profile is measured once (the canonical solution is run, split mode first) and kept in a
:class:`ProfileStore`, in memory and optionally in a JSON file, keyed by the task's test digest,
the ground truth's hash and the runtime fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from ...tasks import Task
from ..limits import Limits
from ..messages import Mode

__all__ = ["TimePolicy", "TaskProfile", "ProfileStore", "profile_key", "task_digest", "import_profile", "profile_for",
           "IMPORT_PROFILES"]

#: Import profiles, smallest first: the library sets a warm process holds (``own``: the task's own set).
IMPORT_PROFILES: dict[str, tuple[str, ...]] = {
    "stdlib": (),
    "numpy": ("numpy",),
    "pandas": ("numpy", "pandas"),
    "pandas+matplotlib": ("numpy", "pandas", "matplotlib", "matplotlib.pyplot"),
}


def profile_for(modules: Iterable[str], source: str = "") -> str:
    """The smallest import profile whose libraries cover ``modules`` (top-level names of non-standard
    libraries), else ``"own"``. pandas draws with matplotlib, imported on first use: where ``source`` may
    plot (it says ``plot`` or ``hist``), a pandas profile becomes ``pandas+matplotlib``, so that the judge
    holds the classes the program's values have, as a worker that preloads everything does.

    >>> profile_for(["numpy"]), profile_for(["pandas"], "df.plot(x='a')"), profile_for(["scipy"])
    ('numpy', 'pandas+matplotlib', 'own')
    """
    needed = {m.split(".")[0] for m in modules}
    if "pandas" in needed and ("plot" in source or "hist" in source):
        needed.add("matplotlib")
    for name, libraries in IMPORT_PROFILES.items():
        if needed <= {m.split(".")[0] for m in libraries}:
            return name
    return "own"


def import_profile(task: Task) -> str:
    """The smallest import profile whose libraries cover what ``task`` imports (:func:`profile_for`).

    >>> from convcodeworld_gym.tasks import Task
    >>> t = Task("d/0", "", "import pandas as pd\\ndef f():\\n", "f", "    pass\\n", "import unittest\\n")
    >>> import_profile(t), import_profile(Task("d/1", "", "def f():\\n", "f", "    pass\\n", ""))
    ('pandas', 'stdlib')
    """
    return profile_for(task.third_party_modules, task.ground_truth + task.test)


@dataclass(frozen=True)
class TimePolicy:
    """Time limits from the canonical solution's measured time ``t``: ``clamp(factor * t + floor, floor, cap)``.

    The same value bounds one test and the whole suite (no single test may need more than the suite).
    The cap defaults to the reference's 121 s; some canonical solutions need 20-75 s.

    >>> TimePolicy().limits_for(0.05).suite_timeout_s, TimePolicy().limits_for(100).suite_timeout_s
    (5.2, 121.0)
    """

    floor_s: float = 5.0
    factor: float = 4.0
    cap_s: float = 121.0

    def __post_init__(self) -> None:
        if not 0 < self.floor_s <= self.cap_s or self.factor < 1:
            raise ValueError(f"TimePolicy needs 0 < floor_s <= cap_s and factor >= 1, got {self}")

    def limits_for(self, canonical_s: float | None, base: Limits | None = None) -> Limits:
        """Limits for a task whose canonical solution took ``canonical_s`` (``None``: unknown, use the cap)."""
        base = base or Limits()
        seconds = self.cap_s if canonical_s is None else min(self.cap_s, max(self.floor_s, self.factor * canonical_s + self.floor_s))
        return Limits(suite_timeout_s=round(seconds, 3), test_timeout_s=round(seconds, 3), max_code_chars=base.max_code_chars)


@dataclass(frozen=True)
class TaskProfile:
    """How a task is judged. ``canonical_passed`` False means its reward is not trustworthy here (see ``note``)."""

    mode: Mode
    canonical_s: float | None
    canonical_passed: bool
    note: str = ""
    imports: str = ""  # the import profile (:func:`import_profile`); "" in profiles stored before it was kept

    def to_json(self) -> dict:
        data = asdict(self)
        data["mode"] = self.mode.value
        return data

    @classmethod
    def from_json(cls, data: dict) -> TaskProfile:
        return cls(Mode(data["mode"]), data.get("canonical_s"), bool(data["canonical_passed"]), data.get("note", ""),
                   data.get("imports", ""))


def task_digest(task: Task) -> str:
    """Test digest + ground-truth hash: changes whenever the task's tests or canonical solution change."""
    gt = hashlib.sha256(task.ground_truth.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{task.test_digest[:32]}-{gt}"


def profile_key(task: Task, fingerprint: str) -> str:
    """Test digest + ground-truth hash + runtime fingerprint (no secrets: only hashes of public text)."""
    return f"{task_digest(task)}-{fingerprint}"


class ProfileStore:
    """Profiles by key; with ``path`` they are loaded from and saved to that JSON file.

    A missing or unreadable file starts an empty store (the profiles are re-measured).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._data: dict[str, TaskProfile] = {}
        if self.path is not None and self.path.exists():
            try:
                raw = json.loads(self.path.read_text())
                self._data = {k: TaskProfile.from_json(v) for k, v in raw.items()}
            except (OSError, ValueError, KeyError, TypeError):
                self._data = {}

    def get(self, key: str) -> TaskProfile | None:
        with self._lock:
            return self._data.get(key)

    def put(self, key: str, profile: TaskProfile) -> None:
        with self._lock:
            self._data[key] = profile
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                tmp = self.path.with_suffix(f".tmp{os.getpid()}")
                tmp.write_text(json.dumps({k: v.to_json() for k, v in self._data.items()}, indent=0))
                os.replace(tmp, self.path)

    def __len__(self) -> int:
        return len(self._data)
