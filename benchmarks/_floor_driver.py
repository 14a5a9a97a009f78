"""The unsafe floor: each job in a child forked from a warm process, with no confinement and no split judge.

Run by ``bench_sandbox.py`` (with the project's interpreter) to show what the sandbox costs on top of
the cheapest fork-per-run design: a parent that has imported numpy, pandas and matplotlib (warmed and
settled as a sandbox worker is) forks a child per job, which runs program and tests in one module in a
private temp dir. Nothing confines the child, so only benign programs (canonical and broken ones) may
be given. Answers the requests of ``_timing.serve``, as ``_bcb_driver.py`` does.
"""

from __future__ import annotations

import importlib
import io
import os
import tempfile
import time
import unittest

from _timing import serve
from convcodeworld_gym.sandbox.confinement import memory
from convcodeworld_gym.sandbox.warm import warm_up


def _child(code: str, test: str) -> int:
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # stdout carries our JSON: a program's prints must not reach it
        os.dup2(null, fd)
    with tempfile.TemporaryDirectory(prefix="ccw_floor_") as workdir:  # removed after the run, as ours are
        os.chdir(workdir)
        module: dict = {"__name__": "__test__"}
        exec(compile(code + "\n" + test, "__test__.py", "exec"), module)
        suite = unittest.TestLoader().loadTestsFromTestCase(module["TestCases"])
        return 0 if unittest.TextTestRunner(stream=io.StringIO()).run(suite).wasSuccessful() else 1


def check(job: list[str]) -> tuple[float, bool]:
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = _child(job[0], job[1])
        finally:
            os._exit(code)
    status = os.waitpid(pid, 0)[1]
    return time.perf_counter() - started, os.waitstatus_to_exitcode(status) == 0


def main() -> None:
    os.environ.update({"MPLBACKEND": "Agg", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"})
    for name in ("numpy", "pandas", "matplotlib.pyplot"):
        importlib.import_module(name)
    warm_up()
    memory.settle()
    serve(check)


if __name__ == "__main__":
    main()
