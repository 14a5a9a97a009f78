"""Env steps per second against the number of envs, and Ray's overhead per execution.

Every step executes a program: one HumanEval task (HumanEval/0), a wrong but compiling
body that runs the whole suite and fails, so no episode ends early (``max_turns`` is
large). Vector envs: Gymnasium's Sync and Async, 1/2/4/8 envs, with the executor in-process
(``LocalExecutor``) and via Docker (``DockerExecutor``, the offline host-Python image),
and the ids' own ``ThreadedVectorEnv`` (``make_vec`` without a mode). Sync shares ONE
executor between its envs, Threaded shares one too (Docker: one container per core),
Async gives each worker process its own (a factory; Docker: one container per worker).

    python benchmarks/throughput.py                 # everything, ~4 minutes on 2 cores
    python benchmarks/throughput.py --no-docker --no-ray --seconds 4

Prints a Markdown table; numbers depend on the machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time

import gymnasium as gym

import convcodeworld_gym  # noqa: F401
from convcodeworld_gym.sandbox import LocalExecutor
from convcodeworld_gym.tasks import load_tasks

ENV_ID = "ConvCodeWorld-CF-EF_full-v0"
TASK_ID = "HumanEval/0"
WRONG = "def has_close_elements(numbers, threshold):\n    return False\n"


def steps_per_second(mode: str, num_envs: int, executor_kwarg: object, seconds: float) -> tuple[float, float]:
    """(env steps/s, mean execute_s per step) over ``seconds`` after a warm-up step."""
    envs = gym.make_vec(
        ENV_ID, num_envs=num_envs, vectorization_mode=None if mode == "threaded" else mode,
        dataset="humaneval", task_ids=(TASK_ID,), max_turns=100_000, executor=executor_kwarg,
    )
    try:
        envs.reset(seed=0)
        actions = (WRONG,) * num_envs
        envs.step(actions)  # warm-up: worker start, container start
        steps, exec_times = 0, []
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            _, _, _, _, info = envs.step(actions)
            steps += num_envs
            exec_times.extend(t.execute_s for t in info["timings"])
        elapsed = time.perf_counter() - started
    finally:
        envs.close()
    return steps / elapsed, statistics.fmean(exec_times)


def ray_overhead(runs: int) -> tuple[float, float]:
    """Mean seconds per sequential execution: local executor, then through a local Ray instance."""
    from convcodeworld_gym.sandbox.ray import RayExecutor

    task = load_tasks("humaneval")[TASK_ID]
    with LocalExecutor() as local:
        local.run(task, WRONG)
        started = time.perf_counter()
        for _ in range(runs):
            local.run(task, WRONG)
        local_s = (time.perf_counter() - started) / runs
    with RayExecutor(init_kwargs={"num_cpus": 2, "include_dashboard": False, "log_to_driver": False}) as ex:
        ex.run(task, WRONG)
        started = time.perf_counter()
        for _ in range(runs):
            ex.run(task, WRONG)
        ray_s = (time.perf_counter() - started) / runs
    return local_s, ray_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", default="1,2,4,8", help="comma-separated env counts")
    parser.add_argument("--modes", default="sync,async,threaded")
    parser.add_argument("--seconds", type=float, default=6.0, help="measuring time per configuration")
    parser.add_argument("--no-docker", action="store_true")
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--ray-runs", type=int, default=20)
    args = parser.parse_args(argv)

    cores = len(os.sched_getaffinity(0))
    backends: dict[str, dict[str, object]] = {"local": {"sync": LocalExecutor(), "async": LocalExecutor, "threaded": LocalExecutor}}
    docker_executor = None
    if not args.no_docker:
        import docker

        from convcodeworld_gym.sandbox.docker import DockerExecutor
        from convcodeworld_gym.testing.docker_image import build_host_python_image

        image = build_host_python_image(docker.from_env(version="auto"))
        factory = functools.partial(DockerExecutor, image.tag, slots=1, python=image.python, volumes=image.volumes)
        docker_executor = factory()
        backends["docker"] = {"sync": docker_executor, "async": factory, "threaded": functools.partial(factory, slots=cores)}

    print(f"# {ENV_ID}, {TASK_ID}, {cores} cores, Python {sys.version.split()[0]}, {args.seconds:g} s per row, "
          f"load average before: {os.getloadavg()[0]:.1f}\n")
    print("| executor | vector env | envs | steps/s | speed-up vs 1 env | mean execute_s |")
    print("|---|---|---:|---:|---:|---:|")
    try:
        for backend, kwargs in backends.items():
            for mode in args.modes.split(","):
                base = None
                for n in (int(x) for x in args.envs.split(",")):
                    rate, exec_s = steps_per_second(mode, n, kwargs[mode], args.seconds)
                    base = base or rate
                    print(f"| {backend} | {mode} | {n} | {rate:.2f} | {rate / base:.2f}x | {exec_s:.3f} |", flush=True)
    finally:
        backends["local"]["sync"].close()  # type: ignore[union-attr]
        if docker_executor is not None:
            docker_executor.close()

    if not args.no_ray:
        local_s, ray_s = ray_overhead(args.ray_runs)
        print(f"\nRay (local instance, num_cpus=2), {args.ray_runs} sequential executions: local {local_s * 1000:.0f} ms, "
              f"via Ray {ray_s * 1000:.0f} ms, overhead {(ray_s - local_s) * 1000:.0f} ms per execution")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
