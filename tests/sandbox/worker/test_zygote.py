"""The zygote: runs fork from it, never from the worker that reads the jobs, and a worker whose zygote died is replaced.

The leak it closes (an earlier job read from inherited memory) is proved in
``test_hostile_verdicts.py::test_a_program_cannot_read_an_earlier_jobs_hidden_tests_from_inherited_memory``.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import TypeVar

import pytest

from convcodeworld_gym.sandbox import SandboxExecutor

from hostile_programs import SQUARE

T = TypeVar("T")


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as fh:
        return [int(p) for p in fh.read().split()]


def _command(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        return fh.read().replace(b"\0", b" ").decode(errors="replace")


def _eventually(probe: Callable[[], T], timeout_s: float = 10.0) -> T:
    """``probe()``'s first truthy answer within ``timeout_s`` (polled), else its last answer."""
    deadline = time.monotonic() + timeout_s
    while not (answer := probe()) and time.monotonic() < deadline:
        time.sleep(0.02)
    return answer


def _spare_appears(zygote: int) -> list[int]:
    return _eventually(lambda: _children(zygote))


def test_the_worker_forks_only_its_zygote_and_every_run_is_the_zygotes_child():
    with SandboxExecutor(workers=1, cache=False, preload=()) as ex:
        assert ex.run(SQUARE, SQUARE.ground_truth).passed
        worker = ex._workers[0].proc.pid  # noqa: SLF001
        children = _children(worker)
        assert len(children) == 1, children  # the zygote only: no spare, no run of the worker's own
        zygote = children[0]
        assert _command(zygote) == _command(worker)  # forked, not exec'd: the same warm interpreter
        # ... and no run: it stays in the worker's PID namespace, as the worker's uid
        assert os.readlink(f"/proc/{zygote}/ns/pid") == os.readlink(f"/proc/{worker}/ns/pid")
        assert os.stat(f"/proc/{zygote}").st_uid == os.stat(f"/proc/{worker}").st_uid
        spares = _spare_appears(zygote)
        assert len(spares) == 1, spares  # the next run's spare, made ahead of its job, is the zygote's child
        assert os.readlink(f"/proc/{spares[0]}/ns/pid") != os.readlink(f"/proc/{worker}/ns/pid")  # a run's pid 1


def test_a_worker_whose_zygote_died_loses_the_run_which_passes_on_a_fresh_worker():
    # Before issue 34 the run failed with the reason (a correct program scored 0); the zygote's death is the
    # machine's doing, so the run is retried on a fresh worker (and zygote), and says that it was.
    with SandboxExecutor(workers=1, cache=False, preload=()) as ex:
        assert ex.run(SQUARE, SQUARE.ground_truth).passed
        worker = ex._workers[0].proc.pid  # noqa: SLF001
        (zygote,) = _children(worker)
        os.kill(zygote, signal.SIGKILL)
        retried = ex.run(SQUARE, SQUARE.ground_truth)
        assert retried.passed and retried.infra_error is None, retried.details
        assert "zygote" in retried.details["retried"]["lost"] or "worker" in retried.details["retried"]["lost"]
        assert ex._workers[0].proc.pid != worker  # noqa: SLF001 - a fresh worker (and zygote) ran it
        assert ex.run(SQUARE, SQUARE.ground_truth).passed


#: Looks for any socket among its descriptors: the zygote's control socket, kept open, would let a program ask
#: the zygote for spares or to reap runs (the judge's channel to the program is a pair of pipes, no socket).
SOCKET_SPY = '''
import os
sockets = []
for fd in os.listdir("/proc/self/fd"):
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        continue
    if target.startswith("socket:"):
        sockets.append(fd + " " + target)
def task_func(x):
    return x * x if not sockets else None
if sockets:
    raise RuntimeError("SOCKETS " + ", ".join(sockets))
'''


def test_a_program_inherits_no_socket_so_it_cannot_reach_the_zygote():
    with SandboxExecutor(workers=1, cache=False, preload=()) as ex:
        result = ex.run(SQUARE, SOCKET_SPY)
    assert result.passed, (result.crash, [t.traceback for t in result.tests])


def _state(pid: int) -> str:
    """The process's state letter (``Z``: ended, not yet reaped), or ``gone``."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


@pytest.mark.parametrize("victim", ["spare", "its_program_process"])
def test_a_spare_killed_while_it_waits_is_replaced_and_its_job_still_passes(victim):
    # The OOM killer, or a person, may end a waiting spare (the judge) or its split program process. The job that
    # comes next must not be handed to what is left of it: before, it failed ("killed by signal SIGKILL", or
    # "SandboxError ... Broken pipe"), a correct program scored 0 for the machine's doing.
    with SandboxExecutor(workers=1, cache=False, preload=()) as ex:
        assert ex.run(SQUARE, SQUARE.ground_truth).passed
        (zygote,) = _children(ex._workers[0].proc.pid)  # noqa: SLF001
        time.sleep(0.5)  # the run is reaped and the next spare made
        (spare,) = _spare_appears(zygote)
        (program,) = _eventually(lambda: _children(spare))  # its program process, forked before it is ready
        time.sleep(0.1)  # ready and waiting for its job
        os.kill(spare if victim == "spare" else program, signal.SIGKILL)
        assert _eventually(lambda: _state(spare) in ("Z", "gone")), _state(spare)  # ends with its program process too
        result = ex.run(SQUARE, SQUARE.ground_truth)
        assert result.passed, (result.crash, [t.traceback for t in result.tests])
        assert _state(spare) == "gone"  # discarded: reaped by the zygote
        assert ex.run(SQUARE, SQUARE.ground_truth).passed
