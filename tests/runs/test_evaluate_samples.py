"""``convcodeworld evaluate --samples N`` (issue 50, item 1): N trajectories per task and combination, each its own
episode (rows carry ``sample``), resumable; the report's pass@k; the static replay reads such a log."""

from __future__ import annotations

import gymnasium as gym
import pytest

from convcodeworld_gym.cli import build_parser
from convcodeworld_gym.policies import SyntheticCoder
from convcodeworld_gym.records import TURNS_FILE, read_turns
from convcodeworld_gym.runs.evaluate import EvalConfig, RunConfigMismatch, run_evaluation
from convcodeworld_gym.runs.report import write_report


def _run(out, executor, samples=4):
    config = EvalConfig(ids=("ConvCodeWorld-CF-EF_full-v0",), dataset="humaneval", limit=3, max_turns=2, samples=samples)
    return run_evaluation(config, SyntheticCoder(0.5), out, executor=executor, progress=None, log=lambda line: None)


def test_samples_are_episodes_of_their_own_and_a_cut_run_resumes_to_the_clean_one(tmp_path, executor):
    clean, cut = tmp_path / "clean", tmp_path / "cut"
    assert _run(clean, executor).played == {"CF-EF_full": 12}
    rows = read_turns(clean)
    assert sorted({(r.task_id, r.sample) for r in rows}) == [(f"HumanEval/{i}", s) for i in range(3) for s in range(4)]
    by_sample = {s: [r.reply for r in rows if r.sample == s] for s in range(4)}
    assert len({tuple(v) for v in by_sample.values()}) > 1  # seeded seed + sample: the trajectories differ
    report, paths = write_report(clean)
    scores = report.scores["CF-EF_full"]
    assert scores.samples == 4 and scores.n_tasks == 3 and sorted(scores.pass_at_k) == [1, 2, 4]
    assert scores.pass_at_k[1] == pytest.approx(scores.pass_at_turn)
    assert all(a <= b + 1e-12 for a, b in zip(scores.pass_at_k[2], scores.pass_at_k[4]))
    assert "Table 1b. pass@k" in paths["markdown"].read_text() and paths["pass_at_k_csv"].read_text().count("\n") == 4
    # the same run cut short: its later episodes lost and a torn line, then resumed
    _run(cut, executor)
    lines = (cut / TURNS_FILE).read_bytes().splitlines(keepends=True)
    (cut / TURNS_FILE).write_bytes(b"".join(lines[:len(lines) // 2]) + lines[len(lines) // 2][:40])
    resumed = _run(cut, executor)
    assert 0 < resumed.played["CF-EF_full"] < 12 and resumed.resumed["CF-EF_full"] == 12 - resumed.played["CF-EF_full"]
    assert read_turns(cut) == read_turns(clean)
    with pytest.raises(RunConfigMismatch, match="samples: 4 -> 2"):  # other settings refuse the folder, by name
        _run(cut, executor, samples=2)
    args = build_parser().parse_args(["evaluate", "CF", "--samples", "16"])
    assert args.samples == 16


def test_the_static_replay_reads_a_log_of_many_samples(tmp_path, humaneval, executor):
    """Two recorded episodes of one task are two samples (the error of issue 50: duplicated turns); the replay plays
    sample 0, or the one named, and its rows name it."""
    from convcodeworld_gym.wrappers import RecordEpisodes

    task = humaneval["HumanEval/2"]
    live = RecordEpisodes(gym.make("ConvCodeWorld-CF-EF_full-v0", dataset="humaneval", max_turns=1, executor=executor),
                          tmp_path)
    for wrong in ("1.0", "2.0"):  # sample 0 and sample 1: different frozen histories
        live.reset(options={"task_id": task.task_id})
        live.step(f"def truncate_number(number):\n    return {wrong}")
        live.step(f"def truncate_number(number):\n    return {wrong}")
    live.close()
    first = gym.make("ConvCodeBench-CF-EF_full-v0", log=tmp_path, dataset="humaneval", max_turns=1, executor=executor)
    obs, info = first.reset(options={"task_id": task.task_id})
    assert obs["code"].endswith("return 1.0") and info["reference_log"] == str(tmp_path)
    second = gym.make("ConvCodeBench-CF-EF_full-v0", log=tmp_path, dataset="humaneval", max_turns=1, reference_sample=1,
                      executor=executor)
    obs, info = second.reset(options={"task_id": task.task_id})
    assert obs["code"].endswith("return 2.0") and info["reference_log"] == f"{tmp_path}#sample=1"
    named = gym.make("ConvCodeBench-CF-EF_full-v0", log=f"{tmp_path}#sample=1", dataset="humaneval", max_turns=1,
                     executor=executor)
    assert named.reset(options={"task_id": task.task_id})[0]["code"].endswith("return 2.0")
    for env in (first, second, named):
        env.close()
