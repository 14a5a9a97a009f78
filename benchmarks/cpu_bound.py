"""Benchmark: one slot's CPU hogs against correct programs in the other (issue 34, item 2: a run's CPU is bounded).

One stream runs CPU hogs back to back (:data:`convcodeworld_gym.testing.cpu_hogs.CPU_HOGS`: a fork bomb whose every
process spins, 16 threads hashing outside the GIL, 16 spinning processes, in turn), each as the program of a
standard-library BigCodeBench task under that task's shipped limits (the picked task with the tightest); at the same time, the other stream runs the
canonical solutions of the first ``--tasks`` standard-library BigCodeBench tasks whose shipped profile passes, with
their shipped limits, one after another. One ``SandboxExecutor(workers=2)``: two slots, each stream on one (the pool
gives a run the first idle slot, so the streams keep theirs but for the rare moment both are idle). The same tasks
also run on the quiet machine (the hog stream idle) before and after, in the same run.

Printed: the bound in effect (``details["confinement"]["cpu_bound"]``); how many canonical runs passed quiet and
next to the hogs; their median time (the executor's wall time per run, and the worker's ``run_s``) quiet and
loaded, and the ratio (target: at most 1.5x); each hog run's time against its limit (target: its limit + at most
1 s) with the kill's share; and the longest wait a run had for its slot's previous run to be torn down.
``--no-cgroup`` runs the same without the slot cgroups (``LocalLauncher(cgroup_root=None)``), for comparison.

Usage (from the clone's root, BigCodeBench data at ``$CONVCODEWORLD_BIGCODEBENCH_PATH``; about 2 minutes):
    python benchmarks/cpu_bound.py [--tasks 50] [--no-cgroup] [--json out.json]
"""

from __future__ import annotations

import argparse
import atexit
import itertools
import json
import os
import statistics
import threading
import time

from convcodeworld_gym.sandbox import ExecutionResult, Limits, SandboxExecutor
from convcodeworld_gym.sandbox.confinement.slot_cgroup import SlotCgroup, find_tree
from convcodeworld_gym.sandbox.host.launch import LocalLauncher
from convcodeworld_gym.sandbox.runtimes.packages import network_policy
from convcodeworld_gym.tasks import Task, load_tasks
from convcodeworld_gym.testing.cpu_hogs import CPU_HOGS


def pick(executor: SandboxExecutor, wanted: int) -> list[Task]:
    """The first ``wanted`` standard-library tasks (no network) whose shipped profile says their canonical passes."""
    picked = []
    for task in load_tasks("bigcodebench"):
        if not task.stdlib_only or network_policy(task) != "none" or executor.runtime_probe().lacking_one(task):
            continue
        shipped = executor.shipped.lookup(task) if executor.shipped is not None else None
        if shipped is not None and shipped.canonical_passed:
            picked.append(task)
        if len(picked) == wanted:
            break
    return picked


def limits_of(executor: SandboxExecutor, task: Task) -> Limits:
    """The limits a run of ``task`` gets: from its (shipped) profile, as the executor derives them."""
    profile = executor.profile(task)
    return executor.time_policy.limits_for(profile.canonical_s, executor.limits) if profile.canonical_passed else executor.limits


def timed(executor: SandboxExecutor, task: Task, program: str) -> tuple[float, ExecutionResult]:
    started = time.perf_counter()
    result = executor.run(task, program)
    return time.perf_counter() - started, result


def canonical_pass(executor: SandboxExecutor, tasks: list[Task]) -> list[tuple[float, ExecutionResult]]:
    return [timed(executor, task, task.ground_truth) for task in tasks]


def summary(runs: list[tuple[float, ExecutionResult]]) -> dict[str, float]:
    return {"passed": sum(r.passed for _, r in runs), "runs": len(runs),
            "median_wall_s": statistics.median(w for w, _ in runs),
            "median_run_s": statistics.median(r.details.get("run_s", w) for w, r in runs),
            "max_wall_s": max(w for w, _ in runs),
            "max_teardown_wait_s": max(r.details.get("stages", {}).get("previous_teardown_s", 0.0) for _, r in runs)}


def _leave_the_root_cgroup() -> None:
    """Move this process (and so the executor and its workers) into a cpu cgroup of its own, with no limit: outside the
    root cgroup the kernel's autogroup does not group a session's processes (``sched_autogroup_enabled`` aside)."""
    tree = find_tree()
    here = SlotCgroup.make(tree, f"ccw-bench-{os.getpid()}", float(os.cpu_count() or 1), 1 << 22)
    here.join()
    print(f"in the cgroup {here.describe()['cgroup']} (no limit: {here.cpus:g} CPUs), outside the kernel's autogroup")

    def back() -> None:
        for controller, directory in here.dirs.items():
            _write_pid(os.path.join(os.path.dirname(directory), "cgroup.procs"))
        here.remove()

    atexit.register(back)


def _write_pid(path: str) -> None:
    with open(path, "w") as fh:
        fh.write(str(os.getpid()))


