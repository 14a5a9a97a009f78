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
_SETTINGS = "whose tests configure Django settings in the judge's process (settings.configure), which the program's never sees"
_NAMES = "whose tests use a name only the program imports (Django's settings) and configure Django in the judge"
_APPCTX = "whose programs need a Flask application or request context the tests set up in the judge"
_RCPARAMS = "whose tests read library-global state the program set (matplotlib rcParams)"
_SAME = "whose tests check that the program returned or changed in place the very object they passed"
_NATIVE = "whose values are library objects native code needs as themselves (geopandas, rsa/cryptography keys)"
_PRIVATE = "whose programs draw on a matplotlib object the tests made (reading its private attributes)"
_FAKEFS = "whose tests fake the file system in the judge (pyfakefs), so the program's file descriptors are not there"
_TZ = "whose values carry pytz time zones, which cross without their localized offset"

#: BigCodeBench tasks whose canonical solution passes only in-process, with the reason. Measured on
#: BigCodeBench (v0.1.0_hf) on 2026-12-01, first over its 300 standard-library tasks and the 464 whose
#: libraries this machine had, then with the full runtime (the second group below).
SPLIT_UNJUDGEABLE: dict[str, str] = {
    "BigCodeBench/205": _FORK,
    "BigCodeBench/273": _CLASS,
    **{f"BigCodeBench/{n}": _PATH for n in (541, 714, 715, 716, 717)},
    **{f"BigCodeBench/{n}": _INSPECT for n in (566, 568, 569, 570, 571)},
    # Measured on 2026-12-01 with the full runtime (`selfcheck --runtime`): each passes in-process.
    **{f"BigCodeBench/{n}": _SETTINGS for n in (76, 77, 78, 183)},
    **{f"BigCodeBench/{n}": _NAMES for n in (79, 181)},
    **{f"BigCodeBench/{n}": _APPCTX for n in (80, 401)},
    "BigCodeBench/102": _RCPARAMS,
    **{f"BigCodeBench/{n}": _SAME for n in (114, 413)},
    **{f"BigCodeBench/{n}": _NATIVE for n in (187, 534, 584)},
    "BigCodeBench/337": _PRIVATE,
    "BigCodeBench/719": _FAKEFS,
    "BigCodeBench/730": _TZ,
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
