"""Env steps per second against the number of envs, and Ray's overhead per execution.

Every step executes a program: one HumanEval task (HumanEval/0), a wrong but compiling
body that runs the whole suite and fails, so no episode ends early (``max_turns`` is
large). Vector envs: Gymnasium's Sync and Async, 1/2/4/8 envs, with the executor on this
machine (``sandbox``: the default ``SandboxExecutor``, warm confined workers; ``local``:
``LocalExecutor``, a fresh interpreter per run) and via Docker (``DockerExecutor``, the
offline host-Python image), and the ids' own ``ThreadedVectorEnv`` (``make_vec`` without a
mode). Sync shares ONE executor between its envs, Threaded shares one too (one worker or
container per core), Async gives each worker process its own (a factory: a sandbox with one
worker per core, a local executor, or one container). The result cache of the sandbox and of
Docker (the same sandbox worker, in containers) is off, so every step really executes.

    python benchmarks/throughput.py                 # everything, ~6 minutes on 2 cores
    python benchmarks/throughput.py --backends sandbox --no-ray --envs 1,2 --seconds 4

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
from convcodeworld_gym.sandbox import LocalExecutor, SandboxExecutor
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


#: The sandbox without its result cache (a benchmark repeats one program), one worker.
UNCACHED_SANDBOX = functools.partial(SandboxExecutor, workers=1, cache=False)


def ray_overhead(runs: int) -> tuple[float, float]:
    """Mean seconds per sequential execution: a warm one-worker sandbox here, then through a local
    Ray instance whose actors each hold the same sandbox."""
    from convcodeworld_gym.sandbox.backends.ray import RayExecutor

    task = load_tasks("humaneval")[TASK_ID]
    with UNCACHED_SANDBOX() as local:
        local.run(task, WRONG)
        started = time.perf_counter()
        for _ in range(runs):
            local.run(task, WRONG)
        local_s = (time.perf_counter() - started) / runs
    with RayExecutor(node_executor=UNCACHED_SANDBOX, slots=1,
                     init_kwargs={"num_cpus": 2, "include_dashboard": False, "log_to_driver": False}) as ex:
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
    parser.add_argument("--backends", default="sandbox,local,docker", help="comma-separated: sandbox, local, docker")
    parser.add_argument("--no-docker", action="store_true", help="leave Docker out (same as leaving it out of --backends)")
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--ray-runs", type=int, default=20)
    args = parser.parse_args(argv)

    cores = len(os.sched_getaffinity(0))
    chosen = [b for b in args.backends.split(",") if not (args.no_docker and b == "docker")]
    unknown = set(chosen) - {"sandbox", "local", "docker"}
    if unknown:
        parser.error(f"--backends: unknown {sorted(unknown)}; choose from sandbox, local, docker")
    backends: dict[str, dict[str, object]] = {}
    shared: list = []  # the Sync rows' shared executors, closed at the end
    if "sandbox" in chosen:
        shared.append(SandboxExecutor(cache=False))
        per_process = functools.partial(SandboxExecutor, cache=False)  # the env's default, one worker per core
        backends["sandbox"] = {"sync": shared[-1], "async": per_process, "threaded": per_process}
    if "local" in chosen:
        shared.append(LocalExecutor())
        backends["local"] = {"sync": shared[-1], "async": LocalExecutor, "threaded": LocalExecutor}
    if "docker" in chosen:
        import docker

        from convcodeworld_gym.sandbox.backends.docker import DockerExecutor
        from convcodeworld_gym.testing.docker_image import build_host_python_image

        image = build_host_python_image(docker.from_env(version="auto"))
        factory = functools.partial(DockerExecutor, image.tag, slots=1, python=image.python, volumes=image.volumes,
                                    cache=False)
        shared.append(factory())
        backends["docker"] = {"sync": shared[-1], "async": factory, "threaded": functools.partial(factory, slots=cores)}

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
        for executor in shared:
            executor.close()

    if not args.no_ray:
        local_s, ray_s = ray_overhead(args.ray_runs)
        print(f"\nRay (local instance, num_cpus=2), {args.ray_runs} sequential executions: sandbox here {local_s * 1000:.0f} ms, "
              f"via Ray {ray_s * 1000:.0f} ms, overhead {(ray_s - local_s) * 1000:.0f} ms per execution")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
