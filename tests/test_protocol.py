"""The reference's turn protocol: model calls per episode for every combination and four task
histories, counted at a real OpenAI-compatible server (the scripted one on 127.0.0.1) driven by
the real ``openai`` client through ``convcodeworld evaluate``'s runner.

What is tested is when the model is called, given each program's outcome: the programs are judged
by the deterministic :class:`~convcodeworld_gym.testing.executor.FakeExecutor` from a table (RIGHT
passes, WRONG fails every test, PARTIAL passes the 3 shown tests and fails the hidden one), and
``test_the_fake_judges_these_programs_as_the_sandbox_does`` checks that table against the real sandbox.

The expected counts are worked out by hand from the reference's ``pot.py`` ``forward`` (see
REFERENCE.md, "The reference's turn protocol"); turn 0 is one call (no ``--turn0`` file).
"""

from __future__ import annotations

import json

import pytest

from convcodeworld_gym.combos import ALL_CONFIGS
from convcodeworld_gym.errors import ContextOverflow
from convcodeworld_gym.runs.evaluate import EvalConfig, run_evaluation
from convcodeworld_gym.policies import OpenAIPolicy
from convcodeworld_gym.protocol import act_with_retrim
from convcodeworld_gym.records import read_turns
from convcodeworld_gym.registration import env_id
from convcodeworld_gym.sandbox import Outcome
from convcodeworld_gym.testing.executor import FakeExecutor, table_rule
from convcodeworld_gym.testing.openai_server import Reply, ScriptedOpenAIServer

TEST = """import unittest
class TestCases(unittest.TestCase):
    def test_1(self):
        self.assertEqual(task_func(1), 2)
    def test_2(self):
        self.assertEqual(task_func(2), 4)
    def test_3(self):
        self.assertEqual(task_func(3), 6)
    def test_4(self):
        self.assertEqual(task_func(-5), -10)
"""
TASK = {
    "task_id": "double/0",
    "instruct_prompt": "Return twice x.",
    "code_prompt": "def task_func(x):\n",
    "canonical_solution": "    return 2 * x\n",
    "test": TEST,
    "entry_point": "task_func",
}
RIGHT = "```python\ndef task_func(x):\n    return 2 * x\n```"
WRONG = "```python\ndef task_func(x):\n    return 0\n```"  # compiles, fails every test
PARTIAL = "```python\ndef task_func(x):\n    return abs(2 * x)\n```"  # passes the 3 shown tests, fails the hidden one
BROKEN = "```python\ndef task_func(x)\n    return 2 * x\n```"  # does not compile


def _first_request(body: dict) -> bool:
    return "Previous code:" not in body["messages"][-1]["content"]


HISTORIES = {
    "passes_at_once": lambda body: RIGHT,
    "compiles_but_fails": lambda body: WRONG,
    "fails_to_compile_then_compiles": lambda body: BROKEN if _first_request(body) else WRONG,
    "partial_tests_pass_hidden_fail": lambda body: PARTIAL,
}

# combination -> calls per episode, per history (in HISTORIES' order), from the reference's forward():
#   compiles, fails: CF / CF SNF never speak on code that compiles (1: turn 0 only); every other
#     combination shows a failure or has an expert: 1 + 10.
#   fails to compile at turn 0, then compiles: turn 1 is one compile-fix call, plus one follow-up
#     call when the failed program's EF showed a failure or the expert speaks (CF: 1 + 1; EF or
#     SEF: 1 + 2 + 9); under SNF the novice speaks instead of the compile fix (CF SNF: 1 + 1;
#     with EF: 1 + 1 + 9).
#   partial pass: EF(partial) shows "Passed all test runs", so without an expert nobody speaks.
EXPECTED = {
    "CF": (1, 1, 2, 1),
    "CF-EF_partial": (1, 11, 11, 1),
    "CF-EF_full": (1, 11, 12, 11),
    "CF-SNF": (1, 1, 2, 1),
    "CF-EF_partial-SNF": (1, 11, 11, 1),
    "CF-EF_full-SNF": (1, 11, 11, 11),
    "CF-SEF": (1, 11, 12, 11),
    "CF-EF_partial-SEF": (1, 11, 12, 11),
    "CF-EF_full-SEF": (1, 11, 12, 11),
}
# The reference's EF(partial) keeps only the blocks of its first 3 function names (pot.py:454-459), so the `ALL`
# block of a program that does not compile reads "Passed all test runs": no follow-up call. The "corrected"
# feedback style shows it, and that cell has one call more (test_the_corrected_style_...).
CORRECTED = {("CF-EF_partial", "fails_to_compile_then_compiles"): 12}


