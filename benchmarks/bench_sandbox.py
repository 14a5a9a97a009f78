"""Benchmark: our SandboxExecutor against BigCodeBench 0.2.5's ``untrusted_check``, in one run.

Same BigCodeBench tasks (standard-library-only and numpy/pandas/matplotlib ones), each with its
canonical program and a broken one (the signature with ``pass``), through both executors.
Reports per-execution medians (sequential back to back, and ours also with 0.2 s between runs;
after warm-up; our result cache off), throughput with
``--workers`` parallel runs, and verdict agreement; and, as a yardstick, the unsafe floor of a
fork-per-run design with no sandbox at all (``_floor_driver.py``). Our side runs with full confinement when the
machine allows it (the level is printed).

Usage (see README, section Sandbox):
    python benchmarks/bench_sandbox.py --bcb-python .venv-bcb/bin/python [--stdlib 20 --pandas 10 --workers 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from convcodeworld_gym.sandbox import SandboxExecutor
from convcodeworld_gym.tasks import load_tasks

HERE = Path(__file__).resolve().parent
DATA_LIBS = {"numpy", "pandas", "matplotlib"}


def pick_tasks(n_stdlib: int, n_pandas: int, executor: SandboxExecutor):
    """The first tasks of each kind whose canonical solution passes quickly here (profiles computed, not timed)."""
    tasks = load_tasks("bigcodebench")
    stdlib, pandas = [], []
    for task in tasks:
        kind = stdlib if task.stdlib_only else pandas if task.third_party_modules <= DATA_LIBS and "pandas" in task.third_party_modules else None
        if kind is None or len(kind) >= (n_stdlib if kind is stdlib else n_pandas) or executor.runtime_probe().lacking_one(task):
            continue
        profile = executor.profile(task)
        if profile.canonical_passed and profile.canonical_s is not None and profile.canonical_s < 2.0:
            kind.append(task)
        if len(stdlib) >= n_stdlib and len(pandas) >= n_pandas:
            break
    return stdlib, pandas


def drive(python: str, driver: str, spec: dict) -> dict:
    """Run ``driver`` (a script beside this one) with ``python`` on ``spec``; its JSON answer."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")} | {"MPLBACKEND": "Agg"}
    proc = subprocess.run([python, str(HERE / driver)], input=json.dumps(spec), capture_output=True, text=True, env=env,
                          cwd=str(HERE))
    if proc.returncode != 0:
        sys.exit(f"{driver} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.1f} ms" if values else "n/a"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bcb-python", default=str(HERE.parent / ".venv-bcb/bin/python"),
                        help="python of a venv with bigcodebench==0.2.5, numpy, pandas, matplotlib")
    parser.add_argument("--stdlib", type=int, default=20)
    parser.add_argument("--pandas", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    if not Path(args.bcb_python).exists():
        sys.exit(f"--bcb-python {args.bcb_python} does not exist: python3 -m venv .venv-bcb && "
                 ".venv-bcb/bin/pip install --no-deps bigcodebench==0.2.5 && .venv-bcb/bin/pip install numpy pandas matplotlib")

    with SandboxExecutor(workers=args.workers, cache=False) as ex:
        stdlib, pandas = pick_tasks(args.stdlib, args.pandas, ex)
        jobs = [(t, p, kind) for kind, ts in (("stdlib", stdlib), ("pandas", pandas))
                for t in ts for p in (t.ground_truth, t.code_prompt + "    pass\n")]
        print(f"confinement: {ex.confinement['level']} ({', '.join(ex.confinement['features'])})")
        print(f"tasks: {len(stdlib)} stdlib + {len(pandas)} pandas/numpy/matplotlib; {len(jobs)} programs (canonical + broken)")
        for task, program, _ in jobs[:4]:
            ex.run(task, program)  # warm-up
        ours_s, ours_v = [], []
        for task, program, _ in jobs:
            started = time.perf_counter()
            ours_v.append(ex.run(task, program).passed)
            ours_s.append(time.perf_counter() - started)
        # Spaced runs (as in RL, where the model writes between runs): the worker prepares its next
        # confined child in the gap, off the critical path.
        spaced_s = []
        for task, program, _ in jobs:
            time.sleep(0.2)
            started = time.perf_counter()
            ex.run(task, program)
            spaced_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        ex.run_many([(t, p) for t, p, _ in jobs], max_workers=args.workers)
        ours_parallel = time.perf_counter() - started
        with SandboxExecutor(workers=1) as cached:
            task, program, _ = jobs[0]
            cached.run(task, program)
            started = time.perf_counter()
            for _ in range(100):
                cached.run(task, program)
            hit_s = (time.perf_counter() - started) / 100

    spec = {"jobs": [[p, t.test, t.entry_point] for t, p, _ in jobs], "workers": args.workers}
    theirs = drive(args.bcb_python, "_bcb_driver.py", spec)
    floor = drive(sys.executable, "_floor_driver.py", spec)

    kinds = [k for _, _, k in jobs]
    print(f"\n{'':28}{'ours (SandboxExecutor)':>26}{'bigcodebench untrusted_check':>32}")
    for kind in ("stdlib", "pandas"):
        o = [s for s, k in zip(ours_s, kinds) if k == kind]
        b = [s for s, k in zip(theirs["seconds"], kinds) if k == kind]
        print(f"median per execution, {kind:7}{ms(o):>26}{ms(b):>32}")
    print(f"median per execution, all    {ms(ours_s):>26}{ms(theirs['seconds']):>32}")
    for kind in ("stdlib", "pandas"):
        o = [s for s, k in zip(spaced_s, kinds) if k == kind]
        print(f"ours, runs 0.2 s apart, {kind:6}{ms(o):>25}")
    ours_tp, their_tp = len(jobs) / ours_parallel, len(jobs) / theirs["parallel_s"]
    print(f"throughput, {args.workers} parallel       {ours_tp:>21.1f} /s{their_tp:>27.1f} /s")
    print(f"throughput ratio (ours / theirs): {ours_tp / their_tp:.1f}x")
    print("unsafe floor, no sandbox (a child forked per run from a warm process, program and tests in it):")
    for kind in ("stdlib", "pandas"):
        f = [s for s, k in zip(floor["seconds"], kinds) if k == kind]
        print(f"  median per execution, {kind:7}{ms(f):>24}")
    floor_tp = len(jobs) / floor["parallel_s"]
    print(f"  throughput, {args.workers} parallel     {floor_tp:>21.1f} /s   (ours / floor: {ours_tp / floor_tp:.2f})")
    agree = sum(a == b for a, b in zip(ours_v, theirs["verdicts"]))
    print(f"verdict agreement: {agree}/{len(jobs)} ({agree / len(jobs):.1%}); passes: ours {sum(ours_v)}, theirs {sum(theirs['verdicts'])}")
    for (task, program, _), a, b in zip(jobs, ours_v, theirs["verdicts"]):
        if a != b:
            print(f"  disagree: {task.task_id} {'canonical' if program == task.ground_truth else 'broken'}: ours {a}, theirs {b}")
    print(f"result-cache hit: {hit_s * 1e6:.0f} us per run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
