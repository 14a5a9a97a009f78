"""The tasks an env plays, and what a default task set leaves out: one place for the env and ``convcodeworld evaluate``.

A default task set (no ``task_ids``) leaves out two kinds of task, each remembered with why and how to get it back
(:attr:`~convcodeworld_gym.tasks.TaskSet.left_out`, which a lookup by id raises as
:class:`~convcodeworld_gym.errors.LeftOutTaskError`):

* ``judge``: tasks only an in-process judge can judge, where a program can forge its verdict
  (:mod:`.sandbox.host.forgeable`), unless ``allow_forgeable=True``;
* ``runtime``: tasks whose solution or tests need modules or NLTK data the runtime lacks (:mod:`.sandbox.runtimes.needs`);
* ``versions``: tasks whose canonical solutions fail with the library releases the runtime has, other than their pinned
  runtime's (:mod:`.sandbox.host.drift`: measured in a runtime of the newest releases), so that no correct program
  scores a silent 0.0 there.
* ``data``: rows the loader could not make a task of (an input/output set's row without tests, or with tests that do
  not decode: :mod:`.tasks.io_datasets`), left out of every set, asked for by id too.

Tasks asked for by id are all kept; :attr:`Selection.missing` names what the runtime lacks of their needs.

A selection is made once per process for the same task set, subset, judge choice and runtime (the runtime's
interpreter and a digest of what it has installed), so the second ``gym.make`` of a task set costs no more than a
dictionary lookup here; its warning is said then, once, in one line that names the command listing every task left
out: :data:`TASKS_COMMAND` (``convcodeworld tasks --dataset NAME``).

Holds:
    TASKS_COMMAND  the command that lists what a task set leaves out
    LeftOut        one task left out: its id, the kind (judge or runtime), what it lacks or the judge's reason, and why
    Selection      the tasks played, what the runtime lacks per task id, the tasks left out; its warning and listing
    select_tasks   the selection of a task set for a runtime, made once per process
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from .errors import ConvCodeWorldError
from .sandbox.host.drift import drift_table, drifted
from .sandbox.host.forgeable import _why as _judge_why  # the reason default_task_set gives, without its warning
from .sandbox.host.profile import task_digest
from .sandbox.host.forgeable import unjudgeable
from .sandbox.runtimes.needs import Lacking, RuntimeProbe, choose_tasks, select_runnable, summarize, warn_once
from .tasks import DatasetSpec, TaskSet, load_tasks
from .tasks.io_datasets import UnjudgeableRow

__all__ = ["TASKS_COMMAND", "LeftOut", "Selection", "select_tasks"]

#: The command that lists each task a default set leaves out, why, and how to get it back.
TASKS_COMMAND = "convcodeworld tasks"

Kind = Literal["judge", "runtime", "versions", "data"]


@dataclass(frozen=True)
class LeftOut:
    """One task a default set left out.

    Attributes:
        task_id: the task.
        kind: ``"judge"`` (only an in-process judge can judge it), ``"runtime"`` (the runtime lacks what it needs),
            ``"versions"`` (its canonical solution fails with the runtime's releases of its libraries) or
            ``"data"`` (its row cannot be judged: no tests, malformed tests).
        detail: the judge's reason (a clause on "tasks": "whose tests ...") or what the runtime lacks
            ("modules pandas and NLTK data 'punkt'").
        why: the whole text its lookup by id raises: why, and how to get it back.
    """

    task_id: str
    kind: Kind
    detail: str
    why: str


@dataclass(frozen=True)
class Selection:
    """What a task set gives an env on a runtime.

    Attributes:
        source: the task set as loaded (before any subset).
        tasks: the tasks played (a subset by ``task_ids`` / ``stdlib_only``, without the tasks left out).
        missing: task id -> what the runtime lacks of its needs: the ``runtime`` tasks left out of a default set, or
            the tasks asked for by id that cannot pass here.
        left_out: the tasks a default set left out, the judge's first, each in the set's order.
        python: the runtime interpreter asked, or None (an executor whose runtime cannot be asked from here).
        install: the commands that give the runtime what the left-out tasks lack ("" when nothing).
        named: the dataset as named by a string (a name or a path), else None.
        stdlib_only: the subset asked for.
    """

    source: TaskSet
    tasks: TaskSet
    missing: Mapping[str, Lacking] = field(default_factory=dict)
    left_out: tuple[LeftOut, ...] = ()
    python: str | None = None
    install: str = ""
    named: str | None = None
    stdlib_only: bool = False

    def of_kind(self, kind: Kind) -> list[LeftOut]:
        """The tasks left out for ``kind``, in order."""
        return [item for item in self.left_out if item.kind == kind]

    def command(self) -> str | None:
        """The ``convcodeworld tasks`` command that lists this selection again, or None when the task set was not
        named by a string (a :class:`TaskSet` or Tasks passed in)."""
        if self.named is None:
            return None
        parts = [TASKS_COMMAND, "--dataset", self.named]
        if self.stdlib_only:
            parts.append("--stdlib-only")
        if self.python is not None and self.python != _default_python():
            parts += ["--runtime", self.python]
        return " ".join(parts)

    def warning(self) -> str | None:
        """The one warning a default set's selection logs, in a line or two: how many tasks were left out and for
        what, and where the details are (:meth:`command`, else ``env.unwrapped.tasks.left_out``); None when none was.

        >>> from convcodeworld_gym.tasks import load_tasks
        >>> he = load_tasks("humaneval")
        >>> print(Selection(he, he.subset(limit=163), {"HumanEval/163": Lacking(("numpy",))},
        ...                 (LeftOut("HumanEval/163", "runtime", "module numpy", "..."),), "/rt/bin/python",
        ...                 named="humaneval").warning())
        humaneval: left out 1 of 164 tasks: 1 that need what the runtime /rt/bin/python lacks (numpy (1)). `convcodeworld tasks --dataset humaneval --runtime /rt/bin/python` lists each, why, and how to get it back.
        """
        if not self.left_out:
            return None
        parts = []
        if data := self.of_kind("data"):
            parts.append(f"{len(data)} rows that cannot be judged (no tests, or tests that do not decode)")
        if judge := self.of_kind("judge"):
            parts.append(f"{len(judge)} the split judge cannot judge (allow_forgeable=True judges them in-process)")
        if runtime := self.of_kind("runtime"):
            items = summarize({item.task_id: self.missing[item.task_id] for item in runtime}).split(", ")
            more = f", +{len(items) - 3} more" if len(items) > 3 else ""
            parts.append(f"{len(runtime)} that need what the runtime {self.python} lacks ({', '.join(items[:3])}{more})")
        if versions := self.of_kind("versions"):
            parts.append(f"{len(versions)} whose canonical solutions fail with the library releases of {self.python}")
        command = self.command()
        where = (f"`{command}` lists each, why, and how to get it back" if command is not None else
                 "env.unwrapped.tasks.left_out maps each to why and how to get it back")
        return f"{self.source.name}: left out {len(self.left_out)} of {self._considered()} tasks: {'; '.join(parts)}. {where}."

    def render(self) -> str:
        """The listing ``convcodeworld tasks`` prints: a summary per kind with how to get the tasks back, then one
        line per task left out (id, kind, what it lacks or the judge's reason)."""
        runtime = self.python or "(not asked: the executor's runtime cannot be asked from here)"
        lines = [f"{self.source.name}: {self._considered()} tasks{' (standard library only)' if self.stdlib_only else ''}; "
                 f"runtime {runtime}",
                 f"played by default: {len(self.tasks)}; left out: {len(self.left_out)}"]
        if data := self.of_kind("data"):
            lines.append(f"  {len(data)} rows that cannot be judged (each line below says why; no option brings them back):")
            lines += [f"    {n} {reason}" for reason, n in Counter(item.detail for item in data).most_common()]
        if judge := self.of_kind("judge"):
            lines.append(f"  {len(judge)} the split judge cannot judge (their canonical solutions pass only in-process, "
                         "where a program can forge its verdict); allow_forgeable=True judges them in-process:")
            lines += [f"    {n} {reason}" for reason, n in Counter(item.detail for item in judge).most_common()]
        if runtime_left := self.of_kind("runtime"):
            lines.append(f"  {len(runtime_left)} need what the runtime lacks: "
                         f"{summarize({item.task_id: self.missing[item.task_id] for item in runtime_left})}")
            lines.append(f"    install: {self.install}")
        if versions := self.of_kind("versions"):
            lines.append(f"  {len(versions)} whose canonical solutions fail with this runtime's library releases, which "
                         "are not the pinned ones (measured in a runtime of the newest releases); the pinned runtime "
                         "plays them (`convcodeworld runtime install bigcodebench`)")
        if self.of_kind("judge") or self.of_kind("runtime") or self.of_kind("versions"):
            lines.append("  Asked for by id (task_ids=[...]) each still runs: judged split, or where it cannot pass.")
        if self.left_out:
            width = max(len(item.task_id) for item in self.left_out)
            lines.append("")
            lines += [f"{item.task_id:<{width}}  {item.kind:<7}  {item.detail}" for item in self.left_out]
        return "\n".join(lines)

    def to_json(self) -> str:
        """The selection as JSON: dataset, runtime, counts, and every task left out (``convcodeworld tasks --json``)."""
        return json.dumps({"dataset": self.source.name, "stdlib_only": self.stdlib_only, "runtime": self.python,
                           "tasks": self._considered(), "played": len(self.tasks), "install": self.install,
                           "left_out": [asdict(item) for item in self.left_out]}, indent=2)

    def _considered(self) -> int:
        """How many tasks the selection chose from: the played ones and those left out."""
        return len(self.tasks) + len(self.left_out)


def select_tasks(
    dataset: DatasetSpec,
    probe: RuntimeProbe | None,
    *,
    task_ids: Iterable[str] | None = None,
    stdlib_only: bool = False,
    allow_forgeable: bool = False,
    strict: bool = False,
    warn: bool = True,
) -> Selection:
    """The tasks of ``dataset`` to play on the runtime ``probe`` asks (see the module docstring).

    Made once per process for the same task set (:func:`~convcodeworld_gym.tasks.load_tasks` gives a set named by a
    string as the same object), ``task_ids``, ``stdlib_only``, ``allow_forgeable`` and runtime (``probe``'s
    interpreter and its :meth:`~.sandbox.runtimes.needs.RuntimeProbe.identity`); the same :class:`Selection` object is returned again.
    With ``warn``, a default set that leaves tasks out logs :meth:`Selection.warning` once per process.

    Raises:
        DatasetError, UnknownTaskError: as :func:`~convcodeworld_gym.tasks.load_tasks`.
        MissingRuntimeDependencies: ``strict`` and some selected task needs what the runtime lacks.
    """
    base = load_tasks(dataset)
    ids = tuple(task_ids) if task_ids is not None else None
    runtime = (probe.python, probe.extra_path, probe.identity()) if probe is not None else None
    key = (id(base), ids, bool(stdlib_only), bool(allow_forgeable), runtime)
    with _lock:
        found = _selections.get(key)
        if found is not None and found[0] is base:
            _selections.move_to_end(key)
            chosen = found[1]
        else:
            named = os.fspath(dataset) if isinstance(dataset, (str, os.PathLike)) else None
            chosen = _select(base, probe, ids, stdlib_only, allow_forgeable, named)
            _selections[key] = (base, chosen)
            while len(_selections) > _MOST_SELECTIONS:
                _selections.popitem(last=False)
            if warn and (message := chosen.warning()) is not None:
                warn_once(message)
    if strict and chosen.missing:  # its message names the tasks, what they lack and the fix
        choose_tasks(_candidates(base, ids, stdlib_only, allow_forgeable)[0], probe, by_id=ids is not None, strict=True)
    return chosen


_MOST_SELECTIONS = 32
#: key -> (the task set it was made from, held so that its id stays its own, the selection)
_selections: OrderedDict[tuple[Any, ...], tuple[TaskSet, Selection]] = OrderedDict()
_lock = threading.Lock()


def _candidates(base: TaskSet, task_ids: tuple[str, ...] | None, stdlib_only: bool,
                allow_forgeable: bool) -> tuple[TaskSet, list[LeftOut]]:
    """The subset asked for, without (in a default set) the tasks only an in-process judge can judge; and those."""
    tasks = base.subset(task_ids=task_ids, stdlib_only=stdlib_only) if task_ids is not None or stdlib_only else base
    if task_ids is not None or allow_forgeable:
        return tasks, []
    found = {task.task_id: listed for task in tasks if (listed := unjudgeable(task)) is not None}
    judged = [LeftOut(task_id, "judge", entry.reason, _judge_why(task_id, listed_id, entry))
              for task_id, (listed_id, entry) in found.items()]
    return tasks.leave_out({item.task_id: item.why for item in judged}), judged


def _select(base: TaskSet, probe: RuntimeProbe | None, task_ids: tuple[str, ...] | None, stdlib_only: bool,
            allow_forgeable: bool, named: str | None) -> Selection:
    tasks, judged = _candidates(base, task_ids, stdlib_only, allow_forgeable)
    if task_ids is None:  # the rows its loader could not make a task of, first
        judged = [LeftOut(task_id, "data", why, why) for task_id, why in base.left_out.items()
                  if isinstance(why, UnjudgeableRow)] + judged
    kept, lacking = select_runnable(tasks, probe)
    python = probe.python if probe is not None else None
    if task_ids is not None:  # asked for by id: every task stays, and says what it lacks
        return Selection(base, tasks, lacking, (), python, named=named, stdlib_only=stdlib_only)
    runtime = [LeftOut(task.task_id, "runtime", lacking[task.task_id].describe(), kept.left_out[task.task_id])
               for task in tasks if task.task_id in lacking]
    install = ""
    if lacking and probe is not None:
        install = probe.install_advice(lacking.values(), any(t.from_bigcodebench for t in tasks if t.task_id in lacking))
    drifted_out = _drifted(kept, probe)
    if drifted_out:
        kept = kept.leave_out({item.task_id: item.why for item in drifted_out})
    return Selection(base, kept, lacking, (*judged, *runtime, *drifted_out), python, install, named, stdlib_only)


def _drifted(tasks: TaskSet, probe: RuntimeProbe | None) -> list[LeftOut]:
    """The tasks of ``tasks`` whose canonical solutions fail with the releases ``probe``'s runtime has (none asked
    when no shipped entry names one of them, or the runtime cannot be asked)."""
    table = drift_table()
    if probe is None or not table or not any(task_digest(task) in table for task in tasks):
        return []
    installed = probe.describe()["packages"]
    found = [(task, entry) for task in tasks if (entry := drifted(task, installed)) is not None]
    return [LeftOut(task.task_id, "versions", entry.failure, entry.why(installed)) for task, entry in found]


def _default_python() -> str | None:
    """The interpreter an executor made without ``runtime=`` runs programs with (None when that cannot be told)."""
    from .sandbox.runtimes.install import resolve_runtime

    try:
        return resolve_runtime(None) or sys.executable
    except ConvCodeWorldError:
        return None
