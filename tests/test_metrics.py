"""Metrics against hand-computed values, including every branch of the static definitions."""

from __future__ import annotations

import pytest

from convcodeworld_gym.metrics import (
    live_scores,
    spearman,
    static_credit_turn,
    static_pass_at_turn,
    static_recall,
    static_scores,
)


def test_live_edge_cases():
    never = live_scores([None, None])
    assert never.pass_at_turn == (0.0,) * 11 and never.mrr == 0.0 and never.recall == 0.0
    at_zero = live_scores([0])
    assert at_zero.pass_at_turn == (1.0,) * 11 and at_zero.mrr == 1.0 and at_zero.recall == 1.0
    at_ten = live_scores([10])
    assert at_ten.pass_at_turn == (0.0,) * 10 + (1.0,)
    assert at_ten.mrr == pytest.approx(1 / 11)
    mixed = live_scores([0, 1, 3, None])
    assert mixed.pass_at_turn[:4] == (0.25, 0.5, 0.5, 0.75)
    assert mixed.mrr == pytest.approx((1 + 1 / 2 + 1 / 4) / 4)
    assert mixed.recall == 0.75 and mixed.n_tasks == 4


def test_live_rejects_bad_input():
    with pytest.raises(ValueError):
        live_scores([])
    with pytest.raises(ValueError):
        live_scores([11])


def test_static_branches():
    # reference passed at turn 0: counts 1, whatever the model does
    assert static_credit_turn([True], {1: False}) == 0
    # the reference's code of turn i-1 passed before the model did: credit 1/i
    assert static_credit_turn([False, False, True], {1: False, 2: False}) == 2
    # the model passes at turn i first: credit 1/(i+1)
    assert static_credit_turn([False, False, True], {1: True}) == 1
    # both at the same step i: the reference's turn i-1 is checked first (1/i beats 1/(i+1))
    assert static_credit_turn([False, True], {1: False, 2: True}) == 1
    # neither ever: no credit
    assert static_credit_turn([False] * 11, {i: False for i in range(11)}) is None
    # the model's own turn 0: credit 1 with compensate_init (the reference's default) ...
    assert static_credit_turn([False] * 11, {0: True}) == 0
    # ... and none without it, for MRR only: Recall counts it either way
    assert static_credit_turn([False] * 11, {0: True}, compensate_init=False) is None
    assert static_credit_turn([False] * 11, {0: True, 3: True}, compensate_init=False) == 3
    assert static_recall([False] * 11, {0: True}) is True
    assert static_recall([False] * 11, {0: False}) is False
    # a model pass at turn 10 is the last creditable one; the reference's turn 10 never counts
    assert static_credit_turn([False] * 10, {10: True}) == 10
    assert static_credit_turn([False] * 10 + [True], {}) is None


def test_static_pass_at_turn_per_turn():
    # each static turn is written anew: a model pass at turn 2 does not carry to turn 3
    assert static_pass_at_turn([False] * 11, {1: False, 2: True, 3: False}, max_turns=3) == (False, True, False)
    # the reference's pass at turn 1 shows from turn 2 on (the static run carries its code)
    assert static_pass_at_turn([False, True], {1: False}, max_turns=3) == (False, True, True)
    # the reference's turn-0 pass counts at every turn; there is no turn-0 entry
    assert static_pass_at_turn([True], {}, max_turns=2) == (True, True)
    # the model's own turn 0 does not count in the per-turn table
    assert static_pass_at_turn([False] * 11, {0: True}, max_turns=2) == (False, False)


