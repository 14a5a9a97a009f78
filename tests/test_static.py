"""ConvCodeBench: recording, static replay (ids, round trip, bandit view, zero verbal calls),
log-level static metrics and the live-vs-static correlation, on real HumanEval / BigCodeBench
executions with scripted policies."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import convcodeworld_gym  # noqa: F401 - registers the ids
from convcodeworld_gym import BENCH_IDS, PAPER_BENCH_IDS, ReferenceLogError, RecordEpisodes, StaticReplay
from convcodeworld_gym.cli import main
from convcodeworld_gym.runs.correlation import correlate
from convcodeworld_gym.extract import extract_code
from convcodeworld_gym.runs.log_scores import live_run_scores, run_scores, static_run_scores
from convcodeworld_gym.metrics import spearman
from convcodeworld_gym.records import read_turns
from convcodeworld_gym.tasks import Task

TASKS = ["HumanEval/0", "HumanEval/1", "HumanEval/2", "HumanEval/3"]
MAX_TURNS = 3
NEVER = 99

Policy = Callable[[Task, int], str]


def wrong(task: Task) -> str:
    """Compiles, fails every test: the signature with an empty body."""
    return f"```python\n{task.code_prompt.rstrip()}\n    pass\n```"


@pytest.fixture(scope="module")
def executor(fake_executor):
    """Static replay is tested on programs that are either the canonical solution or wrong, so the
    fake judges them (the sandbox's own tests judge real programs)."""
    return fake_executor


def threshold_policy(thresholds: Mapping[str, int]) -> Policy:
    """Wrong before turn ``thresholds[task]``, the canonical solution from then on."""
    return lambda task, turn: task.ground_truth if turn >= thresholds[task.task_id] else wrong(task)


REFERENCE = dict(zip(TASKS, [0, 2, NEVER, 1]))  # passes at turn 0, 2, never, 1


def play(env: gym.Env, policy: Policy, task_ids=TASKS) -> list[list[dict]]:
    """Play each task to its end; per task, the list of (obs before the step, info of the step)."""
    log = []
    for task_id in task_ids:
        obs, _ = env.reset(options={"task_id": task_id})
        steps = []
        while True:
            before = obs
            obs, reward, terminated, truncated, info = env.step(policy(env.unwrapped.task, before["turn"]))
            assert reward == (1.0 if info["passed"] else 0.0)
            steps.append({"obs": before, "info": info, "after": obs})
            if terminated or truncated:
                break
        log.append(steps)
    return log


def record(env_id: str, run_dir, policy: Policy, name: str, executor, task_ids=TASKS, **kwargs) -> list[list[dict]]:
    env = RecordEpisodes(gym.make(env_id, dataset=kwargs.pop("dataset", "humaneval"), executor=executor, max_turns=MAX_TURNS, **kwargs), run_dir, policy=name)
    try:
        return play(env, policy, task_ids)
    finally:
        env.close()


@pytest.fixture(scope="module")
def reference_log(tmp_path_factory, executor):
    """A live CF-EF_full run of the reference policy, recorded with RecordEpisodes."""
    run_dir = tmp_path_factory.mktemp("reference")
    record("ConvCodeWorld-CF-EF_full-v0", run_dir, threshold_policy(REFERENCE), "reference", executor)
    return run_dir


class ScriptedUser:
    """A deterministic verbal-feedback provider (stands in for the LLM user in live runs)."""

    source = "scripted"

    def __init__(self, expertise: str) -> None:
        self.expertise = expertise
        self.calls = 0

    def __call__(self, context) -> str | None:
        self.calls += 1
        if context.result.passed:
            return None
        return f"[{self.expertise}] turn {context.turn}: {context.result.pass_fraction:.0%} of the tests pass"


class ExplodingUser:
    """An LLM user simulator that must never be called in static mode."""

    expertise = "expert"
    source = "llm"

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, context) -> str | None:
        self.calls += 1
        raise AssertionError("static replay called the verbal-feedback simulator")


