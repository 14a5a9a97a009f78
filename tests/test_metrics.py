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
