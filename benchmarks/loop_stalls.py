"""Loop stalls: how long making envs and playing episodes holds the event loop, and where.

The goal (issue 41, item 12): nothing an awaited call of an env does (``areset``, ``astep``) holds the loop for more
than 50 ms. Making an env (``gym.make``) is a blocking call: it should cost milliseconds once the process has loaded
its task set, and callers on a loop make it in a thread (:mod:`convcodeworld_gym.rollouts` does).

Phases, on one loop, with the heartbeat and stall watcher of ``benchmarks/_loop_watch.py`` (the one
``rollout_throughput.py`` measures its lag with):

1. ``make, shared executor``: ``--envs`` + 1 ``gym.make`` calls on the loop itself, all given one
   ``SandboxExecutor`` (what the doors of :mod:`convcodeworld_gym.training` do): the first loads the task set, the
   others should not;
2. ``make, own executor``: ``--own-executors`` ``gym.make`` calls that each build the env's own default executor;
3. ``first areset``: the first ``areset`` of the last of those envs;
4. ``episodes``: ``--envs`` episodes of ``--env-id`` played through ``astep`` by the rollout driver
   (:func:`~convcodeworld_gym.rollouts.iter_rollouts`, the envs made beforehand) against the scripted coder (a wrong
   program, then the canonical solution; no latency).

Per phase it prints its seconds, the CPU time the loop's thread spent (its own work: what is not moved off the loop),
the loop's worst lag and 99th percentile, the longest the loop's own work held it
(a lag less the time the loop thread waited for a CPU: on a machine busier than its cores most of a lag can be that
wait), and where the loop was then (the stack the watcher saw most often, innermost frame first). ``--show N``
lists the N stalls held longest with their whole stacks; ``--per-callback`` times each callback alone (a lag is a
whole turn of the loop, many callbacks) and lists those over ``--stall-ms``: the goal's own measure.

    .venv/bin/python benchmarks/loop_stalls.py                       # HumanEval, 64 envs
    CONVCODEWORLD_BIGCODEBENCH_PATH=... .venv/bin/python benchmarks/loop_stalls.py --dataset bigcodebench

Numbers depend on the machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import gymnasium as gym

import convcodeworld_gym  # noqa: F401 - registers the ids
from convcodeworld_gym.policies import OpenAIPolicy
from convcodeworld_gym.rollouts import EpisodeJob, iter_rollouts
from convcodeworld_gym.sandbox import SandboxExecutor
from convcodeworld_gym.testing import CoderServer

try:  # run as a script (benchmarks/ on sys.path) or imported as benchmarks.loop_stalls
    from _loop_watch import LoopWatch
except ImportError:  # pragma: no cover
    from benchmarks._loop_watch import LoopWatch

CORES = len(os.sched_getaffinity(0))


async def phase(watch: LoopWatch, name: str, work: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
    """Run ``work`` as phase ``name`` of ``watch``: its seconds, worst lag, p99 lag and where its worst stall was."""
    watch.phase = name
    first_lag, first_stall = len(watch.lags), len(watch.stalls)
    started, cpu = time.perf_counter(), time.thread_time()
    await work()
    seconds, cpu = time.perf_counter() - started, time.thread_time() - cpu
    await asyncio.sleep(0.02)  # the beat that ends a stall at the phase's end lands in it
    lags = sorted(watch.lags[first_lag:]) or [float("nan")]
    stalls = watch.stalls[first_stall:]
    worst = max(stalls, key=lambda s: s.held_s, default=None)
    return {"phase": name, "seconds": seconds, "loop_cpu_s": cpu, "worst_ms": 1000 * lags[-1],
            "p99_ms": 1000 * lags[int(0.99 * (len(lags) - 1))], "held_ms": 1000 * worst.held_s if worst else 0.0,
            "where": worst.where(8) if worst else "-"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="humaneval", help="humaneval, bigcodebench or a task file")
    parser.add_argument("--env-id", default="ConvCodeWorld-CF-EF_full-SEF-v0")
    parser.add_argument("--envs", type=int, default=64, help="envs made, and episodes played (default 64)")
    parser.add_argument("--own-executors", type=int, default=8, help="envs made with their own executor (default 8)")
    parser.add_argument("--stall-ms", type=float, default=50.0, help="a lag over this is a stall (default 50)")
    parser.add_argument("--llm-user", action="store_true",
                        help="the simulated user of SNF/SEF ids is the LLM user, served by the scripted coder's server "
                        "(each env's user has its own async client, as with a real endpoint); default: the offline user")
    parser.add_argument("--show", type=int, default=0, help="also list the N longest stalls, with their stacks")
    parser.add_argument("--per-callback", action="store_true",
                        help="also time each callback alone (the loop's debug mode: slower) and list those over --stall-ms")
    args = parser.parse_args(argv)
    print(f"# loop stalls: {CORES} cores, {args.env_id} on {args.dataset}, {args.envs} envs, "
          f"{'the LLM user' if args.llm_user else 'the offline user'}\n")
    print("| phase | seconds | loop thread CPU | loop worst lag | loop p99 lag | worst held (lag less CPU wait) "
          "| where the loop was then |")
    print("|---|---:|---:|---:|---:|---:|---|")

    async def run(executor: SandboxExecutor, base_url: str, scratch: str) -> list[dict[str, Any]]:
        watch = LoopWatch(stall_s=args.stall_ms / 1000, per_callback=args.per_callback)
        rows: list[dict[str, Any]] = []
        envs: list[gym.Env] = []
        own: list[gym.Env] = []

        user = ({"simulator_kwargs": {"backend": "llm", "base_url": base_url, "api_key": "EMPTY", "model": "coder",
                                      "cache_path": os.path.join(scratch, "user.sqlite")}} if args.llm_user else {})

        def make(**kwargs: Any) -> gym.Env:
            return gym.make(args.env_id, dataset=args.dataset, max_turns=3, **user, **kwargs)

        async def make_shared() -> None:
            envs.extend(make(executor=executor) for _ in range(args.envs + 1))  # and one more for the first areset

        async def make_own() -> None:
            own.extend(make() for _ in range(args.own_executors))

        async def first_areset() -> None:
            fresh = envs[-1]
            await fresh.areset(options={"task_id": fresh.unwrapped.tasks.ids[0]})

        policy = OpenAIPolicy("coder", base_url=base_url, api_key="EMPTY")  # made before the watch: a blocking call

        async def episodes() -> None:
            ids = envs[0].unwrapped.tasks.ids
            jobs = [EpisodeJob(ids[i % len(ids)], seed=i) for i in range(args.envs)]
            try:
                async for _ in iter_rollouts(jobs, lambda: make(executor=executor), policy, concurrency=len(jobs),
                                             envs=envs[:len(jobs)]):
                    pass
            finally:
                await policy.aclose()

        async with watch.beating():
            for name, work in (("make, shared executor", make_shared), ("make, own executor", make_own),
                               ("first areset", first_areset), ("episodes", episodes)):
                rows.append(await phase(watch, name, work))
                row = rows[-1]
                print(f"| {row['phase']} | {row['seconds']:.2f} | {row['loop_cpu_s']:.2f} s | {row['worst_ms']:.0f} ms "
                      f"| {row['p99_ms']:.0f} ms "
                      f"| {row['held_ms']:.0f} ms | {row['where']} |", flush=True)
        if args.per_callback:
            print(f"\ncallbacks over {args.stall_ms:g} ms: {len(watch.slow_callbacks)}")
            for seconds, name, what in sorted(watch.slow_callbacks, reverse=True):
                print(f"  {1000 * seconds:.0f} ms in [{name}]: {what}")
        for stall in sorted(watch.stalls, key=lambda s: -s.held_s)[:args.show]:
            print(f"\n{1000 * stall.seconds:.0f} ms late, {1000 * stall.held_s:.0f} ms held, in [{stall.phase}]: "
                  f"{stall.where(30)}")
        for env in own + envs[len(envs) - 1:]:  # the driver closed the envs it played
            env.close()
        return rows

    with SandboxExecutor() as executor, CoderServer(args.dataset, wrong_turns=1) as server, \
            tempfile.TemporaryDirectory(prefix="loop_stalls_") as scratch:
        asyncio.run(run(executor, server.base_url, scratch))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