# ---------------------------------------------------------------- recording


def test_record_episodes_writes_finished_episodes_only(tmp_path, executor):
    env = RecordEpisodes(gym.make("ConvCodeWorld-CF-EF_full-v0", dataset="humaneval", executor=executor), tmp_path, policy="p")
    obs, _ = env.reset(options={"task_id": "HumanEval/0"})
    task = env.unwrapped.task
    obs, *_ = env.step(wrong(task))
    shown = obs["execution_feedback"]
    env.step(task.ground_truth)
    env.reset(options={"task_id": "HumanEval/1"})
    env.step(wrong(env.unwrapped.task))  # unfinished: not written
    env.close()
    rows = read_turns(tmp_path)
    assert [(r.task_id, r.turn, r.passed, r.policy, r.reference) for r in rows] == [
        ("HumanEval/0", 0, False, "p", ""),
        ("HumanEval/0", 1, True, "p", ""),
    ]
    assert rows[0].execution_feedback == shown and rows[0].code == task.code_prompt.rstrip() + "\n    pass"
    reopened = RecordEpisodes(gym.make("ConvCodeWorld-CF-v0", dataset="humaneval", executor=executor), tmp_path)
    assert reopened.done == {("CF-EF_full", "HumanEval/0", 0)}
    reopened.close()


# ---------------------------------------------------------------- static replay


def test_bench_ids_registered_and_need_a_log(reference_log):
    assert len(BENCH_IDS) == 9 and all(i in gym.registry for i in BENCH_IDS)
    # the paper's tables: every verbal combination except CF SNF
    assert PAPER_BENCH_IDS == tuple(i for i in BENCH_IDS if ("SNF" in i or "SEF" in i) and i != "ConvCodeBench-CF-SNF-v0")
    assert len(PAPER_BENCH_IDS) == 5
    with pytest.raises(ReferenceLogError, match="pass log="):
        gym.make("ConvCodeBench-CF-EF_full-v0", dataset="humaneval")
    with pytest.raises(ReferenceLogError, match="no rows for combination CF-SEF .*holds: CF-EF_full"):
        gym.make("ConvCodeBench-CF-SEF-v0", log=reference_log, dataset="humaneval", max_turns=MAX_TURNS)
    with pytest.raises(ReferenceLogError, match="HumanEval/9.*not in|no CF-EF_full episode for task 'HumanEval/9'"):
        gym.make("ConvCodeBench-CF-EF_full-v0", log=reference_log, dataset="humaneval", task_ids=["HumanEval/9"], max_turns=MAX_TURNS)
    with pytest.raises(ReferenceLogError, match="ends at turn 3 without a pass.*pass max_turns=4"):
        gym.make("ConvCodeBench-CF-EF_full-v0", log=reference_log, dataset="humaneval")


