"""The reference log a ConvCodeBench replay is played against, read and checked.

A reference model was played once in ConvCodeWorld and logged (the :mod:`.records` schema).
:func:`load_reference` reads the rows of one feedback combination and checks that they can
be replayed; the static env (:mod:`.static`) and the scoring of runs (:mod:`.runs`) use it.
It imports neither Gymnasium nor the sandbox, so scoring logs needs neither.

A log of many trajectories per task (``convcodeworld evaluate --samples N``: rows with ``sample``) is replayed one
trajectory per task: sample 0, or the one asked for (``sample=``, or a source named ``<log>#sample=<n>``, the name a
:class:`ReferenceLog` of another sample gives itself so that the rows of its replay name exactly the history replayed).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Union

from .combos import FeedbackConfig
from .errors import ReferenceLogError
from .metrics import DEFAULT_MAX_TURNS
from .records import TurnRecord, group_episodes, read_turns, split_finished

__all__ = ["ReferenceLog", "ReferenceSpec", "load_reference", "split_sample"]

#: How a source names one sample of a log of many trajectories per task: ``<log>#sample=<n>``.
_SAMPLE_SUFFIX = re.compile(r"#sample=(\d+)$")


def split_sample(source: str) -> tuple[str, int | None]:
    """``(log, sample)`` of a source that may name a sample (``runs/ref#sample=3``); ``sample`` None where it names
    none.

    >>> split_sample("runs/ref#sample=3"), split_sample("runs/ref")
    (('runs/ref', 3), ('runs/ref', None))
    """
    found = _SAMPLE_SUFFIX.search(source)
    return (source[:found.start()], int(found[1])) if found else (source, None)


@dataclass(frozen=True)
class ReferenceLog:
    """The reference's episodes of one feedback combination, checked for replay.

    Attributes:
        source: where the rows came from (a path or hub id; ``""`` for rows given in memory), followed by
            ``#sample=<n>`` when the trajectory replayed is not sample 0.
        feedback: the combination's id part, e.g. ``"CF-EF_full-SEF"``.
        sample: which of the log's trajectories of each task is replayed (0 in a log of one per task).
        episodes: task id -> the reference's turns ``0..n`` (every turn present, in order, ending at its first
            passing turn, or covering turns ``0..max_turns-1`` at least). A log may go on after the pass, as the
            reference's own logs do: it carries the passing code over and executes it again every later turn
            (pot.py:564-570, "Already solved"), so a flaky test can fail it there.
        left_out: task id -> why the log's episode of it cannot be replayed: a turn of it the infrastructure
            lost (``TurnRecord.infra_error``), so its history holds no verdict there and stops; or the log holds no
            trajectory ``sample`` of it.
    """

    source: str
    feedback: str
    episodes: Mapping[str, tuple[TurnRecord, ...]]
    left_out: Mapping[str, str] = field(default_factory=dict)
    sample: int = 0

    def passes(self, task_id: str) -> list[bool]:
        """``passes[j]``: did the reference's code of turn ``j`` pass."""
        return [row.passed for row in self.episode(task_id)]

    def passed_at(self, task_id: str) -> int | None:
        """The reference's first passing turn for ``task_id``, or None."""
        return next((row.turn for row in self.episode(task_id) if row.passed), None)

    def episode(self, task_id: str) -> tuple[TurnRecord, ...]:
        try:
            return self.episodes[task_id]
        except KeyError:
            if task_id in self.left_out:
                raise ReferenceLogError(
                    f"the reference log {self.source or '(rows)'}'s {self.feedback} episode of {task_id!r} cannot be "
                    f"replayed: {self.left_out[task_id]}; play that task's reference episode again"
                ) from None
            raise ReferenceLogError(
                f"the reference log {self.source or '(rows)'} has no {self.feedback} episode for task {task_id!r}; "
                "replay only tasks the reference played (it holds "
                f"{len(self.episodes)} tasks, e.g. {', '.join(list(self.episodes)[:3])})"
            ) from None


ReferenceSpec = Union[str, "os.PathLike[str]", Sequence[TurnRecord], ReferenceLog]


