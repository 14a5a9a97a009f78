"""Runs in the host: task profiles that ship with the package, so that a task's first step runs no canonical solution.

``selfcheck --write-profiles`` measures every task of a set (judge mode, canonical time) and writes
one JSON file; the files in ``convcodeworld_gym/sandbox/profiles/`` ship in the package (HumanEval,
BigCodeBench v0.1.0_hf). :class:`~.pool.SandboxExecutor` asks them for a task it has no profile of
yet; a task is answered only when its digest (tests + canonical solution, :func:`~.profile.task_digest`)
is the one measured, and only when its canonical solution passed there. Any other task (another
dataset, a changed task, a failing one) is calibrated as before.

Canonical times depend on the machine: a shipped time is multiplied by ``time_scale`` (default 2)
before the executor's :class:`~.profile.TimePolicy` turns it into limits; with the default policy
(``4 t + 5 s``, at least 5 s) most tasks get the floor either way.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import json
import os
import platform
from collections.abc import Iterable, Mapping
from pathlib import Path

from ...errors import ConvCodeWorldError
from ...tasks import Task
from ..messages import Mode
from .profile import TaskProfile, import_profile, task_digest

__all__ = ["ShippedProfiles", "shipped_profiles", "tasks_hash", "write_profiles", "PROFILES_DIR", "FORMAT"]

#: The package's profile files.
PROFILES_DIR = Path(__file__).with_name("profiles")
#: Version of the file layout; a file of another version is not read.
FORMAT = 1


def tasks_hash(tasks: Iterable[Task]) -> str:
    """SHA-256 of the sorted ``(task id, task digest)`` pairs: any change to any task's tests or solution changes it."""
    digest = hashlib.sha256()
    for task_id, digest_text in sorted((t.task_id, task_digest(t)) for t in tasks):
        digest.update(f"{task_id}\0{digest_text}\n".encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


class ShippedProfiles:
    """Profiles read from ``paths`` (JSON files written by :func:`write_profiles`), by task id.

    A task is answered when its id is listed with the same :func:`~.profile.task_digest` and a passing
    canonical solution; its canonical time comes back multiplied by ``time_scale``. Files that cannot be
    read, or of another :data:`FORMAT`, raise :class:`~convcodeworld_gym.errors.ConvCodeWorldError`
    naming the file.
    """

    def __init__(self, paths: Iterable[str | os.PathLike[str]], *, time_scale: float = 2.0) -> None:
        if time_scale < 1:
            raise ValueError(f"time_scale must be >= 1 (a shipped time is stretched, never shrunk), got {time_scale}")
        self.time_scale = time_scale
        self.files: dict[str, dict] = {}
        self._by_id: dict[str, dict] = {}
        for path in paths:
            data = _read(Path(path))
            self.files[str(path)] = {k: v for k, v in data.items() if k != "tasks"}
            self._by_id.update(data["tasks"])

    def lookup(self, task: Task) -> TaskProfile | None:
        """The shipped profile of ``task``, or None when it has none or its tests or solution differ."""
        entry = self._by_id.get(task.task_id)
        if entry is None or entry.get("digest") != task_digest(task):
            return None
        canonical_s = round(float(entry["canonical_s"]) * self.time_scale, 4)
        return TaskProfile(Mode(entry["mode"]), canonical_s, True, f"shipped (canonical time x{self.time_scale:g})",
                           entry.get("imports") or import_profile(task))

    def __len__(self) -> int:
        return len(self._by_id)


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConvCodeWorldError(f"cannot read the profile file {path}: {exc}; remake it with "
                                 "`convcodeworld selfcheck --write-profiles`") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("tasks"), dict):
        raise ConvCodeWorldError(f"{path} is not a profile file of format {FORMAT}; remake it with "
                                 "`convcodeworld selfcheck --write-profiles`")
    return data


@functools.lru_cache(maxsize=1)
def shipped_profiles() -> ShippedProfiles:
    """The package's profile files (``PROFILES_DIR/*.json``), read once."""
    return ShippedProfiles(sorted(PROFILES_DIR.glob("*.json")))


def write_profiles(path: str | os.PathLike[str], tasks: Iterable[Task], profiles: Mapping[str, TaskProfile],
                   *, dataset: str, made_with: Mapping[str, object]) -> int:
    """Write the passing profiles among ``profiles`` (by task id) of ``tasks`` to ``path``; returns how many.

    The file holds ``dataset``, the :func:`tasks_hash` of all ``tasks``, ``made_with`` (runtime,
    confinement, machine) and, per task, its digest, judge mode, canonical time and import profile.
    """
    tasks = list(tasks)
    entries = {}
    for task in tasks:
        profile = profiles.get(task.task_id)
        if profile is None or not profile.canonical_passed or profile.canonical_s is None:
            continue  # left out or failing here: calibrated wherever it runs
        entries[task.task_id] = {"digest": task_digest(task), "mode": profile.mode.value,
                                 "canonical_s": profile.canonical_s, "imports": profile.imports or import_profile(task)}
    data = {
        "format": FORMAT, "dataset": dataset, "tasks_hash": tasks_hash(tasks), "tasks_total": len(tasks),
        "made": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
        "made_with": {"machine": f"{platform.machine()}, {os.cpu_count()} CPUs", **made_with},
        "times": "canonical_s: the canonical solution's run time there, in seconds; stretched by time_scale where used",
        "tasks": entries,
    }
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    head = json.dumps({k: v for k, v in data.items() if k != "tasks"}, indent=1)[:-2]
    rows = ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in entries.items())  # one line a task: small diffs
    Path(path).write_text(f'{head},\n "tasks": {{\n{rows}\n }}\n}}\n')
    return len(entries)