#: Each program's outcomes, as the sandbox gives them (checked below).
OUTCOMES = {
    RIGHT: True,
    WRONG: False,
    PARTIAL: {"test_1": Outcome.PASSED, "test_2": Outcome.PASSED, "test_3": Outcome.PASSED, "test_4": Outcome.FAILED},
}


@pytest.fixture(scope="module")
def executor():
    """The fake judge of this module's programs (replaces conftest's sandbox here)."""
    from convcodeworld_gym.extract import extract_code

    return FakeExecutor(table_rule({extract_code(reply): outcome for reply, outcome in OUTCOMES.items()}))


def test_the_fake_judges_these_programs_as_the_sandbox_does(task_file, executor, local_executor):
    from convcodeworld_gym.extract import build_program, extract_code
    from convcodeworld_gym.tasks import load_tasks

    task = load_tasks(task_file)["double/0"]
    for reply in OUTCOMES:
        program = build_program(task, extract_code(reply))
        fake, real = executor.run(task, program), local_executor.run(task, program)
        assert [(t.name, t.outcome) for t in fake.tests] == [(t.name, t.outcome) for t in real.tests], reply


@pytest.fixture(scope="module")
def task_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("tasks") / "double.jsonl"
    path.write_text(json.dumps(TASK) + "\n", encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("history", list(HISTORIES))
def test_model_calls_per_episode_follow_the_reference(history, task_file, executor, tmp_path, monkeypatch):
    for name in ("CONVCODEWORLD_SIMULATOR_BASE_URL", "CONVCODEWORLD_SIMULATOR_MODEL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)  # the offline user simulator
    with ScriptedOpenAIServer(HISTORIES[history]) as server:
        policy = OpenAIPolicy("scripted", base_url=server.base_url, api_key="test-key", max_retries=0)
        config = EvalConfig(ids=tuple(env_id(c.name) for c in ALL_CONFIGS), dataset=task_file, concurrency=1,
                            verbal_env_kwargs={"simulator_kwargs": {"backend": "offline"}})
        run_evaluation(config, policy, tmp_path, executor=executor, progress=None, log=lambda line: None)
        policy.close()
        requests = len(server.chat_requests)
    rows = read_turns(tmp_path)
    calls = {c.name: sum(r.model_calls for r in rows if r.feedback == c.name) for c in ALL_CONFIGS}
    column = list(HISTORIES).index(history)
    assert calls == {name: counts[column] for name, counts in EXPECTED.items()}
    assert requests == sum(calls.values())  # every call the rows count reached the server, and no other
    # every episode has its 11 turns (or ends at the pass); carried turns hold the previous code
    for c in ALL_CONFIGS:
        episode = [r for r in rows if r.feedback == c.name]
        assert [r.turn for r in episode] == list(range(len(episode)))
        assert len(episode) == (1 if history == "passes_at_once" else 11)
        for before, row in zip(episode, episode[1:]):
            if row.model_calls == 0:
                assert row.code == before.code


def test_the_corrected_style_shows_a_crash_under_partial_coverage_and_calls_the_model_on_it(task_file, executor, tmp_path):
    (name, history), count = next(iter(CORRECTED.items()))
    with ScriptedOpenAIServer(HISTORIES[history]) as server:
        policy = OpenAIPolicy("scripted", base_url=server.base_url, api_key="test-key", max_retries=0)
        config = EvalConfig(ids=(env_id(name),), dataset=task_file, concurrency=1, feedback_style="corrected")
        run_evaluation(config, policy, tmp_path, executor=executor, progress=None, log=lambda line: None)
        policy.close()
    rows = read_turns(tmp_path)
    assert sum(r.model_calls for r in rows) == count == EXPECTED[name][list(HISTORIES).index(history)] + 1
    assert rows[0].execution_feedback.startswith("ALL\nexpected ':'")


def test_always_protocol_calls_every_turn(task_file, executor, tmp_path):
    with ScriptedOpenAIServer(HISTORIES["fails_to_compile_then_compiles"]) as server:
        policy = OpenAIPolicy("scripted", base_url=server.base_url, api_key="test-key", max_retries=0)
        config = EvalConfig(ids=(env_id("CF"), env_id("CF-EF_partial")), dataset=task_file, concurrency=1, protocol="always")
        run_evaluation(config, policy, tmp_path, executor=executor, progress=None, log=lambda line: None)
        policy.close()
        assert len(server.chat_requests) == 22
    assert {r.model_calls for r in read_turns(tmp_path)} == {1}


def test_compile_fixes_stop_after_three_calls(task_file, executor, tmp_path):
    """A model that never compiles: 3 compile-fix calls per turn, the last reply is judged."""
    with ScriptedOpenAIServer(lambda body: BROKEN) as server:
        policy = OpenAIPolicy("scripted", base_url=server.base_url, api_key="test-key", max_retries=0)
        config = EvalConfig(ids=(env_id("CF-EF_full"),), dataset=task_file, concurrency=1, max_turns=2)
        run_evaluation(config, policy, tmp_path, executor=executor, progress=None, log=lambda line: None)
        policy.close()
        fix_prompts = [b["messages"][-1]["content"] for b in server.chat_requests[1:]]
    rows = read_turns(tmp_path)
    assert [r.model_calls for r in rows] == [1, 3, 3] and len(fix_prompts) == 6
    # compile fixes show the compilation feedback alone, never execution feedback
    assert all("Compilation feedback" in p and "Execution feedback" not in p for p in fix_prompts)
    # the reference's EF of code that does not compile: ALL and the SyntaxError's text
    assert rows[0].execution_feedback == "ALL\nexpected ':' (__test__.py, line 1)\n"


# ---------------------------------------------------------------- context overflow

VLLM_OVERFLOW = "This model's maximum context length is 4096 tokens. However, you requested 9000 tokens (7000 in the messages, 2048 in the completion)."


def test_context_overflow_retrims_the_execution_feedback():
    long_ef = "\n".join(f"TEST_{i}\n" + "x" * 900 for i in range(20))  # 18 000 characters, 40 lines
    limit = 4500

    def script(body):
        return Reply(status=400, content=VLLM_OVERFLOW) if len(body["messages"][-1]["content"]) > limit else RIGHT

    with ScriptedOpenAIServer(script) as server:
        policy = OpenAIPolicy("scripted", base_url=server.base_url, api_key="test-key", max_retries=0)
        episode = policy.start(None, feedback="CF-EF_full", seed=0)  # type: ignore[arg-type]
        obs = {"task": "Return twice x.", "code": "def task_func(x):\n    return 0", "compilation_feedback": "No syntax errors",
               "execution_feedback": long_ef[:7000], "verbal_feedback": "", "turn": 1}
        reply = act_with_retrim(episode.act, obs, long_ef)
        policy.close()
        sizes = [len(b["messages"][-1]["content"]) for b in server.chat_requests]
    assert reply.text == RIGHT
    # the shown EF, then the reference's windows (2000, 4000), (2000, 3000), ... until one fits
    assert all(size > limit for size in sizes[:-1]) and sizes[-1] <= limit and len(sizes) >= 3
    assert sizes == sorted(sizes, reverse=True)


def test_context_overflow_without_execution_feedback_is_raised():
    def act(observation):
        raise ContextOverflow("too long")

    with pytest.raises(ContextOverflow):
        act_with_retrim(act, {"execution_feedback": ""})
    seen = []

    def act_counting(observation):
        seen.append(len(observation["execution_feedback"]))
        raise ContextOverflow("too long")

    with pytest.raises(ContextOverflow):
        act_with_retrim(act_counting, {"execution_feedback": "line\n" * 3000})
    assert len(seen) == 1 + 7  # the shown text, then every window down to (0, 0)


# ---------------------------------------------------------------- turn 0 from BigCodeBench samples


def _samples(tmp_path, solution: str):
    path = tmp_path / "samples.jsonl"
    path.write_text(json.dumps({"task_id": "double/0", "solution": solution}) + "\n", encoding="utf-8")
    return str(path)


def _run(tmp_path, name, script, task_file, executor, ids, **config):
    with ScriptedOpenAIServer(script) as server:
        policy = OpenAIPolicy("scripted", base_url=server.base_url, api_key="test-key", max_retries=0)
        run_evaluation(EvalConfig(ids=ids, dataset=task_file, concurrency=1, **config), policy, tmp_path / name,
                       executor=executor, progress=None, log=lambda line: None)
        policy.close()
        return read_turns(tmp_path / name), len(server.chat_requests)


def test_turn0_samples_in_live_runs(task_file, executor, tmp_path):
    from convcodeworld_gym.runs.log_scores import live_run_scores

    right = "def task_func(x):\n    return 2 * x\n"
    rows, requests = _run(tmp_path, "right", lambda b: WRONG, task_file, executor, (env_id("CF-EF_full"),),
                          turn0=_samples(tmp_path, right))
    assert requests == 0 and [(r.turn, r.passed, r.model_calls, r.reply) for r in rows] == [(0, True, 0, right)]
    wrong = "def task_func(x):\n    return 0\n"
    rows, requests = _run(tmp_path, "wrong", lambda b: RIGHT, task_file, executor, (env_id("CF-EF_full"),),
                          turn0=_samples(tmp_path, wrong))
    assert requests == 1 and [(r.turn, r.passed, r.model_calls) for r in rows] == [(0, False, 0), (1, True, 1)]
    assert live_run_scores(rows, "CF-EF_full").mrr == 0.5


def test_turn0_samples_in_static_runs(task_file, executor, tmp_path):
    from convcodeworld_gym.runs.log_scores import run_scores

    reference, _ = _run(tmp_path, "reference", lambda b: WRONG, task_file, executor, (env_id("CF-EF_full"),), protocol="always")
    assert not any(r.passed for r in reference)
    static_id = "ConvCodeBench-CF-EF_full-v0"
    kwargs = {"env_kwargs": {"log": str(tmp_path / "reference")}}
    rows, requests = _run(tmp_path, "static", lambda b: RIGHT, task_file, executor, (static_id,),
                          turn0=_samples(tmp_path, "def task_func(x):\n    return 2 * x\n"), **kwargs)
    # turn 0: the sample, judged without a call; then every static turn is written anew (no stop at the pass)
    assert rows[0].turn == 0 and rows[0].passed and rows[0].model_calls == 0 and rows[0].reference
    assert [r.turn for r in rows] == list(range(11)) and requests == 10 and all(r.passed for r in rows)
    scores = run_scores(rows, "CF-EF_full")
    assert scores.mrr == 1.0 and scores.first_turn == 1 and scores.pass_at_turn == (1.0,) * 10
    assert run_scores(rows, "CF-EF_full", compensate_init=False).mrr == 0.5
    without, _ = _run(tmp_path, "static-no-turn0", lambda b: RIGHT, task_file, executor, (static_id,), **kwargs)
    assert without[0].turn == 1 and run_scores(without, "CF-EF_full").mrr == 0.5


def test_turn0_samples_must_cover_the_run(task_file, executor, tmp_path):
    from convcodeworld_gym.errors import SamplesError

    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"task_id": "BigCodeBench/0", "solution": "x = 1"}) + "\n", encoding="utf-8")
    with pytest.raises(SamplesError, match="lack 1 task\\(s\\) of the run, e.g. double/0"):
        _run(tmp_path, "bad", lambda b: RIGHT, task_file, executor, (env_id("CF"),), turn0=str(other))
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"task_id": "double/0"}\n', encoding="utf-8")
    with pytest.raises(SamplesError, match="line 1: needs a string 'task_id' and a string 'solution'"):
        _run(tmp_path, "bad2", lambda b: RIGHT, task_file, executor, (env_id("CF"),), turn0=str(broken))


