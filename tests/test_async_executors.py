"""``await executor.arun(task, program)`` on the real backends: the local sandbox, Docker (its containers) and Ray
(its actors) give what ``run`` gives; the sandbox's pool takes runs first come, first served, as many at once as it
has slots, and a slow run holds one slot only."""

from __future__ import annotations

import asyncio
import time

import pytest

from convcodeworld_gym.sandbox import Limits, SandboxExecutor, TimePolicy
from convcodeworld_gym.tasks import Task


def _jobs(humaneval) -> list[tuple[Task, str]]:
    """Right and wrong programs of a few tasks, one that does not finish in time among them."""
    tasks = [humaneval[f"HumanEval/{i}"] for i in range(4)]
    return [(t, t.ground_truth) for t in tasks] + [(t, f"{t.code_prompt}    return None\n") for t in tasks] + [
        (tasks[0], f"{tasks[0].code_prompt}    while True:\n        pass\n")]


async def _awaited_all(executor, jobs) -> list:
    return list(await asyncio.gather(*(executor.arun(task, program) for task, program in jobs)))


def _same_outcomes(awaited, blocking) -> None:
    assert [r.passed for r in awaited] == [r.passed for r in blocking] == [True] * 4 + [False] * 5
    assert [[(t.name, t.outcome) for t in r.tests] for r in awaited] == [[(t.name, t.outcome) for t in r.tests] for r in blocking]
    assert [r.limits_hit for r in awaited] == [r.limits_hit for r in blocking] and "timeout" in str(awaited[-1].limits_hit)


def test_the_sandbox_awaited_gives_what_it_gives_blocking(humaneval):
    with SandboxExecutor(cache=False, time_policy=TimePolicy(floor_s=2.0)) as executor:
        jobs = _jobs(humaneval)
        blocking = [executor.run(task, program) for task, program in jobs]
        awaited = asyncio.run(_awaited_all(executor, jobs))
    _same_outcomes(awaited, blocking)


def _sleeping(task: Task, seconds: float) -> str:
    return f"import time\ntime.sleep({seconds})\n{task.code_prompt}    return None\n"


def test_the_pool_is_first_come_first_served_and_a_slow_run_holds_one_slot(humaneval):
    task = humaneval["HumanEval/0"]
    with SandboxExecutor(Limits(suite_timeout_s=30.0), workers=2, cache=False, calibrate=False) as executor:
        executor.run(task, task.ground_truth)  # a warm worker
        done: list[tuple[int, float]] = []

        async def run(index: int, program: str) -> None:
            await executor.arun(task, program)
            done.append((index, time.perf_counter()))

        async def fifo() -> None:  # 6 runs of 0.5 s on 2 slots: in pairs, in the order they came
            await asyncio.gather(*(run(i, _sleeping(task, 0.5) + f"# {i}\n") for i in range(6)))

        started = time.perf_counter()
        asyncio.run(fifo())
        assert sorted(i for i, _ in done[:2]) == [0, 1] and sorted(i for i, _ in done[2:4]) == [2, 3]
        assert time.perf_counter() - started >= 1.5  # never more than 2 at once: 3 rounds of 0.5 s
        done.clear()

        async def slow_first() -> None:  # a 4 s run, then 6 quick ones: they all pass it on the other slot
            await asyncio.gather(run(0, _sleeping(task, 4.0)), *(run(i, f"{task.code_prompt}    return {i}\n") for i in range(1, 7)))

        started = time.perf_counter()
        asyncio.run(slow_first())
        assert [i for i, _ in done][-1] == 0 and done[-2][1] - started < 3.0, done


@pytest.mark.docker
def test_docker_awaited_gives_what_it_gives_blocking(humaneval):
    docker = pytest.importorskip("docker", reason="the Docker backend needs the docker extra")
    try:
        client = docker.from_env(version="auto")
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any reason to skip is reported
        pytest.skip(f"no Docker engine reachable ({exc}); run .ci/start-dockerd as root")
    from convcodeworld_gym.sandbox.backends.docker import DockerExecutor
    from convcodeworld_gym.testing.docker_image import build_host_python_image

    image = build_host_python_image(client)
    with DockerExecutor(image.tag, python=image.python, volumes=image.volumes, slots=2, cache=False,
                        time_policy=TimePolicy(floor_s=2.0)) as executor:
        jobs = _jobs(humaneval)
        blocking = [executor.run(task, program) for task, program in jobs]
        awaited = asyncio.run(_awaited_all(executor, jobs))
    _same_outcomes(awaited, blocking)
    assert {r.details["backend"] for r in awaited} == {"docker"}


@pytest.mark.ray
def test_ray_awaited_gives_what_it_gives_blocking(humaneval):
    ray = pytest.importorskip("ray", reason="ray is not installed: pip install 'convcodeworld-gym[ray]'")
    from convcodeworld_gym.sandbox.backends.ray import RayExecutor

    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        node = lambda limits: SandboxExecutor(limits, workers=1, cache=False, time_policy=TimePolicy(floor_s=2.0))  # noqa: E731
        with RayExecutor(node_executor=node) as executor:
            jobs = _jobs(humaneval)
            blocking = [executor.run(task, program) for task, program in jobs]
            awaited = asyncio.run(_awaited_all(executor, jobs))
    finally:
        ray.shutdown()
    _same_outcomes(awaited, blocking)
    assert all(r.details.get("ray_node") for r in awaited)
