"""The runner and the metrics with runs lost to the infrastructure: an episode in which a run was lost (also on
the executor's retry) is played again; lost again, it is logged with ``infra_error`` and left out of the scores,
never counted as a failure. The runs are real (a sandbox whose worker is SIGKILLed from outside, as in
``tests/sandbox/host/test_infra_loss.py``); the metric and reference checks below them work on rows alone.
"""

from __future__ import annotations

import json

import pytest

from convcodeworld_gym.cli import main
from convcodeworld_gym.errors import ReferenceLogError
from convcodeworld_gym.policies import ReplayPolicy
from convcodeworld_gym.records import TurnRecord, read_turns
from convcodeworld_gym.reference import load_reference
from convcodeworld_gym.runs.evaluate import EvalConfig, run_evaluation
from convcodeworld_gym.runs.log_scores import live_run_scores, static_run_scores
from convcodeworld_gym.runs.report import load_report
from convcodeworld_gym.sandbox import Limits, SandboxExecutor
from convcodeworld_gym.testing.infra import WorkerKiller, marked

SOLVED, LOST = "HumanEval/0", "HumanEval/2"


@pytest.fixture
def one_worker():
    with SandboxExecutor(Limits(suite_timeout_s=20.0), workers=1, preload=(), calibrate=False, cache=False) as ex:
        yield ex


def _replies(tmp_path, humaneval) -> ReplayPolicy:
    """Both tasks solved at turn 0; the LOST task's program is marked, so that a WorkerKiller finds its runs."""
    rows = [{"task_id": SOLVED, "solution": humaneval[SOLVED].ground_truth},
            {"task_id": LOST, "solution": marked(humaneval[LOST].ground_truth, sleep_s=1.0)}]
    path = tmp_path / "replies.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return ReplayPolicy(path)


def _run(tmp_path, humaneval, executor, kills: int):
    config = EvalConfig(ids=("ConvCodeWorld-CF-EF_full-v0",), dataset="humaneval", task_ids=(SOLVED, LOST), max_turns=2,
                        concurrency=1)
    with WorkerKiller(times=kills) as killer:
        summary = run_evaluation(config, _replies(tmp_path, humaneval), tmp_path / "run", executor=executor,
                                 progress=None, log=lambda line: None)
    assert len(killer.killed) == kills
    return summary


def test_an_episode_lost_once_is_played_again_and_scored(tmp_path, humaneval, one_worker):
    # the executor retries the first kill, its retry is killed too: the episode is lost, then played again
    summary = _run(tmp_path, humaneval, one_worker, kills=2)
    assert (summary.played, summary.replayed, summary.infra_lost) == ({"CF-EF_full": 2}, {"CF-EF_full": 1}, {"CF-EF_full": 0})
    rows = read_turns(tmp_path / "run")
    assert [(r.task_id, r.turn, r.passed, r.infra_error) for r in rows] == [(SOLVED, 0, True, ""), (LOST, 0, True, "")]
    scores = load_report(tmp_path / "run").scores["CF-EF_full"]
    assert (scores.pass_at_turn, scores.n_tasks, scores.left_out) == ((1.0, 1.0, 1.0), 2, 0)


def test_an_episode_lost_twice_is_logged_with_infra_error_and_left_out_of_the_metrics(tmp_path, humaneval, one_worker,
                                                                                      capsys):
    summary = _run(tmp_path, humaneval, one_worker, kills=4)  # both plays of the episode lost (each run twice)
    assert (summary.replayed, summary.infra_lost) == ({"CF-EF_full": 1}, {"CF-EF_full": 1})
    rows = read_turns(tmp_path / "run")
    lost = [r for r in rows if r.task_id == LOST]
    assert len(lost) == 1 and not lost[0].passed and "killed by signal SIGKILL" in lost[0].infra_error
    assert lost[0].episode_end == "infra_error"
    scores = load_report(tmp_path / "run").scores["CF-EF_full"]
    # not a failure: the lost task is in no share (counted as failed, Pass@1 would be 0.5)
    assert (scores.pass_at_turn, scores.mrr, scores.recall, scores.n_tasks, scores.left_out) == ((1.0, 1.0, 1.0), 1.0, 1.0, 1, 1)
    assert main(["report", str(tmp_path / "run")]) == 0
    assert "left out, a run lost to the infrastructure: CF EF(full) 1" in capsys.readouterr().out


def _row(task: str, turn: int, passed: bool, infra_error: str = "", feedback: str = "CF", reference: str = "") -> TurnRecord:
    return TurnRecord(feedback, task, turn, "", "", "", "", "", True, passed, float(passed), float(passed),
                      episode_end="infra_error" if infra_error else "", reference=reference, infra_error=infra_error)


def test_live_scores_leave_out_episodes_with_a_lost_turn():
    rows = [_row("a", 0, False), _row("a", 1, True), _row("b", 0, False), _row("b", 1, False, "worker killed"),
            _row("c", 0, False)]
    scores = live_run_scores(rows, "CF", max_turns=1)
    assert (scores.pass_at_turn, scores.mrr, scores.n_tasks, scores.left_out) == ((0.0, 0.5), 0.25, 2, 1)
    with pytest.raises(ReferenceLogError, match="every CF episode .* infrastructure lost"):
        live_run_scores([_row("b", 0, False, "worker killed")], "CF", max_turns=1)


def test_static_scores_and_the_reference_log_leave_out_what_was_lost():
    reference = [_row("a", 0, False), _row("a", 1, False), _row("b", 0, False), _row("b", 1, False),
                 _row("c", 0, False, "actor lost")]
    log = load_reference(reference, "CF", max_turns=2)
    assert set(log.episodes) == {"a", "b"} and "actor lost" in log.left_out["c"]
    with pytest.raises(ReferenceLogError, match="cannot be replayed: the infrastructure lost the run of its turn 0"):
        log.episode("c")
    run = [_row("a", 1, True, reference="r"), _row("b", 1, False, "worker killed", reference="r")]
    scores = static_run_scores(run, "CF", log, max_turns=2)
    assert (scores.pass_at_turn, scores.n_tasks, scores.left_out) == ((1.0, 1.0), 1, 1)
    turn0 = [_row("a", 0, False), _row("b", 0, False)]
    lost_turn0 = [_row("a", 0, False, "worker killed"), _row("b", 0, False)]
    run = [_row("a", 1, True, reference="r"), _row("b", 1, False, reference="r"), _row("b", 2, False, reference="r")]
    assert static_run_scores(run, "CF", log, turn0=turn0, max_turns=2).n_tasks == 2
    assert (static_run_scores(run, "CF", log, turn0=lost_turn0, max_turns=2).n_tasks,
            static_run_scores(run, "CF", log, turn0=lost_turn0, max_turns=2).left_out) == (1, 1)
