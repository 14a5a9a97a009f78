"""The trainers' doors to bandit scoring: a reward function for TRL's ``GRPOTrainer`` and a ``compute_score`` for verl.

Both score through a :class:`~.scoring.Scorer` (the process's shared executor and result cache), a whole batch at a
time, and report the perturbation-following rate beside the reward, never in it.

* TRL: ``GRPOTrainer(reward_funcs=reward_function(), train_dataset=contexts.dataset())``. TRL calls it with the batch's
  ``prompts`` and ``completions`` (text, or the assistant's message) and every other column of the rows, among them
  ``extra_info`` (the context's facts, :meth:`~.contexts.Context.row`); it returns one reward per completion (None
  where the infrastructure lost the run: TRL leaves it out) and logs with TRL's ``log_metric``
  ``bandit/pass_rate`` and, on perturbed contexts, ``bandit/follow_rate`` and ``bandit/perturbed_programs``
  (:data:`BANDIT_METRICS`). :func:`follow_line` reads the rate back from a trainer's log.
* verl: ``custom_reward_function.path=<convcodeworld_gym/training/verl_reward.py>``, ``name=compute_score``
  (``reward_kwargs.reward=shaped`` to choose the reward). verl's reward managers call it per completion
  (``compute_score(data_source=, solution_str=, ground_truth=, extra_info=)``: ``naive``, ``prime``) or per batch
  (``compute_score(data_sources=, solution_strs=, ground_truths=, extra_infos=)``: ``batch``, which scores the batch
  together: use it); each answer is a dict whose ``score`` is the reward, the other keys (``pass_fraction``,
  ``passed``, ``perturbed``, ``followed``) land in verl's ``reward_extra_info``, so the following rate is
  ``sum(followed) / sum(perturbed)``. A run the infrastructure lost raises
  :class:`~convcodeworld_gym.errors.InfrastructureError`: verl has no "no reward", and a 0.0 would say the program
  failed.

Holds:
    BANDIT_METRICS   the names the TRL reward function logs under
    reward_function  the reward function TRL calls (one per reward kind and scorer)
    follow_line      the perturbation-following rate per step, read back from a TRL trainer's log
    compute_score    verl's reward function
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import BanditError, InfrastructureError
from ..training.logs import per_step_line
from .contexts import Context
from .scoring import REWARDS, BatchSummary, Score, Scorer

__all__ = ["BANDIT_METRICS", "reward_function", "follow_line", "compute_score"]

#: What the TRL reward function logs: the share of completions that pass, the perturbation-following rate of those
#: on perturbed contexts, and how many there were.
BANDIT_METRICS = ("bandit/pass_rate", "bandit/follow_rate", "bandit/perturbed_programs")


def _text(completion: Any) -> str:
    """A completion as TRL hands it: text, or a conversation whose last message is the assistant's."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], Mapping):
        return str(completion[-1].get("content") or "")
    raise BanditError(f"a completion is text or chat messages, got {type(completion).__name__}")


def reward_function(scorer: Scorer | None = None, *, reward: str = "binary") -> Callable[..., list[float | None]]:
    """The reward function for ``GRPOTrainer(reward_funcs=...)``: scores each completion of the batch on its row's
    context (``extra_info``), all together, with ``scorer`` (default: a :class:`~.scoring.Scorer` of ``reward``
    on the shared executor). Its ``__name__`` (``convcodeworld_<reward>``) is the reward's name in TRL's logs.

    >>> from convcodeworld_gym.testing import FakeExecutor
    >>> fn = reward_function(Scorer(executor=FakeExecutor()))
    >>> info = Context("HumanEval/2", "humaneval", "CF-EF_partial", 0, 1, ()).extra_info()
    >>> logged = {}
    >>> fn(prompts=["p", "p"], completions=["no code", [{"role": "assistant", "content": "x = 1"}]],
    ...    extra_info=[info, info], log_metric=logged.__setitem__), logged
    ([0.0, 0.0], {'bandit/pass_rate': 0.0})
    """
    scoring = scorer if scorer is not None else Scorer(reward=reward)

    def convcodeworld_reward(prompts: Sequence[Any], completions: Sequence[Any], *, extra_info: Sequence[Any] | None = None,
                             log_metric: Callable[[str, float], None] | None = None, **_: Any) -> list[float | None]:
        if extra_info is None or len(extra_info) != len(completions):
            raise BanditError("the reward function needs each row's extra_info (train on ContextSet.dataset(), whose "
                              "rows hold it)")
        scores = scoring.score([(info, _text(completion)) for info, completion in zip(extra_info, completions)])
        summary = BatchSummary.of(scores)
        if log_metric is not None:
            if summary.pass_rate is not None:
                log_metric(BANDIT_METRICS[0], summary.pass_rate)
            if summary.follows.programs:
                log_metric(BANDIT_METRICS[1], float(summary.follows.rate or 0.0))
                log_metric(BANDIT_METRICS[2], float(summary.follows.programs))
        return [s.reward for s in scores]

    convcodeworld_reward.__name__ = f"convcodeworld_{scoring.reward}"
    convcodeworld_reward.__qualname__ = convcodeworld_reward.__name__
    return convcodeworld_reward