def test_static_replay_under_the_reference_protocol(task_file, executor, tmp_path):
    """Static turns follow the protocol on the reference's frozen feedback: under CF a reference
    program that compiles is carried over with no call; a reference that passed at turn 0 ends
    the episode inside reset (its passing code carried, no call)."""
    reference, _ = _run(tmp_path, "ref-wrong", lambda b: WRONG, task_file, executor, (env_id("CF"),), protocol="always")
    rows, requests = _run(tmp_path, "static-cf", lambda b: RIGHT, task_file, executor, ("ConvCodeBench-CF-v0",),
                          env_kwargs={"log": str(tmp_path / "ref-wrong")})
    assert requests == 0 and [r.turn for r in rows] == list(range(1, 11))
    assert all(r.model_calls == 0 and r.code == reference[0].code and not r.passed for r in rows)
    _run(tmp_path, "ref-right", lambda b: RIGHT, task_file, executor, (env_id("CF"),), protocol="always")
    rows, requests = _run(tmp_path, "static-solved", lambda b: WRONG, task_file, executor, ("ConvCodeBench-CF-v0",),
                          env_kwargs={"log": str(tmp_path / "ref-right")})
    assert requests == 0 and [(r.turn, r.passed, r.model_calls, r.episode_end) for r in rows] == [(1, True, 0, "reference_passed")]


