"""The measuring loop both drivers share (each runs in its own interpreter, so this file stands alone).

``measure(check, jobs, workers, passes)``: one warm-up job, every job back to back, then all of them with
``workers`` in parallel, ``passes`` times; returns ``{"seconds": [...], "verdicts": [...], "parallel_s": float,
"parallel_cpu_s": float, "passes_s": [...]}`` (the median pass by time, and every pass's seconds), where ``check(job) -> (seconds, passed)``.
``busy_cpu_s()``: the machine's CPU seconds spent so far (all processes, kernel work included, from
``/proc/stat``), taken around each pass (``timed_passes``): with every core busy, throughput is this CPU per run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def busy_cpu_s() -> float:
    """CPU seconds this machine has spent (user, nice, system, irq, softirq; not idle, iowait or steal), or NaN
    where ``/proc/stat`` cannot be read."""
    try:
        with open("/proc/stat") as fh:
            fields = [int(x) for x in fh.readline().split()[1:8]]
    except (OSError, ValueError):
        return float("nan")
    user, nice, system, _idle, _iowait, irq, softirq = fields
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def timed_passes(run: Callable[[], object], passes: int) -> list[tuple[float, float]]:
    """Call ``run`` ``passes`` times; each pass's (seconds, machine CPU seconds, :func:`busy_cpu_s`)."""
    timed = []
    for _ in range(passes):
        cpu, started = busy_cpu_s(), time.perf_counter()
        run()
        timed.append((time.perf_counter() - started, busy_cpu_s() - cpu))
    return timed


def median_pass(timed: list[tuple[float, float]]) -> tuple[float, float]:
    """The pass of :func:`timed_passes` with the median time (the upper one of an even count), and its CPU."""
    return sorted(timed)[len(timed) // 2]


def measure(check: Callable[[Any], tuple[float, bool]], jobs: list, workers: int, passes: int = 1) -> dict:
    check(jobs[0])  # warm-up: first imports
    sequential = [check(job) for job in jobs]

    def parallel() -> None:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(check, jobs))

    timed = timed_passes(parallel, passes)
    parallel_s, parallel_cpu_s = median_pass(timed)
    return {"seconds": [s for s, _ in sequential], "verdicts": [v for _, v in sequential], "parallel_s": parallel_s,
            "parallel_cpu_s": parallel_cpu_s, "passes_s": [s for s, _ in timed]}
