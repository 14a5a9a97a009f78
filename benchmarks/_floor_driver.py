"""The unsafe yardsticks: each job run with no confinement and no split judge, in one of two ways.

Run by ``bench_sandbox.py`` (with the project's interpreter) to show what the sandbox costs on top of the
cheapest designs there are. A parent that has imported numpy, pandas and matplotlib (warmed and settled as a
sandbox worker is) either

* forks a child per job, which runs program and tests in one module in a private temp dir (the *floor*: the
  cheapest fork-per-run design), or, with ``--reuse N``,
* forks ``N`` warm processes once, and each runs its jobs one after another in itself, in a fresh temp dir each
  (the *ceiling*: no fork, no teardown, no isolation between runs at all; a run may see what earlier runs left).
  Every design that runs a program's tests pays at least this much CPU per run.

Nothing confines either, so only benign programs (canonical and broken ones) may be given. Answers the requests
of ``_timing.serve``, as ``_bcb_driver.py`` does.

Usage: ``python _floor_driver.py [--reuse N]``
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import os
import queue
import socket
import sys
import tempfile
import time
import unittest

from _timing import serve
from convcodeworld_gym.sandbox.confinement import memory
from convcodeworld_gym.sandbox.worker.warm import warm_up


def _run(code: str, test: str) -> bool:
    """Program and tests as one module, in a fresh temp dir (removed after the run, as ours are): all passed?"""
    with tempfile.TemporaryDirectory(prefix="ccw_floor_") as workdir:
        os.chdir(workdir)
        try:
            module: dict = {"__name__": "__test__"}
            exec(compile(code + "\n" + test, "__test__.py", "exec"), module)
            suite = unittest.TestLoader().loadTestsFromTestCase(module["TestCases"])
            return unittest.TextTestRunner(stream=io.StringIO()).run(suite).wasSuccessful()
        finally:
            os.chdir("/")


def _quiet() -> None:
    """Point fds 0-2 at /dev/null: stdout carries our JSON, and a program's prints must not reach it."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)


def fork_per_run(job: list[str]) -> tuple[float, bool]:
    """The floor: one job in a child forked for it. Seconds and verdict."""
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        passed = False
        try:
            _quiet()
            passed = _run(job[0], job[1])
        finally:
            os._exit(0 if passed else 1)
    status = os.waitpid(pid, 0)[1]
    return time.perf_counter() - started, os.waitstatus_to_exitcode(status) == 0


class Reused:
    """The ceiling: ``n`` warm processes forked once, each running the jobs it is given in itself, one at a time.
    :meth:`check` is thread-safe (``_timing.parallel`` calls it from ``n`` threads, each then holding one process)."""

    def __init__(self, n: int) -> None:
        self._free: queue.Queue[io.TextIOWrapper] = queue.Queue()
        for _ in range(n):
            ours, theirs = socket.socketpair()
            pid = os.fork()
            if pid == 0:
                ours.close()
                _quiet()
                self._serve(theirs.makefile("rw"))
                os._exit(0)
            theirs.close()
            self._free.put(ours.makefile("rw"))

    @staticmethod
    def _serve(channel: io.TextIOWrapper) -> None:
        plt = sys.modules.get("matplotlib.pyplot")
        for line in channel:
            code, test = json.loads(line)[:2]
            try:
                passed = _run(code, test)
            except BaseException:  # noqa: BLE001 - a failed module is a failed run, as in the floor's child
                passed = False
            if plt is not None:
                plt.close("all")  # figures would pile up over the runs
            channel.write(json.dumps(passed) + "\n")
            channel.flush()

    def check(self, job: list[str]) -> tuple[float, bool]:
        """Seconds and verdict of ``job``, run in whichever process is free."""
        channel = self._free.get()
        try:
            started = time.perf_counter()
            channel.write(json.dumps(job) + "\n")
            channel.flush()
            answer = channel.readline()
            if not answer:
                raise RuntimeError("a reused process ended (a program exited it): give benign programs only")
            return time.perf_counter() - started, json.loads(answer)
        finally:
            self._free.put(channel)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reuse", type=int, default=0, metavar="N", help="the ceiling, with N reused processes")
    args = parser.parse_args()
    os.environ.update({"MPLBACKEND": "Agg", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"})
    for name in ("numpy", "pandas", "matplotlib.pyplot"):
        importlib.import_module(name)
    warm_up()
    memory.settle()
    serve(Reused(args.reuse).check if args.reuse else fork_per_run)


if __name__ == "__main__":
    main()
