"""Runs in the host: the tasks the split judge cannot judge, and the default task set that leaves them out.

A task whose canonical solution fails under the split judge but passes with program and tests in
one process can only be judged in-process, where a program can forge its verdict. The default
environment never does that: such tasks are left out of its task set (one warning says how many
and why) unless ``allow_forgeable=True`` brings them back, judged in-process with
``info["forgeable"] is True``. Asked for by id in a default set, a left-out task raises
:class:`~convcodeworld_gym.errors.LeftOutTaskError` saying why and how to get it back. The list was
measured with the full BigCodeBench runtime (see docs/status.md); a task not listed that
still fails split is judged split, and its canonical solution's failure is in its profile.

Entries match by content, as the shipped profiles do (:mod:`.shipped`): a task is left out when its
:func:`~.profile.task_digest` (its tests and canonical solution) is a listed entry's, whatever its id or
source, so BigCodeBench loaded from a file (``dataset="…/BigCodeBench.jsonl.gz"``, source
``file:BigCodeBench.jsonl.gz``) loses the same tasks as loaded by name (source ``bigcodebench:v0.1.0_hf``),
a renamed copy of a listed task is left out too, and a task whose tests or solution changed is not (it is
judged split). The id is the entry's name, for people and messages; it need not match.

Adding an entry: add ``"BigCodeBench/<n>": Unjudgeable("", <reason>)`` to :data:`SPLIT_UNJUDGEABLE` and run
``pytest tests/sandbox/host/test_forgeable.py -k digest`` with ``$CONVCODEWORLD_BIGCODEBENCH_PATH`` set: it fails
naming the digest to paste (``task_digest(load_tasks("bigcodebench")["BigCodeBench/<n>"])``).

Holds:
    Unjudgeable        one entry: the digest of a task's tests and canonical solution, and why it fails split
    SPLIT_UNJUDGEABLE  task id -> its entry (measured on BigCodeBench v0.1.0_hf)
    unjudgeable        the listed id and entry whose digest is a task's, or None
    judgeable_split    the tasks of a set that the split judge can judge, and a note on the rest
    default_task_set   a task set without them (one logged warning, each remembered with why and how to get
                       it back), unless forgeable judging is allowed
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from ...tasks import Task, TaskSet
from .profile import task_digest

__all__ = ["Unjudgeable", "SPLIT_UNJUDGEABLE", "unjudgeable", "judgeable_split", "default_task_set"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Unjudgeable:
    """One task the split judge cannot judge.

    Attributes:
        digest: :func:`~.profile.task_digest` of the task's tests and canonical solution, computed from the
            real data: what a task must have to be left out.
        reason: why its canonical solution fails split, as a clause on "tasks" ("whose tests ...").
    """

    digest: str
    reason: str


_FORK = "whose tests' mocks are called from processes the program forks (multiprocessing.Pool)"
_CLASS = "whose tests inspect a class the program defines as a class (issubclass)"
_APPCTX = "whose programs need a Flask application or request context the tests set up in the judge"
_CHANGE = "whose tests hand the program a library object to change in place (a Flask app's config)"
_UNMIRRORED = ("whose tests check the class of a library object the judge cannot rebuild from data (a Flask app, whose "
               "views need the program's request context; a Keras model, which unpickles by loading code): granted on "
               "the program's word, a class claim would be forgeable (see sandbox/run/mirror.py)")
_NATIVE = "whose values are library objects native code needs as themselves (geopandas geometries, cryptography keys)"
_FAKEFS = "whose tests fake the file system in the judge (pyfakefs), so the program's file descriptors are not there"
_SEEDED = ("whose tests draw their data from the random stream the program reseeded in an earlier test (in one module "
           "the program's seed reaches the tests; split, it never does, so that no program can steer what they draw)")

#: BigCodeBench tasks whose canonical solution passes only in-process: task id -> digest and reason. Measured on
#: BigCodeBench (v0.1.0_hf) with the full runtime (`selfcheck --runtime`), 2026-12-01; each passes in-process.
#: The 20 others of the first list (sys.path, rcParams and Django settings the tests share with the program;
#: the tests' functions inspected by the program; returned arguments; pytz zones; exceptions' attributes;
#: http.cookies' dicts) pass split since the split judge shares them (see :mod:`..run.shared` and :mod:`..run.standin`).
#: Since 2026-12-03 (issue 28) library objects are rebuilt in the judge (:mod:`..run.mirror`): 183 (a Django response
#: asked whether it holds a header) and 337 (a program that draws on the tests' axes) pass split, and the six whose
#: tests check the class of an object that cannot be rebuilt (Flask apps, Keras models) are listed.
SPLIT_UNJUDGEABLE: dict[str, Unjudgeable] = {
    "BigCodeBench/205": Unjudgeable("1824a3e709a89da0d30fe1ea5750fc38-2f4888a467486ccf", _FORK),
    "BigCodeBench/273": Unjudgeable("801f10b9c4990c829dfc22c876c48ed7-e9a052c6c5a3832e", _CLASS),
    "BigCodeBench/80": Unjudgeable("3a8491c1467366f01eee16f295626ddc-4995b229dc69be6e", _APPCTX),
    "BigCodeBench/413": Unjudgeable("2f22fc9f8fc8b8ab989e13b9059eab9a-a768fd2dbbc039e9", _CHANGE),
    "BigCodeBench/187": Unjudgeable("1f78c25069fa382cdea3a6e769bbf5f9-b06a92bffbcd5c8d", _NATIVE),
    "BigCodeBench/534": Unjudgeable("a29e38e93015a04410fab79d7cde769c-488848425197b255", _NATIVE),
    "BigCodeBench/719": Unjudgeable("027d040f1b3f01bc2df78a5c7992fb6e-2098906e48781e21", _FAKEFS),
    # since 2026-12-02: the random states cross judge to program only
    "BigCodeBench/93": Unjudgeable("3d3a50bd6a4129120e297f6fe5190f63-2c3bf95bca1a473d", _SEEDED),
    # since 2026-12-03: a stand-in's class claim is no longer granted
    "BigCodeBench/81": Unjudgeable("4a65c81c22df447d28a8c09aa895449c-24b3c510bc5c4f8a", _UNMIRRORED),
    "BigCodeBench/82": Unjudgeable("ae26a044748b0be23f8d1d5d5f677dc5-f06477686e5c5d45", _UNMIRRORED),
    "BigCodeBench/83": Unjudgeable("7e916fe50b6ac4a47616874711dbe0e7-c37a19375c3c6436", _UNMIRRORED),
    "BigCodeBench/417": Unjudgeable("a99545e8f48cbee1b80e70a3ee055aa4-9e332f50a03de83d", _UNMIRRORED),
    "BigCodeBench/418": Unjudgeable("b4a66a662db0b2ee00fbe5f81d2dc787-7379aa15f7e50b7d", _UNMIRRORED),
    "BigCodeBench/419": Unjudgeable("ecda3eeb40023e4538232cdee35a8e07-20b77dea8e17c9c9", _UNMIRRORED),
}


def unjudgeable(task: Task) -> tuple[str, Unjudgeable] | None:
    """The id and entry of :data:`SPLIT_UNJUDGEABLE` whose digest is ``task``'s, or None: its tests and canonical
    solution decide, not its id or source (the id returned is the entry's, which a renamed copy does not share).

    >>> from convcodeworld_gym.tasks import load_tasks
    >>> unjudgeable(load_tasks("humaneval")["HumanEval/0"]) is None
    True
    """
    by_digest = {entry.digest: (task_id, entry) for task_id, entry in SPLIT_UNJUDGEABLE.items()}
    return by_digest.get(task_digest(task))


def judgeable_split(tasks: Iterable[Task]) -> tuple[list[Task], str | None]:
    """The tasks the split judge can judge, in order, and a one-line note naming how many were left out and why
    (None when none was). A task is left out when its digest is listed (:func:`unjudgeable`).

    >>> from convcodeworld_gym.tasks import load_tasks
    >>> kept, note = judgeable_split(load_tasks("humaneval"))
    >>> len(kept), note
    (164, None)
    """
    tasks = list(tasks)
    found = _listed(tasks)
    return [t for t in tasks if t.task_id not in found], _note(found)


def default_task_set(tasks: TaskSet, allow_forgeable: bool = False) -> TaskSet:
    """``tasks`` without those only an in-process judge can judge, logging one warning when any is left out;
    all of ``tasks`` with ``allow_forgeable``. The set returned remembers each task it left out (its
    :attr:`~convcodeworld_gym.tasks.TaskSet.left_out`): asked for by id, it raises
    :class:`~convcodeworld_gym.errors.LeftOutTaskError` naming the judge's reason and ``allow_forgeable=True``."""
    if allow_forgeable:
        return tasks
    found = _listed(tasks)
    if not found:
        return tasks
    log.warning("%s: %s", tasks.name, _note(found))
    return tasks.leave_out({task_id: _why(task_id, *listed) for task_id, listed in found.items()})


def _listed(tasks: Iterable[Task]) -> dict[str, tuple[str, Unjudgeable]]:
    """Task id -> (listed id, entry) for the tasks of ``tasks`` whose digest is listed, in order."""
    return {task.task_id: listed for task in tasks if (listed := unjudgeable(task)) is not None}


def _note(found: dict[str, tuple[str, Unjudgeable]]) -> str | None:
    """The warning on the tasks left out: how many, for which reasons (most first), and how to get them back."""
    if not found:
        return None
    left = Counter(entry.reason for _, entry in found.values())
    why = "; ".join(f"{n} {reason}" for reason, n in left.most_common())  # e.g. "5 whose tests read ..."
    return (f"left out {len(found)} task(s) the split judge cannot judge (their canonical solutions pass only "
            f"in-process, where a program can forge its verdict): {why}. Pass allow_forgeable=True to "
            "judge them in-process.")


def _why(task_id: str, listed_id: str, entry: Unjudgeable) -> str:
    """Why the task ``task_id`` (the listed ``listed_id``'s content) was left out, and how to get it back."""
    copy = "" if listed_id == task_id else f" (it has the tests and canonical solution of {listed_id})"
    return (f"the split judge cannot judge it, one of the tasks {entry.reason}{copy}: its canonical solution "
            "passes only in-process, where a program can forge its verdict. To play it, pass "
            "allow_forgeable=True (judged in-process, info['forgeable'] is True); asked for by id "
            f"(task_ids=[{task_id!r}]) it is kept but judged split, where even its canonical solution fails.")
