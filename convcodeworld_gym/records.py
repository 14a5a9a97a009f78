"""Episode logs: one row per (task, turn), the one schema that live runs write and ConvCodeBench replays.

Logs are JSON-lines files that ``datasets.load_dataset("json", data_files=...)`` reads.
Whole episodes are appended in one write and flushed to disk, so an interrupted run leaves
complete episodes plus at most one torn last line, which readers ignore and writers cut."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import MISSING, asdict, dataclass, field
from pathlib import Path
from typing import Any

from .observation import TEXT_KEYS

__all__ = [
    "TurnRecord",
    "turn_record",
    "EpisodeLogWriter",
    "read_turns",
    "iter_jsonl",
    "group_episodes",
    "TURNS_FILE",
    "METADATA_FILE",
]

#: File name of the turn log inside a run directory.
TURNS_FILE = "turns.jsonl"
#: File name of the run's settings (versions, dataset, policy, seed) inside a run directory.
METADATA_FILE = "metadata.json"


@dataclass(frozen=True)
class TurnRecord:
    """One turn of one episode.

    Attributes:
        feedback: the combination's id part, e.g. ``"CF-EF_full-SNF"``.
        task_id, turn: which task and which submission (0 = first program).
        reply: the policy's raw reply; ``code``: the code extracted from it.
        compilation_feedback, execution_feedback, verbal_feedback: the texts shown after this
            turn ("" when not shown).
        compile_ok, passed, reward, pass_fraction: the truth about this turn's code (all tests).
        tests: per-test ``{"name", "outcome", "traceback"}``.
        episode_end: ``"passed"``, ``"max_turns"``, or ``""`` while the episode goes on.
        verbal_feedback_source: which simulator spoke (``""`` if none).
        policy: the policy's name; ``usage``: token counts and latency of the policy call.
        timings: seconds spent per stage (measurements; not part of a record's identity).
        reference: for ConvCodeBench (static replay) rows, the reference log that was replayed
            (a path or hub id); ``""`` for live rows.
        model_calls: the policy's calls that wrote this turn's program: 1 on every turn of the
            ``always`` protocol; under the reference protocol 0 for code carried over (nothing
            to act on), more than 1 with compile fixes inside the turn. ``usage`` and the
            ``policy_s`` timing add up all of them.
        infra_error: ``""``, or why the infrastructure lost this turn's run, also on its retry
            (``info["infra_error"]``): the turn is no verdict (``passed`` False, ``reward`` 0.0 mean
            nothing), its episode ends there, and the metrics leave the episode out
            (:mod:`~convcodeworld_gym.runs.log_scores`).
        regressed_tests: the tests a program of an earlier turn of the episode passed and this one fails
            (``info["regressed_tests"]``, :mod:`~convcodeworld_gym.regressions`); ``convcodeworld report`` gives the
            share of episodes with one.
        canary: the task is a canary twin (``info["canary"]``, :mod:`~convcodeworld_gym.tasks.canary`): its row
            counts towards the canary pass rate, never towards Pass@1, MRR or Recall.
        reasoning: the reasoning the endpoint returned apart from the reply of the call whose reply this row judged
            (``reasoning_content``: :attr:`~convcodeworld_gym.policies.PolicyReply.reasoning`); ``""`` when none. Never
            judged: ``code`` comes from ``reply`` alone (a thought inside ``reply`` is removed before, under the env's
            ``reasoning="strip"``).
    """

    feedback: str
    task_id: str
    turn: int
    reply: str
    code: str
    compilation_feedback: str
    execution_feedback: str
    verbal_feedback: str
    compile_ok: bool
    passed: bool
    reward: float
    pass_fraction: float
    tests: list[dict[str, str]] = field(default_factory=list)
    episode_end: str = ""
    verbal_feedback_source: str = ""
    policy: str = ""
    usage: dict[str, float] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict, compare=False)
    reference: str = ""
    model_calls: int = 1
    infra_error: str = ""
    regressed_tests: list[str] = field(default_factory=list)
    canary: bool = False
    reasoning: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> TurnRecord:
        """Build from a row (unknown keys are ignored, missing optional ones defaulted; a None where a field has a
        default is missing too: ``datasets`` fills a column that older rows of a log lack with None)."""
        fields = cls.__dataclass_fields__
        return cls(**{k: v for k, v in row.items() if k in fields and not (v is None and _has_default(fields[k]))})


def _has_default(spec: Any) -> bool:
    """Whether a dataclass field has a default (a value or a factory)."""
    return spec.default is not MISSING or spec.default_factory is not MISSING


def turn_record(
    *,
    feedback: str,
    reply: str,
    obs: Mapping[str, Any],
    reward: float,
    info: Mapping[str, Any],
    policy: str = "",
    usage: Mapping[str, float] | None = None,
    policy_s: float | None = None,
    model_calls: int = 1,
    reasoning: str | None = None,
) -> TurnRecord:
    """The row for one ``env.step(reply)`` that returned ``obs, reward, info``.

    The code and feedback texts come from ``obs``, unless ``info["judged"]`` holds them (the
    keys ``code``, ``compilation_feedback``, ``execution_feedback``, ``verbal_feedback``): a
    static replay's observation is the reference's frozen turn, while its row records the
    evaluated model's own code and the (unshown) feedback on it. ``info["reference_log"]``,
    when present, fills :attr:`TurnRecord.reference`. ``reasoning``: the reasoning the endpoint returned apart from
    ``reply`` (kept in the row, never judged).
    """
    texts = {**{k: obs[k] for k in TEXT_KEYS}, **dict(info.get("judged") or {})}
    timings = info.get("timings")
    timing_dict = {k: float(v) for k, v in asdict(timings).items()} if timings is not None else {}
    if policy_s is not None:
        timing_dict["policy_s"] = float(policy_s)
    return TurnRecord(
        feedback=feedback,
        task_id=str(info["task_id"]),
        turn=int(info["turn"]),
        reply=reply,
        code=str(texts["code"]),
        compilation_feedback=str(texts["compilation_feedback"]),
        execution_feedback=str(texts["execution_feedback"]),
        verbal_feedback=str(texts["verbal_feedback"]),
        compile_ok=bool(info["compile_ok"]),
        passed=bool(info["passed"]),
        reward=float(reward),
        pass_fraction=float(info["pass_fraction"]),
        tests=[dict(t) for t in info["tests"]],
        episode_end=str(info.get("episode_end") or ""),
        verbal_feedback_source=str(info.get("verbal_feedback_source") or ""),
        policy=policy,
        usage={k: float(v) for k, v in (usage or {}).items()},
        timings=timing_dict,
        reference=str(info.get("reference_log") or ""),
        model_calls=int(model_calls),
        infra_error=str(info.get("infra_error") or ""),
        regressed_tests=[str(name) for name in info.get("regressed_tests") or ()],
        canary=bool(info.get("canary", False)),
        reasoning=str(reasoning or ""),
    )


def iter_jsonl(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Rows of a JSON-lines file; a torn (unparsable) *last* line is skipped, any other raises."""
    with open(path, encoding="utf-8") as fh:
        lines = fh.readlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines) and not line.endswith("\n"):
                return  # an interrupted append
            raise ValueError(f"{path}, line {number}: not valid JSON; the log is corrupt") from None


