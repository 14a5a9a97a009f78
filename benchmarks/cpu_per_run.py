"""Where throughput goes: the machine's CPU per run, by task group, split judge against in-process judging.

With every core busy, throughput is the CPU a run costs (all of its processes and the kernel's work for
them). This runs ``bench_sandbox.py``'s groups (standard-library, pandas, mocked tasks; canonical and
broken programs) ``--passes`` times each with ``--workers`` in parallel through a ``SandboxExecutor``
(result cache off), once with the split judge and once judged in-process (forgeable: program and tests in
one confined process), and prints runs per second and CPU per run (``/proc/stat``) for each. The gap
between the two columns is what the split judge costs: its second process (a fork, its copy-on-write
faults, its exit) and the crossings between program and tests.

Then, for the split judge, where each run's CPU goes, by process (``/proc/<pid>/stat``): this process (the
executor), the workers, their zygotes, and the runs' own processes (the zygotes' reaped children, each
with the program process it reaped in turn), the last in user and kernel time and in minor page faults;
"other" is the machine's rest (kernel threads, interrupts, anything else running).

Usage:
    CONVCODEWORLD_BIGCODEBENCH_PATH=... python benchmarks/cpu_per_run.py [--passes 3 --workers 2]
"""

from __future__ import annotations

import argparse
import glob
import os
import resource
import statistics

from _timing import busy_cpu_s, timed_passes
from bench_sandbox import pick_tasks
from convcodeworld_gym.sandbox import SandboxExecutor

GROUPS = {"stdlib": 20, "pandas": 10, "mocked": 10}
_TICK = os.sysconf("SC_CLK_TCK")


def passes(judge: str, workers: int, count: int) -> dict[str, tuple[float, float, dict[str, float]]]:
    """Per group: (runs per second, CPU ms per run), medians of ``count`` parallel passes after a warm-up one,
    and the CPU per run by process (:func:`by_process`) over all ``count`` passes."""
    out = {}
    with SandboxExecutor(workers=workers, cache=False, judge=judge) as ex:
        picked = pick_tasks(GROUPS, ex)
        for group, tasks in picked.items():
            jobs = [(t, p) for t in tasks for p in (t.ground_truth, t.code_prompt + "    pass\n")]
            ex.run_many(jobs, max_workers=workers)
            before = by_process()
            timed = timed_passes(lambda: ex.run_many(jobs, max_workers=workers), count)  # noqa: B023 - called here
            after = by_process()
            runs = count * len(jobs)
            out[group] = (statistics.median(len(jobs) / s for s, _ in timed),
                          statistics.median(cpu / len(jobs) * 1000 for _, cpu in timed),
                          {k: (after[k] - before[k]) / runs * (1 if k == "faults" else 1000) for k in after})
    return out


def _stat(pid: int) -> list[int]:
    """Fields of ``/proc/<pid>/stat`` after the command name (0: state; 8: cminflt; 11-14: utime, stime,
    cutime, cstime in clock ticks); [] for a process that is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return [int(x) if x.lstrip("-").isdigit() else 0 for x in fh.read().rsplit(")", 1)[1].split()]
    except OSError:
        return []


def _children(pid: int) -> list[int]:
    found = []
    for path in glob.glob(f"/proc/{pid}/task/*/children"):
        try:
            with open(path) as fh:
                found += [int(x) for x in fh.read().split()]
        except OSError:
            pass
    return found


def by_process() -> dict[str, float]:
    """CPU seconds so far: the machine's, this process's, the workers' (its children), the zygotes' (theirs),
    and the runs' (the zygotes' reaped children, user and kernel apart), and the runs' minor faults. Workers
    started or ended in between make the difference meaningless; the executor keeps them for its lifetime."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    workers = [s for s in map(_stat, _children(os.getpid())) if s]
    zygotes = [s for s in map(_stat, [z for w in _children(os.getpid()) for z in _children(w)]) if s]
    return {"machine": busy_cpu_s(), "executor": me.ru_utime + me.ru_stime,
            "workers": sum(s[11] + s[12] for s in workers) / _TICK, "zygotes": sum(s[11] + s[12] for s in zygotes) / _TICK,
            "runs_user": sum(s[13] for s in zygotes) / _TICK, "runs_kernel": sum(s[14] for s in zygotes) / _TICK,
            "faults": float(sum(s[8] for s in zygotes))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    split, inprocess = passes("split", args.workers, args.passes), passes("inprocess", args.workers, args.passes)
    print(f"{args.workers} in parallel, medians of {args.passes} passes; CPU: the whole machine's, per run")
    print(f"{'group':8}{'split: runs/s':>16}{'CPU/run':>10}{'in-process: runs/s':>21}{'CPU/run':>10}")
    for group in GROUPS:
        (s_rate, s_cpu, _), (i_rate, i_cpu, _) = split[group], inprocess[group]
        print(f"{group:8}{s_rate:>16.1f}{s_cpu:>8.0f}ms{i_rate:>21.1f}{i_cpu:>8.0f}ms")
    print("\nsplit judge, CPU ms per run by process (all passes; runs: the runs' own processes):")
    print(f"{'group':8}{'executor':>10}{'workers':>9}{'zygotes':>9}{'runs user':>11}{'runs kernel':>13}{'other':>7}"
          f"{'all':>6}{'faults':>8}")
    for group in GROUPS:
        cpu = split[group][2]
        other = cpu["machine"] - sum(cpu[k] for k in ("executor", "workers", "zygotes", "runs_user", "runs_kernel"))
        print(f"{group:8}{cpu['executor']:>10.1f}{cpu['workers']:>9.1f}{cpu['zygotes']:>9.1f}{cpu['runs_user']:>11.1f}"
              f"{cpu['runs_kernel']:>13.1f}{other:>7.1f}{cpu['machine']:>6.0f}{cpu['faults']:>8.0f}")


if __name__ == "__main__":
    main()
