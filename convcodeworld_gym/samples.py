"""BigCodeBench samples: a model's single-turn generations, as BigCodeBench's leaderboard
publishes them (JSON lines with ``task_id`` and ``solution``, the whole program).

In the paper, turn 0 of every model, live or static, is its own BigCodeBench samples, not a
ConvCodeWorld prompt; ``convcodeworld evaluate --turn0 FILE`` plays them so. A sample is code, not a
reply (:class:`~.extract.Sample`): it is judged as the reference's fork ran it, calibrated when the
file's name says ``sanitized-calibrated`` as the fork decides it (bigcodebench/evaluate.py:139).

Holds:
    load_samples   the samples of a file: ``{task_id: Sample}``
    samples_digest a digest of the samples, for a run's metadata
    CALIBRATED_MARK what a samples file's name holds when its samples are calibrated
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

from .errors import SamplesError
from .extract import Sample

__all__ = ["load_samples", "samples_digest", "CALIBRATED_MARK"]

#: What a samples file's name holds when its samples are calibrated: the reference's fork then runs
#: ``code_prompt + "\n    pass\n" + solution`` (bigcodebench/evaluate.py:139-142 in the fork).
CALIBRATED_MARK = "sanitized-calibrated"


def load_samples(path: str | os.PathLike[str], *, calibrated: bool | None = None) -> dict[str, Sample]:
    """``{task_id: solution}`` of a samples file (one JSON object a line; blank lines skipped), each a
    :class:`~.extract.Sample`: ``calibrated`` when given, else when the path holds :data:`CALIBRATED_MARK`.

    Raises:
        SamplesError: the file is missing, a line is not a JSON object with a string
            ``task_id`` and ``solution``, or a task appears twice.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "samples.jsonl"
    >>> _ = p.write_text('{"task_id": "BigCodeBench/0", "solution": "def task_func():\\\\n    return 1"}\\n')
    >>> samples = load_samples(p)
    >>> samples, samples["BigCodeBench/0"].calibrated
    ({'BigCodeBench/0': 'def task_func():\\n    return 1'}, False)
    """
    path = Path(path)
    if not path.is_file():
        raise SamplesError(f"samples file {path} does not exist; pass BigCodeBench samples (JSONL of task_id, solution)")
    if calibrated is None:
        calibrated = CALIBRATED_MARK in os.fspath(path)
    samples: dict[str, Sample] = {}
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                raise SamplesError(f"{path}, line {number}: not valid JSON") from None
            if not isinstance(row, dict) or not isinstance(row.get("task_id"), str) or not isinstance(row.get("solution"), str):
                raise SamplesError(f"{path}, line {number}: needs a string 'task_id' and a string 'solution' (BigCodeBench's samples format)")
            if row["task_id"] in samples:
                raise SamplesError(f"{path}, line {number}: task {row['task_id']!r} appears twice; keep one sample per task")
            samples[row["task_id"]] = Sample(row["solution"], calibrated)
    return samples


def samples_digest(samples: Mapping[str, str]) -> str:
    """SHA-256 over the samples in task order: equal for equal samples, whatever the file's order."""
    digest = hashlib.sha256()
    for task_id in sorted(samples):
        for part in (task_id, samples[task_id]):
            digest.update(part.encode("utf-8", "surrogatepass"))
            digest.update(b"\0")
    return digest.hexdigest()
