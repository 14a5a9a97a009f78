"""Turn-by-turn regressions (issue 40, item 2): ``info["regressed_tests"]`` on every id, live and static, the same
through ``step`` and ``astep``; an episode whose third turn breaks a test its second turn passed; the runner's report
gives the share of episodes with a regression, per id and per turn; the reward is unchanged."""

from __future__ import annotations

import asyncio
import csv
import json

import gymnasium as gym
import pytest

import convcodeworld_gym  # noqa: F401 - registers the ids
from convcodeworld_gym import BENCH_IDS, LIVE_IDS, RecordEpisodes
from convcodeworld_gym.regressions import TestHistory
from convcodeworld_gym.runs.evaluate import EvalConfig, run_evaluation
from convcodeworld_gym.runs.report import write_report
from convcodeworld_gym.policies import ReplayPolicy
from convcodeworld_gym.sandbox import Outcome
from convcodeworld_gym.tasks import load_tasks
from convcodeworld_gym.testing import FakeExecutor
from convcodeworld_gym.testing.executor import table_rule

TASK = "HumanEval/0"  # has_close_elements: tests 1, 3, 5, 6 expect True; 2, 4, 7 expect False
HEADER = "def has_close_elements(numbers, threshold):\n"
NOT_COMPILING = HEADER + "    return (\n"
ALWAYS_FALSE = HEADER + "    return False\n"  # passes the tests that expect False
ALWAYS_TRUE = HEADER + "    return True\n"  # passes those that expect True: breaks every test ALWAYS_FALSE passed
EXPECT_FALSE = ["test_2", "test_4", "test_7"]


def _fake() -> FakeExecutor:
    """Judges the three programs as the sandbox does (tests/test_regressions.py's sandbox test checks that)."""
    names = load_tasks("humaneval")[TASK].test_names
    return FakeExecutor(table_rule({
        ALWAYS_FALSE: {n: Outcome.PASSED if n in EXPECT_FALSE else Outcome.FAILED for n in names},
        ALWAYS_TRUE: {n: Outcome.FAILED if n in EXPECT_FALSE else Outcome.PASSED for n in names},
    }))


@pytest.fixture(scope="module")
def fake() -> FakeExecutor:
    return _fake()


@pytest.fixture(scope="module")
def reference_logs(tmp_path_factory, fake) -> dict[str, object]:
    """A recorded live run per combination whose programs never pass, 4 turns long: the ConvCodeBench ids' logs."""
    logs = {}
    for live in LIVE_IDS:
        combination = live.split("-", 1)[1].rsplit("-v", 1)[0]
        where = tmp_path_factory.mktemp(combination)
        env = RecordEpisodes(gym.make(live, dataset="humaneval", task_ids=[TASK], max_turns=3, executor=fake), where,
                             policy="wrong")
        env.reset(options={"task_id": TASK})
        done = False
        while not done:
            *_, terminated, truncated, _ = env.step(HEADER + "    return None\n")
            done = terminated or truncated
        env.close()
        logs[combination] = where
    return logs


def _make(env_name: str, executor, logs) -> gym.Env:
    combination = env_name.split("-", 1)[1].rsplit("-v", 1)[0]
    extra = {"log": logs[combination]} if env_name.startswith("ConvCodeBench-") else {}
    return gym.make(env_name, dataset="humaneval", task_ids=[TASK], max_turns=3, executor=executor, **extra)


PROGRAMS = (NOT_COMPILING, ALWAYS_FALSE, ALWAYS_TRUE)


def _blocking(env: gym.Env) -> list:
    trace = [env.reset(seed=0, options={"task_id": TASK})]
    trace += [env.step(program) for program in PROGRAMS]
    return trace


async def _awaited(env: gym.Env) -> list:
    trace = [await env.areset(seed=0, options={"task_id": TASK})]
    trace += [await env.astep(program) for program in PROGRAMS]
    return trace


@pytest.mark.parametrize("env_name", LIVE_IDS + BENCH_IDS)
def test_every_id_names_the_tests_the_third_turn_broke_the_same_through_step_and_astep(env_name, fake, reference_logs):
    blocking_env, awaited_env = _make(env_name, fake, reference_logs), _make(env_name, fake, reference_logs)
    blocking = _blocking(blocking_env)
    awaited = asyncio.run(_awaited(awaited_env))
    blocking_env.close(), awaited_env.close()
    assert awaited == blocking
    steps = blocking[1:]
    assert [info["regressed_tests"] for *_, info in steps] == [[], [], EXPECT_FALSE]
    assert [info["passed"] for *_, info in steps] == [False, False, False]
    assert [reward for _, reward, *_ in steps] == [0.0, 0.0, 0.0]  # the reward ignores regressions