class EpisodeLogWriter:
    """Appends whole episodes to ``<run_dir>/turns.jsonl``; knows which episodes are done.

    Each episode is one ``write`` followed by ``flush`` and ``fsync``. On open, a torn last
    line left by a killed run is cut off, so resuming never duplicates or loses an episode.

    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> with EpisodeLogWriter(d) as w:
    ...     w.write_episode([{"feedback": "CF", "task_id": "t/0", "turn": 0}])
    >>> EpisodeLogWriter(d).done == {("CF", "t/0")}
    True
    """

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.run_dir / TURNS_FILE
        self._repair()
        self.done: set[tuple[str, str]] = {(r["feedback"], r["task_id"]) for r in iter_jsonl(self.path)} if self.path.exists() else set()
        self._fh = None

    def _repair(self) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            keep = data.rfind(b"\n") + 1
            with open(self.path, "r+b") as fh:
                fh.truncate(keep)

    def write_episode(self, rows: Iterable[TurnRecord | Mapping[str, Any]]) -> None:
        """Append every turn of one finished episode, atomically with respect to interruption."""
        dicts = [r.to_dict() if isinstance(r, TurnRecord) else dict(r) for r in rows]
        if not dicts:
            return
        payload = "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in dicts)
        if self._fh is None:
            self._fh = open(self.path, "a", encoding="utf-8")
        self._fh.write(payload)
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self.done.add((dicts[0]["feedback"], dicts[0]["task_id"]))

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> EpisodeLogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_turns(source: str | os.PathLike[str]) -> list[TurnRecord]:
    """Every row of a log, through ``datasets``.

    ``source`` is a run directory, a ``turns.jsonl`` file, or a Hugging Face hub dataset id.
    """
    import datasets

    path = Path(source)
    if path.is_dir():
        path = path / TURNS_FILE
    if path.exists():
        ds = datasets.load_dataset("json", data_files=str(path), split="train")
    else:
        ds = datasets.load_dataset(str(source), split="train")
    return [TurnRecord.from_dict(row) for row in ds]


def group_episodes(rows: Iterable[TurnRecord]) -> dict[tuple[str, str], list[TurnRecord]]:
    """Rows grouped by (feedback, task_id), each group sorted by turn."""
    groups: dict[tuple[str, str], list[TurnRecord]] = {}
    for row in rows:
        groups.setdefault((row.feedback, row.task_id), []).append(row)
    for group in groups.values():
        group.sort(key=lambda r: r.turn)
    return groups
