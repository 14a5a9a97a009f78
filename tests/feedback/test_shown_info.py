"""``shown_info``: of a step's info, only what its execution feedback could show (the episode server sends it). The
program owns what happens on a hidden test, so nothing per hidden test may cross: no traceback, no outcome, no time
(a red-team helper read a hidden input back from ``timings``, one character a turn, when they crossed)."""

from __future__ import annotations

import copy

import gymnasium as gym
import pytest

from convcodeworld_gym.env import Timings
from convcodeworld_gym.feedback.shown import shown_info

PUBLIC = ("test_1", "test_2", "test_3")


def _info(execution: str | None, outcomes: list[str], crash: str | None = None) -> dict:
    tests = [{"name": f"test_{i + 1}", "outcome": outcome, "traceback": f"trace of test_{i + 1}"}
             for i, outcome in enumerate(outcomes)]
    return {"feedback_shown": {"compilation": True, "execution": execution, "verbal": None}, "tests": tests,
            "crash": crash, "limits_hit": ["time"] if crash else [], "pass_fraction": 0.0, "public_pass_fraction": 0.0,
            "hidden_pass_fraction": 0.0, "regressed_tests": ["test_2", "test_5"],
            "timings": Timings(compile_s=0.001, execute_s=2.5, verbal_s=0.1, step_s=2.6),
            "verbal_feedback_details": {"source": "offline", "leak": {"hidden_literals_redacted": 1}}}


@pytest.mark.parametrize("execution, listed", [("full", [1, 2, 3, 4, 5]), ("partial", [1, 2, 3]), (None, [])])
def test_only_the_tests_the_feedback_covers_are_listed(execution, listed):
    info = _info(execution, ["failed"] * 5)
    before = copy.deepcopy(info)
    shown = shown_info(info, PUBLIC)
    assert [t["name"] for t in shown["tests"]] == [f"test_{i}" for i in listed]
    assert all(t["traceback"] for t in shown["tests"])
    assert shown["regressed_tests"] == [f"test_{i}" for i in (2, 5) if i in listed]
    assert info == before  # the caller's info is never changed


@pytest.mark.parametrize("execution, fractions", [("full", (0.0, 0.0, 0.0)), ("partial", (None, 0.0, None)),
                                                  (None, (None, None, None))])
def test_counts_and_times_of_hidden_tests_never_cross(execution, fractions):
    shown = shown_info(_info(execution, ["failed"] * 5), PUBLIC)
    assert (shown["pass_fraction"], shown["public_pass_fraction"], shown["hidden_pass_fraction"]) == fractions
    timings = shown["timings"]
    assert timings.compile_s == 0.001
    hidden = execution != "full"
    assert (timings.execute_s is None, timings.step_s is None, "leak" not in shown["verbal_feedback_details"]) == \
        (hidden, hidden, hidden)


@pytest.mark.parametrize("execution, outcomes, kept", [
    ("full", ["passed", "passed", "passed", "not_run", "not_run"], True),
    ("partial", ["passed", "not_run", "not_run", "not_run", "not_run"], True),   # it came in a public test
    ("partial", ["timeout", "not_run", "not_run", "not_run", "not_run"], True),
    ("partial", ["passed", "passed", "passed", "error", "not_run"], False),      # after every public test reported
    ("partial", ["passed", "passed", "failed", "not_run", "not_run"], False),
    (None, ["not_run"] * 5, False),
])
def test_a_crash_and_its_limit_are_sent_only_where_the_feedback_could_show_them(execution, outcomes, kept):
    shown = shown_info(_info(execution, outcomes, crash="SystemExit: (144, 60)"), PUBLIC)
    assert (shown["crash"] is not None, shown["limits_hit"] == ["time"]) == (kept, kept)


def test_a_resets_info_passes_unchanged():
    info = {"task_id": "HumanEval/13", "turn": 0, "test_names": ["test_1", "test_4"]}
    assert shown_info(info, PUBLIC) == info


def test_a_program_that_fails_a_hidden_test_by_its_input_writes_nothing_a_client_reads(executor):
    """HumanEval/13 (test_4 hidden under partial EF): a program right on the public tests that, on the hidden input,
    returns a wrong value when its first number is even and raises when it is odd, and its twin with the two ways
    swapped: the runner's info tells them apart by test_4's outcome (failed / error), the shown info does not."""
    env = gym.make("ConvCodeWorld-CF-EF_partial-v0", dataset="humaneval", executor=executor)
    kept, shown = [], []
    for parity in (0, 1):
        env.reset(options={"task_id": "HumanEval/13"})
        code = (f"import math\nseen = []\ndef greatest_common_divisor(a, b):\n    seen.append(a)\n"
                f"    if len(seen) > 3:\n        if a % 2 == {parity}:\n            return -1\n"
                f"        raise ValueError('odd')\n    return math.gcd(a, b)\n")
        *_, info = env.step(code)
        kept.append([t["outcome"] for t in info["tests"]])
        shown.append(shown_info(info, env.unwrapped.task.public_tests))
        shown[-1].pop("timings")
    env.close()
    assert kept == [["passed"] * 3 + ["failed"], ["passed"] * 3 + ["error"]]  # 144 is even
    assert [t["outcome"] for t in shown[0]["tests"]] == ["passed"] * 3
    assert shown[0] == shown[1]
