"""ConvCodeBench from the command line: record a live run, replay it statically, report static scores."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from convcodeworld_gym.runs.log_scores import live_run_scores, static_run_scores
from convcodeworld_gym.records import read_turns

COMBO = "CF-EF_full-SEF"
CLI = [sys.executable, "-m", "convcodeworld_gym.cli"]


def _evaluate(*args: str, env: dict[str, str]) -> str:
    out = subprocess.run([*CLI, "evaluate", *args], capture_output=True, text=True, env=env, timeout=900)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    return out.stdout + out.stderr


def _mrr_row(run: Path) -> dict[str, str]:
    with open(run / "mrr_recall.csv", newline="") as fh:
        return {row[0]: row for row in csv.reader(fh)}["MRR"]


@pytest.mark.parametrize("dataset", ["humaneval", "bigcodebench"])
def test_static_replay_end_to_end_from_cli(tmp_path, dataset, request):
    env = dict(os.environ)
    common = ["--limit", "3", "--max-turns", "3", "--concurrency", "1", "--simulator", "offline"]
    if dataset == "bigcodebench":
        request.getfixturevalue("bigcodebench")  # skips, saying why, without the data file
        common = ["--dataset", "bigcodebench", "--stdlib-only", "--task-ids", "BigCodeBench/1,BigCodeBench/2,BigCodeBench/4", *common]
    else:
        common = ["--dataset", "humaneval", *common]
    live, static = tmp_path / "live", tmp_path / "static"
    _evaluate(COMBO, "--strength", "0.3", "--out", str(live), *common, env=env)
    printed = _evaluate(f"ConvCodeBench-{COMBO}-v0", "--strength", "0.9", "--env-kwarg", f"log={live}",
                        "--out", str(static), *common, env=env)
    assert "Pass@1" in printed and "MRR" in printed  # the same tables as live runs
    assert (static / "pass_at_turn.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    rows = read_turns(static)
    assert rows and all(r.reference for r in rows)  # every static row names the reference log it replayed
    reference = read_turns(live)
    # the report's MRR is the static definition, computed from the reference's frozen passes
    expected = static_run_scores(rows, COMBO, turn0=reference, max_turns=3)
    reported = _mrr_row(static)
    assert float(reported[1]) == pytest.approx(round(100 * expected.mrr, 1))
    live_mrr = live_run_scores(reference, COMBO, max_turns=3).mrr
    assert float(_mrr_row(live)[1]) == pytest.approx(round(100 * live_mrr, 1))
