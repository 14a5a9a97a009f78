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
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable

from ..tasks import Task

__all__ = ["SPLIT_UNJUDGEABLE", "judgeable_split"]

log = logging.getLogger(__name__)

#: BigCodeBench tasks whose canonical solution passes only in-process, with the reason.
SPLIT_UNJUDGEABLE: dict[str, str] = {}


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
    why = "; ".join(f"{n} {reason}" for reason, n in left.most_common())
    return kept, (f"left out {total} task(s) the split judge cannot judge (their canonical solutions pass only "
                  f"in-process, where a program can forge its verdict): {why}. Pass allow_forgeable=True to "
                  "judge them in-process.")