def test_wrapper_steps_are_model_calls(task_file, executor):
    """The RL view: every ReferenceProtocol step is one model call; inside a turn the observation
    is the compile-fix prompt (CF alone), then the follow-up with the failed program's EF."""
    import gymnasium as gym

    from convcodeworld_gym.protocol import ReferenceProtocol

    env = ReferenceProtocol(gym.make(env_id("CF-EF_full"), dataset=task_file, executor=executor, max_turns=2))
    obs, info = env.reset(options={"task_id": "double/0"})
    assert info["turns"] == [] and obs["turn"] == 0
    obs, reward, terminated, truncated, info = env.step(BROKEN)  # turn 0 judged: does not compile
    assert [t["info"]["turn"] for t in info["turns"]] == [0] and reward == 0.0 and not (terminated or truncated)
    assert obs["compilation_feedback"].startswith("Traceback") and obs["execution_feedback"] == ""  # CF alone
    obs, _, _, _, info = env.step(BROKEN)  # a fix that does not compile: still inside turn 1
    assert info["turns"] == [] and obs["compilation_feedback"].startswith("Traceback")
    obs, _, _, _, info = env.step(WRONG)  # compiles: the follow-up shows the failed program's EF
    assert info["turns"] == [] and obs["code"] == extract(WRONG) and obs["compilation_feedback"] == ""
    assert obs["execution_feedback"] == "ALL\nexpected ':' (__test__.py, line 1)\n"
    obs, reward, terminated, truncated, info = env.step(RIGHT)  # the follow-up's reply is turn 1's program
    assert [(t["info"]["turn"], t["model_calls"], t["reward"]) for t in info["turns"]] == [(1, 3, 1.0)]
    assert terminated and reward == 1.0
    env.close()


def extract(reply: str) -> str:
    from convcodeworld_gym.extract import extract_code

    return extract_code(reply)