def load_reference(log: ReferenceSpec, feedback: str | FeedbackConfig, max_turns: int = DEFAULT_MAX_TURNS, *,
                   sample: int | None = None) -> ReferenceLog:
    """Read the reference rows of one combination and check that they can be replayed.

    ``log`` is a run directory, a ``turns.jsonl`` file, a hub dataset id (any of them followed by ``#sample=<n>``
    to name a sample), rows, or a :class:`ReferenceLog` (returned as is when its combination and sample match).
    ``sample``: which trajectory of each task is replayed (default: the one the source names, else 0); a task the
    log holds no such trajectory of is left out (``ReferenceLog.left_out``).

    An episode holding a turn the infrastructure lost (``infra_error``) is left out (``ReferenceLog.left_out``):
    its history stops at a turn that is no verdict. So is an unfinished episode of a log read from a path or the hub
    (a run cut short, or still going: :func:`~.records.split_finished`); rows given in memory are taken as they are.

    Raises:
        ReferenceLogError: no rows of the combination; a task's turns have a gap or a
            duplicate; an unsolved episode stops before turn ``max_turns-1`` (the model's turn
            ``max_turns`` needs the reference's turn ``max_turns-1``). Turns after a pass are accepted
            (the reference re-executed its carried code there; see :attr:`ReferenceLog.episodes`).
    """
    name = FeedbackConfig.parse(feedback).name
    if isinstance(log, ReferenceLog):
        if log.feedback != name:
            raise ReferenceLogError(f"reference log {log.source!r} is for {log.feedback}, not {name}")
        if sample is not None and sample != log.sample:
            raise ReferenceLogError(f"reference log {log.source!r} replays sample {log.sample}, not {sample}")
        return log
    if isinstance(log, (str, os.PathLike)):
        path, named = split_sample(os.fspath(log))
        if sample is not None and named is not None and sample != named:
            raise ReferenceLogError(f"reference log {os.fspath(log)!r} names sample {named}, but sample={sample} was "
                                    "asked for; name one of them")
        sample = sample if sample is not None else named or 0
        # a local log is named by its absolute path, so runs that name it can be scored from anywhere
        source = os.path.abspath(path) if os.path.exists(path) else path
        rows, unfinished = split_finished(read_turns(path))  # what a run cut short is no reference history
    else:
        source, rows, unfinished = "", list(log), []
        sample = sample or 0
    if sample < 0:
        raise ReferenceLogError(f"reference sample must be >= 0, got {sample}")
    source = f"{source}#sample={sample}" if sample else source
    groups = group_episodes(rows)
    present = sorted({combo for combo, _, _ in groups})
    episodes: dict[str, tuple[TurnRecord, ...]] = {}
    # records.episode_key: (feedback, task_id, sample)
    left_out: dict[str, str] = {key[1]: "the run that logged it left it unfinished (no row says how it ended)"
                                for key in unfinished if key[0] == name and key[2] == sample}
    held = {task_id for combo, task_id, _ in groups if combo == name}
    left_out.update({task_id: f"the log holds no trajectory of sample {sample} of it"
                     for task_id in held if (name, task_id, sample) not in groups and task_id not in left_out})
    for (combo, task_id, row_sample), turns in groups.items():
        if combo != name or row_sample != sample:
            continue
        lost = next((row for row in turns if row.infra_error), None)
        if lost is not None:
            left_out[task_id] = f"the infrastructure lost the run of its turn {lost.turn} ({lost.infra_error})"
            continue
        where = f"reference log {source or '(rows)'}, {name} episode of {task_id!r}"
        numbers = [row.turn for row in turns]
        if numbers != list(range(len(turns))):
            missing = sorted(set(range(max(numbers) + 1)) - set(numbers))
            raise ReferenceLogError(
                f"{where}: turns {numbers} are not 0, 1, 2, ... (missing {missing}, or duplicated); "
                "the log must hold every turn of each episode once"
            )
        first = next((row.turn for row in turns if row.passed), None)
        if first is None and len(turns) < max_turns:
            raise ReferenceLogError(
                f"{where}: the episode ends at turn {len(turns) - 1} without a pass, but replaying {max_turns} turns "
                f"needs the reference's turns 0..{max_turns - 1}; pass max_turns={len(turns)} or a complete log"
            )
        episodes[task_id] = tuple(turns)
    if not episodes:
        if left_out:
            raise ReferenceLogError(
                f"reference log {source or '(rows)'}: none of its {name} episodes ({len(left_out)}) can be replayed "
                f"(e.g. {next(iter(left_out))}: {next(iter(left_out.values()))}); play them again"
            )
        raise ReferenceLogError(
            f"reference log {source or '(rows)'} has no rows for combination {name} (it holds: {', '.join(present) or 'no rows'}); "
            "choose the ConvCodeBench id of a combination it was recorded with"
        )
    return ReferenceLog(source=source, feedback=name, episodes=episodes, left_out=left_out, sample=sample)
