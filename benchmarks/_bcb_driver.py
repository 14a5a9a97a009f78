"""Runs BigCodeBench's own ``untrusted_check`` on jobs from stdin; answers each with its time and verdict (JSON lines).

Run by ``bench_sandbox.py`` with the interpreter of a venv holding ``bigcodebench==0.2.5``
(kept apart from the project's venv). Answers the requests of ``_timing.serve``; a job is
``[code, test, entry_point]``.
"""

from __future__ import annotations

import time

from _timing import serve
from bigcodebench.eval import PASS, untrusted_check

# bigcodebench's evaluate defaults: 30 GB address space and data, 10 MB stack.
LIMITS = (30 * 1024, 30 * 1024, 10)


def check(job: list[str]) -> tuple[float, bool]:
    started = time.perf_counter()
    stat, _details = untrusted_check(job[0], job[1], job[2], *LIMITS, min_time_limit=1.0, gt_time_limit=20.0)
    return time.perf_counter() - started, stat == PASS


def main() -> None:
    serve(check)


if __name__ == "__main__":
    main()