# Five tasks, max_turns 3, worked out by hand from the definitions (print_results.py):
#   a: reference passed at turn 0                  -> MRR 1,   Recall 1, Pass@1 t1..3: 1 1 1
#   b: reference passed at turn 1, model never      -> MRR 1/2, Recall 1, Pass@1: 0 1 1
#   c: model passed at static turns 2 only          -> MRR 1/3, Recall 1, Pass@1: 0 1 0
#   d: model's own turn 0 passed, static turns fail -> MRR 1 (0 uncompensated), Recall 1, Pass@1: 0 0 0
#   e: nothing                                      -> 0, 0, 0 0 0
_FIVE = [
    ([True], {1: False}),
    ([False, True], {0: False, 1: False}),
    ([False] * 3, {0: False, 1: False, 2: True, 3: False}),
    ([False] * 3, {0: True, 1: False, 2: False, 3: False}),
    ([False] * 3, {0: False, 1: False, 2: False, 3: False}),
]


def test_static_scores_hand_computed():
    s = static_scores(_FIVE, max_turns=3)
    assert s.first_turn == 1 and s.turns == range(1, 4) and s.pass_at(0) is None
    assert s.pass_at_turn == pytest.approx((1 / 5, 3 / 5, 2 / 5))
    assert s.mrr == pytest.approx((1 + 1 / 2 + 1 / 3 + 1) / 5)
    assert s.recall == pytest.approx(4 / 5)
    uncompensated = static_scores(_FIVE, max_turns=3, compensate_init=False)
    assert uncompensated.mrr == pytest.approx((1 + 1 / 2 + 1 / 3) / 5)
    assert uncompensated.recall == s.recall and uncompensated.pass_at_turn == s.pass_at_turn


def test_spearman():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [40, 30, 20, 10]) == pytest.approx(-1.0)
    with pytest.raises(ValueError):
        spearman([1], [1])


# ---------------------------------------------------------------- the reference's own print_results.py
# Expected values below were taken by running the reference's functions (sfc-gh-hhan/convcodeworld,
# convcodeworld/print_results.py: get_mrr 70-108, get_recall 111-149, pass_at_1 48-56, print_per_turn_results
# 302-356, print_mrr_recall 359-395; compiled from its source with numpy, since the module imports dspy) on
# BigCodeBench-style eval results holding the same passes as the inputs here.

#: Live, max_turns 3: t/0 solved at turn 0, t/1 at turn 2, t/2 never, t/3 at turn 1.
_LIVE = [[True], [False, False, True], [False] * 4, [False, True]]


def test_exclude_init_solved_live_as_print_results():
    from convcodeworld_gym.metrics import live_episode_scores

    kept = live_episode_scores(_LIVE, max_turns=3)
    assert (kept.mrr, kept.recall, kept.init_solved_excluded) == (pytest.approx(0.4583333333333333), 0.75, 0)
    # get_mrr / get_recall(exclude_init_solved=True): 0.27777777777777773, 0.6666666666666666; printed "3/4"
    left = live_episode_scores(_LIVE, max_turns=3, exclude_init_solved=True)
    assert left.mrr == pytest.approx(0.27777777777777773) and left.recall == pytest.approx(0.6666666666666666)
    assert (left.n_tasks - left.init_solved_excluded, left.n_tasks) == (3, 4)
    assert left.pass_at_turn == kept.pass_at_turn  # Pass@1 keeps every task (pass_at_1 has no such option)
    assert live_scores([0, 0], max_turns=1, exclude_init_solved=True).mrr != live_scores([0], max_turns=1).mrr  # NaN: none left


def test_exclude_init_solved_static_as_print_results():
    # reference: t/1 passes at its turn 1; the model's own turn 0 passes t/0; its static turn 2 passes t/1 and t/2
    episodes = [
        ([False] * 4, {0: True, 1: False, 2: False, 3: False}),
        ([False, True], {0: False, 1: False, 2: True, 3: True}),
        ([False] * 4, {0: False, 1: False, 2: True, 3: False}),
        ([False] * 4, {0: False, 1: False, 2: False, 3: False}),
    ]
    kept = static_scores(episodes, max_turns=3)
    assert kept.mrr == pytest.approx(0.4583333333333333) and kept.recall == 0.75
    left = static_scores(episodes, max_turns=3, exclude_init_solved=True)  # get_mrr(option='static', ...)
    assert left.mrr == pytest.approx(0.27777777777777773) and left.recall == pytest.approx(0.6666666666666666)
    assert left.init_solved_excluded == 1 and left.pass_at_turn == kept.pass_at_turn