def test_round_trip_same_policy_sees_the_reference_turns(tmp_path, reference_log, executor):
    reference = {(r.task_id, r.turn): r for r in read_turns(reference_log)}
    steps = record("ConvCodeBench-CF-EF_full-v0", tmp_path, threshold_policy(REFERENCE), "reference", executor, log=reference_log)
    for task_id, episode in zip(TASKS, steps):
        for step in episode:
            turn = step["info"]["turn"]
            shown = reference[(task_id, turn - 1)]
            assert step["obs"]["turn"] == turn
            assert (step["obs"]["code"], step["obs"]["compilation_feedback"], step["obs"]["execution_feedback"]) == (
                shown.code, shown.compilation_feedback, shown.execution_feedback,
            )
    # the same policy passes at the reference's turn (1 for a task the reference solved at turn 0)
    assert [(e[-1]["info"]["turn"], e[-1]["info"]["episode_end"]) for e in steps] == [(1, "passed"), (2, "passed"), (3, "max_turns"), (1, "passed")]
    rows = read_turns(tmp_path)
    assert {r.reference for r in rows} == {str(reference_log)}
    assert all(r.verbal_feedback == "" for r in rows)
    # rows hold the evaluated model's code, not the reference's shown in the observation
    assert [r.code for r in rows] == [step["info"]["judged"]["code"] for episode in steps for step in episode]
    # same policy as the reference: static MRR equals live MRR, (1 + 1/3 + 0 + 1/2) / 4
    static = static_run_scores(rows, "CF-EF_full", turn0=read_turns(reference_log), max_turns=MAX_TURNS)
    live = live_run_scores(read_turns(reference_log), "CF-EF_full", MAX_TURNS)
    assert static.mrr == pytest.approx((1 + 1 / 3 + 1 / 2) / 4) == pytest.approx(live.mrr)
    assert static.recall == live.recall == 0.75
    assert run_scores(rows, "CF-EF_full", turn0=read_turns(reference_log), max_turns=MAX_TURNS) == static


@pytest.mark.parametrize(
    "policy, ends, mrr",
    [
        # never right: the log ends where the reference passed; MRR credits those passes 1/(k+1)
        # (the model's turn k is not played when the reference's turn k-1 passed)
        (threshold_policy(dict.fromkeys(TASKS, NEVER)), [(1, "reference_passed"), (2, "reference_passed"), (3, "max_turns"), (1, "reference_passed")], (1 + 1 / 3 + 1 / 2) / 4),
        # always right: passes at turn 1 everywhere; 1 for the task the reference solved at turn 0, else 1/2
        (threshold_policy(dict.fromkeys(TASKS, 0)), [(1, "passed")] * 4, (1 + 3 / 2) / 4),
    ],
    ids=["never", "always"],
)
def test_episode_ends_and_static_mrr(tmp_path, reference_log, executor, humaneval, policy, ends, mrr):
    steps = record("ConvCodeBench-CF-EF_full-v0", tmp_path, policy, "p", executor, log=reference_log)
    assert [(e[-1]["info"]["turn"], e[-1]["info"]["episode_end"]) for e in steps] == ends
    # the log holds the evaluated model's code, whatever the observation showed
    first = read_turns(tmp_path)[0]
    assert first.code == extract_code(policy(humaneval["HumanEval/0"], 1))
    assert all(e[-1]["info"]["reference_passed_at"] == p for e, p in zip(steps, [0, 2, None, 1]))
    assert static_run_scores(read_turns(tmp_path), "CF-EF_full", max_turns=MAX_TURNS).mrr == pytest.approx(mrr)


def test_a_reference_pass_at_the_last_turn_ends_by_max_turns(executor, humaneval):
    from convcodeworld_gym.records import TurnRecord

    task = humaneval["HumanEval/2"]
    rows = [TurnRecord("CF", task.task_id, t, "", f"# reference turn {t}", "No syntax errors", "", "", True, t == MAX_TURNS, float(t == MAX_TURNS), 0.0)
            for t in range(MAX_TURNS + 1)]
    env = gym.make("ConvCodeBench-CF-v0", log=rows, dataset="humaneval", executor=executor, max_turns=MAX_TURNS)
    [episode] = play(env, lambda task, turn: wrong(task), [task.task_id])
    env.close()
    assert [step["obs"]["code"] for step in episode] == [f"# reference turn {t}" for t in range(MAX_TURNS)]
    assert (episode[-1]["info"]["turn"], episode[-1]["info"]["episode_end"]) == (MAX_TURNS, "max_turns")


