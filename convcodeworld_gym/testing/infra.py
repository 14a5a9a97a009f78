"""Losing sandbox runs to the infrastructure on purpose: what the executors, the env and the runner do then.

A worker dies from outside (the OOM killer picks it, a Ray node is preempted, a container is restarted);
a program cannot make that happen. :class:`WorkerKiller` makes it happen from outside, as a test needs it:
it watches this machine's processes for runs of a :func:`marked` program and SIGKILLs the sandbox worker
that holds each one it sees, up to ``times`` workers. It works for every backend whose workers' processes
this machine sees: the local sandbox, Ray on this machine (the workers are its actors' children) and a
Docker engine on this machine (a container's processes are the host's too).

Holds:
    MARK          the process name a marked program gives itself (``/proc/PID/comm``)
    marked        a program that names its process :data:`MARK`, then sleeps, then is the program it wraps
    marked_runs   the processes of this machine that carry :data:`MARK`
    next_marked   wait for a marked process not seen before (to kill what holds it some other way: a container, an actor)
    worker_of     the sandbox worker process that holds a process of a run
    descendants   a process and every process that descends from it
    runs_under    the marked runs whose process descends from a given process (a Ray actor's, say)
    WorkerKiller  the thread that SIGKILLs the worker of each marked run it sees, up to ``times`` workers
    until         poll a condition until it holds, or fail saying what was awaited

>>> print(marked("def f():\\n    return 1\\n", sleep_s=0.5).splitlines()[-2:])
['def f():', '    return 1']
"""

from __future__ import annotations

import os
import signal
import threading
import time

from collections.abc import Callable

from ..sandbox.host.launch import WORKER_MODULE

__all__ = ["MARK", "marked", "marked_runs", "next_marked", "worker_of", "descendants", "runs_under", "WorkerKiller", "until"]

#: What a marked program names its process (at most 15 bytes: the kernel's limit on a process name).
MARK = "ccw-kill-me"
_PR_SET_NAME = 15


def marked(program: str, sleep_s: float = 2.0) -> str:
    """``program`` preceded by lines that name the process running it :data:`MARK` (``prctl(PR_SET_NAME)``,
    which the sandbox allows) and then sleep ``sleep_s`` seconds, so that a :class:`WorkerKiller` sees the run
    while it is going on. Run undisturbed, it is judged as ``program`` is (if ``sleep_s`` fits its time limit)."""
    return ("import ctypes as _ccw_ctypes, time as _ccw_time\n"
            f"_ccw_ctypes.CDLL(None).prctl({_PR_SET_NAME}, {MARK.encode()!r}, 0, 0, 0)\n"
            f"_ccw_time.sleep({sleep_s!r})\n" + program)


def _read(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def marked_runs() -> list[int]:
    """The pids (as this machine's ``/proc`` shows them) of the processes named :data:`MARK`."""
    return [int(pid) for pid in os.listdir("/proc") if pid.isdigit() and _read(f"/proc/{pid}/comm").strip() == MARK]


def next_marked(seen: set[int], timeout_s: float = 60.0) -> int:
    """The pid of a marked process not in ``seen`` (added to it), once one runs; TimeoutError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        fresh = [pid for pid in marked_runs() if pid not in seen]
        if fresh:
            seen.add(fresh[0])
            return fresh[0]
        time.sleep(0.02)
    raise TimeoutError(f"no new run named {MARK!r} within {timeout_s:g} s")


def _parent(pid: int) -> int | None:
    for line in _read(f"/proc/{pid}/status").splitlines():
        if line.startswith("PPid:"):
            parent = int(line.split()[1])
            return parent or None
    return None


def worker_of(pid: int) -> int | None:
    """The sandbox worker holding process ``pid`` of a run: the topmost of its ancestors that runs the worker's
    code (the zygote and the run's processes are forked from the worker, so they show its command line too),
    or None when it has none (the worker is gone and the run's processes were handed to another parent)."""
    worker = None
    current: int | None = pid
    while current is not None and current > 1:
        if WORKER_MODULE in _read(f"/proc/{current}/cmdline"):
            worker = current
        current = _parent(current)
    return worker


def descendants(root: int) -> list[int]:
    """``root`` and every process of this machine that descends from it, as ``/proc`` shows them now."""
    parents = {int(pid): _parent(int(pid)) for pid in os.listdir("/proc") if pid.isdigit()}
    found, frontier = [root], {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier}
        found += sorted(frontier)
    return found


def runs_under(ancestor: int) -> list[int]:
    """The marked runs (:func:`marked_runs`) whose process descends from process ``ancestor``: the runs a Ray actor
    of this machine holds, given its pid."""
    below = set(descendants(ancestor))
    return [pid for pid in marked_runs() if pid in below]


def until(check: Callable[[], bool], timeout_s: float, what: str, every_s: float = 0.02) -> float:
    """Poll ``check`` every ``every_s`` seconds until it is true; the seconds that took.

    Raises:
        AssertionError: not true within ``timeout_s`` (the message says ``what`` was awaited).

    >>> until(lambda: True, 1.0, "nothing") < 1.0
    True
    """
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"not within {timeout_s:g} s: {what}")
        time.sleep(every_s)
    return time.monotonic() - started


class WorkerKiller(threading.Thread):
    """Watches for runs of :func:`marked` programs and SIGKILLs the worker of each one it sees, up to ``times``
    workers (each worker once). Start it, run the marked program, then :meth:`stop` it (a context manager does
    both ends). ``killed`` lists the workers' pids in order. Marked processes already there when it starts (an
    earlier run's, still being torn down) are left alone: their worker may hold no run any more.

    Args:
        times: the most workers to kill; then the thread ends.
        poll_s: how often it looks.
    """

    def __init__(self, times: int, poll_s: float = 0.02) -> None:
        super().__init__(name="ccw-worker-killer", daemon=True)
        if times < 1:
            raise ValueError(f"times must be >= 1, got {times}")
        self.times, self.poll_s = times, poll_s
        self.killed: list[int] = []
        self._handled: set[int] = set()  # marked processes whose worker was killed (they linger a moment)
        self._stopped = threading.Event()

    def run(self) -> None:
        self._handled.update(marked_runs())
        while len(self.killed) < self.times and not self._stopped.is_set():
            for pid in marked_runs():
                worker = worker_of(pid) if pid not in self._handled else None
                if worker is None or worker in self.killed:
                    continue
                try:
                    os.kill(worker, signal.SIGKILL)
                except ProcessLookupError:
                    continue
                self.killed.append(worker)
                self._handled.add(pid)
                break
            time.sleep(self.poll_s)

    def stop(self, timeout_s: float = 10.0) -> None:
        """End the watch and wait for the thread."""
        self._stopped.set()
        self.join(timeout_s)

    def __enter__(self) -> WorkerKiller:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
