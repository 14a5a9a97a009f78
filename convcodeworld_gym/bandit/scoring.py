"""Scoring completions of bandit contexts: a batch of (context, completion) pairs in one call, blocking or awaited.

Each completion is read as the env reads a reply (its ``<think>`` thoughts removed, the code extracted, compiled;
:func:`~convcodeworld_gym.feedback.compilation.reply_feedback`), and a program that compiles is run against all the
task's tests by the executor: every distinct (task, program) of the batch once, all of them together (``run_many``:
longest first, every slot busy; awaited, each through ``arun`` in the executor's FIFO pool), and an identical run of
an earlier batch is answered by the executor's result cache. A context cut from a perturbed trajectory
(:attr:`~.contexts.Context.perturbation`) has its program run on the perturbed copy too, to tell whether it followed
the swapped expectations its feedback showed (:attr:`Score.followed`); its reward is the true tests'.

Rewards (``reward=``):

* ``"binary"`` (default): 1.0 when the program passes every test, else 0.0;
* ``"pass_fraction"``: the share of the task's tests it passes;
* ``"shaped"``: Cobalt's shaped reward (arXiv 2602.03806) on the share ``p`` of the tests passed and the context's best
  share so far ``b`` (:attr:`~.contexts.Context.best_pass_rate`), without its reasoning-format terms:

  - ``base`` = 1.0 when ``p = 1``, 0.2 when ``p >= 0.5``, 0.0 when ``p > 0``, -0.1 when ``p = 0``;
  - where ``p < 1`` and ``b > 0``: a program that beats the context (``p > b``) gets ``bonus`` =
    ``0.1 (p - b) / (1 - b)``; one that does not (``p <= b``) gets -0.1 in place of ``base``, less ``0.1 (b - p) / b``
    (``penalty`` = that reward minus ``base``);
  - the sum ``base + bonus + penalty``, clipped to [-1, 1]. :attr:`Score.terms` holds each term.

A run the infrastructure lost (also on the executor's retry) has no reward: :attr:`Score.reward` is None and
:attr:`Score.infra_error` says why; doors pass it on as "no reward" (TRL: None) or raise.

Holds:
    REWARDS        the reward kinds
    shaped_reward  the shaped reward of a pass share and a best share so far, with its terms
    Score          one completion's reward and the facts beside it
    BatchSummary   a batch's mean reward, pass rate and perturbation-following rate
    Scorer         scores batches of (context, completion) pairs through one executor
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..aio import Call, Plan, run_awaited, run_blocking
from ..env import DEFAULT_MAX_REPLY_CHARS
from ..errors import BanditError, UnknownTaskError
from ..extract import REASONING_MODES, judged_program
from ..feedback.compilation import reply_feedback
from ..sandbox import ExecutionResult, Executor
from ..tasks import DatasetSpec, Task, TaskSet
from ..tasks.perturb import FollowRate, perturbation
from ..training.shared import shared_executor, task_set
from .contexts import Context

__all__ = ["REWARDS", "shaped_reward", "Score", "BatchSummary", "Scorer"]

#: The reward kinds (see the module docstring).
REWARDS = ("binary", "pass_fraction", "shaped")


def shaped_reward(p: float, best: float) -> tuple[float, dict[str, float]]:
    """``(reward, terms)``: the shaped reward of a program that passed the share ``p`` of the tests in a context
    whose best program so far passed ``best`` (see the module docstring); ``terms`` holds ``base``, ``bonus`` and
    ``penalty``, which add up to the reward before it is clipped to [-1, 1].

    >>> shaped_reward(1.0, 0.5)[0], shaped_reward(0.0, 0.0)[0], shaped_reward(0.6, 0.0)[0]
    (1.0, -0.1, 0.2)
    >>> reward, terms = shaped_reward(0.75, 0.5)  # beats the context: 0.2 + 0.1 * 0.25 / 0.5
    >>> round(reward, 4), {k: round(v, 4) for k, v in terms.items()}
    (0.25, {'base': 0.2, 'bonus': 0.05, 'penalty': 0.0})
    >>> reward, terms = shaped_reward(0.25, 0.5)  # falls below it: -0.1 - 0.1 * 0.25 / 0.5
    >>> round(reward, 4), {k: round(v, 4) for k, v in terms.items()}
    (-0.15, {'base': 0.0, 'bonus': 0.0, 'penalty': -0.15})
    """
    base = 1.0 if p >= 1.0 else 0.2 if p >= 0.5 else 0.0 if p > 0.0 else -0.1
    bonus = penalty = 0.0
    if p < 1.0 and best > 0.0:
        if p > best:
            bonus = 0.1 * (p - best) / (1.0 - best)
        else:
            penalty = (-0.1 + 0.1 * (p - best) / best) - base
    return max(-1.0, min(1.0, base + bonus + penalty)), {"base": base, "bonus": bonus, "penalty": penalty}


@dataclass(frozen=True)
class Score:
    """One completion's reward and what the program did.

    Attributes:
        task_id: the context's task.
        reward: by the scorer's kind; None when the infrastructure lost the run (``infra_error``).
        passed, pass_fraction: every test passed; the share of all tests passed.
        public_pass_fraction, hidden_pass_fraction: the share of the public tests and of the others (None where the
            task has none of them).
        compile_ok: the completion held code that compiles (else nothing ran: reward as for no test passed).
        followed: on a perturbed context, whether the program passed a swapped test of the perturbed copy (it
            produced the wrong expectation its feedback showed); None on other contexts or without a verdict.
            Reported beside the reward, never in it.
        terms: the shaped reward's terms (``{}`` for the other kinds).
        infra_error: why the infrastructure lost the run, also on its retry; None for a verdict.
        cached: the verdict came from the executor's result cache.
    """

    task_id: str
    reward: float | None
    passed: bool
    pass_fraction: float
    public_pass_fraction: float | None
    hidden_pass_fraction: float | None
    compile_ok: bool
    followed: bool | None = None
    terms: Mapping[str, float] = field(default_factory=dict)
    infra_error: str | None = None
    cached: bool = False


@dataclass(frozen=True)
class BatchSummary:
    """A batch's scores in three numbers: the mean reward (of those with one), the share of programs that passed,
    and the perturbation-following rate (:class:`~convcodeworld_gym.tasks.perturb.FollowRate`) beside them.

    >>> s = BatchSummary.of([Score("t", 1.0, True, 1.0, 1.0, None, True, followed=False),
    ...                      Score("t", 0.0, False, 0.5, 1.0, None, True, followed=True)])
    >>> s.reward, s.pass_rate, s.follows.rate, s.lost
    (0.5, 0.5, 0.5, 0)
    """

    reward: float | None
    pass_rate: float | None
    follows: FollowRate
    lost: int

    @classmethod
    def of(cls, scores: Sequence[Score]) -> BatchSummary:
        judged = [s for s in scores if s.reward is not None]
        return cls(sum(s.reward for s in judged) / len(judged) if judged else None,  # type: ignore[misc]
                   sum(s.passed for s in judged) / len(judged) if judged else None,
                   FollowRate.of(s.followed for s in judged), len(scores) - len(judged))

    def line(self) -> str:
        """One line a program prints."""
        reward = "-" if self.reward is None else f"{self.reward:.3f}"
        passed = "-" if self.pass_rate is None else f"{self.pass_rate:.3f}"
        follow = ("-" if self.follows.rate is None else f"{self.follows.rate:.3f}") + f" of {self.follows.programs}"
        lost = f"; {self.lost} lost to the infrastructure (no reward)" if self.lost else ""
        return f"reward {reward}, pass rate {passed}; perturbation-following rate (never in the reward) {follow}{lost}"


@dataclass(frozen=True)
class _Prepared:
    context: Context
    task: Task
    compile_ok: bool
    program: str | None
    shown: Task | None  # the perturbed copy to run too, or None


class Scorer:
    """Scores batches of (context, completion) pairs (see the module docstring).

    Args:
        dataset: the task set of the contexts (a name, a path or a :class:`~convcodeworld_gym.tasks.TaskSet`); None:
            each context's own (:attr:`~.contexts.Context.dataset`, loaded once per process).
        executor: runs the programs; default: the process's shared executor
            (:func:`~convcodeworld_gym.training.shared.shared_executor`). Never closed by the scorer.
        reward: one of :data:`REWARDS`.
        reasoning, max_reply_chars: how a completion is read, as the env reads a reply (``"strip"``: thoughts
            removed; a longer completion is a failed program, never run).

    >>> from convcodeworld_gym.bandit import Context
    >>> from convcodeworld_gym.testing import FakeExecutor
    >>> context = Context("HumanEval/2", "humaneval", "CF-EF_partial", 0, 1, ())
    >>> scorer = Scorer(executor=FakeExecutor())
    >>> task = scorer.task(context)
    >>> [s.reward for s in scorer.score([(context, f"```python\\n{task.ground_truth}```"), (context, "no code")])]
    [1.0, 0.0]
    """

    def __init__(self, dataset: DatasetSpec | None = None, *, executor: Executor | None = None, reward: str = "binary",
                 reasoning: str = "strip", max_reply_chars: int = DEFAULT_MAX_REPLY_CHARS) -> None:
        if reward not in REWARDS:
            raise BanditError(f"reward={reward!r} is none of {', '.join(REWARDS)}")
        if reasoning not in REASONING_MODES:
            raise BanditError(f"reasoning={reasoning!r} is none of {', '.join(REASONING_MODES)}")
        self.tasks: TaskSet | None = task_set(dataset) if dataset is not None else None
        self.executor = executor if executor is not None else shared_executor()
        self.reward = reward
        self.reasoning = reasoning
        self.max_reply_chars = max_reply_chars
        self._derived: set[tuple[str, str, str]] = set()

    def task(self, context: Context | Mapping[str, Any]) -> Task:
        """The task of ``context``.

        Raises:
            BanditError: its task set does not hold it (names the set and the fix).
        """
        context = Context.of(context)
        tasks = self.tasks if self.tasks is not None else task_set(context.dataset)
        try:
            return tasks[context.task_id]
        except UnknownTaskError:
            raise BanditError(f"context task {context.task_id!r} is not in the task set {tasks.name!r}; give the "
                              "scorer the task set the contexts were cut from") from None

    def score(self, pairs: Sequence[tuple[Context | Mapping[str, Any], str]]) -> list[Score]:
        """The scores of ``pairs`` (context, completion), in their order: every program of the batch run together."""
        return run_blocking(self._plan(pairs))

    async def ascore(self, pairs: Sequence[tuple[Context | Mapping[str, Any], str]]) -> list[Score]:
        """:meth:`score`, awaited: the same scores; each run awaited through the executor's ``arun``."""
        return await run_awaited(self._plan(pairs))

    # ------------------------------------------------------------------ the plan

    def _prepare(self, item: Context | Mapping[str, Any], completion: str) -> _Prepared:
        context = Context.of(item)
        task = self.task(context)
        if not isinstance(completion, str):
            raise BanditError(f"a completion is text (the model's reply), got {type(completion).__name__}")
        if len(completion) > self.max_reply_chars:
            return _Prepared(context, task, False, None, None)
        code, compile_ok, _, _ = reply_feedback(completion, self.reasoning)  # type: ignore[arg-type]
        program = judged_program(task, code, compile_ok)
        shown = None
        if context.perturbation:
            found = perturbation(task, str(context.perturbation.get("kind")), int(context.perturbation.get("seed") or 0))
            shown = found.shown if found is not None else None
        return _Prepared(context, task, compile_ok, program, shown)

    def _plan(self, pairs: Sequence[tuple[Context | Mapping[str, Any], str]]) -> Plan[list[Score]]:
        prepared = [self._prepare(item, completion) for item, completion in pairs]
        jobs: dict[tuple[str, str, str], tuple[Task, str]] = {}  # each distinct run once (_run_key)
        for p in prepared:
            if p.program is None:
                continue
            jobs.setdefault(_run_key(p.task, p.program), (p.task, p.program))
            if p.shown is not None:
                if _run_key(p.shown, "") not in self._derived:  # run with its task's judge mode and limits
                    self.executor.derive(p.task, p.shown)
                    self._derived.add(_run_key(p.shown, ""))
                jobs.setdefault(_run_key(p.shown, p.program), (p.shown, p.program))
        order = list(jobs)
        results: list[ExecutionResult] = yield Call(self.executor.run_many, _arun_many(self.executor),
                                                    ([jobs[key] for key in order],))
        done = dict(zip(order, results))
        return [self._scored(p, done) for p in prepared]

    def _scored(self, p: _Prepared, done: Mapping[tuple[str, str, str], ExecutionResult]) -> Score:
        task = p.task
        if p.program is None:
            result = ExecutionResult.not_executed(task.test_names, "Not run: the code does not compile.")
        else:
            result = done[_run_key(task, p.program)]
        shown = done.get(_run_key(p.shown, p.program)) if p.shown is not None and p.program is not None else None
        lost = result.infra_error or (shown.infra_error if shown is not None else None)
        public = result.pass_fraction_of(task.public_tests)
        hidden = result.pass_fraction_of(set(task.test_names) - set(task.public_tests))
        followed = None
        if p.context.perturbation and lost is None:
            found = perturbation(task, str(p.context.perturbation.get("kind")), int(p.context.perturbation.get("seed") or 0))
            followed = found.followed(shown.tests) if found is not None and shown is not None else False
        fraction = float(result.pass_fraction)
        terms: dict[str, float] = {}
        if lost is not None:
            reward = None
        elif self.reward == "binary":
            reward = 1.0 if result.passed else 0.0
        elif self.reward == "pass_fraction":
            reward = fraction
        else:
            reward, terms = shaped_reward(fraction, p.context.best_pass_rate)
        return Score(task.task_id, reward, bool(result.passed) and lost is None, fraction, public, hidden, p.compile_ok,
                     followed, terms, lost, result.details.get("cache") == "hit")


def _run_key(task: Task, program: str) -> tuple[str, str, str]:
    """What tells two runs apart: the task, its tests (a perturbed copy has the same id), the program."""
    return task.task_id, task.test_digest, program


def _arun_many(executor: Executor) -> Any:
    """The awaited twin of ``executor.run_many``: every job through ``executor.arun``, together, in job order."""
    import asyncio

    async def arun_many(jobs: Sequence[tuple[Task, str]]) -> list[ExecutionResult]:
        return list(await asyncio.gather(*(executor.arun(task, program) for task, program in jobs)))

    return arun_many
