"""Runs BigCodeBench's own ``untrusted_check`` on jobs from stdin; prints timings and verdicts as JSON.

Run by ``bench_sandbox.py`` with the interpreter of a venv holding ``bigcodebench==0.2.5``
(kept apart from the project's venv). Input: ``{"jobs": [[code, test, entry_point], ...], "workers": n, "passes": k}``.
Output: what ``_timing.measure`` returns, as JSON.
"""

from __future__ import annotations

import json
import sys
import time

from _timing import measure
from bigcodebench.eval import PASS, untrusted_check

# bigcodebench's evaluate defaults: 30 GB address space and data, 10 MB stack.
LIMITS = (30 * 1024, 30 * 1024, 10)


def check(job: list[str]) -> tuple[float, bool]:
    started = time.perf_counter()
    stat, _details = untrusted_check(job[0], job[1], job[2], *LIMITS, min_time_limit=1.0, gt_time_limit=20.0)
    return time.perf_counter() - started, stat == PASS


def main() -> None:
    spec = json.load(sys.stdin)
    json.dump(measure(check, spec["jobs"], spec["workers"], spec.get("passes", 1)), sys.stdout)


if __name__ == "__main__":
    main()
