"""Offline policies that need no model: the oracle and the replay of logged replies."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ConvCodeWorldError
from ..records import iter_jsonl
from ..tasks import Task
from .base import Policy, PolicyEpisode, PolicyReply, fenced

__all__ = ["OraclePolicy", "ReplayPolicy", "ReplayError"]


class ReplayError(ConvCodeWorldError):
    """A replay file is malformed or has no reply for a task."""


class _Fixed(PolicyEpisode):
    def __init__(self, replies: Mapping[int, str]) -> None:
        self._replies = replies
        self._turn = 0

    def act(self, observation: Mapping[str, Any]) -> PolicyReply:
        turn = int(observation.get("turn", self._turn))
        self._turn = turn + 1
        known = [t for t in self._replies if t <= turn]
        return PolicyReply(self._replies[max(known)])


class OraclePolicy(Policy):
    """Replies with the ground truth program at every turn: every task passes at turn 0
    (except tasks whose canonical solution fails in this environment, e.g. needing network).

    >>> from convcodeworld_gym.tasks import load_tasks
    >>> ep = OraclePolicy().start(load_tasks("humaneval")["HumanEval/0"], feedback="CF", seed=0)
    >>> ep.act({"turn": 0}).text.startswith("```python")
    True
    """

    name = "oracle"

    def start(self, task: Task, *, feedback: str, seed: int) -> PolicyEpisode:
        return _Fixed({0: fenced(task.solution_code)})


class ReplayPolicy(Policy):
    """Replies read from a JSON-lines file.

    Each row has ``task_id`` and either ``reply`` (with ``turn``, default 0) or
    ``solution`` (BigCodeBench's samples format: turn 0). An optional ``feedback`` key
    (id part, e.g. ``CF-EF_full``) limits a row to one combination. At a turn with no row
    the latest earlier reply is repeated (a model that does not change its answer).

    Raises:
        ReplayError: on a row without ``task_id`` or text, or (at ``start``) a task with no row.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise ReplayError(f"replay file {self.path} does not exist; pass a JSONL file of task_id, turn, reply")
        self.name = f"replay({self.path.name})"
        self._rows: dict[tuple[str | None, str], dict[int, str]] = {}
        for number, row in enumerate(iter_jsonl(self.path), start=1):
            text = row.get("reply", row.get("solution"))
            if "task_id" not in row or not isinstance(text, str):
                raise ReplayError(f"{self.path}, row {number}: needs 'task_id' and a string 'reply' (or 'solution')")
            turn = int(row.get("turn", 0)) if "reply" in row else 0
            self._rows.setdefault((row.get("feedback"), str(row["task_id"])), {})[turn] = text

    def start(self, task: Task, *, feedback: str, seed: int) -> PolicyEpisode:
        replies = {**self._rows.get((None, task.task_id), {}), **self._rows.get((feedback, task.task_id), {})}
        if 0 not in replies:
            raise ReplayError(f"replay file {self.path} has no turn-0 reply for task {task.task_id!r} ({feedback})")
        return _Fixed(replies)

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "path": str(self.path)}
