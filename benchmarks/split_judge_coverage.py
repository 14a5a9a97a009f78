"""How many canonical solutions pass under the split judge (no calibration, no in-process fallback).

    CONVCODEWORLD_BIGCODEBENCH_PATH=... nice -n 10 python benchmarks/split_judge_coverage.py stdlib out.json
    CONVCODEWORLD_BIGCODEBENCH_PATH=... nice -n 10 python benchmarks/split_judge_coverage.py libs out.json

``stdlib``: the standard-library BigCodeBench tasks; ``libs``: the others whose libraries this
interpreter has. Writes ``{task_id: [passed, last line of the failure]}`` and prints the count;
``--judge inprocess`` runs the same tasks in-process (to tell split-only failures from others).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time

from convcodeworld_gym.sandbox import SandboxExecutor
from convcodeworld_gym.tasks import load_tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("which", choices=["stdlib", "libs"])
    parser.add_argument("out")
    parser.add_argument("--judge", default="split", choices=["split", "inprocess"])
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    every = list(load_tasks("bigcodebench"))
    if args.which == "stdlib":
        tasks = [t for t in every if t.stdlib_only]
    else:
        tasks = [t for t in every if not t.stdlib_only
                 and all(importlib.util.find_spec(m) is not None for m in t.third_party_modules)]
    results: dict[str, list] = {}
    started = time.monotonic()
    with SandboxExecutor(workers=args.workers, judge=args.judge, calibrate=False, cache=False) as ex:
        for task in tasks:
            result = ex.run(task, task.ground_truth)
            texts = [result.crash or ""] + [t.traceback for t in result.tests if not t.outcome.ok]
            why = "" if result.passed else next(
                (line for text in texts for line in reversed(text.strip().splitlines()) if line.strip()), "")[:300]
            results[task.task_id] = [result.passed, why]
    with open(args.out, "w") as fh:
        json.dump(results, fh, indent=0)
    passed = sum(ok for ok, _ in results.values())
    print(f"{args.which}, judge {args.judge}: {passed}/{len(results)} canonical solutions pass "
          f"({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
