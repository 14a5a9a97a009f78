"""The env against the reference's own code paths, one test per difference of issue 32 that a run shows.

Every expected text and count here was taken by running the reference's own functions (the public repository
sfc-gh-hhan/convcodeworld and its bigcodebench fork, unchanged) on the same programs; nothing of them is copied
into the package. How each was run:

* Execution: the fork's ``untrusted_check`` (bigcodebench/eval/__init__.py:164-207); for a hanging test its
  ``unsafe_execute`` (ibid. 108-161) in a process joined ``timeout + 1`` s later, as ``untrusted_check`` does, but
  with a 3 s suite timer instead of its fixed 121 s.
* Feedback text: ``ProgramOfThought.get_execution_feedback`` (convcodeworld/pot.py:449-494) on that result,
  compiled from pot.py's own source (pot.py imports dspy), with ``unit_test`` False (full) or True (partial).
* Turn 0 from samples: the fork's ``evaluate`` builds the program of a ``*-sanitized-calibrated.jsonl`` sample
  (bigcodebench/evaluate.py:134-142) and ``untrusted_check`` judges it; the next turn's compilation feedback is
  pot.py's ``compile_code`` (21-26) of the sample (``parse_code`` takes a string as it is, 416-417).
* Partial coverage names: ``extract_methods_from_class`` (convcodeworld/extract_methods.py:13-18) on every task.

The reference's tracebacks are those of the same Python (3.11) as this project's interpreter.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from convcodeworld_gym.env import ConvCodeWorldEnv
from convcodeworld_gym.extract import Sample
from convcodeworld_gym.feedback import PASSED_ALL_TEST_RUNS, execution_feedback, visible_tests
from convcodeworld_gym.feedback.execution import TIMED_OUT, reference_partial_names
from convcodeworld_gym.metrics import live_episode_scores
from convcodeworld_gym.protocol import ReferenceProtocol
from convcodeworld_gym.sandbox import Outcome
from convcodeworld_gym.tasks import Task
from convcodeworld_gym.testing.executor import FakeExecutor, canonical_rule

# ---------------------------------------------------------------- item 1: one block per failing subtest

#: BigCodeBench/1 (its tests use subTest), the program after its import header: lengths 10 and 150 count one
#: letter too many, length 5 raises, a negative length raises nothing.
SUBTESTS_CODE = (
    "def task_func(length=100):\n"
    "    if length == 5:\n"
    "        raise KeyError(length)\n"
    "    random_string = ''.join(random.choices(string.ascii_uppercase, k=length + (length in (10, 150))))\n"
    "    return dict(collections.Counter(random_string))\n"
)
#: get_execution_feedback (full) of the fork's result for the same program: failures (two subtests, then
#: test_negative_length), then errors (the subtest that raised), each subtest named with its parameters.
SUBTESTS_REFERENCE = (
    "TEST_GENERATED_STRING_PROPERTIES (LENGTH=10)\nTraceback (most recent call last):\n"
    '  File "__test__.py", line 24, in test_generated_string_properties\n'
    "AssertionError: 11 != 10 : Total counts should sum to 10\n\n\n"
    "TEST_GENERATED_STRING_PROPERTIES (LENGTH=150)\nTraceback (most recent call last):\n"
    '  File "__test__.py", line 24, in test_generated_string_properties\n'
    "AssertionError: 151 != 150 : Total counts should sum to 150\n\n\n"
    "TEST_NEGATIVE_LENGTH\nTraceback (most recent call last):\n"
    '  File "__test__.py", line 33, in test_negative_length\n'
    "AssertionError: ValueError not raised : Negative length should raise an error\n\n\n"
    "TEST_GENERATED_STRING_PROPERTIES (LENGTH=5)\nTraceback (most recent call last):\n"
    '  File "__test__.py", line 22, in test_generated_string_properties\n'
    '  File "__test__.py", line 6, in task_func\n'
    "KeyError: 5\n\n"
)


def _step(env: ConvCodeWorldEnv, task_id: str, action: str) -> tuple[dict, float, dict]:
    env.reset(options={"task_id": task_id})
    obs, reward, _, _, info = env.step(action)
    return obs, reward, info


def test_item_1_a_failing_subtest_is_a_block_named_with_its_parameters(bigcodebench, executor):
    with ConvCodeWorldEnv("CF-EF_full", dataset=bigcodebench, task_ids=["BigCodeBench/1"], executor=executor) as env:
        obs, _, info = _step(env, "BigCodeBench/1", SUBTESTS_CODE)
        assert obs["execution_feedback"] == SUBTESTS_REFERENCE
        generated = next(t for t in info["tests"] if t["name"] == "test_generated_string_properties")
        assert generated["outcome"] == "failed"  # the verdict is the test's: the subtests only add blocks
    with ConvCodeWorldEnv("CF-EF_partial", dataset=bigcodebench, task_ids=["BigCodeBench/1"], executor=executor) as env:
        obs, _, _ = _step(env, "BigCodeBench/1", SUBTESTS_CODE)
        # the reference's partial coverage (setUp, test_generated_string_properties, test_zero_length) matches no
        # subtest's key and test_negative_length is the 4th name: get_execution_feedback (partial) says
        assert obs["execution_feedback"] == PASSED_ALL_TEST_RUNS


#: A task whose subtest parameters hold dots: the reference keyed its blocks by ``test.id().split(".")[-1]``.
DOTS = Task("dots/0", "Double x.", "def task_func(x):\n", "task_func", "    return x * 2\n",
            "import unittest\nclass TestCases(unittest.TestCase):\n    def test_values(self):\n"
            "        for value in (0.5, 1.5, 2.0):\n            with self.subTest(value=value):\n"
            "                self.assertEqual(task_func(value), value * 2)\n")
DOTS_CODE = "def task_func(x):\n    return x * 2 if x == 2.0 else x\n"


def test_item_1_subtest_keys_are_cut_at_their_last_dot_as_the_reference_cut_them(executor):
    result = executor.run(DOTS, DOTS_CODE)
    # untrusted_check's details: {"5)": <the 1.5 failure>} (both keys were "5)": the later text in the first place)
    assert execution_feedback(result, "full") == (
        '5)\nTraceback (most recent call last):\n  File "__test__.py", line 9, in test_values\nAssertionError: 1.5 != 3.0\n\n'
    )
    corrected = execution_feedback(result, "full", style="corrected")
    assert corrected.startswith("TEST_VALUES (VALUE=0.5)\n") and "\n\nTEST_VALUES (VALUE=1.5)\n" in corrected


def test_item_1_subtest_entries_are_sealed_and_never_decide_an_outcome(executor):
    import os

    from convcodeworld_gym.sandbox import Limits
    from convcodeworld_gym.sandbox.messages import Done, End, Fault, Start, seal
    from convcodeworld_gym.sandbox.run.events import PROTOCOL_VIOLATION, assemble, collect_events, new_token

    token = new_token()
    for line in (Fault("test_a", "t (x=1)", "failures", "tb").to_wire() + b"\n",  # unsealed
                 seal(Fault("test_a", "t (x=1)", "passed", "tb"), token)):  # sealed, but no list of unittest's
        read_fd, write_fd = os.pipe()
        os.write(write_fd, seal(Start("test_a"), token) + line + seal(Done(), token))
        os.close(write_fd)
        try:
            _, stop = collect_events(read_fd, Limits(suite_timeout_s=5), lambda: True, token)
        finally:
            os.close(read_fd)
        assert stop == PROTOCOL_VIOLATION
    # a test's outcome is its End's, whatever entries came before it
    events = [Start("test_a"), Fault("test_a", "__test__.TestCases.test_a (x=1)", "failures", "tb"), End("test_a", "passed", ""), Done()]
    result = assemble(("test_a",), events, None, "ended", Limits())
    assert result.passed and result.tests[0].faults[0].id.endswith("(x=1)")
    # a program cannot make a subtest of a test that fails pass it, nor a passing subtest fail it
    catching = DOTS_CODE.replace("return x * 2 if", "import unittest\n    unittest.TestCase.subTest = None\n    return x * 2 if")
    assert not executor.run(DOTS, catching).passed and executor.run(DOTS, "def task_func(x):\n    return x * 2\n").passed


# ---------------------------------------------------------------- item 2: partial coverage as the reference's


def test_item_2_partial_coverage_names_are_the_references_first_three_function_names(bigcodebench):
    # extract_methods_from_class(test)[:3] on all 1140 tasks: 475 differ from the first 3 test methods; the digest is
    # of json.dumps([task_id, names]) + "\n" per task, in the dataset's order.
    digest, differ = hashlib.sha256(), 0
    for task in bigcodebench:
        names = reference_partial_names(task.test)[:3]
        differ += names != task.test_names[:3]
        digest.update(json.dumps([task.task_id, list(names)]).encode() + b"\n")
    assert (len(bigcodebench), differ) == (1140, 475)
    assert digest.hexdigest() == "7fd253a8ab74ad9201cc813bd9e501f3f74a310deeea5a10d0c1ab90d6d644cf"
    assert visible_tests(bigcodebench["BigCodeBench/1"]) == ("setUp", "test_generated_string_properties", "test_zero_length")
    assert visible_tests(bigcodebench["BigCodeBench/1"], "corrected") == bigcodebench["BigCodeBench/1"].test_names[:3]


def test_item_2_a_crash_reads_passed_under_the_references_partial_coverage_and_not_under_the_corrected(bigcodebench, executor):
    crash = "raise RuntimeError('at import')\n" + SUBTESTS_CODE
    for style, expected in (("reference", PASSED_ALL_TEST_RUNS), ("corrected", "ALL\nat import\n")):
        with ConvCodeWorldEnv("CF-EF_partial", dataset=bigcodebench, task_ids=["BigCodeBench/1"], executor=executor,
                              feedback_style=style) as env:
            obs, reward, info = _step(env, "BigCodeBench/1", crash)
            assert (obs["execution_feedback"], reward) == (expected, 0.0)
            assert info["actionable"] == (style == "corrected")  # the reference's protocol does not call its model


# ---------------------------------------------------------------- item 3: a test hangs while others fail

#: BigCodeBench/1, after its header: every length counts one letter too many, a negative length never returns.
HANG_CODE = (
    "def task_func(length=100):\n"
    "    if length < 0:\n"
    "        while True:\n"
    "            pass\n"
    "    random_string = ''.join(random.choices(string.ascii_uppercase, k=length + 1))\n"
    "    return dict(collections.Counter(random_string))\n"
)
_HANG_SUBTEST = (
    "TEST_GENERATED_STRING_PROPERTIES (LENGTH={n})\nTraceback (most recent call last):\n"
    '  File "__test__.py", line 25, in test_generated_string_properties\n'
    "AssertionError: {m} != {n} : Total counts should sum to {n}\n\n\n"
)
#: get_execution_feedback (full) of unsafe_execute's result: the timer raised TimeoutException in
#: test_negative_length and the suite went on to test_zero_length. The reference's block of the hanging test also
#: had the frames it was in, between its first line and the timer's frame:
#:   File "__test__.py", line 35, in test_negative_length
#:   File "__test__.py", line 6, in task_func
#: and the timer's frame named its installed path (.../bigcodebench/bigcodebench/eval/utils.py); the sandbox stops a
#: hanging test from outside, so ours shows the timer's frame alone (TIMED_OUT), path normalised.
HANG_REFERENCE = (
    "".join(_HANG_SUBTEST.format(n=n, m=n + 1) for n in (10, 50, 100, 150))
    + "TEST_GENERATED_STRING_PROPERTIES (LENGTH=5)\nTraceback (most recent call last):\n"
    '  File "__test__.py", line 24, in test_generated_string_properties\n'
    "AssertionError: False is not true : Length of result should be <= requested string length\n\n\n"
    "TEST_ZERO_LENGTH\nTraceback (most recent call last):\n"
    '  File "__test__.py", line 30, in test_zero_length\n'
    "AssertionError: 1 != 0 : Result should be empty for zero length\n\n\n"
    "TEST_NEGATIVE_LENGTH\n" + TIMED_OUT + "\n"
)


def test_item_3_a_hanging_test_among_failing_ones_shows_them_all_and_times_out_in_its_own_block(bigcodebench, quick_executor):
    with ConvCodeWorldEnv("CF-EF_full", dataset=bigcodebench, task_ids=["BigCodeBench/1"], executor=quick_executor) as env:
        obs, _, info = _step(env, "BigCodeBench/1", HANG_CODE)
    outcomes = {t["name"]: t["outcome"] for t in info["tests"]}
    # the verdict is the run's: test_zero_length never ran in it; the feedback ran it apart, as the reference's went on
    assert outcomes == {"test_generated_string_properties": "failed", "test_zero_length": "not_run", "test_negative_length": "timeout"}
    assert obs["execution_feedback"] == HANG_REFERENCE
    assert TIMED_OUT.endswith("TimeoutException: Timed out!\n")
    with ConvCodeWorldEnv("CF-EF_partial", dataset=bigcodebench, task_ids=["BigCodeBench/1"], executor=quick_executor) as env:
        obs, _, _ = _step(env, "BigCodeBench/1", HANG_CODE)
    # get_execution_feedback (partial): of setUp, test_generated_string_properties and test_zero_length, only the last
    # has a block of that key
    assert obs["execution_feedback"] == (
        "TEST_ZERO_LENGTH\nTraceback (most recent call last):\n"
        '  File "__test__.py", line 30, in test_zero_length\n'
        "AssertionError: 1 != 0 : Result should be empty for zero length\n\n"
    )


# ---------------------------------------------------------------- items 5 and 6: turn 0 from samples

#: A sanitized-calibrated sample of BigCodeBench/667 whose docstring holds a fenced example.
FENCED_SAMPLE = (
    "import heapq\nimport collections\n\ndef task_func(x, n):\n"
    '    """\n    Find the n most common letters in a dictionary of letter frequencies.\n\n    Example:\n'
    "    ```python\n        >>> task_func({'a': 1, 'b': 2, 'c': 3}, 2)\n        ['c', 'b']\n    ```\n"
    '    """\n    counter = collections.Counter(x)\n    return heapq.nlargest(n, counter.keys(), key=counter.get)\n'
)
#: A calibrated sample that is the function's body alone: code_prompt + "\n    pass\n" makes it task_func's.
BODY_SAMPLE = "    counter = collections.Counter(x)\n    return heapq.nlargest(n, counter.keys(), key=counter.get)\n"


