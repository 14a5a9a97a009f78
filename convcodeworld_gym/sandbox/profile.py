"""Per-task profiles: which judge mode serves a task, and its time limit calibrated from the canonical solution.

A profile is measured once (the canonical solution is run, split mode first) and kept in a
:class:`ProfileStore`, in memory and optionally in a JSON file, keyed by the task's test digest,
the ground truth's hash and the runtime fingerprint.

Holds:
    TimePolicy    floor, factor and cap that turn the canonical solution's time into limits
    TaskProfile   mode, canonical time and outcome, and the limits that follow
    ProfileStore  thread-safe store of profiles (optionally persisted as JSON)
    profile_key   the key of a task's profile
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

from ..tasks import Task
from .executor import Limits
from .judge import Mode

__all__ = ["TimePolicy", "TaskProfile", "ProfileStore", "profile_key"]


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

    def to_json(self) -> dict:
        data = asdict(self)
        data["mode"] = self.mode.value
        return data

    @classmethod
    def from_json(cls, data: dict) -> TaskProfile:
        return cls(Mode(data["mode"]), data.get("canonical_s"), bool(data["canonical_passed"]), data.get("note", ""))


def profile_key(task: Task, fingerprint: str) -> str:
    """Test digest + ground-truth hash + runtime fingerprint (no secrets: only hashes of public text)."""
    gt = hashlib.sha256(task.ground_truth.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{task.test_digest[:32]}-{gt}-{fingerprint}"


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