def test_zero_verbal_calls_in_static_mode(tmp_path, executor):
    live_user = ScriptedUser("expert")
    ref_dir = tmp_path / "ref"
    record("ConvCodeWorld-CF-EF_full-SEF-v0", ref_dir, threshold_policy(REFERENCE), "ref", executor, verbal_feedback=live_user)
    assert live_user.calls > 0
    logged = {(r.task_id, r.turn): r.verbal_feedback for r in read_turns(ref_dir)}
    assert any(logged.values())
    llm = ExplodingUser()
    env = gym.make("ConvCodeBench-CF-EF_full-SEF-v0", log=ref_dir, dataset="humaneval", executor=executor, max_turns=MAX_TURNS, verbal_feedback=llm)
    steps = play(env, threshold_policy(dict.fromkeys(TASKS, NEVER)))
    for task_id, episode in zip(TASKS, steps):
        for step in episode:
            assert step["obs"]["verbal_feedback"] == logged[(task_id, step["info"]["turn"] - 1)]
    for round_ in env.unwrapped.rounds():
        env.unwrapped.score(round_, round_.task.ground_truth)
    env.close()
    assert llm.calls == 0


def test_bandit_rounds_and_score(reference_log, executor):
    env = StaticReplay("CF-EF_full", reference_log, "humaneval", executor=executor, max_turns=MAX_TURNS)
    rounds = list(env.rounds())
    # a round per turn i whose reference history 0..i-1 has no pass
    assert [(r.task.task_id, r.turn) for r in rounds] == [
        ("HumanEval/1", 1), ("HumanEval/1", 2), ("HumanEval/2", 1), ("HumanEval/2", 2), ("HumanEval/2", 3), ("HumanEval/3", 1),
    ]
    obs, _ = env.reset(options={"task_id": "HumanEval/2"})
    assert dict(rounds[2].observation) == obs and [r.turn for r in rounds[2].history] == [0]
    assert [env.score(r, r.task.ground_truth) for r in rounds] == [1.0] * 6
    assert env.score(rounds[0], wrong(rounds[0].task)) == 0.0
    # scoring rounds does not disturb the running episode
    obs, reward, terminated, truncated, info = env.step(wrong(env.task))
    assert info["task_id"] == "HumanEval/2" and info["turn"] == 1 and obs["turn"] == 2 and reward == 0.0
    env.close()


def test_relative_log_path_is_named_absolute(reference_log, executor, monkeypatch):
    monkeypatch.chdir(reference_log.parent)
    env = gym.make("ConvCodeBench-CF-EF_full-v0", log=reference_log.name, dataset="humaneval", executor=executor, max_turns=MAX_TURNS)
    _, info = env.reset(options={"task_id": "HumanEval/3"})
    assert info["reference_log"] == str(reference_log)
    env.close()


def test_dataset_and_log_overlap(reference_log, executor, humaneval):
    # a dataset smaller than the log (as a batch runner passes it): only the shared tasks are played
    env = gym.make("ConvCodeBench-CF-EF_full-v0", log=reference_log, dataset=humaneval.subset(task_ids=["HumanEval/3", "HumanEval/7", "HumanEval/1"]),
                   executor=executor, max_turns=MAX_TURNS, simulator_kwargs={"backend": "offline"})
    assert env.unwrapped.tasks.ids == ("HumanEval/3", "HumanEval/1")
    with pytest.raises(ReferenceLogError, match="no CF-EF_full episode for task 'HumanEval/7'"):
        env.reset(options={"task_id": "HumanEval/7"})
    env.close()
    with pytest.raises(ReferenceLogError, match="none of the 2 tasks of .* is in the reference log"):
        gym.make("ConvCodeBench-CF-EF_full-v0", log=reference_log, dataset=humaneval.subset(task_ids=["HumanEval/7", "HumanEval/8"]), max_turns=MAX_TURNS)


def test_record_episodes_needs_a_convcodeworld_env(tmp_path):
    with pytest.raises(TypeError, match="needs a convcodeworld-gym env"):
        RecordEpisodes(gym.make("CartPole-v1"), tmp_path)