def test_a_new_episode_starts_with_no_history(fake):
    env = gym.make("ConvCodeWorld-CF-EF_full-v0", dataset="humaneval", task_ids=[TASK], max_turns=3, executor=fake)
    env.reset(options={"task_id": TASK})
    env.step(ALWAYS_FALSE)
    env.reset(options={"task_id": TASK})
    *_, info = env.step(ALWAYS_TRUE)  # the first program of this episode: nothing earlier to break
    env.close()
    assert info["regressed_tests"] == []


def test_in_the_sandbox_the_third_turn_breaks_what_the_second_passed(executor):
    """The real sandbox judges the programs the fake above stands in for, and the env names what regressed."""
    env = gym.make("ConvCodeWorld-CF-EF_full-v0", dataset="humaneval", task_ids=[TASK], max_turns=3, executor=executor)
    env.reset(options={"task_id": TASK})
    infos = [env.step(program)[-1] for program in PROGRAMS]
    env.close()
    assert [t["name"] for t in infos[1]["tests"] if t["outcome"] == "passed"] == EXPECT_FALSE
    assert [info["regressed_tests"] for info in infos] == [[], [], EXPECT_FALSE]


def test_the_history_forgets_a_lost_run():
    history = TestHistory()
    assert history.judge([{"name": "t", "outcome": "passed"}]) == []
    assert history.judge([{"name": "t", "outcome": "not_run"}], lost=True) == []  # no verdict
    assert history.judge([{"name": "t", "outcome": "failed"}]) == ["t"]
    with pytest.raises(TypeError, match="info\\['tests'\\]"):
        history.judge(["t"])


def test_the_runners_report_gives_the_share_of_episodes_with_a_regression_per_id_and_per_turn(tmp_path, fake):
    """Two tasks, two ids: HumanEval/0 regresses at turn 2 (and 3); HumanEval/1 never does."""
    replies = tmp_path / "replies.jsonl"
    rows = [{"task_id": TASK, "turn": turn, "reply": program} for turn, program in enumerate(PROGRAMS)]
    rows += [{"task_id": "HumanEval/1", "turn": 0, "reply": "def separate_paren_groups(s):\n    return []\n"}]
    replies.write_text("".join(json.dumps(row) + "\n" for row in rows))
    config = EvalConfig(ids=("ConvCodeWorld-CF-EF_full-v0", "ConvCodeWorld-CF-EF_partial-v0"), dataset="humaneval",
                        task_ids=(TASK, "HumanEval/1"), max_turns=3, protocol="always")
    run_evaluation(config, ReplayPolicy(replies), tmp_path / "run", executor=fake, progress=None, log=lambda line: None)
    report, paths = write_report(tmp_path / "run")
    for name in ("CF-EF_full", "CF-EF_partial"):
        shares = report.regressions[name]
        assert (shares.episodes, shares.regressed, shares.share) == (2, 1, 0.5)
        # turn 3 repeats turn 2's program (the replay's last reply): the tests turn 1 passed still fail there
        assert [shares.share_at(turn) for turn in (1, 2, 3)] == [0.0, 0.5, 0.5]
    table = list(csv.reader(paths["regressions_csv"].open()))
    assert table[0] == ["Turn", "CF EF(partial)", "CF EF(full)"]
    assert table[1] == ["any", "50.0", "50.0"] and table[3] == ["2", "50.0", "50.0"]
    assert "Table 3. Episodes (%) with a turn-by-turn regression" in paths["markdown"].read_text()
    logged = [row for row in map(json.loads, (tmp_path / "run" / "turns.jsonl").read_text().splitlines())
              if row["task_id"] == TASK and row["turn"] == 2]
    assert [row["regressed_tests"] for row in logged] == [EXPECT_FALSE, EXPECT_FALSE]
    assert report.scores["CF-EF_full"].recall == 0.0  # rewards and scores as before: nothing passed
    old_log = tmp_path / "old"  # a log written before rows carried regressed_tests reads the same
    old_log.mkdir()
    for name in ("turns.jsonl", "metadata.json"):
        rows = (tmp_path / "run" / name).read_text()
        if name == "turns.jsonl":
            rows = "".join(json.dumps({k: v for k, v in json.loads(line).items() if k != "regressed_tests"}) + "\n"
                           for line in rows.splitlines())
        (old_log / name).write_text(rows)
    assert write_report(old_log)[0].regressions == report.regressions


def test_the_outcomes_a_logged_test_passes_with_are_the_sandboxs():
    from convcodeworld_gym.regressions import OK_OUTCOMES
    from convcodeworld_gym.sandbox.result import Outcome

    assert OK_OUTCOMES == {outcome.value for outcome in Outcome if outcome.ok}
