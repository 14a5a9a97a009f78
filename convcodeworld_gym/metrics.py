"""ConvCodeWorld metrics: Pass@1 per turn, MRR and Recall, live and static (ConvCodeBench).

Live: a task's *first passing turn* ``k`` (0..max_turns) decides everything. Pass@1 at
turn ``t`` is the share of tasks with ``k <= t``; MRR is the mean of ``1/(k+1)`` (0 when
never solved); Recall is the share ever solved.

Static (ConvCodeBench): the reference's frozen turns and the evaluated model's turns
``1..max_turns`` are walked together. A task whose reference code passed at turn 0 scores
1. Otherwise, for ``i = 1..max_turns``: if the reference's code of turn ``i-1`` passed, the
credit is ``1/i`` (credit turn ``i-1``); else if the evaluated model's code at turn ``i``
passes, the credit is ``1/(i+1)`` (credit turn ``i``). Recall counts either event, and also
the evaluated model's own turn-0 program.

Holds:
    Scores               per-turn Pass@1, MRR, Recall over a set of tasks
    first_pass_turn      turn index of the first ``True``
    live_scores          Scores from first passing turns
    static_credit_turn   the credited turn of one ConvCodeBench task
    static_scores        Scores over ConvCodeBench tasks
    spearman             Spearman's rank correlation (scipy)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "Scores",
    "first_pass_turn",
    "live_scores",
    "static_credit_turn",
    "static_recall",
    "static_scores",
    "spearman",
    "DEFAULT_MAX_TURNS",
]

DEFAULT_MAX_TURNS = 10


@dataclass(frozen=True)
class Scores:
    """Metrics over a set of tasks; shares are in [0, 1].

    Attributes:
        pass_at_turn: Pass@1 at turns 0..max_turns (non-decreasing).
        mrr: mean reciprocal rank of the first passing turn.
        recall: share of tasks solved at any turn.
        n_tasks: number of tasks scored.
    """

    pass_at_turn: tuple[float, ...]
    mrr: float
    recall: float
    n_tasks: int

    def as_percent(self) -> dict[str, object]:
        """The paper's presentation: percentages rounded to 1 decimal."""
        return {
            "pass_at_turn": [round(100 * p, 1) for p in self.pass_at_turn],
            "mrr": round(100 * self.mrr, 1),
            "recall": round(100 * self.recall, 1),
            "n_tasks": self.n_tasks,
        }


def first_pass_turn(passes: Sequence[bool]) -> int | None:
    """Index of the first passing turn, or None.

    >>> first_pass_turn([False, False, True, True]), first_pass_turn([False]), first_pass_turn([])
    (2, None, None)
    """
    for turn, passed in enumerate(passes):
        if passed:
            return turn
    return None


def _scores(credit_turns: Sequence[int | None], recall_hits: Sequence[bool], max_turns: int) -> Scores:
    n = len(credit_turns)
    if n == 0:
        raise ValueError("no tasks to score")
    for k in credit_turns:
        if k is not None and not 0 <= k <= max_turns:
            raise ValueError(f"passing turn {k} is outside 0..{max_turns}")
    pass_at = tuple(sum(1 for k in credit_turns if k is not None and k <= t) / n for t in range(max_turns + 1))
    mrr = sum(1.0 / (k + 1) for k in credit_turns if k is not None) / n
    recall = sum(recall_hits) / n
    return Scores(pass_at_turn=pass_at, mrr=mrr, recall=recall, n_tasks=n)


def live_scores(first_passes: Iterable[int | None], max_turns: int = DEFAULT_MAX_TURNS) -> Scores:
    """Scores from each task's first passing turn (None = never solved).

    >>> s = live_scores([0, 1, None, 10])
    >>> s.pass_at_turn[0], s.pass_at_turn[1], s.pass_at_turn[10], s.recall
    (0.25, 0.5, 0.75, 0.75)
    >>> round(s.mrr, 4)  # (1 + 1/2 + 0 + 1/11) / 4
    0.3977
    """
    turns = list(first_passes)
    return _scores(turns, [k is not None for k in turns], max_turns)


def static_credit_turn(
    reference_passes: Sequence[bool], model_passes: Mapping[int, bool], max_turns: int = DEFAULT_MAX_TURNS
) -> int | None:
    """The credited turn of one ConvCodeBench task (MRR credit is ``1/(turn+1)``), or None.

    ``reference_passes[j]``: did the reference's logged code of turn ``j`` pass.
    ``model_passes[i]``: did the evaluated model's code at turn ``i`` pass (turns it did not play are absent).

    >>> static_credit_turn([True], {})              # reference solved at turn 0
    0
    >>> static_credit_turn([False, True], {1: False})  # reference's turn-1 code passed: credit 1/2
    1
    >>> static_credit_turn([False, False, False], {1: False, 2: True})  # model passed at turn 2: 1/3
    2
    >>> static_credit_turn([False], {0: True, 1: False}) is None  # a turn-0 pass of the model earns no MRR
    True
    """
    if reference_passes and reference_passes[0]:
        return 0
    for i in range(1, max_turns + 1):
        if i - 1 < len(reference_passes) and reference_passes[i - 1]:
            return i - 1
        if model_passes.get(i, False):
            return i
    return None


def static_recall(reference_passes: Sequence[bool], model_passes: Mapping[int, bool], max_turns: int = DEFAULT_MAX_TURNS) -> bool:
    """True when a static credit exists or the evaluated model's own turn-0 program passed."""
    return static_credit_turn(reference_passes, model_passes, max_turns) is not None or bool(model_passes.get(0, False))


def static_scores(
    episodes: Iterable[tuple[Sequence[bool], Mapping[int, bool]]], max_turns: int = DEFAULT_MAX_TURNS
) -> Scores:
    """Scores over ConvCodeBench tasks, each given as ``(reference_passes, model_passes)``.

    >>> s = static_scores([([True], {}), ([False, False], {1: False, 2: True}), ([False], {0: True})])
    >>> [round(p, 3) for p in s.pass_at_turn[:3]], round(s.mrr, 4), round(s.recall, 3)
    ([0.333, 0.333, 0.667], 0.4444, 1.0)
    """
    items = list(episodes)
    credits = [static_credit_turn(ref, model, max_turns) for ref, model in items]
    hits = [static_recall(ref, model, max_turns) for ref, model in items]
    return _scores(credits, hits, max_turns)


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation of two equally long score lists (ties averaged), via scipy.

    >>> spearman([0.1, 0.5, 0.3], [10, 50, 20])
    1.0
    """
    if len(x) != len(y) or len(x) < 2:
        raise ValueError(f"spearman needs two lists of the same length >= 2, got {len(x)} and {len(y)}")
    from scipy.stats import spearmanr

    return float(spearmanr(x, y).statistic)
