"""ConvCodeWorld metrics: Pass@1 per turn, MRR and Recall, live and static (ConvCodeBench),
defined as the reference's ``print_results.py`` computes them.

Live: a task's *first passing turn* ``k`` (0..max_turns) decides everything. Pass@1 at turn
``t`` is the share of tasks whose turn-``t`` program passes or whose turn-0 program passed;
the reference carries a passing program over and executes it again every later turn, so
(flaky tests aside) that is the share with ``k <= t``. MRR is the mean of ``1/(k+1)`` (0 when
never solved); Recall is the share ever solved.

Static (ConvCodeBench), per task, from the reference's logged passes ``ref[j]`` and the
evaluated model's passes ``model[i]`` (its own turn-0 program at ``i = 0``, its static turns
``1..max_turns`` after):

* MRR and Recall: a task with ``ref[0]`` counts 1. Otherwise walk ``i = 0..max_turns``: at
  ``i = 0``, ``model[0]`` credits 1 (``compensate_init=True``, the reference's default; with
  ``False`` the walk starts at ``i = 1`` for MRR only); at ``i >= 1``, ``ref[i-1]`` credits
  ``1/i`` (credited turn ``i-1``), else ``model[i]`` credits ``1/(i+1)``. Recall is 1 where
  any of these happens (always walked from ``i = 0``).
* Pass@1 at turn ``t`` (``t = 1..max_turns``; there is no turn-0 row): the share of tasks
  whose static turn-``t`` program passes or whose ``ref[0]`` passed. Once ``ref[i-1]``
  passed, the static run carries the reference's passing code at every turn ``>= i``, so
  those turns pass. Unlike live Pass@1 the curve can fall: each static turn is written anew
  on the reference's history."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .combos import DEFAULT_MAX_TURNS

__all__ = [
    "Scores",
    "first_pass_turn",
    "live_scores",
    "static_credit_turn",
    "static_recall",
    "static_pass_at_turn",
    "static_scores",
    "spearman",
    "DEFAULT_MAX_TURNS",
]


@dataclass(frozen=True)
class Scores:
    """Metrics over a set of tasks; shares are in [0, 1].

    Attributes:
        pass_at_turn: Pass@1 at turns ``first_turn..max_turns``.
        mrr: mean reciprocal rank of the first (credited) passing turn.
        recall: share of tasks solved at any turn.
        n_tasks: number of tasks scored.
        first_turn: the turn of ``pass_at_turn[0]``: 0 live, 1 static (the reference's
            static table has no turn-0 row).
        left_out: tasks not scored because the infrastructure lost a run of their episode (also on
            its retry): such a turn is no verdict, so the episode's first passing turn is unknown.
            They are in no share above (``n_tasks`` does not count them).
    """

    pass_at_turn: tuple[float, ...]
    mrr: float
    recall: float
    n_tasks: int
    first_turn: int = 0
    left_out: int = 0

    @property
    def turns(self) -> range:
        """The turn index of each entry of ``pass_at_turn``."""
        return range(self.first_turn, self.first_turn + len(self.pass_at_turn))

    def pass_at(self, turn: int) -> float | None:
        """Pass@1 at ``turn``, or None when the table has no row for it (turn 0 of a static run)."""
        index = turn - self.first_turn
        return self.pass_at_turn[index] if 0 <= index < len(self.pass_at_turn) else None

    def as_percent(self) -> dict[str, object]:
        """The paper's presentation: percentages rounded to 1 decimal."""
        return {
            "pass_at_turn": [round(100 * p, 1) for p in self.pass_at_turn],
            "first_turn": self.first_turn,
            "mrr": round(100 * self.mrr, 1),
            "recall": round(100 * self.recall, 1),
            "n_tasks": self.n_tasks,
            "left_out": self.left_out,
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


def _check_turns(turns: Iterable[int | None], max_turns: int) -> None:
    for k in turns:
        if k is not None and not 0 <= k <= max_turns:
            raise ValueError(f"passing turn {k} is outside 0..{max_turns}")


def _mean(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("no tasks to score")
    return sum(values) / len(values)


def live_scores(first_passes: Iterable[int | None], max_turns: int = DEFAULT_MAX_TURNS) -> Scores:
    """Scores from each task's first passing turn (None = never solved).

    >>> s = live_scores([0, 1, None, 10])
    >>> s.pass_at_turn[0], s.pass_at_turn[1], s.pass_at_turn[10], s.recall
    (0.25, 0.5, 0.75, 0.75)
    >>> round(s.mrr, 4)  # (1 + 1/2 + 0 + 1/11) / 4
    0.3977
    """
    turns = list(first_passes)
    _check_turns(turns, max_turns)
    pass_at = tuple(_mean([float(k is not None and k <= t) for k in turns]) for t in range(max_turns + 1))
    return Scores(
        pass_at_turn=pass_at,
        mrr=_mean([0.0 if k is None else 1.0 / (k + 1) for k in turns]),
        recall=_mean([float(k is not None) for k in turns]),
        n_tasks=len(turns),
    )


def _ref(reference_passes: Sequence[bool], turn: int) -> bool:
    return 0 <= turn < len(reference_passes) and bool(reference_passes[turn])


def static_credit_turn(
    reference_passes: Sequence[bool],
    model_passes: Mapping[int, bool],
    max_turns: int = DEFAULT_MAX_TURNS,
    *,
    compensate_init: bool = True,
) -> int | None:
    """The credited turn of one ConvCodeBench task (its MRR credit is ``1/(turn+1)``), or None.

    ``reference_passes[j]``: did the reference's logged code of turn ``j`` pass.
    ``model_passes[i]``: did the evaluated model's code at turn ``i`` pass (turn 0: its own
    single-turn program; absent turns count as not passing).

    >>> static_credit_turn([True], {})              # reference solved at turn 0
    0
    >>> static_credit_turn([False, True], {1: False})  # reference's turn-1 code passed: credit 1/2
    1
    >>> static_credit_turn([False, False, False], {1: False, 2: True})  # model passed at turn 2: 1/3
    2
    >>> static_credit_turn([False], {0: True, 1: False})  # the model's own turn 0 counts 1 ...
    0
    >>> static_credit_turn([False], {0: True, 1: False}, compensate_init=False) is None  # ... unless not compensated
    True
    """
    if _ref(reference_passes, 0):
        return 0
    for i in range(0 if compensate_init else 1, max_turns + 1):
        if i > 0 and _ref(reference_passes, i - 1):
            return i - 1
        if model_passes.get(i, False):
            return i
    return None


def static_recall(
    reference_passes: Sequence[bool], model_passes: Mapping[int, bool], max_turns: int = DEFAULT_MAX_TURNS
) -> bool:
    """True when the reference passed at a turn ``0..max_turns-1`` or the model at ``0..max_turns``
    (the reference's Recall walks from the model's turn 0 whatever ``compensate_init`` says)."""
    return static_credit_turn(reference_passes, model_passes, max_turns, compensate_init=True) is not None


def static_pass_at_turn(
    reference_passes: Sequence[bool], model_passes: Mapping[int, bool], max_turns: int = DEFAULT_MAX_TURNS
) -> tuple[bool, ...]:
    """One task's Pass@1 at static turns ``1..max_turns``.

    Turn ``t`` passes when the model's static turn-``t`` program passed, the reference passed
    at turn 0, or the reference passed at a turn ``< t`` (the static run then carries its code).

    >>> static_pass_at_turn([False, False, True], {1: True, 2: False}, max_turns=4)
    (True, False, True, True)
    >>> static_pass_at_turn([True], {1: False}, max_turns=2)
    (True, True)
    """
    out = []
    carried = _ref(reference_passes, 0)
    for t in range(1, max_turns + 1):
        carried = carried or _ref(reference_passes, t - 1)
        out.append(carried or bool(model_passes.get(t, False)))
    return tuple(out)


def static_scores(
    episodes: Iterable[tuple[Sequence[bool], Mapping[int, bool]]],
    max_turns: int = DEFAULT_MAX_TURNS,
    *,
    compensate_init: bool = True,
) -> Scores:
    """Scores over ConvCodeBench tasks, each given as ``(reference_passes, model_passes)``.

    >>> s = static_scores([([True], {}), ([False, False], {1: False, 2: True}), ([False], {0: True})])
    >>> [round(p, 3) for p in s.pass_at_turn[:2]], round(s.mrr, 4), round(s.recall, 3), s.first_turn
    ([0.333, 0.667], 0.7778, 1.0, 1)
    """
    items = list(episodes)
    credits = [static_credit_turn(ref, model, max_turns, compensate_init=compensate_init) for ref, model in items]
    _check_turns(credits, max_turns)
    per_task = [static_pass_at_turn(ref, model, max_turns) for ref, model in items]
    return Scores(
        pass_at_turn=tuple(_mean([float(p[t]) for p in per_task]) for t in range(max_turns)),
        mrr=_mean([0.0 if k is None else 1.0 / (k + 1) for k in credits]),
        recall=_mean([float(static_recall(ref, model, max_turns)) for ref, model in items]),
        n_tasks=len(items),
        first_turn=1,
    )


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation of two equally long score lists (ties averaged), via scipy.

    >>> spearman([0.1, 0.5, 0.3], [10, 50, 20])
    1.0
    """
    if len(x) != len(y) or len(x) < 2:
        raise ValueError(f"spearman needs two lists of the same length >= 2, got {len(x)} and {len(y)}")
    from scipy.stats import spearmanr

    return float(spearmanr(x, y).statistic)