def test_item_5_a_sample_is_code_not_a_reply(bigcodebench, executor):
    with ConvCodeWorldEnv("CF-EF_full", dataset=bigcodebench, task_ids=["BigCodeBench/667"], executor=executor) as env:
        obs, reward, _ = _step(env, "BigCodeBench/667", Sample(FENCED_SAMPLE, calibrated=True))
        assert (reward, obs["code"]) == (1.0, FENCED_SAMPLE)  # untrusted_check: "pass"
        obs, reward, _ = _step(env, "BigCodeBench/667", FENCED_SAMPLE)  # as a reply, its fenced example is "the code"
        assert reward == 0.0 and obs["compilation_feedback"].endswith("IndentationError: unexpected indent\n")


def test_item_6_a_calibrated_sample_runs_as_code_prompt_pass_and_solution(bigcodebench, executor):
    with ConvCodeWorldEnv("CF-EF_full", dataset=bigcodebench, task_ids=["BigCodeBench/667"], executor=executor) as env:
        obs, reward, info = _step(env, "BigCodeBench/667", Sample("", calibrated=True))
        # untrusted_check of code_prompt + "\n    pass\n": get_execution_feedback (full)
        assert reward == 0.0 and obs["compilation_feedback"] == "No syntax errors"
        assert obs["execution_feedback"] == "".join(
            f'TEST_CASE_{i}\nTraceback (most recent call last):\n  File "__test__.py", line {8 + 2 * i}, in test_case_{i}\n'
            f"AssertionError: None != {expected}\n\n" + ("\n" if i < 5 else "")
            for i, expected in enumerate(["['c', 'b']", "['c']", "['c', 'b', 'a']", "[]", "['c', 'b', 'a']"], start=1)
        )
        obs, reward, info = _step(env, "BigCodeBench/667", Sample(BODY_SAMPLE, calibrated=True))
        # untrusted_check: "pass"; compile_code of the sample itself (the next turn's CF): its IndentationError
        assert reward == 1.0 and not info["compile_ok"]
        assert obs["compilation_feedback"] == (
            "Traceback (most recent call last):\n"
            '  File "pot.py", line 23, in compile_code\n'
            "    compile(code, 'tmp.py', mode='exec')\n"
            '  File "tmp.py", line 1\n'
            "    counter = collections.Counter(x)\n"
            "IndentationError: unexpected indent\n"
        )
        _, reward, _ = _step(env, "BigCodeBench/667", Sample(BODY_SAMPLE))  # not calibrated: the solution alone
        assert reward == 0.0


