"""The Ray executor on a real local Ray instance (``ray.init(num_cpus=2)``): 20 tasks identical to the
local sandbox, warm sandboxes reused by the actors, and ``convcodeworld evaluate --ray``."""

from __future__ import annotations

import json

import pytest

from convcodeworld_gym import env_id
from convcodeworld_gym.cli import main
from convcodeworld_gym.runs.evaluate import EvalConfig, run_evaluation
from convcodeworld_gym.policies import make_policy
from convcodeworld_gym.records import TURNS_FILE, iter_jsonl

pytestmark = pytest.mark.ray
ray = pytest.importorskip("ray", reason="ray is not installed: pip install 'convcodeworld-gym[ray]'")

from convcodeworld_gym.sandbox.ray import RayExecutor, make_ray_executor  # noqa: E402


@pytest.fixture(scope="module")
def ray_instance():
    """One local Ray instance for the module (starting one costs seconds); executors connect to it."""
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_twenty_tasks_identical_to_the_local_sandbox(humaneval, executor, ray_instance) -> None:
    tasks = [humaneval[i] for i in range(20)]
    # ground truth for most, a wrong body for every fourth task: passes and failures both compare
    jobs = [(t, t.ground_truth if i % 4 else f"def {t.entry_point}(*args):\n    raise ValueError('wrong')\n") for i, t in enumerate(tasks)]
    expected = executor.run_many(jobs)  # the session's local SandboxExecutor
    with RayExecutor() as ex:
        assert ex.default_concurrency() == 2  # one actor per CPU of the instance
        results = ex.run_many(jobs)
        single = ex.run(*jobs[1])
    assert ray.is_initialized()  # not started by the executor, so not shut down by it
    assert results == expected
    assert single == expected[1]
    assert [r.passed for r in results] == [bool(i % 4) for i in range(20)]
    assert all(r.details.get("ray_node") and r.details["backend"] == "sandbox" for r in results)
    assert {r.details["confinement"]["level"] for r in results} == {executor.confinement["level"]}
    # two warm sandboxes did all the work (each actor keeps one; one uid each), not one per execution
    assert len({r.details["uid"] for r in results}) == 2
    assert all(r.details["judge"] == e.details["judge"] for r, e in zip(results, expected))


def test_evaluate_cli_with_ray_twenty_tasks(tmp_path, executor, ray_instance, capsys) -> None:
    """``convcodeworld evaluate --ray`` on 20 tasks logs exactly what the same run on this machine logs."""
    common = ["evaluate", "CF-EF_full", "--dataset", "humaneval", "--limit", "20", "--policy", "synthetic",
              "--max-turns", "1", "--no-progress", "--no-report"]
    out = tmp_path / "run"
    rc = main([*common, "--ray", "local", "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    rows = list(iter_jsonl(out / TURNS_FILE))
    assert len({r["task_id"] for r in rows}) == 20
    assert any(r["passed"] for r in rows) and not all(r["passed"] for r in rows)
    assert all(r["tests"] for r in rows if r["compile_ok"])  # the programs ran (through Ray) and were judged
    # the same run on this machine's sandbox gives the same log (apart from timings)
    config = EvalConfig(ids=(env_id("CF-EF_full"),), dataset="humaneval", limit=20, max_turns=1)
    run_evaluation(config, make_policy("synthetic", strength=0.5), tmp_path / "local", executor=executor, progress=None,
                   log=lambda line: None)
    strip = lambda row: json.dumps({k: v for k, v in row.items() if k not in ("timings", "usage")}, sort_keys=True)  # noqa: E731
    assert sorted(map(strip, iter_jsonl(tmp_path / "local" / TURNS_FILE))) == sorted(map(strip, rows))


def _wait_until_dead(actor, timeout: float = 60.0) -> None:
    """Return once a call to ``actor`` fails as Ray fails calls to a dead actor (CI saw a call that Ray
    delivered before the kill had landed, so the lost actor still answered)."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            ray.get(actor.__ray_ready__.remote(), timeout=timeout)
        except ray.exceptions.RayActorError:
            return
        time.sleep(0.05)
    raise AssertionError(f"the killed actor still answered after {timeout} s")


def test_a_lost_actor_is_an_executor_error_then_replaced(humaneval, ray_instance) -> None:
    from convcodeworld_gym.errors import ExecutorError

    task = humaneval["HumanEval/0"]
    with RayExecutor(slots=1) as ex:
        assert ex.run(task, task.ground_truth).passed
        lost = ex._actors[0]
        ray.kill(lost)  # what losing its node does to an actor
        _wait_until_dead(lost)  # ray.kill is asynchronous: a call sent at once may still reach the actor
        with pytest.raises(ExecutorError, match="actor .* was lost"):
            ex.run(task, task.ground_truth)
        assert ex.run(task, task.ground_truth).passed  # a fresh actor took the slot


def test_bad_arguments_are_clear_errors() -> None:
    # (an unreachable address is not tested: Ray retries the connection for minutes)
    with pytest.raises(ValueError, match="cluster address"):
        make_ray_executor("")
    with pytest.raises(ValueError, match="slots must be >= 1"):
        RayExecutor(slots=0)


def test_a_probe_derived_through_ray_runs_on_its_tasks_profile_uncalibrated(humaneval, ray_instance) -> None:
    """The offline expert derives each probe's profile from its task's (``Executor.derive``); through Ray the actor
    that runs the probe is told, so it does not calibrate the probe (whose canonical solution fails by design)."""
    import dataclasses
    import functools

    from convcodeworld_gym.sandbox import SandboxExecutor

    task = humaneval["HumanEval/7"]
    probe = dataclasses.replace(task, test=task.test.replace("def test_", "def test_probe(self):\n        self.fail('a probe')\n    def test_", 1))
    stub = task.code_prompt + "    return None\n"
    uncalibrated = functools.partial(SandboxExecutor, workers=1, shipped=False)
    with RayExecutor(slots=1, node_executor=uncalibrated) as ex:
        ex.derive(task, probe)
        derived = ex.run(probe, stub)
    with RayExecutor(slots=1, node_executor=uncalibrated) as ex:
        calibrated = ex.run(probe, stub)
    assert not calibrated.details["profile"]["canonical_passed"]  # what a probe calibrated on its own looks like
    assert derived.details["profile"]["canonical_passed"] and derived.details["profile"]["mode"] == "split"
    assert {t.name for t in derived.tests} == set(probe.test_names) and not derived.passed