def test_live_pass_at_turn_follows_each_turn_of_an_episode_that_goes_on_after_its_pass():
    # pass_at_1 per turn of a task whose carried passing code failed again at turn 2 (a flaky test) and passed at 3,
    # next to one never solved: [0.0, 50.0, 0.0, 50.0]; get_mrr 0.25 (the walk stops at the first pass); get_recall 0.5
    from convcodeworld_gym.metrics import live_episode_scores

    s = live_episode_scores([[False, True, False, True], [False] * 4], max_turns=3)
    assert s.pass_at_turn == (0.0, 0.5, 0.0, 0.5) and s.mrr == 0.25 and s.recall == 0.5


def test_a_reference_log_that_goes_on_after_its_pass_is_read_turn_by_turn():
    # The reference's static run (run.py:275-311, pot.py:564 "Already solved") carries the reference's code at turn t
    # only when the reference's turn t-1 passed; its print_per_turn_results (option static) then gives 50.0, 50.0, 0.0
    # for a reference that passed at turn 1 and failed its carried code at turn 2 (task a; the model passes nothing
    # there), next to a task b the model passes at static turn 1; get_mrr 0.5, get_recall 1.0.
    episodes = [([False, True, False, True], {0: False, 1: False, 3: False}), ([False] * 4, {0: False, 1: True, 2: False, 3: False})]
    s = static_scores(episodes, max_turns=3)
    assert s.pass_at_turn == (0.5, 0.5, 0.0) and s.mrr == 0.5 and s.recall == 1.0


def test_fill_cf_from_turn_0_as_print_results():
    # A live run of CF EF(full) alone, max_turns 2: print_per_turn_results fills CF and CF SNF with pass_at_1 of the
    # initial results at every turn (25.0, 25.0, 25.0; CF EF(full): 25.0, 50.0, 75.0) and print_mrr_recall their MRR
    # and Recall with it too (25.0; CF EF(full): 45.8, 75.0), after asserting that every initial program compiles.
    from convcodeworld_gym.records import TurnRecord
    from convcodeworld_gym.runs.report import scores_by_combination

    def row(task: str, turn: int, passed: bool, code: str = "x = 1", compiles: bool = True) -> TurnRecord:
        return TurnRecord("CF-EF_full", task, turn, code, code, "", "", "", compiles, passed, float(passed), float(passed))

    rows = [row("t/0", 0, True), row("t/1", 0, False), row("t/1", 1, True), row("t/2", 0, False, "def f():\n    return 1"),
            row("t/2", 1, False), row("t/2", 2, False), row("t/3", 0, False), row("t/3", 1, False), row("t/3", 2, True)]
    scores = scores_by_combination(rows, max_turns=2, fill_cf=True)
    assert list(scores) == ["CF", "CF-EF_full", "CF-SNF"]
    percent = {name: s.as_percent() for name, s in scores.items()}
    assert percent["CF"]["pass_at_turn"] == percent["CF-SNF"]["pass_at_turn"] == [25.0, 25.0, 25.0]
    assert (percent["CF"]["mrr"], percent["CF"]["recall"]) == (25.0, 25.0)
    assert percent["CF-EF_full"]["pass_at_turn"] == [25.0, 50.0, 75.0]
    assert (percent["CF-EF_full"]["mrr"], percent["CF-EF_full"]["recall"]) == (45.8, 75.0)
    assert list(scores_by_combination(rows, max_turns=2)) == ["CF-EF_full"]  # off by default
    # a turn-0 program that does not compile: the reference's assertion (print_results.py:328) stops it; nothing is filled
    broken = [r if (r.task_id, r.turn) != ("t/2", 0) else row("t/2", 0, False, "def f(:", compiles=False) for r in rows]
    assert list(scores_by_combination(broken, max_turns=2, fill_cf=True)) == ["CF-EF_full"]
