"""Benchmark: our SandboxExecutor against BigCodeBench 0.2.5's ``untrusted_check``, in one run.

Same BigCodeBench tasks in three groups (standard-library-only, numpy/pandas/matplotlib, and tasks whose
tests mock what the program uses), each with its canonical program and a broken one (the signature with
``pass``), through both executors. Reports per-execution medians per group (sequential back to back, and
with 0.2 s between runs; after warm-up; our result cache off), the mocked group also judged
in-process (forgeable) next to the split judge with stand-ins, each group's per-stage split of our runs
(``details["stages"]``), the first step of an unseen task against a later step of it (a fresh executor with
shipped profiles), throughput with ``--workers`` parallel runs (each side's median of ``--passes`` passes) and the
machine's CPU per run in it, and verdict agreement; and, as yardsticks, two unsafe designs with no sandbox at all
(``_floor_driver.py``): the floor (a fork per run) and the ceiling (a warm process per parallel slot that runs every
job it gets in itself: no fork, no isolation). Our side
runs with full confinement when the machine allows it (the level is printed).

The sides are interleaved, because this machine's speed drifts by 10-25% over minutes: each group's programs run
back to back on our side, then on theirs, the floor's and the ceiling's, group after group; the throughput passes
go ours, theirs, floor, ceiling, ``--passes`` times. The throughput ratio printed is the median of the rounds' ratios.

Usage (see docs/benchmarks.md):
    python benchmarks/bench_sandbox.py --bcb-python .venv-bcb/bin/python [--stdlib 20 --pandas 10 --mocked 10 --workers 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _timing import median_pass, timed_pass
from convcodeworld_gym.sandbox import ExecutionResult, SandboxExecutor
from convcodeworld_gym.tasks import Task, load_tasks

HERE = Path(__file__).resolve().parent
DATA_LIBS = {"numpy", "pandas", "matplotlib"}


def group_of(task: Task) -> str | None:
    """``mocked`` (tests that mock, data libraries at most), ``stdlib``, ``pandas``, or None (not benchmarked)."""
    if not task.third_party_modules <= DATA_LIBS:
        return None
    if "mock" in task.test:
        return "mocked"
    return "stdlib" if task.stdlib_only else "pandas" if "pandas" in task.third_party_modules else None


def pick_tasks(wanted: dict[str, int], executor: SandboxExecutor, skip: int = 0) -> dict[str, list[Task]]:
    """The first tasks of each group (after the first ``skip`` of each) whose canonical solution passes quickly
    here (profiles shipped or computed, not timed)."""
    picked: dict[str, list[Task]] = {group: [] for group in wanted}
    skipped = dict.fromkeys(wanted, 0)
    for task in load_tasks("bigcodebench"):
        group = group_of(task)
        if group not in wanted or len(picked[group]) >= wanted[group] or executor.runtime_probe().lacking_one(task):
            continue
        profile = executor.profile(task)
        if profile.canonical_passed and profile.canonical_s is not None and profile.canonical_s < 2.0:
            if skipped[group] < skip:
                skipped[group] += 1
            else:
                picked[group].append(task)
        if all(len(picked[g]) >= n for g, n in wanted.items()):
            break
    return picked


def timed(executor: SandboxExecutor, task: Task, program: str) -> tuple[float, ExecutionResult]:
    started = time.perf_counter()
    result = executor.run(task, program)
    return time.perf_counter() - started, result


def stage_split(results: list[ExecutionResult]) -> str:
    """Median of each stage over ``results`` (ms), in the order a run goes through them."""
    order = ("fork_s", "confine_s", "program_fork_s", "import_s", "handoff_s", "job_s", "connect_s", "program_start_s",
             "load_s", "tests_s", "round_trip_s", "round_trips", "previous_teardown_s", "prefaulted_mb")
    names = {"fork_s": "fork", "confine_s": "confine", "program_fork_s": "program process", "import_s": "import",
             "handoff_s": "hand-off", "job_s": "of it job read", "connect_s": "program started + its names fetched",
             "program_start_s": "of that the program's module run", "load_s": "tests loaded", "tests_s": "tests",
             "round_trip_s": "judge's round trips to the program", "round_trips": "their count",
             "previous_teardown_s": "teardown", "prefaulted_mb": "MiB the spare copied ahead"}
    stages = [r.details.get("stages", {}) for r in results]
    scale = {"round_trips": 1, "prefaulted_mb": 1}  # a count and a size, not seconds
    return ", ".join(f"{names[k]} {statistics.median(s[k] for s in stages if k in s) * scale.get(k, 1000):.1f}"
                     for k in order if any(k in s for s in stages))


def first_vs_later(unseen: list[Task], workers: int, warm: list[tuple[Task, str]], reset: bool = False
                   ) -> tuple[list[float], list[float], int]:
    """A fresh executor (shipped profiles), warmed on ``warm``; then each ``unseen`` task (none of ``warm``'s)
    run twice with different broken programs: the first step's and the later step's seconds, and how many
    of the first steps found no shipped profile (and calibrated). ``reset``: the task is prepared first, as
    the env's ``reset`` does (``Executor.prepare``), untimed."""
    with SandboxExecutor(workers=workers, cache=False) as ex:
        ex.run_many(warm, max_workers=workers)
        first, later = [], []
        for task in unseen:
            time.sleep(0.2)
            if reset:
                ex.prepare(task)
            first.append(timed(ex, task, task.code_prompt + "    pass\n")[0])
            time.sleep(0.2)
            later.append(timed(ex, task, task.code_prompt + "    return None\n")[0])
        calibrated = sum(1 for t in unseen if not ex.profile(t).note.startswith("shipped"))
    return first, later, calibrated


Job = tuple[Task, str]


class Driver:
    """A side measured in its own interpreter: ``driver`` (a script beside this one, answering as
    ``_timing.serve`` does) run by ``python``, asked one job or one parallel pass at a time."""

    def __init__(self, python: str, driver: str, *args: str) -> None:
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")} | {"MPLBACKEND": "Agg"}
        self.name = driver
        self._stderr = tempfile.TemporaryFile()
        python = os.path.abspath(python) if os.sep in python else python  # it runs in HERE: a relative path would miss
        self._proc = subprocess.Popen([python, str(HERE / driver), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._stderr, env=env, cwd=str(HERE), text=True)

    def _ask(self, request: dict) -> dict:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        try:
            self._proc.stdin.write(json.dumps(request) + "\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            self._stderr.seek(0)
            sys.exit(f"{self.name} failed:\n{self._stderr.read().decode(errors='replace')[-3000:]}")
        return json.loads(line)

    def check(self, job: Job) -> tuple[float, bool]:
        """Seconds and verdict of one run of ``job``."""
        answer = self._ask({"check": _wire(job)})
        return answer["seconds"], answer["passed"]

    def parallel(self, jobs: list[Job], workers: int) -> tuple[float, float]:
        """Seconds and machine CPU seconds of one pass over ``jobs``, ``workers`` at a time."""
        answer = self._ask({"parallel": [_wire(job) for job in jobs], "workers": workers})
        return answer["seconds"], answer["cpu_s"]

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        self._proc.wait()
        self._stderr.close()


def _wire(job: Job) -> list[str]:
    task, program = job
    return [program, task.test, task.entry_point]


def cpu_ms(cpu_s: float, jobs: list) -> str:
    """Machine CPU seconds over ``jobs`` runs, as ms per run."""
    return f"{cpu_s / len(jobs) * 1000:.0f} ms"


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.1f} ms" if values else "n/a"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bcb-python", default=str(HERE.parent / ".venv-bcb/bin/python"),
                        help="python of a venv with bigcodebench==0.2.5, numpy, pandas, matplotlib")
    parser.add_argument("--stdlib", type=int, default=20)
    parser.add_argument("--pandas", type=int, default=10)
    parser.add_argument("--mocked", type=int, default=10)
    parser.add_argument("--unseen", type=int, default=5, help="unseen tasks of each of stdlib, pandas for first vs later step")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--passes", type=int, default=3, help="parallel passes of each side (ours, theirs, the floor); the median pass is compared")
    args = parser.parse_args()
    if not Path(args.bcb_python).exists():
        sys.exit(f"--bcb-python {args.bcb_python} does not exist: python3 -m venv .venv-bcb && "
                 ".venv-bcb/bin/pip install --no-deps bigcodebench==0.2.5 && .venv-bcb/bin/pip install numpy pandas matplotlib")

    theirs, floor = Driver(args.bcb_python, "_bcb_driver.py"), Driver(sys.executable, "_floor_driver.py")
    ceiling = Driver(sys.executable, "_floor_driver.py", "--reuse", str(args.workers))
    try:
        with SandboxExecutor(workers=args.workers, cache=False) as ex:
            picked = pick_tasks({"stdlib": args.stdlib, "pandas": args.pandas, "mocked": args.mocked}, ex)
            jobs = [(t, p, kind) for kind, ts in picked.items() for t in ts for p in (t.ground_truth, t.code_prompt + "    pass\n")]
            pairs = [(t, p) for t, p, _ in jobs]
            print(f"confinement: {ex.confinement['level']} ({', '.join(ex.confinement['features'])})")
            print(f"tasks: {', '.join(f'{len(ts)} {kind}' for kind, ts in picked.items())}; {len(jobs)} programs (canonical + broken)")
            ex.run_many(pairs, max_workers=args.workers)  # warm-up: every worker group, every slot
            theirs.check(pairs[0])  # warm-up: first imports
            floor.check(pairs[0])
            ceiling.check(pairs[0])
            # Back to back, a group at a time on each side in turn (the sides interleaved, see the docstring).
            ours_s: list[float] = [0.0] * len(jobs)
            ours_r: list[ExecutionResult] = [None] * len(jobs)  # type: ignore[list-item]
            their_s, their_v, floor_s, ceiling_s = [0.0] * len(jobs), [False] * len(jobs), [0.0] * len(jobs), [0.0] * len(jobs)
            groups = [[i for i, job in enumerate(jobs) if job[2] == kind] for kind in picked]
            for group in groups:
                for i in group:
                    ours_s[i], ours_r[i] = timed(ex, *pairs[i])
                for i in group:
                    their_s[i], their_v[i] = theirs.check(pairs[i])
                for i in group:
                    floor_s[i] = floor.check(pairs[i])[0]
                for i in group:
                    ceiling_s[i] = ceiling.check(pairs[i])[0]
            ours_v = [r.passed for r in ours_r]
            # Spaced runs (as in RL, where the model writes between runs): the worker prepares its next
            # confined child in the gap, off the critical path, and it copies ahead the pages runs write
            # first. Both sides, a group at a time in turn.
            spaced_s: list[float] = [0.0] * len(jobs)
            spaced_r: list[ExecutionResult] = [None] * len(jobs)  # type: ignore[list-item]
            their_spaced_s: list[float] = [0.0] * len(jobs)
            for group in groups:
                for i in group:
                    time.sleep(0.2)
                    spaced_s[i], spaced_r[i] = timed(ex, *pairs[i])
                for i in group:
                    time.sleep(0.2)
                    their_spaced_s[i] = theirs.check(pairs[i])[0]
            # Throughput: a 4 s pass is at the mercy of the machine, so several rounds, each side in turn.
            passes: dict[str, list[tuple[float, float]]] = {"ours": [], "theirs": [], "floor": [], "ceiling": []}
            for _ in range(args.passes):
                passes["ours"].append(timed_pass(lambda: ex.run_many(pairs, max_workers=args.workers)))
                passes["theirs"].append(theirs.parallel(pairs, args.workers))
                passes["floor"].append(floor.parallel(pairs, args.workers))
                passes["ceiling"].append(ceiling.parallel(pairs, args.workers))
            groups_used = sorted({r.details.get("worker_group", "?") for r in ours_r})
            unseen = [t for ts in pick_tasks({"stdlib": args.unseen, "pandas": args.unseen}, ex, skip=40).values() for t in ts]
            unseen_reset = [t for ts in pick_tasks({"stdlib": args.unseen, "pandas": args.unseen}, ex,
                                                   skip=40 + args.unseen).values() for t in ts]
            with SandboxExecutor(workers=1) as cached:
                task, program = pairs[0]
                cached.run(task, program)
                started = time.perf_counter()
                for _ in range(100):
                    cached.run(task, program)
                hit_s = (time.perf_counter() - started) / 100
    finally:
        theirs.close()
        floor.close()
        ceiling.close()
    mocked_jobs = [(t, p) for t, p, k in jobs if k == "mocked"]
    with SandboxExecutor(workers=args.workers, cache=False, judge="inprocess") as forgeable:
        forgeable.run_many(mocked_jobs, max_workers=args.workers)  # warm-up
        inprocess_s = [timed(forgeable, t, p)[0] for t, p in mocked_jobs]
    first_s, later_s, calibrated = first_vs_later(unseen, args.workers, pairs)
    first_r, later_r, calibrated_r = first_vs_later(unseen_reset, args.workers, pairs, reset=True)

    kinds = [k for _, _, k in jobs]
    n = len(jobs)
    print(f"\n{'':28}{'ours (SandboxExecutor)':>26}{'bigcodebench untrusted_check':>32}{'ratio':>8}")
    for kind in picked:
        o = [s for s, k in zip(ours_s, kinds) if k == kind]
        b = [s for s, k in zip(their_s, kinds) if k == kind]
        ratio = f"{statistics.median(b) / statistics.median(o):.1f}x" if o and b else ""
        print(f"median per execution, {kind:7}{ms(o):>26}{ms(b):>32}{ratio:>8}")
    print(f"median per execution, all    {ms(ours_s):>26}{ms(their_s):>32}")
    print(f"mocked, judged in-process (forgeable){ms(inprocess_s):>17}")
    for kind in picked:
        o = [s for s, k in zip(spaced_s, kinds) if k == kind]
        b = [s for s, k in zip(their_spaced_s, kinds) if k == kind]
        print(f"runs 0.2 s apart, {kind:7}{ms(o):>31}{ms(b):>32}{statistics.median(b) / statistics.median(o):>7.1f}x")
    print(f"worker groups used: {', '.join(groups_used)}")
    print("per-stage medians of our runs, ms (fork/confine/program process: the spare, made before its job; "
          "teardown: after the reply):")
    for kind in picked:
        print(f"  {kind:7} back to back: {stage_split([r for r, k in zip(ours_r, kinds) if k == kind])}")
        print(f"  {kind:7} 0.2 s apart:  {stage_split([r for r, k in zip(spaced_r, kinds) if k == kind])}")
    print(f"first step of an unseen task: {ms(first_s)}, a later step: {ms(later_s)} "
          f"(ratio {statistics.median(first_s) / statistics.median(later_s):.2f}; {len(first_s)} tasks, "
          f"{calibrated} calibrated first)")
    print(f"after the env's reset (Executor.prepare): first step {ms(first_r)}, a later step: {ms(later_r)} "
          f"(ratio {statistics.median(first_r) / statistics.median(later_r):.2f}; {len(first_r)} other tasks, "
          f"{calibrated_r} calibrated first)")
    (ours_parallel, ours_cpu), (their_parallel, their_cpu), (floor_parallel, floor_cpu), (ceiling_parallel, ceiling_cpu) = (
        median_pass(passes[side]) for side in ("ours", "theirs", "floor", "ceiling"))
    rounds = [t / o for (o, _), (t, _) in zip(passes["ours"], passes["theirs"])]
    ours_tp, their_tp, floor_tp, ceiling_tp = (n / s for s in (ours_parallel, their_parallel, floor_parallel, ceiling_parallel))

    def rates(side: str) -> str:
        return ", ".join(f"{n / s:.1f}" for s, _ in passes[side])

    print(f"throughput, {args.workers} parallel       {ours_tp:>21.1f} /s{their_tp:>27.1f} /s   (medians of "
          f"{rates('ours')} and {rates('theirs')})")
    print(f"throughput ratio (ours / theirs), median of the {len(rounds)} rounds: {statistics.median(rounds):.1f}x "
          f"(rounds: {', '.join(f'{r:.1f}x' for r in rounds)}; ratio of the median passes {ours_tp / their_tp:.1f}x)")
    print(f"machine CPU per run in that pass (all processes, kernel included){cpu_ms(ours_cpu, jobs):>9}"
          f"{cpu_ms(their_cpu, jobs):>16}")
    yardsticks = (
        ("floor", "unsafe floor, no sandbox (a child forked per run from a warm process, program and tests in it)",
         floor_s, floor_tp, floor_cpu),
        ("ceiling", f"unsafe ceiling, no fork and no isolation ({args.workers} warm processes, each running its jobs in "
         "itself)", ceiling_s, ceiling_tp, ceiling_cpu))
    for side, title, seconds, rate, cpu in yardsticks:
        print(f"{title}:")
        for kind in ("stdlib", "pandas"):
            print(f"  median per execution, {kind:7}{ms([s for s, k in zip(seconds, kinds) if k == kind]):>24}")
        print(f"  throughput, {args.workers} parallel     {rate:>21.1f} /s   (ours / {side}: {ours_tp / rate:.2f}; "
              f"{side} / theirs: {rate / their_tp:.1f}x; passes {rates(side)}; CPU per run {cpu_ms(cpu, jobs)})")
    agree = sum(a == b for a, b in zip(ours_v, their_v))
    print(f"verdict agreement: {agree}/{n} ({agree / n:.1%}); passes: ours {sum(ours_v)}, theirs {sum(their_v)}")
    for (task, program, _), a, b in zip(jobs, ours_v, their_v):
        if a != b:
            print(f"  disagree: {task.task_id} {'canonical' if program == task.ground_truth else 'broken'}: ours {a}, theirs {b}")
    print(f"result-cache hit: {hit_s * 1e6:.0f} us per run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