def follow_line(log_history: Sequence[Mapping[str, Any]]) -> str:
    """The perturbation-following rate of each logged step (``-``: no perturbed context in it), from a TRL trainer's
    ``log_history`` (what :func:`reward_function` logged), for a program to print beside the reward.

    >>> follow_line([{"reward": 0.5}, {"reward": 0.2, "bandit/follow_rate": 0.25, "bandit/perturbed_programs": 8.0}])
    'perturbation-following rate per step (never in the reward): -, 0.250; programs on perturbed contexts: -, 8'
    """
    return per_step_line(log_history, *BANDIT_METRICS[1:], rate_name="perturbation-following rate",
                         count_name="programs on perturbed contexts")


_scorers: dict[str, Scorer] = {}  # reward kind -> the process's scorer for verl (on the shared executor)
_scorers_lock = threading.Lock()


def _verl_scorer(reward: str) -> Scorer:
    if reward not in REWARDS:
        raise BanditError(f"reward={reward!r} is none of {', '.join(REWARDS)} (verl: custom_reward_function.reward_kwargs)")
    with _scorers_lock:
        if reward not in _scorers:
            _scorers[reward] = Scorer(reward=reward)
        return _scorers[reward]


def _context(ground_truth: Any, extra_info: Any) -> Context | Mapping[str, Any]:
    """The context of a verl row: its ``extra_info``, the task named by ``ground_truth`` where that lacks it."""
    info = dict(extra_info or {})
    if not info.get("task_id") and isinstance(ground_truth, str):
        try:
            info.update(json.loads(ground_truth))
        except ValueError:
            raise BanditError(f"ground truth {ground_truth[:80]!r} names no task: write the rows with "
                              "ContextSet.to_parquet") from None
    return info


def _answer(score: Score, perturbed: bool) -> dict[str, float]:
    if score.reward is None:
        raise InfrastructureError(
            f"the run scoring a completion for {score.task_id} was lost to the infrastructure, also on its retry "
            f"({score.infra_error}); it has no reward (verl takes no missing one): rerun the step", score.task_id,
            str(score.infra_error))
    return {"score": float(score.reward), "pass_fraction": score.pass_fraction, "passed": float(score.passed),
            "perturbed": float(perturbed), "followed": float(bool(score.followed))}


def compute_score(data_source: Any = None, solution_str: str | None = None, ground_truth: Any = None,
                  extra_info: Any = None, *, data_sources: Sequence[Any] | None = None,
                  solution_strs: Sequence[str] | None = None, ground_truths: Sequence[Any] | None = None,
                  extra_infos: Sequence[Any] | None = None, reward: str = "binary",
                  **_: Any) -> dict[str, float] | list[dict[str, float]]:
    """verl's reward function (see the module docstring): one completion (``solution_str``, its row's
    ``ground_truth`` and ``extra_info``) -> a dict whose ``score`` is the reward; a batch (``solution_strs``,
    ``ground_truths``, ``extra_infos``: verl's ``batch`` reward manager) -> one dict per completion, scored together.
    ``reward``: one of :data:`~.scoring.REWARDS`. ``data_source`` is not read (every row's is ``convcodeworld``).

    Raises:
        InfrastructureError: a run was lost to the infrastructure, also on its retry (no reward to give).
        BanditError: a row names no task, or ``reward`` is unknown.
    """
    del data_source, data_sources
    scorer = _verl_scorer(reward)
    if solution_strs is not None:
        truths = list(ground_truths) if ground_truths is not None else [None] * len(solution_strs)
        infos = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
        contexts = [_context(truth, info) for truth, info in zip(truths, infos)]
        scores = scorer.score(list(zip(contexts, (str(s) for s in solution_strs))))
        return [_answer(score, bool(Context.of(c).perturbation)) for score, c in zip(scores, contexts)]
    context = _context(ground_truth, extra_info)
    (score,) = scorer.score([(context, str(solution_str or ""))])
    return _answer(score, bool(Context.of(context).perturbation))
