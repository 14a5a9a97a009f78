"""Where throughput goes: the machine's CPU per run, by task group, split judge against in-process judging.

With every core busy, throughput is the CPU a run costs (all of its processes and the kernel's work for
them). This runs ``bench_sandbox.py``'s groups (standard-library, pandas, mocked tasks; canonical and
broken programs) ``--passes`` times each with ``--workers`` in parallel through a ``SandboxExecutor``
(result cache off), once with the split judge and once judged in-process (forgeable: program and tests in
one confined process), and prints runs per second and CPU per run (``/proc/stat``) for each. The gap
between the two columns is what the split judge costs: its second process (a fork, its copy-on-write
faults, its exit) and the crossings between program and tests.

Usage:
    CONVCODEWORLD_BIGCODEBENCH_PATH=... python benchmarks/cpu_per_run.py [--passes 3 --workers 2]
"""

from __future__ import annotations

import argparse
import statistics

from _timing import timed_passes
from bench_sandbox import pick_tasks
from convcodeworld_gym.sandbox import SandboxExecutor

GROUPS = {"stdlib": 20, "pandas": 10, "mocked": 10}


def passes(judge: str, workers: int, count: int) -> dict[str, tuple[float, float]]:
    """Per group: (runs per second, CPU ms per run), medians of ``count`` parallel passes after a warm-up one."""
    out = {}
    with SandboxExecutor(workers=workers, cache=False, judge=judge) as ex:
        picked = pick_tasks(GROUPS, ex)
        for group, tasks in picked.items():
            jobs = [(t, p) for t in tasks for p in (t.ground_truth, t.code_prompt + "    pass\n")]
            ex.run_many(jobs, max_workers=workers)
            timed = timed_passes(lambda: ex.run_many(jobs, max_workers=workers), count)  # noqa: B023 - called here
            out[group] = (statistics.median(len(jobs) / s for s, _ in timed),
                          statistics.median(cpu / len(jobs) * 1000 for _, cpu in timed))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    split, inprocess = passes("split", args.workers, args.passes), passes("inprocess", args.workers, args.passes)
    print(f"{args.workers} in parallel, medians of {args.passes} passes; CPU: the whole machine's, per run")
    print(f"{'group':8}{'split: runs/s':>16}{'CPU/run':>10}{'in-process: runs/s':>21}{'CPU/run':>10}")
    for group in GROUPS:
        (s_rate, s_cpu), (i_rate, i_cpu) = split[group], inprocess[group]
        print(f"{group:8}{s_rate:>16.1f}{s_cpu:>8.0f}ms{i_rate:>21.1f}{i_cpu:>8.0f}ms")


if __name__ == "__main__":
    main()
