"""Rollout throughput: episodes per minute of the rollout driver against the ideal and the old ways, with a model
that takes its time.

The model is the scripted coder (``convcodeworld_gym.testing.CoderServer``: a wrong program, then the canonical
solution) on the scripted OpenAI-compatible server in a process of its own, each reply after ``--latency`` seconds
(1 s, as a real model) plus its tokens at ``--tokens-per-s``. Episodes play CF-EF_full-SEF (the offline expert,
whose probes run in the sandbox too) on HumanEval and on BigCodeBench's standard-library tasks, with ``--in-flight``
episodes in flight (64 and 256) and twice as many episodes in all, all sharing one ``SandboxExecutor`` (one worker
per core, its result cache off so every program really runs).

Per setting it prints:

* episodes per minute of the driver (``convcodeworld_gym.rollouts.iter_rollouts``), against the **ideal**: the
  episodes over the larger of (model seconds of all calls / episodes in flight) and (env CPU seconds / cores),
  the latter measured as the time the same episodes take with an instant model (the env then keeps every core
  busy; measured so because this machine's CPU counters also count what else runs on it, and the CPU times of
  this process's tree missed most of the sandbox runs' time);
* the same episodes played the old way: threads (``convcodeworld evaluate`` before, one thread per episode in
  flight, each blocking on its steps) and, on a few episodes, one after the other (sequential);
* the event loop's worst lag and 99th percentile (a 5 ms heartbeat, ``benchmarks/_loop_watch.py``, which also says
  where the loop was in its longest stall; ``--freeze-gc`` to see what the garbage collector's pauses add), and the
  memory of this process per episode in flight (its peak RSS over its RSS before
  the run);
* the same driver run with one episode whose program takes ``--slow-s`` seconds (100) among them (listed first, in
  the first wave): how much later the other episodes are all done than without it.

    python benchmarks/rollout_throughput.py                        # everything: over an hour on 2 cores
    python benchmarks/rollout_throughput.py --datasets humaneval --in-flight 64 --slow-s 20 --no-threads

BigCodeBench needs ``$CONVCODEWORLD_BIGCODEBENCH_PATH`` (it is left out, saying so, without it). Numbers depend on
the machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

import convcodeworld_gym  # noqa: F401 - registers the ids
from convcodeworld_gym.policies import OpenAIPolicy, Policy, PolicyEpisode, PolicyReply
from convcodeworld_gym.rollouts import EpisodeJob, Trajectory, iter_rollouts, play
from convcodeworld_gym.sandbox import SandboxExecutor, TimePolicy
from convcodeworld_gym.tasks import BIGCODEBENCH_ENV, Task, TaskSet, load_tasks
from convcodeworld_gym.testing import CoderServer
from convcodeworld_gym.testing.openai_server import fake_tokens

try:  # run as a script (benchmarks/ on sys.path) or imported as benchmarks.rollout_throughput
    from _loop_watch import LoopWatch
except ImportError:  # pragma: no cover
    from benchmarks._loop_watch import LoopWatch

ENV_ID = "ConvCodeWorld-CF-EF_full-SEF-v0"
CORES = len(os.sched_getaffinity(0))


@dataclass
class Run:
    """One pass over the episodes."""

    seconds: float
    trajectories: list[Trajectory]
    done_at: dict[int, float] = field(default_factory=dict)  # job seed -> seconds from the start to its end
    worst_lag_s: float = float("nan")
    p99_lag_s: float = float("nan")
    rss_per_episode_mb: float = float("nan")
    worst_where: str = "-"  # where the loop was in the stall its own work held longest (_loop_watch.LoopWatch)

    @property
    def per_minute(self) -> float:
        return 60 * len(self.trajectories) / self.seconds

    def others_done_s(self, slow_seed: int) -> float:
        """Seconds until every episode but the one of ``slow_seed`` was done."""
        return max(seconds for seed, seconds in self.done_at.items() if seed != slow_seed)


class _Clocked(Policy):
    """A policy whose episodes note when they end (the driver closes each episode once it is over)."""

    def __init__(self, inner: Policy, done_at: dict[int, float], started: float, on_end: Callable[[], None]) -> None:
        self.inner, self.done_at, self.started, self.on_end = inner, done_at, started, on_end
        self.name = inner.name

    def start(self, task: Task, *, feedback: str, seed: int) -> PolicyEpisode:
        return _ClockedEpisode(self, self.inner.start(task, feedback=feedback, seed=seed), seed)


class _ClockedEpisode(PolicyEpisode):
    def __init__(self, policy: _Clocked, inner: PolicyEpisode, seed: int) -> None:
        self.policy, self.inner, self.seed = policy, inner, seed

    def act(self, observation: Mapping[str, Any]) -> PolicyReply:
        return self.inner.act(observation)

    async def aact(self, observation: Mapping[str, Any]) -> PolicyReply:
        return await self.inner.aact(observation)

    def close(self) -> None:
        self.inner.close()
        self.policy.done_at[self.seed] = time.perf_counter() - self.policy.started
        self.policy.on_end()


def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def model_seconds(trajectories: Sequence[Trajectory], latency_s: float, tokens_per_s: float) -> float:
    """What the server spent answering these episodes' calls: its latency and each reply's tokens at the rate."""
    return sum(latency_s + len(fake_tokens(call.reply)) / tokens_per_s for t in trajectories for call in t.calls)


def drive(jobs: list[EpisodeJob], make_env: Callable[[], gym.Env], base_url: str, in_flight: int,
          slow_seed: int | None = None) -> Run:
    """The rollout driver: ``in_flight`` episodes on one loop, a heartbeat and an RSS sampler beside them. With
    ``slow_seed``, the run ends once every other episode is done (the slow one is cancelled)."""

    async def main() -> Run:
        peak = [_rss_mb()]
        baseline = peak[0]
        watch = LoopWatch(on_beat=lambda: peak.__setitem__(0, max(peak[0], _rss_mb())))
        others_done = asyncio.Event()
        done_at: dict[int, float] = {}
        started = time.perf_counter()

        def on_end() -> None:
            if slow_seed is not None and len([s for s in done_at if s != slow_seed]) == len(jobs) - 1:
                others_done.set()

        policy = OpenAIPolicy("coder", base_url=base_url, api_key="EMPTY")
        clocked = _Clocked(policy, done_at, started, on_end)

        async def play_all() -> list[Trajectory]:
            return [t async for t in iter_rollouts(jobs, make_env, clocked, concurrency=in_flight)]

        async with watch.beating():
            playing = asyncio.create_task(play_all())
            if slow_seed is None:
                trajectories = await playing
            else:
                await others_done.wait()
                playing.cancel()
                await asyncio.gather(playing, return_exceptions=True)
                trajectories = []
            seconds = time.perf_counter() - started
        await policy.aclose()
        return Run(seconds, trajectories, done_at, watch.worst_s, watch.p99_s, (peak[0] - baseline) / in_flight,
                   watch.worst_where())

    return asyncio.run(main())


def threaded(jobs: list[EpisodeJob], make_env: Callable[[], gym.Env], base_url: str, threads: int) -> Run:
    """The old way: ``threads`` threads, each playing episodes one after the other on an env of its own, blocking
    (``convcodeworld evaluate --concurrency N`` before the driver; one thread: sequential)."""
    policy = OpenAIPolicy("coder", base_url=base_url, api_key="EMPTY")
    local = threading.local()
    envs: list[gym.Env] = []
    lock = threading.Lock()

    def one(job: EpisodeJob) -> Trajectory:
        if not hasattr(local, "env"):
            local.env = make_env()
            with lock:
                envs.append(local.env)
        return play(local.env, policy, job)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        done = list(pool.map(one, jobs))
    seconds = time.perf_counter() - started
    for env in envs:
        env.close()
    policy.close()
    return Run(seconds, done)


def warm(executor: SandboxExecutor, tasks: TaskSet) -> None:
    """Start every worker slot the runs will use (as the long-used executor of the other passes has)."""
    executor.run_many([(task, task.ground_truth) for task in list(tasks)[: 4 * executor.default_concurrency()]])


def task_set(name: str) -> tuple[str, bool, TaskSet] | None:
    """(dataset spec for the server, stdlib only, the tasks) of a ``--datasets`` name; None when it cannot be had."""
    if name == "humaneval":
        return "humaneval", False, load_tasks("humaneval")
    if name == "bigcodebench-stdlib":
        path = os.environ.get(BIGCODEBENCH_ENV)
        if not path:
            print(f"note: {name} left out: set ${BIGCODEBENCH_ENV} to a local BigCodeBench.jsonl.gz", file=sys.stderr)
            return None
        return path, True, load_tasks(path, stdlib_only=True)
    raise SystemExit(f"unknown dataset {name!r}: humaneval or bigcodebench-stdlib")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default="humaneval,bigcodebench-stdlib")
    parser.add_argument("--in-flight", default="64,256", help="comma-separated episodes in flight")
    parser.add_argument("--waves", type=int, default=2, help="episodes in all = waves x in flight")
    parser.add_argument("--latency", type=float, default=1.0, help="seconds every model reply waits")
    parser.add_argument("--tokens-per-s", type=float, default=200.0, help="and its tokens at this rate")
    parser.add_argument("--slow-s", type=float, default=100.0, help="the slow episode's program sleeps this long (0: none)")
    parser.add_argument("--workers", type=int, default=None, help="sandbox worker slots (default: one per core)")
    parser.add_argument("--sequential-episodes", type=int, default=6, help="episodes of the sequential pass (0: none)")
    parser.add_argument("--no-threads", action="store_true", help="leave out the threaded pass")
    parser.add_argument("--freeze-gc", action="store_true",
                        help="gc.freeze() once the task set and its envs are loaded (shorter garbage-collection pauses)")
    parser.add_argument("--no-lend", action="store_true",
                        help="the executor without lending (a run idle on the CPU keeps its place; sandbox.lending)")
    args = parser.parse_args(argv)
    time_policy = TimePolicy(floor_s=args.slow_s + 30, cap_s=max(121.0, args.slow_s + 30))  # the slow one is no timeout
    model = {"wrong_turns": 1, "latency_s": args.latency, "tokens_per_s": args.tokens_per_s}
    print(f"# rollout throughput: {CORES} cores, {ENV_ID}, model latency {args.latency:g} s + tokens at "
          f"{args.tokens_per_s:g}/s, sandbox workers {args.workers or CORES}, slow task {args.slow_s:g} s, "
          f"idle runs {'keep' if args.no_lend else 'lend'} their places\n")
    print("| tasks | in flight | episodes | driver ep/min | ideal ep/min | driver / ideal | threads ep/min "
          "| sequential ep/min | loop worst lag | loop p99 lag | MB / episode in flight | others done | "
          "with one slow task | delay |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in args.datasets.split(","):
        chosen = task_set(name)
        if chosen is None:
            continue
        spec, stdlib_only, tasks = chosen
        sandbox = {"workers": args.workers, "cache": False, "time_policy": time_policy, "lend_idle": not args.no_lend}
        with SandboxExecutor(**sandbox) as executor:
            def make_env(executor: SandboxExecutor = executor) -> gym.Env:
                return gym.make(ENV_ID, dataset=tasks, max_turns=3, executor=executor)

            probe = make_env()
            ids = list(probe.unwrapped.tasks.ids)  # the tasks this runtime can play
            probe.close()
            if args.freeze_gc:  # what is loaded by now lives to the end: the collector need not walk it again
                gc.collect()
                gc.freeze()
            for in_flight in (int(n) for n in args.in_flight.split(",")):
                # the first job's task is no other job's: it is the one made slow below
                jobs = [EpisodeJob(ids[0], seed=0)] + [EpisodeJob(ids[1 + i % (len(ids) - 1)], seed=i + 1)
                                                       for i in range(args.waves * in_flight - 1)]
                with CoderServer(spec, stdlib_only=stdlib_only, wrong_turns=1, latency_s=0.0) as server:
                    env_s = drive(jobs, make_env, server.base_url, in_flight).seconds  # an instant model: the env alone
                with CoderServer(spec, stdlib_only=stdlib_only, **model) as server:
                    run = drive(jobs, make_env, server.base_url, in_flight)
                    threads = None if args.no_threads else threaded(jobs, make_env, server.base_url, in_flight)
                    sequential = (threaded(jobs[:args.sequential_episodes], make_env, server.base_url, 1)
                                  if args.sequential_episodes else None)
                ideal_s = max(model_seconds(run.trajectories, args.latency, args.tokens_per_s) / in_flight, env_s)
                ideal = 60 * len(jobs) / ideal_s
                slow = None
                if args.slow_s:
                    with SandboxExecutor(**sandbox) as own, \
                            CoderServer(spec, stdlib_only=stdlib_only, sleepy={ids[0]: args.slow_s}, **model) as server:
                        warm(own, tasks)  # its slow run is cut short; a fresh executor lets it end on its own
                        slow = drive(jobs, lambda own=own: gym.make(ENV_ID, dataset=tasks, max_turns=3, executor=own),
                                     server.base_url, in_flight, slow_seed=0)
                others = run.others_done_s(0)
                row = [name, str(in_flight), str(len(jobs)), f"{run.per_minute:.0f}", f"{ideal:.0f}", f"{run.per_minute / ideal:.2f}",
                       f"{threads.per_minute:.0f}" if threads else "-", f"{sequential.per_minute:.1f}" if sequential else "-",
                       f"{run.worst_lag_s * 1000:.0f} ms", f"{run.p99_lag_s * 1000:.0f} ms", f"{run.rss_per_episode_mb:.2f}",
                       f"{others:.1f} s", f"{slow.others_done_s(0):.1f} s" if slow else "-",
                       f"{100 * (slow.others_done_s(0) - others) / others:+.1f}%" if slow else "-"]
                print("| " + " | ".join(row) + " |", flush=True)
                print(f"<!-- {name}, {in_flight} in flight: the env alone {env_s:.1f} s ({CORES * env_s / len(jobs):.3f} s of "
                      f"the cores an episode); model "
                      f"{model_seconds(run.trajectories, args.latency, args.tokens_per_s):.0f} s in all; "
                      f"{sum(t.model_calls for t in run.trajectories)} calls; passed {sum(bool(t.passed) for t in run.trajectories)}"
                      f"/{len(jobs)}; driver {run.seconds:.1f} s, ideal {ideal_s:.1f} s; the loop's longest stall "
                      f"of its own: {run.worst_where} -->", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