def test_check_env_static(reference_log, executor):
    env = gym.make("ConvCodeBench-CF-EF_full-v0", log=reference_log, dataset="humaneval", executor=executor, task_ids=["HumanEval/2"], max_turns=MAX_TURNS)
    check_env(env.unwrapped)
    env.close()


def test_render_ansi_static(reference_log, executor):
    with pytest.raises(ValueError, match="render_mode must be None or 'ansi', got 'human'"):
        gym.make("ConvCodeBench-CF-EF_full-v0", log=reference_log, dataset="humaneval", render_mode="human")
    env = gym.make("ConvCodeBench-CF-EF_full-v0", log=reference_log, dataset="humaneval", executor=executor,
                   task_ids=["HumanEval/3"], max_turns=MAX_TURNS, render_mode="ansi")
    assert env.unwrapped.render() == "(no episode: call reset())\n"  # gym.make's order check would refuse
    obs, _ = env.reset()
    text = env.render()
    assert text.startswith(f"=== HumanEval/3 [ConvCodeBench CF-EF_full] reference turn {obs['turn'] - 1}, next turn {obs['turn']} ===")
    assert obs["code"] and obs["code"] in text
    env.close()


# ---------------------------------------------------------------- log-level metrics


def test_static_run_scores_every_branch_from_rows():
    from convcodeworld_gym.records import TurnRecord

    def row(task, turn, passed, reference=""):
        return TurnRecord("CF-SEF", task, turn, "", "", "", "", "", True, passed, float(passed), 0.0, reference=reference)

    ref = [row("a", 0, True)]  # reference passed at turn 0: 1
    ref += [row("b", 0, False), row("b", 1, True)]  # reference's turn 1 passes before the model: 1/2
    ref += [row("c", i, False) for i in range(3)]  # the model passes at turn 2: 1/3
    ref += [row("d", 0, False), row("d", 1, True)]  # tie at step 2: reference's turn 1 first -> 1/2
    ref += [row("e", i, False) for i in range(3)]  # never: only the model's own turn 0 (1 when compensated)
    ref += [row("f", i, False) for i in range(3)]  # never at all
    run = [row("a", 1, False, "L"), row("b", 1, False, "L"), row("c", 1, False, "L"), row("c", 2, True, "L")]
    run += [row("d", 1, False, "L"), row("e", 1, False, "L"), row("e", 2, False, "L"), row("e", 3, False, "L")]
    run += [row("f", 1, False, "L"), row("f", 2, False, "L"), row("f", 3, False, "L")]
    turn0 = [row(t, 0, t == "e") for t in "abcdef"]
    s = static_run_scores(run, "CF-SEF", ref, turn0=turn0, max_turns=3)
    assert s.mrr == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 2 + 1) / 6)
    assert static_run_scores(run, "CF-SEF", ref, turn0=turn0, max_turns=3, compensate_init=False).mrr == pytest.approx(
        (1 + 1 / 2 + 1 / 3 + 1 / 2) / 6
    )
    assert s.recall == pytest.approx(5 / 6)
    # turns 1..3 (no turn-0 row): a: 1 1 1; b, d: 0 1 1 (the reference's turn-1 pass shows at turn 2);
    # c: 0 1 1 (its episode stopped at its turn-2 pass, carried over); e, f: 0 0 0
    assert s.first_turn == 1 and s.pass_at_turn == pytest.approx((1 / 6, 4 / 6, 4 / 6))
    assert static_run_scores(run, "CF-SEF", ref, max_turns=3).recall == pytest.approx(4 / 6)
    # turn-0 rows of the same combination win over another combination's
    other = [TurnRecord("CF", t, 0, "", "", "", "", "", True, True, 1.0, 1.0) for t in "abcdef"]
    assert static_run_scores(run, "CF-SEF", ref, turn0=other + turn0, max_turns=3).recall == pytest.approx(5 / 6)
    assert static_run_scores(run, "CF-SEF", ref, turn0=other, max_turns=3).recall == pytest.approx(6 / 6)
    with pytest.raises(ReferenceLogError, match="turns \\[1, 3\\], expected \\[1, 2\\]"):
        static_run_scores([row("c", 1, False), row("c", 3, False)], "CF-SEF", ref, max_turns=3)
    with pytest.raises(ReferenceLogError, match="no CF-SEF episode for task 'z'"):
        static_run_scores([row("z", 1, False)], "CF-SEF", ref, max_turns=3)
    with pytest.raises(ReferenceLogError, match="name \\[''\\] as their reference log"):
        static_run_scores([row("a", 1, False)], "CF-SEF", max_turns=3)
    with pytest.raises(ReferenceLogError, match="turn-0 rows lack task"):
        static_run_scores(run, "CF-SEF", ref, turn0=turn0[:2], max_turns=3)
    with pytest.raises(ReferenceLogError, match="ends at turn 2 without a pass.*max_turns=3"):
        static_run_scores(run, "CF-SEF", ref, max_turns=10)
    # a log that goes on after the reference's pass (its carried code executed again, pot.py:564) is read as it is
    assert static_run_scores(run, "CF-SEF", ref + [row("a", 1, True)], max_turns=3) == static_run_scores(run, "CF-SEF", ref, max_turns=3)
    with pytest.raises(ReferenceLogError, match="missing \\[1\\]"):
        static_run_scores(run, "CF-SEF", [r for r in ref if (r.task_id, r.turn) != ("c", 1)], max_turns=3)


