"""What the episode server needs of the sandbox (issue 39): an awaited run whose caller gives up is killed at once on its
slot (as a limit kills it), and is neither retried nor cached; at its start, a pool removes the slot cgroups that
processes which died left behind, and only those. The real sandbox, real cgroups (as root; skipped elsewhere)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from convcodeworld_gym.sandbox import Limits, SandboxExecutor

RUN_S = 4.0


def _named(name: str) -> list[int]:
    """Processes of this machine whose name is ``name`` (a run that named itself)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if Path(f"/proc/{entry}/comm").read_text().strip() == name:
                    found.append(int(entry))
            except OSError:
                continue
    return found


def _until(check: Callable[[], bool], timeout_s: float, what: str) -> float:
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"not within {timeout_s:g} s: {what}")
        time.sleep(0.02)
    return time.monotonic() - started


def _cgroup_kind(executor: SandboxExecutor) -> str:
    return str(executor.confinement.get("cpu_bound", {}).get("kind", "none"))


def test_a_cancelled_awaited_run_is_killed_at_once_and_neither_retried_nor_cached(humaneval):
    task = humaneval["HumanEval/0"]
    name = f"ccw-cancel{os.getpid() % 100000}"[:15]  # a process name has 15 characters at most
    program = (f"import ctypes, time\nctypes.CDLL(None).prctl(15, {name.encode()!r}, 0, 0, 0)\ntime.sleep({RUN_S})\n"
               + task.ground_truth)
    with SandboxExecutor(Limits(suite_timeout_s=30.0), workers=1, calibrate=False) as executor:
        if not _cgroup_kind(executor).startswith("cgroup"):
            pytest.skip("a run is killed early only where its slot has a cgroup (as root)")
        executor.run(task, task.ground_truth)  # a warm worker

        async def cancel_mid_run() -> float:
            run = asyncio.ensure_future(executor.arun(task, program))
            await asyncio.to_thread(_until, lambda: bool(_named(name)), 30, "the run starts")
            started = time.monotonic()
            run.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await run
            await asyncio.to_thread(_until, lambda: not _named(name), RUN_S + 10, "the cancelled run ends")
            return time.monotonic() - started

        killed_s = asyncio.run(cancel_mid_run())
        time.sleep(1.0)
        retried = bool(_named(name))  # a retry would start the program again
        started = time.monotonic()
        again = executor.run(task, program)
        again_s = time.monotonic() - started
    assert killed_s < 1.5, f"the cancelled run ended {killed_s:.1f} s after the cancel (it sleeps {RUN_S:g} s)"
    assert not retried
    assert again.passed and again.details.get("cache") != "hit" and again_s >= RUN_S, (again.details, again_s)
