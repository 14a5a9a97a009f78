"""Judged programs per second per core, and the CPU one judged program costs (issue 40, item 3).

Three measurements, each a Markdown table on stdout:

1. **Self-check**: every BigCodeBench task the executor's runtime serves (as ``convcodeworld selfcheck`` chooses
   them), its canonical program judged once, through a ``SandboxExecutor`` with ``--workers`` slots (default: one
   per core), the result cache off. Canonical programs are the slow end of what a judge sees: every test runs to
   its end.
2. **Scaling**: a sample of those tasks (every ``--sample-every``-th), the same programs with 1 worker and then
   with 2 (more if ``--scaling`` says so), ours and, side by side on the same programs in the same run, BigCodeBench
   0.2.5's own ``untrusted_check`` (``--bcb-python``; no isolation between runs, the harness the paper's numbers
   came from), passes interleaved.
3. **Rollout mix**: on the sample, the programs a policy writes during RL, one of each per task: the canonical
   program, a wrong one (the signature with ``return None``: every test runs and fails) and one that crashes at
   import (``raise RuntimeError`` after the function). No program that loops to its time limit is in the mix (its
   cost is the limit, whatever the judge).

For each pass: programs, seconds, programs per second, **programs per second per core** (per second over the cores
the pass could use: ``min(workers, cores)``), **CPU seconds per judged program** (the CPU of this process and
everything it starts, from a cgroup v1 ``cpuacct`` group of its own: :class:`CpuClock`; where there is none, the
machine's busy CPU from ``/proc/stat``, so run it on a quiet machine; the load average is printed before and after), and the verdicts (passed / programs). Then what a Ray node needs (the Ray backend runs
one sandbox worker per actor, one actor per CPU it is given): the peak proportional memory (PSS) of this process's
process tree over the self-check, per worker; the runtime's size on disk; and the programs per second a node of
``--node-cores`` cores would judge at the measured per-core figure.

The published anchors are printed beside ours, and their tasks differ from these: SandboxFusion about 0.065
problems per second per core, a Dockerised Python judge about 0.1.

Usage (see docs/benchmarks.md; the pinned runtime: ``convcodeworld runtime install bigcodebench``):
    CONVCODEWORLD_BIGCODEBENCH_PATH=... python benchmarks/judge_rate.py --bcb-python /tmp/bcb-python
    python benchmarks/judge_rate.py --parts scaling,mix --sample-every 40   # the sample only: minutes
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from _timing import busy_cpu_s
from bench_sandbox import Driver, Job
from convcodeworld_gym.sandbox import SandboxExecutor
from convcodeworld_gym.sandbox.runtimes.needs import choose_tasks
from convcodeworld_gym.tasks import Task, load_tasks

#: Published figures of other judges (their tasks differ from BigCodeBench's): problems per second per core.
ANCHORS = (("SandboxFusion (published)", 0.065), ("a Dockerised Python judge (published)", 0.1))


class CpuClock:
    """CPU seconds spent by this process and everything it starts (the executor, its workers and zygotes, the runs,
    the peer's driver), from a cgroup v1 ``cpuacct`` group of its own that this process moves into: the sandbox moves
    runs into slot cgroups of the ``cpu`` and ``pids`` hierarchies only, so they stay counted here, and whatever else
    the machine runs is not. Where that cannot be had (cgroup v2, no root), the machine's busy CPU (``/proc/stat``),
    which counts everything that runs: then run it on a quiet machine. ``source`` says which."""

    ROOT = "/sys/fs/cgroup/cpuacct"

    def __init__(self) -> None:
        self._usage: str | None = None
        self._home = os.path.join(self.ROOT, _own_cpuacct().lstrip("/"))  # where this process goes back to
        group = os.path.join(self._home, f"ccw-judge-rate-{os.getpid()}")
        try:
            os.makedirs(group, exist_ok=True)
            with open(os.path.join(group, "cgroup.procs"), "w") as fh:
                fh.write(str(os.getpid()))
            self._usage, self.source = os.path.join(group, "cpuacct.usage"), f"cgroup {group}"
        except OSError as exc:
            self.source = f"/proc/stat, the whole machine (no cpuacct group: {exc})"

    def __call__(self) -> float:
        if self._usage is None:
            return busy_cpu_s()
        with open(self._usage) as fh:
            return int(fh.read()) / 1e9

    def close(self) -> None:
        """Move this process back to the group it came from and remove its own (once what it started has ended)."""
        if self._usage is not None:
            group = os.path.dirname(self._usage)
            try:
                with open(os.path.join(self._home, "cgroup.procs"), "w") as fh:
                    fh.write(str(os.getpid()))
                os.rmdir(group)
            except OSError:
                pass


def _own_cpuacct() -> str:
    """This process's cgroup v1 ``cpuacct`` path (``/`` where none is listed)."""
    try:
        with open("/proc/self/cgroup") as fh:
            for line in fh:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if "cpuacct" in controllers.split(","):
                    return path
    except (OSError, ValueError):
        pass
    return "/"


@dataclass(frozen=True)
class Pass:
    """One timed pass over some programs."""

    side: str
    label: str
    workers: int
    programs: int
    seconds: float
    cpu_s: float
    passed: int | None

    @property
    def per_core(self) -> float:
        """Programs per second per core the pass could use."""
        return self.programs / self.seconds / min(self.workers, os.cpu_count() or 1)

    def row(self) -> str:
        verdicts = "n/a" if self.passed is None else f"{self.passed}/{self.programs}"
        return (f"| {self.side} | {self.label} | {self.workers} | {self.programs} | {self.seconds:.1f} | "
                f"{self.programs / self.seconds:.3f} | **{self.per_core:.3f}** | {self.cpu_s / self.programs:.3f} | "
                f"{verdicts} |")


HEADER = ("| side | programs | workers | n | seconds | programs/s | programs/s/core | CPU s / program | passed |\n"
          "|---|---|---:|---:|---:|---:|---:|---:|---:|")


def wrong(task: Task) -> str:
    """The task's signature returning None: compiles, runs every test, fails them."""
    return task.code_prompt.rstrip() + "\n    return None\n"


def crashing(task: Task) -> str:
    """The task's signature, then a module-level raise: the run ends before any test."""
    return task.code_prompt.rstrip() + "\n    return None\n\nraise RuntimeError('crashed at import')\n"


def rollout_mix(tasks: list[Task]) -> list[Job]:
    """One canonical, one wrong and one crashing program per task, interleaved task by task."""
    return [(t, program) for t in tasks for program in (t.ground_truth, wrong(t), crashing(t))]


def ours(jobs: list[Job], workers: int, label: str, clock: CpuClock) -> Pass:
    """One pass of ``jobs`` through a fresh ``SandboxExecutor`` of ``workers`` slots (started, and its workers
    warm, before the clock starts; result cache off)."""
    with SandboxExecutor(workers=workers, cache=False) as executor:
        executor.run(*jobs[0])  # the workers up and the first task's profile read, outside the pass
        cpu, started = clock(), time.perf_counter()
        results = executor.run_many(jobs)
        seconds, cpu_s = time.perf_counter() - started, clock() - cpu
    return Pass("ours (split judge, confined)", label, workers, len(jobs), seconds, cpu_s, sum(r.passed for r in results))


def theirs(driver: Driver, jobs: list[Job], workers: int, label: str, clock: CpuClock) -> Pass:
    """One pass of ``jobs`` through BigCodeBench's ``untrusted_check``, ``workers`` at a time."""
    cpu = clock()
    seconds, _machine_cpu_s = driver.parallel(jobs, workers)
    cpu_s = clock() - cpu
    return Pass("BigCodeBench 0.2.5 untrusted_check", label, workers, len(jobs), seconds, cpu_s, None)


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def _pss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as fh:
                total += next(int(line.split()[1]) for line in fh if line.startswith("Pss:"))
        except (OSError, StopIteration, ValueError):
            continue
    return total / 1024


@contextmanager
def peak_pss(every_s: float = 2.0) -> Iterator[Callable[[], float]]:
    """Sample the PSS of this process's tree every ``every_s`` seconds in a thread; yields a reader of the peak (MB)."""
    peak, stop = [0.0], threading.Event()

    def sample() -> None:
        while not stop.wait(every_s):
            peak[0] = max(peak[0], _pss_mb(_descendants(os.getpid())))

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield lambda: peak[0]
    finally:
        stop.set()
        thread.join()


def _dir_mb(path: Path) -> float:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total / 2**20


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="slots of the self-check pass (default: one per core)")
    parser.add_argument("--scaling", default="1,2", help="worker counts of the scaling passes (default 1,2)")
    parser.add_argument("--sample-every", type=int, default=10, help="the sample: every N-th chosen task (default 10)")
    parser.add_argument("--parts", default="scaling,mix,selfcheck",
                        help="which passes, comma-separated, of scaling, mix, selfcheck (default: all three)")
    parser.add_argument("--bcb-python", default=None, help="an interpreter that imports bigcodebench 0.2.5 and the "
                        "tasks' libraries (e.g. a wrapper that sets PYTHONPATH to a --target install of it and runs "
                        "the pinned runtime's python); without it the peer is left out")
    parser.add_argument("--node-cores", type=int, default=32, help="cores of the Ray node the last table sizes (default 32)")
    args = parser.parse_args()
    clock = CpuClock()
    try:
        return measure(args, clock)
    finally:
        clock.close()


