"""ConvCodeWorld metrics: Pass@1 per turn, MRR and Recall, live and static (ConvCodeBench),
defined as the reference's ``print_results.py`` computes them.

Live: Pass@1 at turn ``t`` is the share of tasks whose turn-``t`` program passes or whose turn-0
program passed (``pass_at_1``, print_results.py:48-56). The reference carries a passing program
over and executes it again every later turn, so a flaky test can make a later turn fail; an
episode that ended at its pass (the env's default) carries it to every later turn, and Pass@1 is
then the share of tasks with ``k <= t`` for the *first passing turn* ``k``. MRR is the mean of
``1/(k+1)`` (0 when never solved); Recall is the share ever solved.

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
  on the reference's history. A reference log that goes on after its pass (the reference's own
  logs do: it carries and re-executes the passing code) is read turn by turn: the static run
  carries the reference's code at turn ``t`` when the reference's turn ``t-1`` passed.

``exclude_init_solved`` (print_results.py:70-149; off by default there too) leaves the tasks
whose (evaluated model's) turn-0 program passed out of MRR and Recall, never out of Pass@1.

Many trajectories per task (``convcodeworld evaluate --samples N``; the reference plays one): each task's Pass@1 at a
turn is the share of its samples passing there, its MRR and Recall the mean over its samples, and the scores the mean
over tasks (the unbiased pass@1 estimate; equal to the one-trajectory scores when N is 1). Beside them, pass@k at each
turn (:func:`pass_at_k`: the chance that at least one of k of a task's samples, drawn without replacement, passes
there), for k = 1, 2, 4, ... up to the fewest samples of a task, and that number itself."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
import math
from dataclasses import dataclass, field

from .combos import DEFAULT_MAX_TURNS

__all__ = [
    "Scores",
    "first_pass_turn",
    "live_pass_at_turn",
    "live_scores",
    "live_episode_scores",
    "static_credit_turn",
    "static_recall",
    "static_pass_at_turn",
    "static_scores",
    "pass_at_k",
    "sample_ks",
    "live_sample_scores",
    "static_sample_scores",
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
        init_solved_excluded: tasks left out of MRR and Recall (not of Pass@1, nor of ``n_tasks``) because
            their turn-0 program passed (``exclude_init_solved``); the reference prints
            ``(n_tasks - init_solved_excluded)/n_tasks``. With many samples per task: the tasks every sample of
            which is left out (a sample whose turn 0 passed is left out of its task's MRR and Recall).
        samples: trajectories per task (the fewest of any task; 1 in the reference's runs).
        pass_at_k: k -> pass@k at the turns of ``pass_at_turn`` (:func:`pass_at_k`, averaged over tasks), for the
            k of :func:`sample_ks`; empty with one sample per task (pass@1 is then ``pass_at_turn``).
    """

    pass_at_turn: tuple[float, ...]
    mrr: float
    recall: float
    n_tasks: int
    first_turn: int = 0
    left_out: int = 0
    init_solved_excluded: int = 0
    samples: int = 1
    pass_at_k: Mapping[int, tuple[float, ...]] = field(default_factory=dict)

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
            "init_solved_excluded": self.init_solved_excluded,
            **({"samples": self.samples,
                "pass_at_k": {k: [round(100 * p, 1) for p in values] for k, values in self.pass_at_k.items()}}
               if self.samples > 1 else {}),
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


def _mean_of_kept(values: Sequence[float]) -> float:
    """The mean over the tasks MRR and Recall keep: NaN when ``exclude_init_solved`` left none (as the
    reference's ``np.mean`` of nothing); :func:`_mean` has already refused an empty task set."""
    return sum(values) / len(values) if values else float("nan")


