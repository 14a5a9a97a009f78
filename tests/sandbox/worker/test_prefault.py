"""Prefaulting: a spare copies, while it waits, the pages runs write first, and every run keeps its priority.

The pages come from a rehearsal (our own workload in a throwaway fork, never a job); a spare and its program
process copy them at the lowest priority once they have waited a while, and the worker gives them their
priority back before the job is written. Speed itself is measured in ``benchmarks/``, not here.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import time

import pytest

from convcodeworld_gym.sandbox import SandboxExecutor
from convcodeworld_gym.sandbox.confinement import memory
from convcodeworld_gym.tasks import Task

PAGE = os.sysconf("SC_PAGE_SIZE")
PAGES = 2048


def _buffer() -> tuple[bytearray, int]:
    """A resident buffer of 2 * PAGES pages and its address."""
    buf = bytearray(2 * PAGES * PAGE)
    for at in range(0, len(buf), PAGE):
        buf[at] = 1
    return buf, ctypes.addressof((ctypes.c_char * len(buf)).from_buffer(buf))


def _faults_writing(buf: bytearray, plan: memory.Prefault | None) -> int:
    """In a fork: prefault ``plan`` (none: plain), then write the buffer's first half; the minor faults of the writes."""
    read_fd, write_fd = os.pipe()
    never = os.pipe()  # its write end stays open here: never readable in the child
    pid = os.fork()
    if pid == 0:
        try:
            if plan is not None:
                plan.while_idle(never[0], after_s=0)
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            for at in range(0, PAGES * PAGE, PAGE):
                buf[at] = 2
            os.write(write_fd, json.dumps(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before).encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    faults = json.loads(os.read(read_fd, 100))
    os.close(read_fd)
    os.waitpid(pid, 0)
    for fd in never:
        os.close(fd)
    return faults


def test_a_rehearsal_finds_the_pages_a_fork_writes_and_copying_them_ahead_saves_their_faults():
    buf, address = _buffer()

    def rehearse() -> None:
        for at in range(0, PAGES * PAGE, PAGE):
            buf[at] = 3

    plan = memory.Prefault.rehearsed(rehearse)
    covered = {page for start, length in plan.chunks for page in range(start // PAGE, (start + length) // PAGE)}
    first_half = set(range(address // PAGE, address // PAGE + PAGES))
    second_half = set(range(address // PAGE + PAGES, address // PAGE + 2 * PAGES))
    assert first_half <= covered  # every page the rehearsal wrote
    assert len(second_half & covered) < PAGES // 10  # and not the ones it left alone
    assert all(0 < length <= 1 << 18 for _, length in plan.chunks)
    plain, prefaulted = _faults_writing(buf, None), _faults_writing(buf, plan)
    assert plain >= PAGES // 2  # copy-on-write: a fault per page written (fewer only with huge pages)
    assert prefaulted < plain // 4


def test_copying_ahead_stops_as_soon_as_the_job_comes():
    buf, _ = _buffer()
    plan = memory.Prefault(((ctypes.addressof((ctypes.c_char * len(buf)).from_buffer(buf)), len(buf)),))
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, b"job")
        assert plan.while_idle(read_fd, after_s=0) == 0
        assert plan.while_idle(read_fd) == 0  # the wait ends at once too
        assert memory.Prefault().while_idle(read_fd, after_s=0) == 0
    finally:
        os.close(read_fd)
        os.close(write_fd)


PRIORITY_TEST = """import os
import unittest
class TestCases(unittest.TestCase):
    def test_the_program_runs_at_the_workers_priority(self):
        self.assertEqual(task_func(), {nice})
    def test_the_judge_runs_at_the_workers_priority(self):
        self.assertEqual(os.getpriority(os.PRIO_PROCESS, 0), {nice})
"""


def test_every_run_gets_its_priority_back_and_a_spare_that_waited_copied_ahead():
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    task = Task(task_id="Prefault/0", prompt="the priority", code_prompt="import os\ndef task_func():\n",
                entry_point="task_func", canonical_solution="    return os.getpriority(os.PRIO_PROCESS, 0)\n",
                test=PRIORITY_TEST.format(nice=nice))
    with SandboxExecutor(workers=1, cache=False) as ex:
        if ex.confinement["level"] in ("process",) or not memory.can_raise_priority():
            pytest.skip(f"spares prefault only where the worker can raise priorities (level {ex.confinement['level']})")
        results = []
        for gap in (0.0, 0.0, 0.3, 0.0, 0.3):
            time.sleep(gap)
            results.append((gap, ex.run(task, task.ground_truth)))
    for gap, result in results:
        assert result.passed, (gap, [(t.name, t.traceback) for t in result.tests])
    waited = [r.details["stages"].get("prefaulted_mb", 0.0) for gap, r in results if gap]
    assert all(mb > 0 for mb in waited), waited


def test_a_spare_is_raised_back_only_once_it_is_ready():
    if not memory.can_raise_priority():
        pytest.skip("needs CAP_SYS_NICE")
    from convcodeworld_gym.sandbox.worker.spare import SpareFacts
    from convcodeworld_gym.sandbox.worker.zygote import Spare

    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # a stand-in spare: its own group, lowered, then ready when told
        try:
            os.setsid()
            memory.lowest_priority()
            os.read(go_r, 1)
            os.write(ready_w, b"r" * 16)
            time.sleep(30)
        finally:
            os._exit(0)
    facts = SpareFacts(child=pid, workdir="/nonexistent", namespaced=False, network="none", mode="split", token="t",
                       started=0.0, forked=0.0, lowered=True)
    spare = Spare(facts, zygote=None, job_w=-1, result_r=-1, ready_r=ready_r)  # type: ignore[arg-type]
    try:
        time.sleep(0.1)
        assert spare.restore_priority(0, wait_s=0.05) is False  # not ready: it could still lower itself afterwards
        assert os.getpriority(os.PRIO_PROCESS, pid) == 19
        os.write(go_w, b"g")
        assert spare.restore_priority(0, wait_s=5) is True
        assert os.getpriority(os.PRIO_PROCESS, pid) == 0
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        for fd in (ready_r, ready_w, go_r, go_w):
            os.close(fd)
