"""What a mirrored task's first step costs: the split judge on tasks that return matplotlib figures and fitted models,
this tree against another checkout of the project (the peer: e.g. the commit before the data-tree mirrors), side by
side in one run.

    git worktree add /tmp/ccw-base 4bfc896        # the peer: the mirrors as pickles (issue 38's "today")
    CONVCODEWORLD_BIGCODEBENCH_PATH=... python benchmarks/mirror_cost.py --peer /tmp/ccw-base [--runtime PY] [--passes 3]

Each side is a driver process of its own (this file with ``--driver``, the project's tree first on its
``sys.path``) with one sandbox worker, asked one run at a time and interleaved job by job and pass by pass
(``_timing.serve``), so the machine's drift falls on both alike. Each run is a task's canonical solution judged
split from a cold start of its result (no cache): a first step. Prints, per task, both sides' median seconds and the
ratio, and the ratio of the sums.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: Tasks whose canonical solutions return (or leave open) library objects that cross as mirrors (from the survey):
#: bars, a heat map, pair plots, a polar and a 3-D plot, a random forest, a linear model, a seasonal decomposition
#: (statsmodels), a folium map.
TASKS = ("BigCodeBench/9", "BigCodeBench/37", "BigCodeBench/57", "BigCodeBench/99", "BigCodeBench/106",
         "BigCodeBench/108", "BigCodeBench/185", "BigCodeBench/214", "BigCodeBench/257", "BigCodeBench/282")


def driver(runtime: str | None) -> None:
    """Answer ``{"check": task_id}`` with the seconds and verdict of one split run of its canonical solution."""
    import time

    from _timing import serve
    from convcodeworld_gym.sandbox import SandboxExecutor
    from convcodeworld_gym.tasks import load_tasks

    tasks = {t.task_id: t for t in load_tasks("bigcodebench")}
    with SandboxExecutor(workers=1, judge="split", calibrate=False, cache=False, runtime=runtime) as ex:
        def check(task_id: str) -> tuple[float, bool]:
            task = tasks[task_id]
            started = time.perf_counter()
            passed = ex.run(task, task.ground_truth).passed
            return time.perf_counter() - started, passed

        serve(check)


class Side:
    """One driver: the project at ``tree``."""

    def __init__(self, tree: str, runtime: str | None) -> None:
        env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{HERE}", "MPLBACKEND": "Agg"}
        self.tree = tree
        self._err = tempfile.TemporaryFile()
        self._proc = subprocess.Popen([sys.executable, str(HERE / "mirror_cost.py"), "--driver",
                                       *(["--runtime", runtime] if runtime else [])], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=self._err, env=env, cwd=tree, text=True)

    def check(self, task_id: str) -> tuple[float, bool]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps({"check": task_id}) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            self._err.seek(0)
            sys.exit(f"the driver of {self.tree} failed:\n{self._err.read().decode(errors='replace')[-3000:]}")
        answer = json.loads(line)
        return answer["seconds"], answer["passed"]

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        self._proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--driver", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--peer", help="another checkout of the project (the tree to compare with)")
    parser.add_argument("--runtime", help="the runtime interpreter both sides run programs with (default: the installed one)")
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    if args.driver:
        driver(args.runtime)
        return
    if not args.peer:
        parser.error("--peer is required: the checkout to compare with (see the module's docstring)")
    ours, peer = Side(str(HERE.parent), args.runtime), Side(os.path.abspath(args.peer), args.runtime)
    times: dict[str, dict[str, list[float]]] = {t: {"ours": [], "peer": []} for t in TASKS}
    verdicts: dict[str, dict[str, bool]] = {t: {} for t in TASKS}
    try:
        for _ in range(args.passes):
            for task_id in TASKS:
                for name, side in (("ours", ours), ("peer", peer)):
                    seconds, passed = side.check(task_id)
                    times[task_id][name].append(seconds)
                    verdicts[task_id][name] = passed
    finally:
        ours.close()
        peer.close()
    print(f"{'task':<20}{'ours s':>9}{'peer s':>9}{'ratio':>8}  passed (ours/peer)")
    total = {"ours": 0.0, "peer": 0.0}
    for task_id in TASKS:
        med = {name: statistics.median(times[task_id][name]) for name in ("ours", "peer")}
        for name in total:
            total[name] += med[name]
        print(f"{task_id:<20}{med['ours']:>9.2f}{med['peer']:>9.2f}{med['ours'] / med['peer']:>8.2f}  "
              f"{verdicts[task_id]['ours']}/{verdicts[task_id]['peer']}")
    print(f"{'sum of medians':<20}{total['ours']:>9.2f}{total['peer']:>9.2f}{total['ours'] / total['peer']:>8.2f}")


if __name__ == "__main__":
    main()
