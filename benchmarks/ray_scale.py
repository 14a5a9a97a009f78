"""Judged programs per second on a Ray cluster of 1 and of 2 single-CPU nodes on this machine (issue 52, item 4).

A real cluster (``ray.cluster_utils.Cluster``, through :class:`convcodeworld_gym.testing.ray_cluster.NodeCluster`):
a head node of 1 CPU, and a worker node of 1 CPU that is added before each 2-node pass and removed (SIGKILL, as a
machine lost) before each 1-node pass. ONE ``RayExecutor`` (``slots=None``: one actor per CPU, growing and shrinking
with the cluster, as under an autoscaler) judges the same programs in every pass; its node sandboxes' result cache is
off, each slot's runs are held to 1 CPU (``SandboxSettings(run_cpus=1)``, the slot's cgroup: what a 1-CPU machine
gives them), and each pass starts once every actor has judged a few programs (its sandbox worker warm). Side by side
in the same run, on the same programs: the local ``SandboxExecutor`` (no Ray) with 1 and 2 workers, the same
settings, so the table shows what Ray costs. Passes go ray 1 node, ray 2 nodes, local 1 worker, local 2 workers,
``--passes`` rounds; each row gives every pass, the median, programs per second at the median, and the 2 / 1 ratio
(the median of the rounds' ratios: this machine's speed drifts over minutes) beside the ideal 2.0. Every pass's
verdicts must be the same (the script fails otherwise).

The programs: the rollout mix of ``judge_rate.py`` (per task the canonical program, a wrong one that runs every test
and fails, and one that crashes at import), on HumanEval (all 164 tasks: 492 programs) or on every
``--sample-every``-th BigCodeBench task this runtime serves.

The nodes are logical: both share this machine's cores with the driver, the head's services and each other, so 2
nodes of 1 CPU on a 2-core machine can reach 2.0 only if nothing else needs a core.

    python benchmarks/ray_scale.py                       # HumanEval, 3 rounds: about 5 minutes on 2 cores
    CONVCODEWORLD_BIGCODEBENCH_PATH=... python benchmarks/ray_scale.py --dataset bigcodebench --sample-every 20
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from judge_rate import rollout_mix
from convcodeworld_gym.sandbox import ExecutionResult, SandboxExecutor, SandboxSettings
from convcodeworld_gym.sandbox.backends.ray import RayExecutor
from convcodeworld_gym.sandbox.host.profile import import_profile
from convcodeworld_gym.sandbox.runtimes.needs import choose_tasks
from convcodeworld_gym.tasks import Task, load_tasks
from convcodeworld_gym.testing.infra import until
from convcodeworld_gym.testing.ray_cluster import NodeCluster

Job = tuple[Task, str]
#: The node executor: one warm sandbox worker whose runs get 1 CPU, no result cache (every pass judges the same programs).
UNCACHED = functools.partial(SandboxExecutor, workers=1, cache=False, settings=SandboxSettings(run_cpus=1.0))
START_S = 120.0


def programs(dataset: str, sample_every: int) -> list[Job]:
    """The rollout mix over the chosen tasks."""
    tasks = load_tasks(dataset)
    if dataset == "bigcodebench":
        with SandboxExecutor(workers=1, cache=False) as probe_ex:
            tasks, _lacking = choose_tasks(tasks, probe_ex.runtime_probe(), by_id=False)
        return rollout_mix(list(tasks)[::sample_every])
    return rollout_mix(list(tasks))


def warm(run_many: Callable[[list[Job]], list[ExecutionResult]], jobs: list[Job], nodes: set[str], workers: int
         ) -> None:
    """Outside the clock: judge one canonical program of each import profile until every node (``nodes``: the Ray
    actors' nodes; ``{""}`` for the local sandbox) has a warm sandbox worker of each (a node's sandbox starts a
    worker per profile on its first run), ``workers`` at once on each node."""
    firsts = list({import_profile(task): (task, task.ground_truth) for task, _program in jobs}.values())
    seen: set[tuple[str, str]] = set()
    for _ in range(20):
        results = run_many(firsts * workers * len(nodes))
        seen |= {(r.details.get("ray_node", ""), r.details["worker_group"]) for r in results}
        served = {group for _node, group in seen}  # a profile may be served by a larger group
        if all((node, group) in seen for node in nodes for group in served):
            return
    raise RuntimeError(f"not every node warmed every worker group: {sorted(seen)}")


def timed(run_many: Callable[[list[Job]], list[ExecutionResult]], jobs: list[Job]) -> tuple[float, list[bool]]:
    started = time.perf_counter()
    results = run_many(jobs)
    seconds = time.perf_counter() - started
    lost = [r.infra_error for r in results if r.infra_error]
    if lost:
        raise RuntimeError(f"{len(lost)} runs lost in a pass: {lost[0]}")
    return seconds, [r.passed for r in results]


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", choices=("humaneval", "bigcodebench"), default="humaneval")
    parser.add_argument("--sample-every", type=int, default=20, help="BigCodeBench: every N-th task served (default 20)")
    parser.add_argument("--passes", type=int, default=3, help="rounds of the four passes (default 3)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    jobs = programs(args.dataset, args.sample_every)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    print(f"# {len(jobs)} programs ({args.dataset}, rollout mix), {os.cpu_count()} cores, Python "
          f"{sys.version.split()[0]}, commit {commit}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"load average before: {_load()}\n", flush=True)

    seconds: dict[str, list[float]] = {}
    verdicts: list[list[bool]] = []

    def record(label: str, run_many: Callable[[list[Job]], list[ExecutionResult]]) -> None:
        took, passed = timed(run_many, jobs)
        seconds.setdefault(label, []).append(took)
        verdicts.append(passed)
        print(f"{label}: {took:.1f} s, {len(jobs) / took:.2f} programs/s (load {_load()})", flush=True)

    with NodeCluster(head_cpus=1) as cluster:
        ex = RayExecutor(cluster.address, node_executor=UNCACHED)
        try:
            until(lambda: len(ex.actors()) == 1, START_S, "the head's actor started")
            worker = None
            for _ in range(args.passes):
                if worker is not None:
                    cluster.remove(worker)
                    worker = None
                    until(lambda: len(ex.actors()) == 1, START_S, "the lost node's actor dropped")
                warm(ex.run_many, jobs, {node for node, _pid in ex.actors()}, 1)
                record("ray, 1 node", ex.run_many)
                worker = cluster.add(cpus=1)
                until(lambda: len(ex.actors()) == 2, START_S, "an actor on the added node")
                warm(ex.run_many, jobs, {node for node, _pid in ex.actors()}, 1)
                record("ray, 2 nodes", ex.run_many)
                for workers in (1, 2):
                    with UNCACHED(workers=workers) as local:
                        warm(local.run_many, jobs, {""}, workers)
                        record(f"local sandbox, {workers} worker{'s' * (workers > 1)}", local.run_many)
        finally:
            ex.close()

    if any(v != verdicts[0] for v in verdicts):
        raise SystemExit("the passes' verdicts differ: a verdict changed between configurations")
    print(f"\nverdicts: the same in all {len(verdicts)} passes ({sum(verdicts[0])} of {len(jobs)} passed); "
          f"load average after: {_load()}\n")
    print("| configuration | passes (s) | median s | programs/s | 2 / 1 | ideal |")
    print("|---|---|---:|---:|---:|---:|")
    for one, two in (("ray, 1 node", "ray, 2 nodes"), ("local sandbox, 1 worker", "local sandbox, 2 workers")):
        rate = {label: len(jobs) / statistics.median(seconds[label]) for label in (one, two)}
        rounds = statistics.median(a / b for a, b in zip(seconds[one], seconds[two]))
        for label in (one, two):
            ratio = f"**{rounds:.2f}x**" if label == two else ""
            ideal = "2.0x" if label == two else ""
            print(f"| {label} | {', '.join(f'{s:.1f}' for s in seconds[label])} | "
                  f"{statistics.median(seconds[label]):.1f} | {rate[label]:.2f} | {ratio} | {ideal} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