# ---------------------------------------------------------------- correlation


def test_correlate_live_vs_static(tmp_path, executor, capsys):
    policies = {
        "strong": dict(zip(TASKS, [0, 1, 1, 2])),
        "middle": dict(zip(TASKS, [1, 2, NEVER, 2])),
        "weak": dict(zip(TASKS, [2, NEVER, NEVER, 3])),
    }
    live_dirs = {name: tmp_path / f"live-{name}" for name in policies}
    for name, thresholds in policies.items():
        record("ConvCodeWorld-CF-EF_full-v0", live_dirs[name], threshold_policy(thresholds), name, executor)
    static_dirs = {name: tmp_path / f"static-{name}" for name in policies}
    for name, thresholds in policies.items():  # the middle policy's live run is the reference
        record("ConvCodeBench-CF-EF_full-v0", static_dirs[name], threshold_policy(thresholds), name, executor, log=live_dirs["middle"])
    [result] = correlate(list(live_dirs.values()), list(static_dirs.values()), max_turns=MAX_TURNS)
    assert result.feedback == "CF-EF_full" and result.policies == ("strong", "middle", "weak")
    live_mrr = [(1 + 1 / 2 + 1 / 2 + 1 / 3) / 4, (1 / 2 + 1 / 3 + 0 + 1 / 3) / 4, (1 / 3 + 0 + 0 + 1 / 4) / 4]
    # static: the weak policy is credited the reference's passes, so it ties with the reference;
    # the strong policy's own turn-0 pass on the first task counts 1 (compensate_init)
    static_mrr = [(1 + 1 / 2 + 1 / 2 + 1 / 3) / 4, (1 / 2 + 1 / 3 + 0 + 1 / 3) / 4, (1 / 2 + 1 / 3 + 0 + 1 / 3) / 4]
    assert [s.mrr for s in result.live] == pytest.approx(live_mrr)
    assert [s.mrr for s in result.static] == pytest.approx(static_mrr)
    assert [s.recall for s in result.live] == [1.0, 0.75, 0.5] and [s.recall for s in result.static] == [1.0, 0.75, 0.75]
    assert result.mrr_rho == pytest.approx(spearman(live_mrr, static_mrr)) == pytest.approx(0.8660254)
    assert result.recall_rho == pytest.approx(0.8660254)
    assert main(["correlate", *map(str, live_dirs.values()), "--static", *map(str, static_dirs.values()), "--max-turns", str(MAX_TURNS)]) == 0
    out = capsys.readouterr().out
    assert "CF-EF_full: Spearman MRR 0.866, Recall 0.866" in out and "weak" in out
    with pytest.raises(ValueError, match="one pair per policy"):
        correlate([live_dirs["weak"]], [static_dirs["weak"]])


