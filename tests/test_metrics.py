"""Metrics against hand-computed values, including every branch of the static definitions."""

from __future__ import annotations

import pytest

from convcodeworld_gym.metrics import live_scores, spearman, static_credit_turn, static_recall, static_scores


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
    # neither ever: no credit; the model's turn 0 alone gives Recall but no MRR
    assert static_credit_turn([False] * 11, {i: False for i in range(11)}) is None
    assert static_recall([False] * 11, {0: True}) is True
    assert static_recall([False] * 11, {0: False}) is False
    # a model pass at turn 10 is the last creditable one
    assert static_credit_turn([False] * 10, {10: True}) == 10


def test_static_scores_hand_computed():
    s = static_scores(
        [
            ([True], {}),  # 1
            ([False, True], {1: False}),  # 1/2
            ([False, False, False], {1: False, 2: True}),  # 1/3
            ([False] * 11, {0: True}),  # recall only
            ([False] * 11, {}),  # nothing
        ]
    )
    assert s.mrr == pytest.approx((1 + 1 / 2 + 1 / 3) / 5)
    assert s.recall == pytest.approx(4 / 5)
    assert s.pass_at_turn[:3] == pytest.approx((0.2, 0.4, 0.6))
    assert s.pass_at_turn[10] == pytest.approx(0.6)


def test_spearman():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [40, 30, 20, 10]) == pytest.approx(-1.0)
    with pytest.raises(ValueError):
        spearman([1], [1])
