"""The selfcheck command and the result cache, on real HumanEval tasks through the real sandbox."""

from __future__ import annotations

from dataclasses import replace

from convcodeworld_gym.cli import main
from convcodeworld_gym.sandbox import SandboxExecutor
from convcodeworld_gym.runs.selfcheck import run_selfcheck
from convcodeworld_gym.tasks import TaskSet


def test_selfcheck_cli_reports_pass_rate_and_modes(capsys):
    assert main(["selfcheck", "--dataset", "humaneval", "--limit", "3", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "selfcheck humaneval/limit3: 3/3 canonical solutions pass (100.0%)" in out
    assert "judge modes: split 3" in out


def test_selfcheck_explains_a_failure(humaneval):
    broken = humaneval.subset(limit=2)
    tasks = TaskSet((broken[0], replace(broken[1], canonical_solution="    import not_a_real_module_xyz\n")), name="two")
    with SandboxExecutor(workers=1, preload=()) as ex:
        report = run_selfcheck(tasks, ex)  # a default set: the task the runtime cannot serve is left out
        asked = run_selfcheck(tasks, ex, by_id=True)  # asked for by id: run, and its failure explained
    assert (report.passed, report.total, list(report.left_out)) == (1, 1, [tasks[1].task_id])
    assert (asked.passed, asked.total) == (1, 2)
    kind, detail = asked.failures[tasks[1].task_id]
    assert kind == "missing library" and "not_a_real_module_xyz" in detail


def test_result_cache_hits_and_can_be_switched_off(humaneval):
    task = humaneval[0]
    wrong = task.code_prompt + "    return False\n"
    with SandboxExecutor(workers=1, preload=()) as ex:
        first, second = ex.run(task, wrong), ex.run(task, wrong)
        assert "cache" not in first.details and second.details["cache"] == "hit" and first == second
    with SandboxExecutor(workers=1, preload=(), cache=False) as ex:
        assert "cache" not in ex.run(task, wrong).details and "cache" not in ex.run(task, wrong).details