def _load() -> str:
    with open("/proc/loadavg") as fh:
        return " ".join(fh.read().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--no-cgroup", action="store_true", help="slots without cgroups (the sandbox before the bound)")
    parser.add_argument("--json", help="also write the numbers here")
    parser.add_argument("--outside-autogroup", action="store_true",
                        help="run in a cpu cgroup of its own (no limit), as under systemd or in a container, where the "
                             "kernel's autogroup (each session one scheduling entity) does not apply")
    args = parser.parse_args()
    if args.outside_autogroup:
        _leave_the_root_cgroup()

    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {_load()} at the start")
    launcher = LocalLauncher(cgroup_root=None) if args.no_cgroup else None
    with SandboxExecutor(workers=2, cache=False, launcher=launcher) as executor:
        tasks = pick(executor, args.tasks)
        hog_task = min(tasks, key=lambda t: executor.profile(t).canonical_s or 0.0)  # the tightest limit
        hog_limits = limits_of(executor, hog_task)
        warm = canonical_pass(executor, tasks)  # every task's profile, facts and worker group warm; not measured
        bound = warm[0][1].details["confinement"].get("cpu_bound", {})
        print(f"{len(tasks)} standard-library BigCodeBench tasks; bound: {json.dumps(bound)}; "
              f"confinement {warm[0][1].details['confinement']['level']}")
        print(f"warm-up: {sum(r.passed for _, r in warm)}/{len(warm)} pass")
        quiet_before = canonical_pass(executor, tasks)

        hogs: list[dict[str, object]] = []
        stop = threading.Event()

        def hog_stream() -> None:
            for name in itertools.cycle(CPU_HOGS):
                if stop.is_set() and len(hogs) >= len(CPU_HOGS):
                    return
                wall, result = timed(executor, hog_task, CPU_HOGS[name])
                stages = result.details.get("stages", {})
                hogs.append({"hog": name, "limit_s": hog_limits.suite_timeout_s, "wall_s": wall,
                             "run_s": result.details.get("run_s"), "kill_s": stages.get("kill_s"),
                             "teardown_wait_s": stages.get("previous_teardown_s"), "limits_hit": list(result.limits_hit),
                             "passed": result.passed, "infra_error": result.infra_error, "worker": result.details.get("worker")})

        thread = threading.Thread(target=hog_stream)
        thread.start()
        time.sleep(1.0)  # the first hog is under way
        loaded = canonical_pass(executor, tasks)
        stop.set()
        thread.join()
        quiet_after = canonical_pass(executor, tasks)

    print(f"load average {_load()} at the end")
    quiet = quiet_before + quiet_after
    numbers = {"bound": bound, "tasks": len(tasks), "hog_task": hog_task.task_id,
               "quiet_before": summary(quiet_before), "loaded": summary(loaded), "quiet_after": summary(quiet_after),
               "hogs": hogs}
    q, lo = summary(quiet), numbers["loaded"]
    ratio_wall, ratio_run = lo["median_wall_s"] / q["median_wall_s"], lo["median_run_s"] / q["median_run_s"]
    numbers["ratio_wall"], numbers["ratio_run"] = ratio_wall, ratio_run
    for name, s in (("quiet before", numbers["quiet_before"]), ("next to hogs", lo), ("quiet after", numbers["quiet_after"])):
        print(f"{name:>13}: {s['passed']}/{s['runs']} pass; median {s['median_wall_s'] * 1e3:.0f} ms wall, "
              f"{s['median_run_s'] * 1e3:.0f} ms run_s; longest {s['max_wall_s']:.2f} s; "
              f"longest wait for a slot's teardown {s['max_teardown_wait_s']:.2f} s")
    print(f"median next to hogs / quiet (both quiet passes): {ratio_wall:.2f}x wall, {ratio_run:.2f}x run_s "
          f"(target at most 1.5x: {'met' if ratio_wall <= 1.5 else 'NOT met'})")
    late = [h for h in hogs if h["wall_s"] > h["limit_s"] + 1.0]
    over = [h["wall_s"] - h["limit_s"] for h in hogs]
    counts = ", ".join(f"{n} {sum(h['hog'] == n for h in hogs)}" for n in CPU_HOGS)
    print(f"hog runs: {len(hogs)} ({counts}), "
          f"limit {hog_limits.suite_timeout_s:g} s; each ended after its limit by {min(over):+.2f} .. {max(over):+.2f} s "
          f"wall (run_s {min(h['run_s'] - h['limit_s'] for h in hogs):+.2f} .. "
          f"{max(h['run_s'] - h['limit_s'] for h in hogs):+.2f} s); kill "
          f"{max((h['kill_s'] or 0.0) for h in hogs) * 1e3:.0f} ms at most; "
          f"{len(late)} past limit + 1 s (target 0: {'met' if not late else 'NOT met'})")
    for h in hogs:
        print(f"  {h['hog']:>15} slot {h['worker']}: {h['wall_s']:.2f} s wall, run_s {h['run_s']:.2f}, kill "
              f"{(h['kill_s'] or 0.0) * 1e3:.0f} ms, waited {(h['teardown_wait_s'] or 0.0):.2f} s for the slot, "
              f"{','.join(h['limits_hit']) or 'no limit hit'}{' LOST ' + str(h['infra_error']) if h['infra_error'] else ''}")
    failed = [t.task_id for t, (_, r) in zip(tasks, loaded) if not r.passed]
    if failed:
        print("failed next to the hogs:", ", ".join(failed))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(numbers, fh, indent=1, default=str)


if __name__ == "__main__":
    main()
