"""Episode-server throughput: the same episodes played over the server (``convcodeworld serve``, one WebSocket session
per episode in flight) and in-process (``astep`` on envs sharing one executor), with a model that takes its time.

Both sides play the same jobs with the same rollout driver (:func:`convcodeworld_gym.rollouts.iter_rollouts`,
``protocol="always"``) and the same policy (``OpenAIPolicy`` against the scripted coder, ``CoderServer``: a wrong
program, then the canonical solution, each reply after ``--latency`` s plus its tokens at ``--tokens-per-s``, as
benchmarks/rollout_throughput.py has it); only the env differs: in-process, ``gym.make`` envs on one
``SandboxExecutor`` in this process; served, :class:`~convcodeworld_gym.service.remote.RemoteEnv` sessions on a
server in a process of its own (with its own ``SandboxExecutor``, as many workers). Each pass starts from a fresh
executor (fresh result cache) with its task set chosen and its workers up, and the clock runs from the first episode
to the last. Passes alternate in-process, served, served, in-process (``--rounds`` times two each), so that the
machine's drift falls on both sides alike; the ratio is served over in-process episodes per minute, over all
passes. Each pass also gives the CPU its episodes cost: this process and its descendants (the sandbox's workers and
runs, and on the served side the server), the coder's process left out.

    python benchmarks/server_throughput.py                                   # 256 in flight, HumanEval, CF-EF_full-SEF
    python benchmarks/server_throughput.py --dataset bigcodebench-stdlib     # needs $CONVCODEWORLD_BIGCODEBENCH_PATH

Needs the ``openenv`` extra (``pip install -e '.[openenv]'``). Numbers depend on the machine and on what else runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import gymnasium as gym

import convcodeworld_gym  # noqa: F401 - registers the ids
from convcodeworld_gym.policies import OpenAIPolicy
from convcodeworld_gym.rollouts import EpisodeJob, Trajectory, iter_rollouts
from convcodeworld_gym.sandbox import SandboxExecutor
from convcodeworld_gym.service.remote import RemoteEnvs
from convcodeworld_gym.tasks import BIGCODEBENCH_ENV, TaskSet, load_tasks
from convcodeworld_gym.testing import CoderServer
from convcodeworld_gym.testing.episode_server import EpisodeServer

CORES = len(os.sched_getaffinity(0))


@dataclass(frozen=True)
class Pass:
    side: str
    seconds: float
    trajectories: list[Trajectory]
    cpu_s: float  # CPU of this process and its descendants (the server and the sandboxes), the coder's left out

    @property
    def per_minute(self) -> float:
        return 60 * len(self.trajectories) / self.seconds

    @property
    def cpu_per_episode_s(self) -> float:
        return self.cpu_s / len(self.trajectories)

    @property
    def passed(self) -> int:
        return sum(bool(t.passed) for t in self.trajectories)


def tree_cpu_s(leave_out: int) -> float:
    """CPU seconds of this process and its live descendants (with what they reaped), the subtree of ``leave_out``
    (the coder's server) left out."""
    stats: dict[int, tuple[int, float]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(entry)] = (int(fields[1]), sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK"))

    def counted(pid: int) -> bool:
        while pid > 1:
            if pid == leave_out:
                return False
            if pid == os.getpid():
                return True
            pid = stats.get(pid, (0, 0.0))[0]
        return False

    return sum(cpu for pid, (_, cpu) in stats.items() if counted(pid))


def drive(jobs: Sequence[EpisodeJob], make_env: Callable[[], gym.Env], coder: CoderServer, in_flight: int,
          aclose: Callable[[], object] | None = None) -> tuple[float, list[Trajectory], float]:
    """Play ``jobs`` with ``in_flight`` episodes on one loop; (seconds, trajectories, CPU seconds of the episodes:
    this process and its descendants, the coder's left out)."""

    async def main() -> tuple[float, list[Trajectory], float]:
        policy = OpenAIPolicy("coder", base_url=coder.base_url, api_key="EMPTY")
        cpu, started = tree_cpu_s(coder.pid), time.perf_counter()
        try:
            done = [t async for t in iter_rollouts(jobs, make_env, policy, concurrency=in_flight, protocol="always")]
            return time.perf_counter() - started, done, tree_cpu_s(coder.pid) - cpu
        finally:
            if aclose is not None:
                await aclose()  # type: ignore[misc]
            await policy.aclose()

    return asyncio.run(main())


def in_process(env_id: str, tasks: TaskSet, jobs: Sequence[EpisodeJob], coder: CoderServer, in_flight: int,
               max_turns: int, workers: int | None) -> Pass:
    with SandboxExecutor(workers=workers) as executor:
        first = gym.make(env_id, dataset=tasks, max_turns=max_turns, executor=executor)
        chosen = first.unwrapped.tasks  # the task set chosen once, as the server's backend does before it serves
        first.close()

        def make_env() -> gym.Env:
            return gym.make(env_id, dataset=chosen, max_turns=max_turns, executor=executor)

        seconds, done, cpu = drive(jobs, make_env, coder, in_flight)
    return Pass("in-process", seconds, done, cpu)


def served(env_id: str, serve_args: Sequence[str], tasks: TaskSet, jobs: Sequence[EpisodeJob], coder: CoderServer,
           in_flight: int) -> Pass:
    with EpisodeServer([env_id, *serve_args, "--max-sessions", str(max(256, in_flight))]) as server:
        make_env = RemoteEnvs(server.base_url, env_id, tasks=tasks)
        seconds, done, cpu = drive(jobs, make_env, coder, in_flight, aclose=make_env.aclose)
    return Pass("served", seconds, done, cpu)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="humaneval", choices=("humaneval", "bigcodebench-stdlib"))
    parser.add_argument("--env-id", default="ConvCodeWorld-CF-EF_full-SEF-v0")
    parser.add_argument("--in-flight", type=int, default=256, help="episodes in flight (sessions at once)")
    parser.add_argument("--episodes", type=int, default=256, help="episodes per pass")
    parser.add_argument("--rounds", type=int, default=1, help="each round: in-process, served, served, in-process")
    parser.add_argument("--latency", type=float, default=1.0, help="seconds every model reply waits")
    parser.add_argument("--tokens-per-s", type=float, default=200.0, help="and its tokens at this rate")
    parser.add_argument("--max-turns", type=int, default=3)
    parser.add_argument("--workers", type=int, default=None, help="sandbox worker slots of each side (default: one per core)")
    args = parser.parse_args(argv)

    if args.dataset == "humaneval":
        spec, stdlib_only = "humaneval", False
    else:
        spec = os.environ.get(BIGCODEBENCH_ENV, "")
        if not spec:
            raise SystemExit(f"--dataset bigcodebench-stdlib needs ${BIGCODEBENCH_ENV} (a local BigCodeBench.jsonl.gz)")
        stdlib_only = True
    tasks = load_tasks(spec, stdlib_only=stdlib_only)
    serve_args = ["--dataset", spec, "--max-turns", str(args.max_turns), *(["--stdlib-only"] if stdlib_only else []),
                  *(["--workers", str(args.workers)] if args.workers else [])]
    probe = gym.make(args.env_id, dataset=tasks)
    ids = list(probe.unwrapped.tasks.ids)  # the tasks this runtime can play, as both sides choose them
    probe.close()
    jobs = [EpisodeJob(ids[i % len(ids)], seed=i) for i in range(args.episodes)]
    print(f"# server throughput: {CORES} cores, {args.env_id} on {args.dataset} ({len(ids)} tasks), {args.episodes} "
          f"episodes a pass, {args.in_flight} in flight, model latency {args.latency:g} s + tokens at "
          f"{args.tokens_per_s:g}/s, sandbox workers {args.workers or CORES} a side\n")
    print("| pass | side | seconds | episodes/min | CPU ms / episode | passed |")
    print("|---:|---|---:|---:|---:|---:|")
    passes: list[Pass] = []
    with CoderServer(spec, stdlib_only=stdlib_only, wrong_turns=1, latency_s=args.latency,
                     tokens_per_s=args.tokens_per_s) as coder:
        for _ in range(args.rounds):
            for side in ("in-process", "served", "served", "in-process"):
                if side == "served":
                    done = served(args.env_id, serve_args, tasks, jobs, coder, args.in_flight)
                else:
                    done = in_process(args.env_id, tasks, jobs, coder, args.in_flight, args.max_turns, args.workers)
                passes.append(done)
                print(f"| {len(passes)} | {done.side} | {done.seconds:.1f} | {done.per_minute:.0f} | "
                      f"{done.cpu_per_episode_s * 1000:.0f} | {done.passed}/{len(done.trajectories)} |", flush=True)
    rate = {side: 60 * sum(len(p.trajectories) for p in passes if p.side == side)
            / sum(p.seconds for p in passes if p.side == side) for side in ("in-process", "served")}
    cpu = {side: sum(p.cpu_s for p in passes if p.side == side) / sum(len(p.trajectories) for p in passes if p.side == side)
           for side in ("in-process", "served")}
    print(f"\nin-process {rate['in-process']:.0f} episodes/min, served {rate['served']:.0f} episodes/min: "
          f"served / in-process = {rate['served'] / rate['in-process']:.2f} (target >= 0.8); CPU per episode "
          f"{cpu['in-process'] * 1000:.0f} ms in-process, {cpu['served'] * 1000:.0f} ms served")
    return 0 if all(p.passed == len(p.trajectories) for p in passes) else 1


if __name__ == "__main__":
    sys.exit(main())
