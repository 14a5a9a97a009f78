"""The Ray executor on a real local Ray instance (``ray.init(num_cpus=2)``): 20 tasks identical to the
local sandbox, warm sandboxes reused by the actors, and ``convcodeworld evaluate --ray``."""

from __future__ import annotations

import json
import threading

import pytest

from convcodeworld_gym import env_id
from convcodeworld_gym.cli import main
from convcodeworld_gym.policies import make_policy
from convcodeworld_gym.records import TURNS_FILE, iter_jsonl
from convcodeworld_gym.runs.evaluate import EvalConfig, run_evaluation
from convcodeworld_gym.sandbox import Limits
from convcodeworld_gym.testing.infra import WorkerKiller, marked, marked_runs, next_marked

pytestmark = pytest.mark.ray
ray = pytest.importorskip("ray", reason="ray is not installed: pip install 'convcodeworld-gym[ray]'")

from convcodeworld_gym.sandbox.backends.ray import RayExecutor, make_ray_executor  # noqa: E402


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


def test_a_lost_actor_is_replaced_and_the_execution_retried_on_the_fresh_one(humaneval, ray_instance) -> None:
    # Before issue 34 the execution an actor was lost with raised ExecutorError (and an env step with it).
    task = humaneval["HumanEval/0"]
    with RayExecutor(slots=1) as ex:
        assert ex.run(task, task.ground_truth).passed
        (lost,) = ex._slots
        ray.kill(lost.actor)  # what losing its node does to an actor
        _wait_until_dead(lost.actor)  # ray.kill is asynchronous: a call sent at once may still reach the actor
        result = ex.run(task, task.ground_truth)
        assert result.passed and "Ray actor" in result.details["retried"]["lost"], result.details
        assert ex._slots[0] is not lost  # a fresh actor took the slot


def test_an_actor_lost_mid_run_is_retried_and_lost_twice_has_no_verdict(humaneval, ray_instance) -> None:
    task = humaneval["HumanEval/0"]
    program = marked(task.ground_truth, sleep_s=1.0)
    with RayExecutor(slots=1, limits=Limits(suite_timeout_s=20.0)) as ex:
        assert ex.run(task, program).passed  # undisturbed (and calibrated): the marked program is correct
        for kills in (1, 2):
            out: list = []
            text = program + "\n" * kills  # not the verdict the actor cached
            runner = threading.Thread(target=lambda: out.append(ex.run(task, text)))
            seen = set(marked_runs())
            runner.start()
            for _ in range(kills):  # the actor holding the run, then (twice) the fresh one holding its retry
                next_marked(seen, timeout_s=60)
                ray.kill(ex._slots[0].actor)
            runner.join(timeout=120)
            assert not runner.is_alive(), "the execution hung after its actor was lost"
            result = out[0]
            assert "Ray actor" in result.details["retried"]["lost"], result.details
            if kills == 1:
                assert result.passed and result.infra_error is None, result
            else:
                assert not result.passed and "Ray actor" in (result.infra_error or ""), result
        assert ex.run(task, task.ground_truth).passed


def test_a_sandbox_worker_killed_in_an_actor_is_retried_there(humaneval, ray_instance) -> None:
    """The node's sandbox worker (a child of the actor, on this machine) SIGKILLed mid-run of a correct program:
    the actor's sandbox retries the run on a fresh worker and it passes; killed twice, it has no verdict."""
    task = humaneval["HumanEval/0"]
    program = marked(task.ground_truth, sleep_s=1.0)
    with RayExecutor(slots=1, limits=Limits(suite_timeout_s=20.0)) as ex:
        assert ex.run(task, program).passed
        with WorkerKiller(times=1) as killer:
            retried = ex.run(task, program + "\n")  # another program text: not the cached verdict
        assert len(killer.killed) == 1, "the killer never saw the run in the actor"
        assert retried.passed and "killed by signal SIGKILL" in retried.details["retried"]["lost"], retried.details
        with WorkerKiller(times=2) as killer:
            lost = ex.run(task, program + "\n\n")
        assert len(killer.killed) == 2
        assert not lost.passed and "killed by signal SIGKILL" in (lost.infra_error or ""), lost


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
