"""training/grpo_bandit.py: GRPO on bandit contexts cut from a log (issue 50, item 5), its smoke run on CPU."""

from __future__ import annotations

import pytest

pytest.importorskip("trl", reason="the TRL test needs the 'train' extra: pip install -e '.[train]'")
pytestmark = pytest.mark.train


def _per_step(printed: str, label: str) -> list[str]:
    line = next(line for line in printed.splitlines() if line.startswith(label))
    return [v.strip() for v in line.split(":", 1)[1].split(";")[0].split(",")]


def test_flags_cut_the_contexts_as_asked(training_program, tmp_path):
    program = training_program("grpo_bandit")
    args = program.build_parser().parse_args(["--turns", "1,2", "--reward", "shaped", "--max-variance-k", "0"])
    assert (args.turns, args.reward, args.feedback, args.max_variance_k) == ("1,2", "shaped", "CF-EF_partial", 0)
    with pytest.raises(SystemExit, match="--log"):
        program.build_contexts(args)
    smoke = program.smoke_overrides(program.build_parser().parse_args(["--output-dir", str(tmp_path)]))
    assert (smoke.model, smoke.num_generations, smoke.max_steps, smoke.log) == ("tiny-random", 4, 2,
                                                                               str(tmp_path / "smoke-log"))


@pytest.mark.slow
def test_the_smoke_run_trains_on_contexts_and_prints_both_rates(training_program, tmp_path, capsys):
    """The smoke run makes its log (the scripted coder over the scripted server, perturbed public tests), cuts it,
    and trains 2 GRPO steps: per step a nonzero reward (the canonical solution's place) and a following rate of 0.25
    on each perturbed context's group (the test fitter's place follows the swap; the canonical solution and the tiny
    model's completions do not)."""
    program = training_program("grpo_bandit")
    assert program.main(["--smoke", "--output-dir", str(tmp_path), "--parquet", str(tmp_path / "train.parquet")]) == 0
    printed = capsys.readouterr().out
    assert "log: 4 tasks, 16 trajectories" in printed and "contexts: 20 (4 at turn 0; turn 1: 16" in printed
    rewards = [float(v) for v in _per_step(printed, "mean reward (binary) per step")]
    assert rewards == [float(v) for v in _per_step(printed, "pass rate per step")] and all(r > 0 for r in rewards)
    assert all(float(v) != 0.0 for v in _per_step(printed, "loss per step"))
    follows = _per_step(printed, "perturbation-following rate per step (never in the reward)")
    assert set(follows) <= {"0.250", "-"} and "0.250" in follows
    assert (tmp_path / "train.parquet").exists()