def measure(args: argparse.Namespace, clock: CpuClock) -> int:
    """The passes of ``args`` and their tables (see the module)."""
    scaling = [int(n) for n in args.scaling.split(",")]
    parts = set(args.parts.split(","))
    if not parts <= {"scaling", "mix", "selfcheck"}:
        raise SystemExit(f"--parts {args.parts!r}: name some of scaling, mix, selfcheck")

    probe_ex = SandboxExecutor(workers=1, cache=False)
    probe = probe_ex.runtime_probe()
    probe_ex.close()
    chosen, lacking = choose_tasks(load_tasks("bigcodebench"), probe, by_id=False)
    tasks = list(chosen)
    sample = tasks[:: args.sample_every]
    runtime = Path(probe.python).parent.parent if probe is not None else None  # the venv, not its base interpreter
    print(f"{len(tasks)} BigCodeBench tasks served by {probe.python if probe else sys.executable} "
          f"({len(lacking)} left out); sample: every {args.sample_every}th, {len(sample)} tasks; "
          f"{os.cpu_count()} cores; load average {_load()}; CPU from {clock.source}\n")
    passes: list[Pass] = []
    peak_mb = None

    driver = Driver(args.bcb_python, "_bcb_driver.py") if args.bcb_python else None
    try:
        canonical = [(t, t.ground_truth) for t in sample]
        mix = rollout_mix(sample)
        for workers in scaling if "scaling" in parts else ():  # interleaved: ours then theirs at each width
            passes.append(ours(canonical, workers, "sample, canonical", clock))
            if driver:
                passes.append(theirs(driver, canonical, workers, "sample, canonical", clock))
        for workers in (max(scaling),) if "mix" in parts else ():
            passes.append(ours(mix, workers, "sample, rollout mix", clock))
            if driver:
                passes.append(theirs(driver, mix, workers, "sample, rollout mix", clock))
        if "selfcheck" in parts:
            with peak_pss() as peak:
                passes.append(ours([(t, t.ground_truth) for t in tasks], args.workers, "full self-check", clock))
                peak_mb = peak()
    finally:
        if driver:
            driver.close()

    print(HEADER)
    for p in passes:
        print(p.row())
    print(f"\nload average after: {_load()}")
    print("\nAnchors, published (their tasks differ from BigCodeBench's):")
    for name, rate in ANCHORS:
        print(f"- {name}: {rate} problems/s/core")

    by = {(p.side, p.label, p.workers): p for p in passes}
    ours_side = "ours (split judge, confined)"
    one, two = by.get((ours_side, "sample, canonical", 1)), by.get((ours_side, "sample, canonical", 2))
    if one and two:
        print(f"\nScaling, ours, 1 -> 2 workers: {two.programs / two.seconds / (one.programs / one.seconds):.2f}x programs/s")
    peer_one = by.get(("BigCodeBench 0.2.5 untrusted_check", "sample, canonical", 1))
    peer_two = by.get(("BigCodeBench 0.2.5 untrusted_check", "sample, canonical", 2))
    if peer_one and peer_two:
        print(f"Scaling, BigCodeBench's harness, 1 -> 2 workers: "
              f"{peer_two.programs / peer_two.seconds / (peer_one.programs / peer_one.seconds):.2f}x programs/s")

    full = by.get((ours_side, "full self-check", args.workers))
    basis = full or two or one
    if basis is not None:
        print(f"\nA Ray node of {args.node_cores} cores (one actor and sandbox worker per core), at "
              f"{basis.per_core:.3f} programs/s/core ({basis.label}): about {basis.per_core * args.node_cores:.1f} "
              f"programs/s, {basis.cpu_s / basis.programs:.2f} CPU s each.")
        if peak_mb is not None:
            print(f"Memory: peak PSS of the executor's process tree over the self-check {peak_mb:.0f} MB for "
                  f"{args.workers} workers (this process included): about {peak_mb / args.workers:.0f} MB per worker.")
        if runtime is not None and runtime.is_dir():
            print(f"Disk: the runtime's venv ({runtime}) holds {_dir_mb(runtime) / 1024:.2f} GB (its base interpreter "
                  "besides); each node needs it at the same path, and root for the sandbox's namespaces and uids "
                  "(docs/scale.md).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