def live_pass_at_turn(passes: Sequence[bool], max_turns: int = DEFAULT_MAX_TURNS) -> tuple[bool, ...]:
    """One task's Pass@1 at turns ``0..max_turns`` from its episode's passes, turn by turn.

    Turn ``t`` passes when its program passed or the turn-0 program did (print_results.py:48-56, ``pass_at_1``
    of turn ``t``'s results OR the initial results). A turn after the episode's last one carries its last
    program: passing when the episode ended at a pass. An episode that re-executes its passing code at every
    later turn (``rerun_passed``) can fail again there, as the reference's can.

    >>> live_pass_at_turn([False, True], max_turns=3)          # ended at its pass: carried
    (False, True, True, True)
    >>> live_pass_at_turn([False, True, False, True], max_turns=3)  # re-executed, flaky at turn 2
    (False, True, False, True)
    >>> live_pass_at_turn([True, False], max_turns=2)          # turn 0 passed: every turn counts
    (True, True, True)
    """
    init = bool(passes and passes[0])
    carried = bool(passes and passes[-1])
    return tuple(init or (bool(passes[t]) if t < len(passes) else carried) for t in range(max_turns + 1))


def live_episode_scores(
    episodes: Iterable[Sequence[bool]], max_turns: int = DEFAULT_MAX_TURNS, *, exclude_init_solved: bool = False
) -> Scores:
    """Scores from each task's passes at turns ``0..`` (its episode, turn by turn).

    Pass@1 per turn is :func:`live_pass_at_turn`; MRR and Recall take each task's first passing turn
    (print_results.py:70-82 and 111-123: the walk stops there, whatever later turns did). With
    ``exclude_init_solved`` the tasks whose turn-0 program passed are left out of MRR and Recall
    (print_results.py:75, 116), not out of Pass@1.

    >>> s = live_episode_scores([[True], [False, True, False], [False] * 3], max_turns=2)
    >>> [round(p, 3) for p in s.pass_at_turn], round(s.mrr, 3), round(s.recall, 3)
    ([0.333, 0.667, 0.333], 0.5, 0.667)
    >>> s = live_episode_scores([[True], [False, True, False], [False] * 3], max_turns=2, exclude_init_solved=True)
    >>> s.mrr, s.recall, s.init_solved_excluded, s.n_tasks
    (0.25, 0.5, 1, 3)
    """
    items = [list(passes) for passes in episodes]
    per_turn = [live_pass_at_turn(passes, max_turns) for passes in items]
    firsts = [first_pass_turn(passes) for passes in items]
    _check_turns(firsts, max_turns)
    kept = [k for k in firsts if not (exclude_init_solved and k == 0)]
    return Scores(
        pass_at_turn=tuple(_mean([float(p[t]) for p in per_turn]) for t in range(max_turns + 1)),
        mrr=_mean_of_kept([0.0 if k is None else 1.0 / (k + 1) for k in kept]),
        recall=_mean_of_kept([float(k is not None) for k in kept]),
        n_tasks=len(items),
        init_solved_excluded=len(firsts) - len(kept),
    )


def live_scores(
    first_passes: Iterable[int | None], max_turns: int = DEFAULT_MAX_TURNS, *, exclude_init_solved: bool = False
) -> Scores:
    """Scores from each task's first passing turn (None = never solved), its passing code carried over to
    every later turn (:func:`live_episode_scores` of episodes that end at their pass).

    >>> s = live_scores([0, 1, None, 10])
    >>> s.pass_at_turn[0], s.pass_at_turn[1], s.pass_at_turn[10], s.recall
    (0.25, 0.5, 0.75, 0.75)
    >>> round(s.mrr, 4)  # (1 + 1/2 + 0 + 1/11) / 4
    0.3977
    """
    turns = list(first_passes)
    episodes = [[False] * (max_turns + 1) if k is None else [False] * k + [True] for k in turns]
    return live_episode_scores(episodes, max_turns, exclude_init_solved=exclude_init_solved)


