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
_APPCTX = "whose programs need a Flask application or request context the tests set up in the judge"
_CHANGE = "whose tests hand the program a library object to change in place (a Flask app's config)"
_MEMBERSHIP = ("whose tests ask a library object the program returned whether it holds a key ('UUID' in a Django "
               "response), which only the object could answer and a stand-in never decides")
_NATIVE = "whose values are library objects native code needs as themselves (geopandas geometries, cryptography keys)"
_PRIVATE = "whose programs draw on a matplotlib object the tests made (reading its private attributes)"
_FAKEFS = "whose tests fake the file system in the judge (pyfakefs), so the program's file descriptors are not there"
_SEEDED = ("whose tests draw their data from the random stream the program reseeded in an earlier test (in one module "
           "the program's seed reaches the tests; split, it never does, so that no program can steer what they draw)")

#: BigCodeBench tasks whose canonical solution passes only in-process, with the reason. Measured on
#: BigCodeBench (v0.1.0_hf) with the full runtime (`selfcheck --runtime`), 2026-12-01; each passes in-process.
#: The 20 others of the first list (sys.path, rcParams and Django settings the tests share with the program;
#: the tests' functions inspected by the program; returned arguments; pytz zones; exceptions' attributes;
#: http.cookies' dicts) pass split since the split judge shares them (see :mod:`.shared` and :mod:`.standin`).
SPLIT_UNJUDGEABLE: dict[str, str] = {
    "BigCodeBench/205": _FORK,
    "BigCodeBench/273": _CLASS,
    "BigCodeBench/80": _APPCTX,
    "BigCodeBench/413": _CHANGE,
    "BigCodeBench/183": _MEMBERSHIP,
    **{f"BigCodeBench/{n}": _NATIVE for n in (187, 534)},
    "BigCodeBench/337": _PRIVATE,
    "BigCodeBench/719": _FAKEFS,
    "BigCodeBench/93": _SEEDED,  # since 2026-12-02: the random states cross judge to program only
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
