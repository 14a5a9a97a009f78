"""``shown_info``: of a step's info, only what its execution feedback could show (the episode server sends it)."""

from __future__ import annotations

import copy

import pytest

from convcodeworld_gym.feedback.shown import shown_info

PUBLIC = ("test_1", "test_2", "test_3")


def _info(execution: str | None, outcomes: list[str], crash: str | None = None) -> dict:
    tests = [{"name": f"test_{i + 1}", "outcome": outcome, "traceback": f"trace of test_{i + 1}"}
             for i, outcome in enumerate(outcomes)]
    return {"feedback_shown": {"compilation": True, "execution": execution, "verbal": None}, "tests": tests,
            "crash": crash, "pass_fraction": 0.0}


@pytest.mark.parametrize("execution, traced", [("full", [1, 2, 3, 4, 5]), ("partial", [1, 2, 3]), (None, [])])
def test_a_traceback_stays_only_on_a_test_the_feedback_covers(execution, traced):
    info = _info(execution, ["failed"] * 5)
    before = copy.deepcopy(info)
    shown = shown_info(info, PUBLIC)
    assert [t["traceback"] is not None for t in shown["tests"]] == [i + 1 in traced for i in range(5)]
    assert [t["outcome"] for t in shown["tests"]] == ["failed"] * 5
    assert info == before  # the caller's info is never changed


@pytest.mark.parametrize("execution, outcomes, kept", [
    ("full", ["passed", "passed", "passed", "not_run", "not_run"], True),
    ("partial", ["passed", "not_run", "not_run", "not_run", "not_run"], True),   # it came in a public test
    ("partial", ["timeout", "not_run", "not_run", "not_run", "not_run"], True),
    ("partial", ["passed", "passed", "passed", "error", "not_run"], False),      # after every public test reported
    ("partial", ["passed", "passed", "failed", "not_run", "not_run"], False),
    (None, ["not_run"] * 5, False),
])
def test_a_crash_is_sent_only_where_the_feedback_could_show_it(execution, outcomes, kept):
    shown = shown_info(_info(execution, outcomes, crash="SystemExit: (144, 60)"), PUBLIC)
    assert (shown["crash"] is not None) == kept


def test_a_resets_info_passes_unchanged():
    info = {"task_id": "HumanEval/13", "turn": 0, "test_names": ["test_1", "test_4"]}
    assert shown_info(info, PUBLIC) == info
