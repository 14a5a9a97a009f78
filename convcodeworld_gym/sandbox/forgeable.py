"""The tasks the split judge cannot judge, and the default task set that leaves them out.

A task whose canonical solution fails under the split judge but passes with program and tests in
one process can only be judged in-process, where a program can forge its verdict. The default
environment never does that: such tasks are left out of its task set (one warning says how many
and why) unless ``allow_forgeable=True`` brings them back, judged in-process with
``info["forgeable"] is True``. The list was measured with the full BigCodeBench runtime (see the
README's Sandbox section); a task not listed that still fails split is judged split, and its
canonical solution's failure is in its profile.

Holds:
    SPLIT_UNJUDGEABLE  task id -> why its canonical solution fails under the split judge
    judgeable_split    the tasks of a set that the split judge can judge, and a note on the rest
    default_task_set   a task set without them (one logged warning), unless forgeable judging is allowed
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable

from ..tasks import Task, TaskSet

__all__ = ["SPLIT_UNJUDGEABLE", "judgeable_split", "default_task_set"]

log = logging.getLogger(__name__)

_FORK = "whose tests' mocks are called from processes the program forks (multiprocessing.Pool)"
_CLASS = "whose tests inspect a class the program defines as a class (issubclass)"
_PATH = "whose tests read the sys.path the program changed"
_INSPECT = "whose programs inspect a function the tests define (inspect.signature, its code)"

#: BigCodeBench tasks whose canonical solution passes only in-process, with the reason. Measured on
#: BigCodeBench (v0.1.0_hf) on 2026-12-01 over its 300 standard-library tasks and the 464 whose libraries
#: this machine had (numpy, pandas, matplotlib, scipy, ...); the other 376 tasks are not measured yet.
SPLIT_UNJUDGEABLE: dict[str, str] = {
    "BigCodeBench/205": _FORK,
    "BigCodeBench/273": _CLASS,
    **{f"BigCodeBench/{n}": _PATH for n in (541, 714, 715, 716, 717)},
    **{f"BigCodeBench/{n}": _INSPECT for n in (566, 568, 569, 570, 571)},
}


def judgeable_split(tasks: Iterable[Task]) -> tuple[list[Task], str | None]:
    """The tasks the split judge can judge, in order, and a one-line note naming how many were left out and why
    (None when none was).

    >>> from convcodeworld_gym.tasks import load_tasks
    >>> kept, note = judgeable_split(load_tasks("humaneval"))
    >>> len(kept), note
    (164, None)
    """
    kept, left = [], Counter()
    for task in tasks:
        reason = SPLIT_UNJUDGEABLE.get(task.task_id) if task.source.startswith("bigcodebench") else None
        if reason is None:
            kept.append(task)
        else:
            left[reason] += 1
    if not left:
        return kept, None
    total = sum(left.values())
    why = "; ".join(f"{n} {reason}" for reason, n in left.most_common())  # e.g. "5 whose tests read ..."
    return kept, (f"left out {total} task(s) the split judge cannot judge (their canonical solutions pass only "
                  f"in-process, where a program can forge its verdict): {why}. Pass allow_forgeable=True to "
                  "judge them in-process.")


def default_task_set(tasks: TaskSet, allow_forgeable: bool = False) -> TaskSet:
    """``tasks`` without those only an in-process judge can judge, logging one warning when any is left out;
    all of ``tasks`` with ``allow_forgeable``."""
    if allow_forgeable:
        return tasks
    kept, note = judgeable_split(tasks)
    if note is None:
        return tasks
    log.warning("%s: %s", tasks.name, note)
    return TaskSet(tuple(kept), name=tasks.name)
