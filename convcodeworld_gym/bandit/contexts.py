"""Bandit contexts cut from logged trajectories: every partial trajectory of a reference model's episodes, filtered.

A log of many trajectories per task (``convcodeworld evaluate --samples N``, :class:`~..wrappers.RecordEpisodes`, the
rollout driver) is cut into *contexts*: the partial trajectory after turns ``1..K`` of every trajectory (the task, its
programs ``0..t-1`` and the feedback shown on each), plus one context per task with no program yet (turn 0). A policy
then writes one program per context (the program of turn ``t``), which is scored on the task's tests
(:mod:`.scoring`): one-step bandit learning on offline contexts, as Cobalt does it (arXiv 2602.03806).

Each context carries the best pass rates of its programs so far: of all the task's tests, of its public tests
(:attr:`~convcodeworld_gym.tasks.Task.public_tests`) and of the others (hidden; None where the task has none of that
kind), 0.0 before any program; the shaped reward rewards a program that beats the first.

The rules, in order (each counted in :class:`ContextCounts`):

1. trajectories the log cannot give contexts from are left out: one holding a turn the infrastructure lost (no
   verdict there), a canary twin's (its rows count towards the canary only), a static replay's (its rows are the
   evaluated model's, beside the reference's history);
2. ``skip_solved_at_turn0``: a task every trajectory of which passed at turn 0 gives no context (nothing to repair,
   nothing to learn at turn 0 either);
3. ``dynamic_sampling``: a trajectory is kept when its pass rate (of all tests) changes over its turns and reaches
   1.0; in ``validation`` mode, when it changes;
4. ``max_variance_k``: of a task's kept trajectories, at most k: the split of its k - j least and j most changing ones
   (j = 0 .. k-1) whose changes (max - min of the pass rate) vary most (population variance; the first such split
   on ties), after "Not All Rollouts are Useful" (arXiv 2504.13818), as Cobalt chooses them; ``validation`` mode keeps
   one trajectory per task instead, the one that changes least (a change above 0);
5. per kept trajectory, the contexts after turns ``turns`` (default 1, 2, 3), each only while its programs so far all
   failed (a trajectory ends at its pass), its last two programs did not both pass every public test (the feedback
   said "passed" twice: nothing more to act on), and its messages hold at most ``max_prompt_chars`` characters;
   the turn-0 context of every task kept by rule 2 (``include_turn0``).

Ties in rules 3-4 are broken by a draw seeded by ``(seed, task id, sample)``, and ``shuffle`` orders the contexts by
a draw of ``seed`` (Cobalt shuffles its contexts): the same log and seed give the same contexts in the same order.

Templates (how a context is written as chat messages):

* ``"chat"`` (default): the conversation as the multi-turn GRPO door plays it (:mod:`~..training.grpo`): the task's
  instruction as the first user turn, then each program as the assistant's turn (the logged reply, its
  ``<think>`` thoughts removed) and the feedback shown on it as the next user turn
  (:func:`~..training.grpo.feedback_message`); ``system=`` puts a system message first (Cobalt's format has one);
* ``"policy"``: what :class:`~..policies.OpenAIPolicy` sends in the reference's way: its system prompt and one user
  message with the task, the previous code and this turn's feedback (a ConvCodeBench static turn's prompt);
* a callable ``template(task, rows) -> messages`` (``rows``: the trajectory's rows before the context's turn).

:meth:`ContextSet.dataset` writes the contexts as a ``datasets.Dataset`` that TRL's ``GRPOTrainer`` trains on as it is
(``prompt``: the messages) and verl reads as it is (``data_source``, ``prompt``, ``ability``, ``reward_model``,
``extra_info``; :meth:`ContextSet.to_parquet`): ``extra_info`` holds what scoring needs (the task set and task id,
the turn, the best pass rates, the perturbation), never a test or a solution.

Holds:
    TEMPLATES        the named templates
    Template         a template: a name of TEMPLATES, or a callable
    DATA_SOURCE      every row's ``data_source``
    Context          one context: its task, turn, messages, best pass rates so far, perturbation
    LoggedTrajectory one logged trajectory with its pass rates per turn
    ContextCounts    what each rule kept and dropped
    ContextSet       the contexts and their counts; as a Dataset, as parquet
    bandit_contexts  cut a log into contexts by the rules above
    pass_rates       the pass rate of all, public and hidden tests of a row
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Union

from ..errors import BanditError
from ..extract import read_reply
from ..policies.llm import user_prompt
from ..policies.prompts import SYSTEM_PROMPT
from ..records import TurnRecord, group_episodes, read_turns, split_finished
from ..tasks import DatasetSpec, Task, TaskSet
from ..training.grpo import feedback_message
from ..training.shared import task_set

__all__ = ["TEMPLATES", "Template", "Context", "LoggedTrajectory", "ContextCounts", "ContextSet", "bandit_contexts",
           "pass_rates", "DATA_SOURCE"]

#: The named templates (see the module docstring).
TEMPLATES = ("chat", "policy")

#: A template: a name of :data:`TEMPLATES`, or ``template(task, rows) -> messages``.
Template = Union[str, Callable[[Task, Sequence[TurnRecord]], Sequence[Mapping[str, str]]]]

#: The ``data_source`` of every row (verl picks a reward function by it; ours is given by path anyway).
DATA_SOURCE = "convcodeworld"


@dataclass(frozen=True)
class Context:
    """One context: a partial trajectory, for a policy to write the next program of.

    Attributes:
        task_id: the task; ``dataset``: the task set it is in, as :func:`~convcodeworld_gym.tasks.load_tasks` takes it
            (a name or a path: what scoring loads the task from).
        feedback: the combination the trajectory was played under (``CF-EF_partial``).
        sample: the trajectory it was cut from; -1 for a task's turn-0 context (no program yet).
        turn: the turn whose program the completion is: programs ``0..turn-1`` are in the context.
        messages: the prompt, as chat messages.
        best_pass_rate: the best share of all the task's tests a program of the context passed (0.0 with none).
        best_public_pass_rate, best_hidden_pass_rate: the same over the public tests and over the others; None where
            the task has none of that kind.
        pass_rates: the share of all tests each program of the context passed, turn by turn.
        perturbation: ``{"kind", "seed"}`` when the trajectory was played on a perturbed task
            (:mod:`~convcodeworld_gym.tasks.perturb`: its feedback shows the swapped expectations); ``{}`` otherwise.
    """

    task_id: str
    dataset: str
    feedback: str
    sample: int
    turn: int
    messages: tuple[Mapping[str, str], ...]
    best_pass_rate: float = 0.0
    best_public_pass_rate: float | None = None
    best_hidden_pass_rate: float | None = None
    pass_rates: tuple[float, ...] = ()
    perturbation: Mapping[str, Any] = field(default_factory=dict)

    def extra_info(self) -> dict[str, Any]:
        """The facts a dataset row keeps beside the prompt (its ``extra_info``): all but the messages, the
        perturbation as JSON text (``""`` when none), so that every row has the same columns."""
        info = {k: v for k, v in asdict(self).items() if k != "messages"}
        info["pass_rates"] = list(self.pass_rates)
        info["perturbation"] = json.dumps(dict(self.perturbation), sort_keys=True) if self.perturbation else ""
        return info

    def row(self, index: int = 0) -> dict[str, Any]:
        """The context as a dataset row that TRL and verl read (see the module docstring)."""
        ground_truth = json.dumps({"dataset": self.dataset, "task_id": self.task_id}, sort_keys=True)
        return {"prompt": [dict(m) for m in self.messages], "data_source": DATA_SOURCE, "ability": "code",
                "reward_model": {"style": "rule", "ground_truth": ground_truth},
                "extra_info": {"index": index, **self.extra_info()}}

    @classmethod
    def of(cls, item: Context | Mapping[str, Any]) -> Context:
        """A context from itself, a dataset row (:meth:`row`), or a row's ``extra_info`` (messages then ``()``).

        Raises:
            BanditError: the mapping lacks the task id or the task set (names what it holds).
        """
        if isinstance(item, Context):
            return item
        info = item.get("extra_info") if isinstance(item.get("extra_info"), Mapping) else item
        if not info.get("task_id") or info.get("dataset") in (None, ""):
            raise BanditError(f"a context needs task_id and dataset (a dataset row's extra_info holds them); got keys "
                              f"{sorted(info)}: pass rows of ContextSet.dataset(), or Context objects")
        raw = info.get("perturbation") or {}
        perturbation = json.loads(raw) if isinstance(raw, str) else dict(raw)
        hidden, public = info.get("best_hidden_pass_rate"), info.get("best_public_pass_rate")
        sample = info.get("sample")
        return cls(str(info["task_id"]), str(info["dataset"]), str(info.get("feedback") or ""),
                   -1 if sample is None else int(sample), int(info.get("turn") or 0),
                   tuple(dict(m) for m in _items(item.get("prompt"))), float(info.get("best_pass_rate") or 0.0),
                   None if public is None else float(public), None if hidden is None else float(hidden),
                   tuple(float(p) for p in _items(info.get("pass_rates"))), perturbation)


def _items(value: Any) -> tuple[Any, ...]:
    """A row's list value as a tuple (``()`` for None): a list, or the array a parquet reader gives (verl's)."""
    return () if value is None else tuple(value)


def _fraction(tests: Iterable[Mapping[str, str]], names: set[str]) -> float | None:
    chosen = [t for t in tests if t.get("name") in names]
    return sum(t.get("outcome") == "passed" for t in chosen) / len(chosen) if chosen else None


def pass_rates(row: TurnRecord, task: Task) -> tuple[float, float | None, float | None]:
    """``(all, public, hidden)``: the share of all the task's tests, of its public tests and of the others that the
    row's program passed (public or hidden None where the task has none of them), from the row's per-test outcomes.

    >>> from convcodeworld_gym.tasks import load_tasks
    >>> task = load_tasks("humaneval")["HumanEval/0"]
    >>> tests = [{"name": n, "outcome": "passed" if n in ("test_1", "test_4") else "failed"} for n in task.test_names]
    >>> row = TurnRecord("CF", task.task_id, 0, "", "", "", "", "", True, False, 0.0, 2 / 7, tests=tests)
    >>> [round(r, 3) for r in pass_rates(row, task)]
    [0.286, 0.333, 0.25]
    """
    public = set(task.public_tests)
    hidden = set(task.test_names) - public
    return float(row.pass_fraction), _fraction(row.tests, public), _fraction(row.tests, hidden)


@dataclass(frozen=True)
class LoggedTrajectory:
    """One logged trajectory (an episode) and its pass rates per turn (:func:`pass_rates`).

    Attributes:
        task, feedback, sample: which; ``rows``: its turns, in order.
        rates, public, hidden: the pass rate of all, public and hidden tests of each turn's program.
    """

    task: Task
    feedback: str
    sample: int
    rows: tuple[TurnRecord, ...]
    rates: tuple[float, ...]
    public: tuple[float | None, ...]
    hidden: tuple[float | None, ...]

    @classmethod
    def of(cls, task: Task, rows: Sequence[TurnRecord]) -> LoggedTrajectory:
        rates = [pass_rates(row, task) for row in rows]
        return cls(task, rows[0].feedback, rows[0].sample, tuple(rows), tuple(r[0] for r in rates),
                   tuple(r[1] for r in rates), tuple(r[2] for r in rates))

    @property
    def change(self) -> float:
        """How much its pass rate changes over its turns: max - min."""
        return max(self.rates) - min(self.rates)

    @property
    def reaches_one(self) -> bool:
        """Whether a program of it passed every test."""
        return max(self.rates) >= 1.0


@dataclass(frozen=True)
class ContextCounts:
    """What each rule kept and dropped (see the module docstring).

    Attributes:
        tasks: tasks the log holds trajectories of under the combination (after rule 1).
        trajectories: their trajectories (after rule 1).
        left_out: trajectories rule 1 left out, by why (``infra_error``, ``canary``, ``static``, ``unfinished``,
            ``not in the task set``).
        solved_at_turn0: tasks rule 2 skipped; ``tasks_kept``: the others.
        after_dynamic_sampling: trajectories rule 3 kept (of the tasks kept).
        after_downsampling: trajectories rule 4 kept.
        turn0: turn-0 contexts; ``by_turn``: contexts cut after each turn (turn -> count).
        stopped: contexts rule 5 did not make, by why (``passed``, ``public passed twice``, ``too long``; a
            trajectory too short for a turn is no context and is not counted).
        contexts: all contexts.
    """

    tasks: int = 0
    trajectories: int = 0
    left_out: Mapping[str, int] = field(default_factory=dict)
    solved_at_turn0: int = 0
    tasks_kept: int = 0
    after_dynamic_sampling: int = 0
    after_downsampling: int = 0
    turn0: int = 0
    by_turn: Mapping[int, int] = field(default_factory=dict)
    stopped: Mapping[str, int] = field(default_factory=dict)
    contexts: int = 0

    def lines(self) -> list[str]:
        """The counts as lines a program prints."""
        left = ", ".join(f"{n} {why}" for why, n in self.left_out.items()) or "none"
        stopped = ", ".join(f"{n} {why}" for why, n in self.stopped.items()) or "none"
        turns = ", ".join(f"turn {t}: {n}" for t, n in sorted(self.by_turn.items())) or "none"
        return [f"log: {self.tasks} tasks, {self.trajectories} trajectories (left out: {left})",
                f"tasks solved at turn 0 by every trajectory: {self.solved_at_turn0} skipped, {self.tasks_kept} kept",
                f"trajectories after dynamic sampling: {self.after_dynamic_sampling}; after down-sampling: "
                f"{self.after_downsampling}",
                f"contexts: {self.contexts} ({self.turn0} at turn 0; {turns}; not made: {stopped})"]


@dataclass(frozen=True)
class ContextSet:
    """Contexts cut from a log, in their order, and the counts of each rule (:func:`bandit_contexts`)."""

    contexts: tuple[Context, ...]
    counts: ContextCounts

    def __len__(self) -> int:
        return len(self.contexts)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.contexts)

    def __getitem__(self, index: int) -> Context:
        return self.contexts[index]

    def rows(self) -> list[dict[str, Any]]:
        """Every context as a dataset row (:meth:`Context.row`), ``extra_info["index"]`` its place."""
        return [context.row(i) for i, context in enumerate(self.contexts)]

    def dataset(self) -> Any:
        """The contexts as a ``datasets.Dataset`` (:meth:`rows`): ``GRPOTrainer(train_dataset=...)`` trains on it, and
        the reward function of :mod:`.doors` scores its completions.

        Raises:
            BanditError: there are no contexts (the counts say where they went).
        """
        import datasets

        if not self.contexts:
            raise BanditError("no contexts to write: " + "; ".join(self.counts.lines()) + " (loosen the rules: "
                              "dynamic_sampling=False, skip_solved_at_turn0=False, or a log of more trajectories)")
        return datasets.Dataset.from_list(self.rows())

    def to_parquet(self, path: str | os.PathLike[str]) -> str:
        """Write :meth:`dataset` to ``path`` as parquet (what verl's ``data.train_files`` reads); returns the path."""
        out = os.fspath(path)
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        self.dataset().to_parquet(out)
        return out


def _key(seed: int, *parts: object) -> str:
    """A seeded draw's sort key for ``parts`` (the same on every machine)."""
    return hashlib.sha256(":".join(str(p) for p in (seed, *parts)).encode("utf-8", "surrogatepass")).hexdigest()


def _downsampled(kept: Sequence[LoggedTrajectory], k: int) -> list[LoggedTrajectory]:
    """Rule 4: at most ``k`` of ``kept`` (sorted by change, least first): the split of the k - j least and the j most
    changing whose changes' population variance is largest (the first on ties)."""
    if len(kept) <= k:
        return list(kept)
    best = list(kept[:k])
    for j in range(1, k):
        split = list(kept[:k - j]) + list(kept[len(kept) - j:])
        if statistics.pvariance([t.change for t in split]) > statistics.pvariance([t.change for t in best]):
            best = split
    return best


def _assistant(row: TurnRecord, max_reply_chars: int | None) -> str:
    """A logged program's turn as the assistant wrote it: its reply without its thoughts (the reply as it is where
    the thought never closed), cut to ``max_reply_chars``."""
    answer = read_reply(row.reply, "strip").answer
    text = (answer if answer is not None else row.reply).strip()
    return text[:max_reply_chars] if max_reply_chars is not None else text


def _shown(row: TurnRecord) -> dict[str, str]:
    return {"compilation_feedback": row.compilation_feedback, "execution_feedback": row.execution_feedback,
            "verbal_feedback": row.verbal_feedback}


def _messages(template: Template, task: Task, rows: Sequence[TurnRecord], system: str | None,
              max_reply_chars: int | None, max_feedback_chars: int | None) -> tuple[dict[str, str], ...]:
    if callable(template):
        return tuple(dict(m) for m in template(task, rows))
    if template == "policy":
        last = rows[-1] if rows else None
        observation = {"task": task.prompt, "turn": len(rows), "code": last.code if last else "",
                       **(_shown(last) if last else {})}
        return ({"role": "system", "content": system if system is not None else SYSTEM_PROMPT},
                {"role": "user", "content": user_prompt(observation)})
    messages = [{"role": "system", "content": system}] if system is not None else []
    messages.append({"role": "user", "content": task.prompt})
    for row in rows:
        messages.append({"role": "assistant", "content": _assistant(row, max_reply_chars)})
        messages.append({"role": "user", "content": feedback_message(_shown(row), max_feedback_chars)})
    return tuple(messages)


def _chars(messages: Iterable[Mapping[str, str]]) -> int:
    return sum(len(str(m.get("content", ""))) for m in messages)


def _best(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def bandit_contexts(
    log: str | os.PathLike[str] | Iterable[TurnRecord],
    dataset: DatasetSpec,
    *,
    feedback: str | None = None,
    turns: Sequence[int] = (1, 2, 3),
    include_turn0: bool = True,
    template: Template = "chat",
    system: str | None = None,
    skip_solved_at_turn0: bool = True,
    dynamic_sampling: bool = True,
    max_variance_k: int | None = 4,
    validation: bool = False,
    seed: int = 0,
    shuffle: bool = True,
    max_prompt_chars: int | None = None,
    max_reply_chars: int | None = None,
    max_feedback_chars: int | None = None,
) -> ContextSet:
    """Cut ``log`` into contexts by the rules of the module docstring.

    Args:
        log: a run folder, a ``turns.jsonl`` file, a hub dataset id, or rows (unfinished episodes are left out).
        dataset: the task set the log was played on: a name or path (kept in every context, for scoring), or a
            :class:`~convcodeworld_gym.tasks.TaskSet` (its name is kept: score such contexts with a
            :class:`~.scoring.Scorer` given the set).
        feedback: the combination to cut (``CF-EF_partial``); default: the log's only one.
        turns: the turns after which partial trajectories are cut (each >= 1).
        include_turn0: one context per kept task with no program yet.
        template, system: how a context is written (``"chat"``, ``"policy"`` or a callable; ``system``: a system
            message, or the policy template's own).
        skip_solved_at_turn0, dynamic_sampling, max_variance_k, validation, seed, shuffle: rules 2-4 and the order.
        max_prompt_chars: a context whose messages hold more characters is not made (nor any later one of its
            trajectory); ``max_reply_chars``, ``max_feedback_chars``: each program's and each feedback turn's text
            is cut to that many characters (the chat template).

    Raises:
        BanditError: the log holds no rows of the combination (or several combinations and none was named), a
            turn < 1 is asked for, an unknown template, or a task the task set lacks.
    """
    if isinstance(template, str) and template not in TEMPLATES:
        raise BanditError(f"template={template!r} is none of {', '.join(TEMPLATES)}; pass one of them or a callable "
                          "template(task, rows) -> messages")
    if any(int(t) < 1 for t in turns):
        raise BanditError(f"turns={list(turns)}: contexts are cut after turns 1, 2, ... (turn 0's context is "
                          "include_turn0)")
    if max_variance_k is not None and max_variance_k < 1:
        raise BanditError(f"max_variance_k must be >= 1 or None, got {max_variance_k}")
    tasks: TaskSet = task_set(dataset)
    spec = os.fspath(dataset) if isinstance(dataset, (str, os.PathLike)) else tasks.name
    if isinstance(log, (str, os.PathLike)):
        rows, unfinished = split_finished(read_turns(log))
    else:
        rows, unfinished = split_finished(list(log))
    combos = sorted({row.feedback for row in rows})
    if feedback is None:
        if len(combos) != 1:
            raise BanditError(f"the log holds {'no rows' if not combos else 'combinations ' + ', '.join(combos)}; "
                              "name the one to cut with feedback=")
        feedback = combos[0]
    elif feedback not in combos:
        raise BanditError(f"the log holds no rows of {feedback} (it holds: {', '.join(combos) or 'no rows'})")
    left_out: dict[str, int] = {}
    if unfinished:
        left_out["unfinished"] = sum(1 for key in unfinished if key[0] == feedback)
    by_task: dict[str, list[LoggedTrajectory]] = {}
    for (combo, task_id, _sample), episode in group_episodes(rows).items():
        if combo != feedback:
            continue
        why = ("infra_error" if any(r.infra_error for r in episode) else "canary" if any(r.canary for r in episode)
               else "static" if any(r.reference for r in episode) else None)
        if why is None and task_id not in tasks:
            why = "not in the task set"
        if why is not None:
            left_out[why] = left_out.get(why, 0) + 1
            continue
        by_task.setdefault(task_id, []).append(LoggedTrajectory.of(tasks[task_id], episode))
    if not by_task and left_out.get("not in the task set"):
        raise BanditError(f"none of the log's {feedback} trajectories is of a task of {tasks.name!r} ({len(tasks)} "
                          "tasks); pass the task set the log was played on")
    counts: dict[str, Any] = {"tasks": len(by_task), "trajectories": sum(map(len, by_task.values())),
                              "left_out": {k: v for k, v in left_out.items() if v}}
    contexts: list[Context] = []
    stopped: dict[str, int] = {}
    by_turn: dict[int, int] = {}
    solved = kept_tasks = dynamic = down = turn0 = 0
    for task in tasks:  # the task set's order
        trajectories = sorted(by_task.get(task.task_id, ()), key=lambda t: t.sample)
        if not trajectories:
            continue
        if skip_solved_at_turn0 and all(t.rows[0].passed for t in trajectories):
            solved += 1
            continue
        kept_tasks += 1
        perturbed = next((dict(t.rows[0].perturbation) for t in trajectories if t.rows[0].perturbation), {})
        perturbation = {"kind": perturbed["kind"], "seed": perturbed["seed"]} if perturbed else {}
        if include_turn0:  # no feedback shown: nothing perturbed
            turn0 += 1
            contexts.append(Context(task.task_id, spec, feedback, -1, 0,
                                    _messages(template, task, (), system, max_reply_chars, max_feedback_chars),
                                    0.0, 0.0 if task.public_tests else None,
                                    0.0 if len(task.test_names) > len(task.public_tests) else None, ()))
        if validation:
            chosen = [t for t in trajectories if t.change > 0]
        elif dynamic_sampling:
            chosen = [t for t in trajectories if t.change > 0 and t.reaches_one]
        else:
            chosen = list(trajectories)
        chosen.sort(key=lambda t: (t.change, _key(seed, task.task_id, t.sample)))
        dynamic += len(chosen)
        if validation:
            chosen = chosen[:1]
        elif max_variance_k is not None:
            chosen = _downsampled(chosen, max_variance_k)
        down += len(chosen)
        for trajectory in chosen:
            for turn in sorted({int(t) for t in turns}):
                if len(trajectory.rows) < turn:
                    break
                history = trajectory.rows[:turn]
                why = None
                if any(row.passed for row in history):
                    why = "passed"
                elif turn >= 2 and all(trajectory.public[j] == 1.0 for j in (turn - 1, turn - 2)):
                    why = "public passed twice"
                messages = _messages(template, task, history, system, max_reply_chars, max_feedback_chars)
                if why is None and max_prompt_chars is not None and _chars(messages) > max_prompt_chars:
                    why = "too long"
                if why is not None:
                    stopped[why] = stopped.get(why, 0) + 1
                    break
                by_turn[turn] = by_turn.get(turn, 0) + 1
                contexts.append(Context(
                    task.task_id, spec, feedback, trajectory.sample, turn, messages,
                    max(trajectory.rates[:turn]), _best(trajectory.public[:turn]), _best(trajectory.hidden[:turn]),
                    trajectory.rates[:turn], perturbation))
    if shuffle:
        random.Random(int(_key(seed, "shuffle")[:16], 16)).shuffle(contexts)
    return ContextSet(tuple(contexts), ContextCounts(
        **counts, solved_at_turn0=solved, tasks_kept=kept_tasks, after_dynamic_sampling=dynamic,
        after_downsampling=down, turn0=turn0, by_turn=dict(sorted(by_turn.items())), stopped=stopped,
        contexts=len(contexts)))
