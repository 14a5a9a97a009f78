"""The measuring pieces both drivers share (each runs in its own interpreter, so this file stands alone).

``serve(check)``: a driver's loop. It answers one JSON request per stdin line with one JSON line on stdout, so
the benchmark can interleave the two sides job by job and pass by pass (this machine's speed drifts by 10-25%
over minutes; measured minutes apart, the two sides' ratio drifts with it):
``{"check": job}`` -> ``{"seconds": s, "passed": bool}``; ``{"parallel": [job, ...], "workers": n}`` ->
``{"seconds": s, "cpu_s": c}``, where ``check(job) -> (seconds, passed)``.
``busy_cpu_s()``: the machine's CPU seconds spent so far (all processes, kernel work included, from
``/proc/stat``), taken around each pass (``timed_pass``): with every core busy, throughput is this CPU per run.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

Check = Callable[[Any], tuple[float, bool]]


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


def timed_pass(run: Callable[[], object]) -> tuple[float, float]:
    """Call ``run`` once: its (seconds, machine CPU seconds, :func:`busy_cpu_s`)."""
    cpu, started = busy_cpu_s(), time.perf_counter()
    run()
    return time.perf_counter() - started, busy_cpu_s() - cpu


def timed_passes(run: Callable[[], object], passes: int) -> list[tuple[float, float]]:
    """:func:`timed_pass` ``passes`` times, back to back."""
    return [timed_pass(run) for _ in range(passes)]


def median_pass(timed: list[tuple[float, float]]) -> tuple[float, float]:
    """The pass of :func:`timed_passes` with the median time (the upper one of an even count), and its CPU."""
    return sorted(timed)[len(timed) // 2]


def parallel(check: Check, jobs: list, workers: int) -> None:
    """Every job through ``check``, ``workers`` at a time."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(check, jobs))


def serve(check: Check) -> None:
    """Answer the benchmark's requests (see the module's docstring) until stdin ends. Answers go out on the
    stdout the driver started with; anything else that writes to fd 1 later writes to stderr instead."""
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    for line in sys.stdin:
        request = json.loads(line)
        if "check" in request:
            seconds, passed = check(request["check"])
            answer = {"seconds": seconds, "passed": passed}
        else:
            seconds, cpu_s = timed_pass(lambda: parallel(check, request["parallel"], request["workers"]))  # noqa: B023
            answer = {"seconds": seconds, "cpu_s": cpu_s}
        out.write(json.dumps(answer) + "\n")
        out.flush()
