"""Import the reference implementation's result files into the :mod:`..records` log schema.

The reference (``sfc-gh-hhan/convcodeworld``) writes one JSON-lines file per turn: turn 0
is the model's single-turn BigCodeBench generation (``task_id``, ``solution``), and the file
of iteration ``k >= 1`` holds per task the code of turn ``k`` (``solution``) together with the
feedback on the code of turn ``k-1`` that produced it (``compilation_feedback``,
``execution_feedback``, ``user_feedback``; ``null`` when not given) and ``iteration``. Next to
each ``X.jsonl`` is ``X_eval_results.json``: ``{"eval": {task_id: [{"status": "pass"|"fail"|"timeout",
"details": {test name: traceback}, ...}]}}`` (BigCodeBench's evaluation; only ``"pass"`` passes). Iteration ``k >= 2`` files are named
``..._ITER=k.jsonl``.

In our schema the feedback *on* turn ``t`` belongs to row ``t``, so row ``t`` takes the
feedback fields of iteration ``t+1``. An episode ends at its first passing turn (the
reference keeps copying a solved task's code forward; those rows are dropped). The reference
logs no per-test passes, so a row's ``tests`` lists the failing tests of ``details`` and
``pass_fraction`` is 1.0 for a pass, else 0.0."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..combos import FeedbackConfig
from ..errors import ReferenceLogError
from ..feedback import compilation_feedback
from ..metrics import DEFAULT_MAX_TURNS
from ..records import EpisodeLogWriter, TurnRecord, group_episodes, iter_jsonl

__all__ = ["import_reference", "iteration_files", "write_reference_log", "eval_results_path", "REFERENCE_SOURCE"]

#: ``verbal_feedback_source`` of imported rows that carry verbal feedback.
REFERENCE_SOURCE = "reference-log"
_EVAL_SUFFIX = "_eval_results.json"


def eval_results_path(generation_file: str | os.PathLike[str]) -> Path:
    """``X_eval_results.json`` next to ``X.jsonl``."""
    path = Path(generation_file)
    if path.suffix != ".jsonl":
        raise ReferenceLogError(f"{path}: a reference generation file ends in .jsonl; pass the .jsonl, not its eval results")
    return path.with_name(path.stem + _EVAL_SUFFIX)


def iteration_files(first_iteration: str | os.PathLike[str]) -> list[Path]:
    """``first_iteration`` (``X.jsonl``) and the existing ``X_ITER=2.jsonl``, ``X_ITER=3.jsonl``, ... in order."""
    first = Path(first_iteration)
    stem = re.sub(r"_ITER=\d+$", "", first.stem)
    files = [first]
    k = 2
    while (candidate := first.with_name(f"{stem}_ITER={k}.jsonl")).exists():
        files.append(candidate)
        k += 1
    return files


def _load_turn(path: Path) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    if not path.exists():
        raise ReferenceLogError(f"reference generation file {path} does not exist")
    generations = {str(row["task_id"]): row for row in iter_jsonl(path)}
    eval_path = eval_results_path(path)
    if not eval_path.exists():
        raise ReferenceLogError(f"{path} has no evaluation next to it: expected {eval_path} (run the reference's evaluation on it)")
    with open(eval_path, encoding="utf-8") as fh:
        data = json.load(fh)
    if not isinstance(data, dict) or not isinstance(data.get("eval"), dict):
        raise ReferenceLogError(f"{eval_path}: expected a JSON object with an 'eval' mapping of task id -> results")
    evaluations: dict[str, dict[str, Any]] = {}
    for task_id, results in data["eval"].items():
        result = results[0] if isinstance(results, list) and results else results
        if not isinstance(result, dict) or "status" not in result:
            raise ReferenceLogError(f"{eval_path}, task {task_id!r}: expected [{{'status': 'pass'|'fail'|'timeout', 'details': {{...}}}}]")
        evaluations[str(task_id)] = result
    return generations, evaluations


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def import_reference(
    files: Sequence[str | os.PathLike[str]],
    *,
    feedback: str | FeedbackConfig,
    policy: str = "",
    max_turns: int = DEFAULT_MAX_TURNS,
) -> list[TurnRecord]:
    """Rows (turn by turn, task by task in turn-0 order) of one reference run.

    Args:
        files: the generation files in turn order: turn 0's, then iteration 1, 2, ...; each
            with its ``_eval_results.json`` beside it. Files past turn ``max_turns`` are ignored.
        feedback: the combination the run used (the reference encodes it in the file name,
            e.g. ``_CF_EF_FULL_SEF``; here it is said explicitly).
        policy: the model's name, stored in every row.

    Raises:
        ReferenceLogError: a file, its evaluation, or a task's row in it is missing or malformed.
    """
    name = FeedbackConfig.parse(feedback).name
    if not files:
        raise ReferenceLogError("no reference files given: pass turn 0's generation file, then the iteration files in order")
    paths = [Path(f) for f in files][: max_turns + 1]
    turns = [_load_turn(p) for p in paths]
    rows: list[TurnRecord] = []
    for task_id in turns[0][0]:
        for t, (path, (generations, evaluations)) in enumerate(zip(paths, turns)):
            if task_id not in generations or task_id not in evaluations:
                where = path if task_id not in generations else eval_results_path(path)
                raise ReferenceLogError(f"{where} has no result for task {task_id!r} (turn {t}); the run's files must cover every task of turn 0")
            result = evaluations[task_id]
            code = _text(generations[task_id].get("solution", result.get("solution")))
            passed = result["status"] == "pass"
            following = turns[t + 1][0].get(task_id, {}) if t + 1 < len(turns) else {}
            verbal = _text(following.get("user_feedback"))
            details = result.get("details") or {}
            # the reference's last file imported ends an episode its program did not pass (a finished episode)
            end = "passed" if passed else ("max_turns" if t == len(paths) - 1 else "")
            rows.append(
                TurnRecord(
                    feedback=name,
                    task_id=task_id,
                    turn=t,
                    reply=code,
                    code=code,
                    compilation_feedback=_text(following.get("compilation_feedback")),
                    execution_feedback=_text(following.get("execution_feedback")),
                    verbal_feedback=verbal,
                    compile_ok=compilation_feedback(code)[0],
                    passed=passed,
                    reward=1.0 if passed else 0.0,
                    pass_fraction=1.0 if passed else 0.0,
                    tests=[{"name": str(n), "outcome": "failed", "traceback": _text(tb)} for n, tb in details.items()],
                    episode_end=end,
                    verbal_feedback_source=REFERENCE_SOURCE if verbal else "",
                    policy=policy,
                )
            )
            if passed:
                break
    return rows


def write_reference_log(
    files: Sequence[str | os.PathLike[str]],
    out_dir: str | os.PathLike[str],
    *,
    feedback: str | FeedbackConfig,
    policy: str = "",
    max_turns: int = DEFAULT_MAX_TURNS,
) -> Path:
    """Import ``files`` (see :func:`import_reference`) and append them, episode by episode, to
    ``<out_dir>/turns.jsonl``; episodes already there are skipped. Returns the log's path."""
    rows = import_reference(files, feedback=feedback, policy=policy, max_turns=max_turns)
    with EpisodeLogWriter(out_dir) as writer:
        for key, episode in group_episodes(rows).items():
            if key not in writer.done:
                writer.write_episode(episode)
        return writer.path