def _ref(reference_passes: Sequence[bool], turn: int) -> bool:
    """Did the reference's code of ``turn`` pass: as logged, or, past the end of a log that ended at its
    pass, carried over (passing)."""
    if turn < 0 or not reference_passes:
        return False
    return bool(reference_passes[turn]) if turn < len(reference_passes) else bool(reference_passes[-1])


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
    at turn 0 (print_results.py:339, ``pass_at_1`` with the reference's initial results), or the
    reference's turn ``t-1`` passed: the static run then carries the reference's code (pot.py:564,
    "Already solved"). A log that ended at the reference's pass carries it to every later turn; one
    that goes on after it says per turn whether the carried code passed again.

    >>> static_pass_at_turn([False, False, True], {1: True, 2: False}, max_turns=4)
    (True, False, True, True)
    >>> static_pass_at_turn([True], {1: False}, max_turns=2)
    (True, True)
    >>> static_pass_at_turn([False, True, False, True], {1: False, 3: False}, max_turns=4)  # flaky at turn 2
    (False, True, False, True)
    """
    init = _ref(reference_passes, 0)
    return tuple(init or _ref(reference_passes, t - 1) or bool(model_passes.get(t, False)) for t in range(1, max_turns + 1))


def static_scores(
    episodes: Iterable[tuple[Sequence[bool], Mapping[int, bool]]],
    max_turns: int = DEFAULT_MAX_TURNS,
    *,
    compensate_init: bool = True,
    exclude_init_solved: bool = False,
) -> Scores:
    """Scores over ConvCodeBench tasks, each given as ``(reference_passes, model_passes)``.

    With ``exclude_init_solved`` the tasks whose evaluated model's own turn-0 program passed
    (``model_passes[0]``) are left out of MRR and Recall (print_results.py:86, 127), not of Pass@1.

    >>> s = static_scores([([True], {}), ([False, False], {1: False, 2: True}), ([False], {0: True})])
    >>> [round(p, 3) for p in s.pass_at_turn[:2]], round(s.mrr, 4), round(s.recall, 3), s.first_turn
    ([0.333, 0.667], 0.7778, 1.0, 1)
    """
    items = list(episodes)
    per_task = [static_pass_at_turn(ref, model, max_turns) for ref, model in items]
    kept = [(ref, model) for ref, model in items if not (exclude_init_solved and model.get(0, False))]
    credits = [static_credit_turn(ref, model, max_turns, compensate_init=compensate_init) for ref, model in kept]
    _check_turns(credits, max_turns)
    return Scores(
        pass_at_turn=tuple(_mean([float(p[t]) for p in per_task]) for t in range(max_turns)),
        mrr=_mean_of_kept([0.0 if k is None else 1.0 / (k + 1) for k in credits]),
        recall=_mean_of_kept([float(static_recall(ref, model, max_turns)) for ref, model in kept]),
        n_tasks=len(items),
        first_turn=1,
        init_solved_excluded=len(items) - len(kept),
    )


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that at least one of ``k`` of ``n`` samples, drawn without replacement, is among the ``c`` that
    pass: ``1 - C(n-c, k) / C(n, k)`` (the unbiased estimator of pass@k from ``n`` samples).

    >>> pass_at_k(16, 0, 4), pass_at_k(16, 16, 1), pass_at_k(4, 1, 1), pass_at_k(4, 1, 2), pass_at_k(4, 3, 2)
    (0.0, 1.0, 0.25, 0.5, 1.0)

    Raises:
        ValueError: not ``0 <= c <= n`` and ``1 <= k <= n``.
    """
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def sample_ks(samples: int) -> tuple[int, ...]:
    """The k that pass@k is reported for with ``samples`` trajectories per task: 1, 2, 4, ... below ``samples``, and
    ``samples`` itself; ``()`` for one sample (pass@1 is Pass@1).

    >>> sample_ks(1), sample_ks(2), sample_ks(16), sample_ks(10)
    ((), (1, 2), (1, 2, 4, 8, 16), (1, 2, 4, 8, 10))
    """
    if samples <= 1:
        return ()
    ks = [1 << i for i in range(samples.bit_length()) if 1 << i < samples]
    return (*ks, samples)


def _sampled(tasks: Sequence[Sequence[tuple[tuple[bool, ...], int | None, bool, bool]]], *, first_turn: int,
             exclude_init_solved: bool) -> Scores:
    """Scores of tasks given per sample as ``(passes at each turn of the table, credited turn or None, recalled,
    turn 0 passed)``: per task the mean over its samples, then the mean over tasks (see the module docstring)."""
    if not tasks or any(not samples for samples in tasks):
        raise ValueError("no tasks to score" if not tasks else "a task without samples")
    width = len(tasks[0][0][0])
    n = min(len(samples) for samples in tasks)
    per_turn = [tuple(sum(s[0][t] for s in samples) / len(samples) for t in range(width)) for samples in tasks]
    kept = [[s for s in samples if not (exclude_init_solved and s[3])] for samples in tasks]
    for samples in kept:
        _check_turns([s[1] for s in samples], first_turn + width - 1)
    mrr = [sum(0.0 if s[1] is None else 1.0 / (s[1] + 1) for s in samples) / len(samples) for samples in kept if samples]
    recall = [sum(float(s[2]) for s in samples) / len(samples) for samples in kept if samples]
    ks = sample_ks(n)
    at_k = {k: tuple(_mean([pass_at_k(len(samples), sum(s[0][t] for s in samples), k) for samples in tasks])
                     for t in range(width)) for k in ks}
    return Scores(
        pass_at_turn=tuple(_mean([p[t] for p in per_turn]) for t in range(width)),
        mrr=_mean_of_kept(mrr),
        recall=_mean_of_kept(recall),
        n_tasks=len(tasks),
        first_turn=first_turn,
        init_solved_excluded=sum(1 for samples in kept if not samples),
        samples=n,
        pass_at_k=at_k,
    )


def live_sample_scores(
    tasks: Iterable[Sequence[Sequence[bool]]], max_turns: int = DEFAULT_MAX_TURNS, *, exclude_init_solved: bool = False
) -> Scores:
    """Scores of tasks each played several times: per task, its samples' passes turn by turn (one list per sample,
    as :func:`live_episode_scores` takes one per task). Pass@1 per turn, MRR and Recall are each task's mean over its
    samples, averaged over tasks; ``pass_at_k`` holds pass@k per turn. With one sample per task it equals
    :func:`live_episode_scores`.

    >>> s = live_sample_scores([[[False, True], [False, False, False], [True], [False, False, True]]], max_turns=2)
    >>> s.pass_at_turn, round(s.mrr, 4), s.recall, s.samples  # MRR: (1/2 + 0 + 1 + 1/3) / 4
    ((0.25, 0.5, 0.75), 0.4583, 0.75, 4)
    >>> {k: [round(p, 3) for p in v] for k, v in s.pass_at_k.items()}
    {1: [0.25, 0.5, 0.75], 2: [0.5, 0.833, 1.0], 4: [1.0, 1.0, 1.0]}
    """
    out = []
    for samples in tasks:
        episodes = [list(passes) for passes in samples]
        firsts = [first_pass_turn(passes) for passes in episodes]
        out.append([(live_pass_at_turn(passes, max_turns), k, k is not None, k == 0) for passes, k in zip(episodes, firsts)])
    return _sampled(out, first_turn=0, exclude_init_solved=exclude_init_solved)


def static_sample_scores(
    tasks: Iterable[Sequence[tuple[Sequence[bool], Mapping[int, bool]]]],
    max_turns: int = DEFAULT_MAX_TURNS,
    *,
    compensate_init: bool = True,
    exclude_init_solved: bool = False,
) -> Scores:
    """:func:`static_scores` of tasks each replayed several times by the evaluated model: per task, one
    ``(reference_passes, model_passes)`` per sample (the same reference history, the model's own samples). Each task's
    scores are its samples' mean, averaged over tasks; ``pass_at_k`` holds pass@k per static turn.

    >>> s = static_sample_scores([[([False], {1: True}), ([False], {1: False})]], max_turns=1)
    >>> s.pass_at_turn, s.mrr, s.recall, s.pass_at_k
    ((0.5,), 0.25, 0.5, {1: (0.5,), 2: (1.0,)})
    """
    out = []
    for samples in tasks:
        out.append([(static_pass_at_turn(ref, model, max_turns),
                     static_credit_turn(ref, model, max_turns, compensate_init=compensate_init),
                     static_recall(ref, model, max_turns), bool(model.get(0, False))) for ref, model in samples])
    return _sampled(out, first_turn=1, exclude_init_solved=exclude_init_solved)


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation of two equally long score lists (ties averaged), via scipy.

    >>> spearman([0.1, 0.5, 0.3], [10, 50, 20])
    1.0
    """
    if len(x) != len(y) or len(x) < 2:
        raise ValueError(f"spearman needs two lists of the same length >= 2, got {len(x)} and {len(y)}")
    from scipy.stats import spearmanr

    return float(spearmanr(x, y).statistic)
