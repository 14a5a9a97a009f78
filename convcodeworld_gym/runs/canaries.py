"""Verifying canary twins in the sandbox, and building the lists that ship them (:mod:`~convcodeworld_gym.tasks.canary`).

A candidate twin holds when, run in the sandbox as the env runs a reply, the task's canonical solution passes the task
itself, passes every test of the twin but the changed one, and fails the changed one (an assertion failure or an
error: never a timeout, a crash or a lost run, which would say nothing of the change). ``convcodeworld canaries build``
tries each task's candidates in the rule's order, at most ``max_candidates`` of them, and lists the first that holds
(or why none did). The twin is run with its task's judge mode and time limits (:meth:`~convcodeworld_gym.sandbox.host.executor.Executor.derive`): its
canonical solution fails by design, so it is never calibrated itself.

The same check, on every listed twin, is the exhaustive test (``tests/tasks/test_canary.py``, marked slow); a sample
of it runs in the default suite.

Holds:
    Verdict         what the canonical solution did on one candidate twin and its task
    canonical_program  the program the env judges when a reply is the task's canonical solution
    check_twins     the verdicts of candidate twins, run in the sandbox
    build_list      the verified twins of a task set: each task's first candidate that holds
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..extract import extract_code, judged_program
from ..sandbox import ExecutionResult, Executor, Outcome
from ..tasks import Task, TaskSet
from ..tasks.canary import CanaryList, CanaryTwin, candidate_count, make_twin, source_digest

__all__ = ["Verdict", "canonical_program", "check_twins", "build_list"]

#: Outcomes of the changed test that show the canonical solution contradicted by it.
_CONTRADICTED = (Outcome.FAILED, Outcome.ERROR)


@dataclass(frozen=True)
class Verdict:
    """What the canonical solution did on a candidate twin.

    Attributes:
        task_id: the task; ``candidate``: the index of the candidate change.
        holds: the twin holds: the canonical solution passes the task and every test of the twin but the changed
            one, which it fails.
        reason: why it does not hold ("" when it does).
    """

    task_id: str
    candidate: int
    holds: bool
    reason: str = ""


def canonical_program(task: Task) -> str:
    """The program the env judges when the reply is ``task``'s canonical solution (``task.solution_code``)."""
    program = judged_program(task, extract_code(task.solution_code), True)
    assert program is not None
    return program


def _verdict(twin: CanaryTwin, on_twin: ExecutionResult, on_task: ExecutionResult, candidate: int) -> Verdict:
    """The verdict on ``twin`` from the canonical solution's results on it and on its task."""
    changed = twin.change.test if twin.change is not None else ""

    def no(reason: str) -> Verdict:
        return Verdict(twin.original.task_id if twin.original else twin.task_id, candidate, False, reason)

    if on_twin.infra_error or on_task.infra_error:
        return no(f"a run was lost to the infrastructure ({on_twin.infra_error or on_task.infra_error})")
    if not on_task.passed:
        failing = [t.name for t in on_task.tests if not t.outcome.ok]
        return no(f"the canonical solution fails the task itself here ({', '.join(failing[:3]) or on_task.crash or 'a crash'})")
    outcomes = {t.name: t.outcome for t in on_twin.tests}
    others = [name for name, outcome in outcomes.items() if name != changed and not outcome.ok]
    if others:
        return no(f"the canonical solution fails other tests of the twin ({', '.join(others[:3])})")
    if outcomes.get(changed) not in _CONTRADICTED:
        shown = outcomes.get(changed).value if changed in outcomes else "no outcome"  # type: ignore[union-attr]
        return no(f"the canonical solution's outcome on the changed test {changed} is {shown}")
    return Verdict(twin.original.task_id if twin.original else twin.task_id, candidate, True)


