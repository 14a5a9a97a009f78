"""Runs in the host: the tasks whose canonical solutions fail with other library releases than their pinned runtime's.

A task set's tests were written against the libraries of its pinned runtime (BigCodeBench:
``envs/bigcodebench/requirements.txt``). With newer releases some canonical solutions fail however they are judged
(pandas 3 removed ``DataFrame.applymap``, numpy 2.4 refuses ``nonzero`` of a 0-d array, ...): there a program written
as the task asks scores 0.0. A default task set leaves such a task out on a runtime whose release of a library the task
uses is not the pinned one (:mod:`...selection`, kind ``"versions"``; ``convcodeworld tasks`` lists each with the
failure seen), so that no correct program scores a silent 0.0; asked for by id, it still runs.

The table is measured, never guessed: ``convcodeworld selfcheck --dataset bigcodebench --runtime <newest>
--write-drift PATH`` runs every canonical solution in a runtime of the newest releases and writes, for each that failed
there and passed in the pinned runtime (the shipped profiles say which), the distributions the task uses with their
pinned releases, the releases it failed with, and the failure; the package ships the files in
``convcodeworld_gym/sandbox/host/drift/``. A task is matched by its tests and canonical solution
(:func:`~.profile.task_digest`), whatever its id.

Holds:
    DRIFT_DIR        the package's drift files
    FORMAT           the version of the file layout
    Drift            one task's entry: the distributions and their pinned releases, what it failed with, why
    drift_table      the shipped entries by task digest
    drifted          the entry of a task that would fail on a runtime of these releases, or None
    pinned_releases  distribution -> release of a requirements file's pins
    write_drift      a drift file from a self-check's failures
"""

from __future__ import annotations

import datetime
import functools
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from ...errors import ConvCodeWorldError
from ...tasks import Task
from ..runtimes.packages import pypi_name
from .profile import task_digest

__all__ = ["DRIFT_DIR", "FORMAT", "Drift", "drift_table", "drifted", "write_drift", "pinned_releases"]

#: The package's drift files.
DRIFT_DIR = Path(__file__).with_name("drift")
#: Version of the file layout; a file of another version is not read.
FORMAT = 1
#: Libraries the data stack's tasks load through another (seaborn draws with matplotlib on pandas and numpy data):
#: a task that uses the key uses these too.
_UNDERNEATH = {"seaborn": ("matplotlib", "pandas", "numpy"), "pandas": ("numpy",), "matplotlib": ("numpy",),
               "scipy": ("numpy",), "scikit-learn": ("numpy", "scipy"), "statsmodels": ("numpy", "scipy", "pandas")}


@dataclass(frozen=True)
class Drift:
    """A task whose canonical solution failed with newer releases than its pinned runtime's.

    Attributes:
        task_id: the task's id where it was measured.
        pinned: distribution -> its pinned release, for each distribution the task uses.
        seen: distribution -> the release it failed with.
        failure: the last line of the failure there.
    """

    task_id: str
    pinned: Mapping[str, str]
    seen: Mapping[str, str]
    failure: str

    def differing(self, installed: Mapping[str, str]) -> dict[str, str]:
        """Distribution -> the release ``installed`` has, for each that is not the pinned one (absent ones are the
        runtime selection's ``runtime`` kind, not this)."""
        have = {_normal(name): version for name, version in installed.items()}
        return {name: have[_normal(name)] for name, version in self.pinned.items()
                if _normal(name) in have and have[_normal(name)] != version}

    def why(self, installed: Mapping[str, str]) -> str:
        """The reason a default set left the task out on a runtime with ``installed``."""
        releases = ", ".join(f"{name} {version} (pinned {self.pinned[name]})"
                             for name, version in sorted(self.differing(installed).items()))
        return (f"its canonical solution fails with library releases other than the pinned ones: this runtime has "
                f"{releases}; with {', '.join(f'{k} {v}' for k, v in sorted(self.seen.items()))} it failed: "
                f"{self.failure}. Play it on the pinned runtime (`convcodeworld runtime install bigcodebench`), or "
                "ask for it by id (task_ids=[...]), where it runs and may fail for a correct program")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@functools.lru_cache(maxsize=1)
def drift_table() -> dict[str, Drift]:
    """Every shipped entry, by the task's digest (tests + canonical solution)."""
    table: dict[str, Drift] = {}
    for path in sorted(DRIFT_DIR.glob("*.json")) if DRIFT_DIR.is_dir() else ():
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ConvCodeWorldError(f"cannot read the drift file {path}: {exc}") from None
        if data.get("format") != FORMAT:
            continue
        for digest, entry in data.get("tasks", {}).items():
            table[digest] = Drift(entry["task_id"], dict(entry["pinned"]), dict(entry["seen"]), entry["failure"])
    return table


def drifted(task: Task, installed: Mapping[str, str]) -> Drift | None:
    """The shipped entry of ``task`` when a runtime with ``installed`` (distribution -> release) differs from its
    pinned releases in a library the task uses, else None."""
    entry = drift_table().get(task_digest(task))
    return entry if entry is not None and entry.differing(installed) else None


def pinned_releases(requirements: str | os.PathLike[str]) -> dict[str, str]:
    """Distribution -> release of each ``name==version`` line of a requirements file."""
    found: dict[str, str] = {}
    for line in Path(requirements).read_text().splitlines():
        match = re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s;#]+)", line)
        if match:
            found[match.group(1)] = match.group(2)
    return found


def _distributions(task: Task, pinned: Mapping[str, str]) -> list[str]:
    """The pinned distributions ``task`` uses: its third-party imports' and what those load underneath."""
    names = {pypi_name(module) for module in task.third_party_modules}
    for name in list(names):
        names.update(_UNDERNEATH.get(name, ()))
    by_normal = {_normal(name): name for name in pinned}
    return sorted(by_normal[_normal(name)] for name in names if _normal(name) in by_normal)


def write_drift(path: str | os.PathLike[str], failures: Mapping[str, str], tasks: Iterable[Task],
                pinned: Mapping[str, str], installed: Mapping[str, str], passed_pinned: Iterable[str]) -> int:
    """Write a drift file: each task of ``failures`` (task id -> its failure's last line) that passed in the pinned
    runtime (``passed_pinned``: task ids) and uses a distribution whose ``installed`` release is not its ``pinned``
    one. Returns how many entries were written."""
    passed = set(passed_pinned)
    have = {_normal(name): version for name, version in installed.items()}
    entries: dict[str, dict] = {}
    for task in tasks:
        if task.task_id not in failures or task.task_id not in passed:
            continue
        used = _distributions(task, pinned)
        seen = {name: have[_normal(name)] for name in used if _normal(name) in have}
        drift = Drift(task.task_id, {name: pinned[name] for name in used}, seen, failures[task.task_id])
        if drift.differing(installed):
            entries[task_digest(task)] = asdict(drift)
    data = {"format": FORMAT, "measured": datetime.date.today().isoformat(), "tasks": entries}
    Path(path).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return len(entries)
