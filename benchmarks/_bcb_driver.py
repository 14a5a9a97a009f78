"""Runs BigCodeBench's own ``untrusted_check`` on jobs from stdin; prints timings and verdicts as JSON.

Run by ``bench_sandbox.py`` with the interpreter of a venv holding ``bigcodebench==0.2.5``
(kept apart from the project's venv). Input: ``{"jobs": [[code, test, entry_point], ...], "workers": n}``.
Output: ``{"seconds": [...], "verdicts": [...], "parallel_s": float}``.
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from bigcodebench.eval import PASS, untrusted_check

# bigcodebench's evaluate defaults: 30 GB address space and data, 10 MB stack.
LIMITS = (30 * 1024, 30 * 1024, 10)


def check(job: list[str]) -> tuple[float, bool]:
    started = time.perf_counter()
    stat, _details = untrusted_check(job[0], job[1], job[2], *LIMITS, min_time_limit=1.0, gt_time_limit=20.0)
    return time.perf_counter() - started, stat == PASS


def main() -> None:
    spec = json.load(sys.stdin)
    jobs = spec["jobs"]
    check(jobs[0])  # warm-up: first imports
    sequential = [check(job) for job in jobs]
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=spec["workers"]) as pool:
        list(pool.map(check, jobs))
    parallel_s = time.perf_counter() - started
    json.dump({"seconds": [s for s, _ in sequential], "verdicts": [v for _, v in sequential], "parallel_s": parallel_s}, sys.stdout)


if __name__ == "__main__":
    main()