def check_twins(executor: Executor, twins: Sequence[tuple[CanaryTwin, int]], *,
                originals: dict[str, ExecutionResult] | None = None) -> list[Verdict]:
    """Run the canonical solution on each ``(twin, candidate index)`` and on its task, in the sandbox of ``executor``
    (all of them at once, :meth:`~convcodeworld_gym.sandbox.host.executor.Executor.run_many`); one :class:`Verdict` each, in order.

    ``originals`` (task id -> the canonical solution's result on the task) is read and filled: a task's own run is
    made once."""
    originals = {} if originals is None else originals
    for twin, _ in twins:
        assert twin.original is not None
        executor.derive(twin.original, twin)  # the task's judge mode and limits: the twin's canonical fails by design
    tasks = {twin.original.task_id: twin.original for twin, _ in twins if twin.original.task_id not in originals}  # type: ignore[union-attr]
    jobs: list[tuple[Task, str]] = [(task, canonical_program(task)) for task in tasks.values()]
    jobs += [(twin, canonical_program(twin)) for twin, _ in twins]
    results = executor.run_many(jobs)
    originals.update(zip(tasks, results[:len(tasks)]))
    return [_verdict(twin, result, originals[twin.original.task_id], candidate)  # type: ignore[union-attr]
            for (twin, candidate), result in zip(twins, results[len(tasks):])]


def build_list(tasks: TaskSet, executor: Executor, *, dataset: str, max_candidates: int = 3, batch: int = 64,
               left_out: dict[str, str] | None = None, log: Callable[[str], None] = lambda line: None) -> CanaryList:
    """The verified twins of ``tasks``: for each task, its candidates in the rule's order (at most
    ``max_candidates``), the first that holds (:func:`check_twins`); the others are listed as excluded, with why.

    Args:
        dataset: the name the list records.
        batch: twins run at once (a progress line is logged after each batch).
        left_out: task id -> why it was not tried (a task the runtime cannot serve); listed as excluded.

    Raises:
        ValueError: ``max_candidates`` < 1.
    """
    if max_candidates < 1:
        raise ValueError(f"max_candidates must be >= 1, got {max_candidates}")
    excluded: dict[str, str] = {task_id: f"not tried: {why}" for task_id, why in (left_out or {}).items()}
    counts = {task.task_id: min(candidate_count(task), max_candidates) for task in tasks}
    for task in tasks:
        if counts[task.task_id] == 0:
            excluded[task.task_id] = "no candidate change of its tests"
    found: dict[str, Verdict] = {}
    last: dict[str, Verdict] = {}
    originals: dict[str, ExecutionResult] = {}
    by_id = {task.task_id: task for task in tasks}
    for candidate in range(max_candidates):
        pending = [task for task in tasks if counts[task.task_id] > candidate and task.task_id not in found
                   and not _hopeless(last.get(task.task_id))]
        for start in range(0, len(pending), batch):
            chunk = [(make_twin(task, candidate), candidate) for task in pending[start:start + batch]]
            for verdict in check_twins(executor, chunk, originals=originals):
                (found if verdict.holds else last)[verdict.task_id] = verdict
            log(f"{dataset}: candidate {candidate + 1}: {min(start + batch, len(pending))}/{len(pending)} tried; "
                f"{len(found)} twins so far")
    for task_id, verdict in last.items():
        if task_id not in found:
            excluded[task_id] = verdict.reason
    twins = {}
    for task in tasks:
        verdict = found.get(task.task_id)
        if verdict is not None:
            twin = make_twin(by_id[task.task_id], verdict.candidate)
            assert twin.change is not None
            twins[task.task_id] = {"digest": source_digest(task), "candidate": verdict.candidate, "test": twin.change.test,
                                   "change": twin.change.describe()}
    made_with = {"machine": f"{platform.machine()}, {os.cpu_count()} CPUs", "python": sys.version.split()[0],
                 "max_candidates": max_candidates, "tasks": len(tasks) + len(left_out or {})}
    probe = executor.runtime_probe()
    if probe is not None:
        made_with["runtime"] = probe.python
    return CanaryList(dataset, twins, dict(sorted(excluded.items(), key=lambda item: _order(item[0]))), made_with)


def _hopeless(verdict: Verdict | None) -> bool:
    """Whether no other candidate of the task can hold: its canonical solution fails the task, or a run was lost."""
    return verdict is not None and (verdict.reason.startswith("the canonical solution fails the task")
                                    or verdict.reason.startswith("a run was lost"))


def _order(task_id: str) -> tuple[str, int]:
    """Sort key of a task id: its name, then its number (``HumanEval/2`` before ``HumanEval/10``)."""
    name, _, number = task_id.rpartition("/")
    return (name, int(number)) if number.isdigit() else (task_id, -1)