# ---------------------------------------------------------------- item 9: the passing code executed again


def test_item_9_rerun_passed_executes_the_carried_passing_code_again_so_pass_at_1_can_dip(humaneval):
    task = humaneval["HumanEval/0"]
    runs = []

    def flaky(t: Task, program: str) -> dict[str, Outcome]:
        outcomes = canonical_rule(t, program)
        runs.append(program)
        if len(runs) == 3:  # the carried passing code's first re-execution meets a flaky test
            return {name: Outcome.FAILED for name in outcomes}
        return outcomes

    wrong = "def has_close_elements(numbers, threshold):\n    return None"
    fake = FakeExecutor(flaky)
    turns = []
    env = ReferenceProtocol(ConvCodeWorldEnv("CF-EF_full", dataset=humaneval, task_ids=[task.task_id], executor=fake,
                                             max_turns=3, rerun_passed=True))
    env.reset(options={"task_id": task.task_id})
    for reply in (wrong, task.ground_truth, task.ground_truth):
        *_, terminated, truncated, info = env.step(reply)
        turns.extend(info["turns"])
    assert (terminated, truncated) == (False, True)
    # turn 1 passed; turn 2 carried it (no model call) and its flaky test failed it; turn 3 is the model's again
    assert [t["info"]["passed"] for t in turns] == [False, True, False, True]
    assert turns[2]["model_calls"] == 0 and turns[2]["action"] == turns[1]["obs"]["code"] and len(runs) == 4
    # pass_at_1 per turn of such results: 0.0, 100.0, 0.0, 100.0 (the reference's curve dips too)
    assert live_episode_scores([[t["info"]["passed"] for t in turns]], max_turns=3).pass_at_turn == (0.0, 1.0, 0.0, 1.0)
    env.close()
    # the default: the episode ends at the pass
    with ConvCodeWorldEnv("CF-EF_full", dataset=humaneval, task_ids=[task.task_id], executor=FakeExecutor()) as plain:
        plain.reset(options={"task_id": task.task_id})
        assert plain.step(task.ground_truth)[2] is True
