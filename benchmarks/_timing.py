"""The measuring loop both drivers share (each runs in its own interpreter, so this file stands alone).

``measure(check, jobs, workers)``: one warm-up job, every job back to back, then all of them with
``workers`` in parallel; returns ``{"seconds": [...], "verdicts": [...], "parallel_s": float}``, where
``check(job) -> (seconds, passed)``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def measure(check: Callable[[Any], tuple[float, bool]], jobs: list, workers: int) -> dict:
    check(jobs[0])  # warm-up: first imports
    sequential = [check(job) for job in jobs]
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(check, jobs))
    parallel_s = time.perf_counter() - started
    return {"seconds": [s for s, _ in sequential], "verdicts": [v for _, v in sequential], "parallel_s": parallel_s}