# ---------------------------------------------------------------- BigCodeBench standard-library subset


def test_static_replay_bigcodebench_stdlib(tmp_path, bigcodebench, executor):
    # three quick standard-library tasks (BigCodeBench/0 alone runs for half a minute)
    ids = ["BigCodeBench/1", "BigCodeBench/2", "BigCodeBench/4"]
    tasks = bigcodebench.subset(task_ids=ids, stdlib_only=True)
    assert list(tasks.ids) == ids
    thresholds = dict(zip(ids, [1, NEVER, 0]))
    user = ScriptedUser("novice")
    ref_dir, run_dir = tmp_path / "ref", tmp_path / "run"
    record("ConvCodeWorld-CF-EF_partial-SNF-v0", ref_dir, threshold_policy(thresholds), "ref", executor, task_ids=ids, dataset=tasks, verbal_feedback=user)
    env = RecordEpisodes(
        gym.make("ConvCodeBench-CF-EF_partial-SNF-v0", log=ref_dir, dataset="bigcodebench", stdlib_only=True, task_ids=ids, limit=3, executor=executor, max_turns=MAX_TURNS),
        run_dir, policy="always-right",
    )
    assert list(env.unwrapped.tasks.ids) == ids
    steps = play(env, threshold_policy(dict.fromkeys(ids, 0)), ids)
    env.close()
    assert [(e[-1]["info"]["turn"], e[-1]["info"]["episode_end"]) for e in steps] == [(1, "passed")] * 3
    assert steps[1][0]["obs"]["verbal_feedback"].startswith("[novice] turn 0")
    scores = static_run_scores(read_turns(run_dir), "CF-EF_partial-SNF", max_turns=MAX_TURNS)
    assert scores.mrr == pytest.approx((1 / 2 + 1 / 2 + 1) / 3) and scores.recall == 1.0


def test_static_play_on_after_a_pass(tmp_path, reference_log, executor):
    """stop_on_pass=False plays every static turn the reference's log allows, as the reference's static
    runs do; the per-turn static Pass@1 then follows each turn's own result (it can fall)."""
    # passes at turn 1 everywhere, then writes a wrong program again (threshold 1, then never)
    def flip(task, turn):
        return threshold_policy(dict.fromkeys(TASKS, 1))(task, turn) if turn == 1 else threshold_policy(dict.fromkeys(TASKS, NEVER))(task, turn)

    steps = record("ConvCodeBench-CF-EF_full-v0", tmp_path, flip, "flip", executor, log=reference_log, stop_on_pass=False)
    # reference passes at turns 0, 2, never, 1: the episodes run to the reference's pass or max_turns
    assert [(e[-1]["info"]["turn"], e[-1]["info"]["episode_end"]) for e in steps] == [
        (1, "reference_passed"), (2, "reference_passed"), (3, "max_turns"), (1, "reference_passed"),
    ]
    assert [[s["info"]["passed"] for s in e] for e in steps] == [[True], [True, False], [True, False, False], [True]]
    assert not any(s["info"]["episode_end"] == "passed" for e in steps for s in e)
    s = static_run_scores(read_turns(tmp_path), "CF-EF_full", max_turns=MAX_TURNS)
    # turn 1: all four pass; turn 2: task 0 (reference's turn 0) and task 3 (its turn 1) only;
    # turn 3: task 1 too (the reference's turn 2), not task 2 (never solved by the reference)
    assert s.pass_at_turn == pytest.approx((4 / 4, 2 / 4, 3 / 4))
