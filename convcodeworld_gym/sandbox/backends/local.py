"""Runs in the host: the local executor, one fresh child interpreter per execution, in its own process group.

The parent, not the child, owns the clock: it reads per-test events from a pipe and
kills the whole process group when a test or the suite runs over its limit. Whatever
the child reported before that stands; the running test is ``TIMEOUT`` and the tests
after it are ``NOT_RUN``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ...tasks import TEST_CLASS, Task
from ..children import describe_exit, has_exited, kill_group
from ..host.executor import Executor
from ..limits import Limits
from ..messages import Event, RunnerJob
from ..result import ExecutionResult
from ..run import runner
from ..run.events import MODULE_NAME, assemble, collect_events, new_token
from ..runtimes.interpreter import child_env

if TYPE_CHECKING:
    from ..runtimes.needs import RuntimeProbe

__all__ = ["LocalExecutor"]

#: The runner script each run's fresh interpreter is started on (run as a script, it imports only ``messages.py``).
_RUNNER = Path(runner.__file__)


class LocalExecutor(Executor):
    """Runs each program in a fresh ``python`` child with a private temporary work dir.

    This backend isolates processes, time and environment variables; it does not confine
    file-system or network access (see the sandbox documentation for confined backends).

    >>> from convcodeworld_gym.tasks import load_tasks
    >>> task = load_tasks("humaneval")["HumanEval/0"]
    >>> with LocalExecutor() as ex:
    ...     ex.run(task, task.ground_truth).passed
    True
    """

    def __init__(self, limits: Limits | None = None, python: str | None = None) -> None:
        self.limits = limits or Limits()
        self.python = python or sys.executable
        self._probe = None

    def runtime_probe(self) -> RuntimeProbe:
        """Asks ``python``, the interpreter of the runs."""
        if self._probe is None:
            from ..runtimes.needs import RuntimeProbe

            self._probe = RuntimeProbe.shared(self.python)
        return self._probe

    def run(self, task: Task, program: str) -> ExecutionResult:
        if (refused := self.refuse_oversized(task, program)) is not None:
            return refused
        started = time.monotonic()
        workdir = tempfile.mkdtemp(prefix="ccw_")  # no "-": task 1127 splits paths on it
        limits = self.limits.covering(task.own_time_limits)
        try:
            events, stop_reason, exit_desc = self._execute(task, program, workdir, limits)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        result = assemble(task.test_names, events, stop_reason, exit_desc, limits)
        return ExecutionResult(
            tests=result.tests,
            executed=True,
            crash=result.crash,
            limits_hit=result.limits_hit,
            wall_time_s=time.monotonic() - started,
            details={"backend": "local", "confinement": {"level": "process"}, "judge": "inprocess", "forgeable": True},  # the keys the other executors report
        )

    def _execute(self, task: Task, program: str, workdir: str, limits: Limits) -> tuple[list[Event], str | None, str]:
        token = new_token()
        job = RunnerJob(program=program, test=task.test, test_class=TEST_CLASS, module=MODULE_NAME, token=token,
                        first=task.public_tests)
        read_fd, write_fd = os.pipe()
        try:
            proc = subprocess.Popen(
                [self.python, "-s", str(_RUNNER)],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd=workdir,
                env=child_env(workdir, {"CCW_RESULT_FD": str(write_fd)}),
                pass_fds=(write_fd,),
                start_new_session=True,
            )
        except OSError:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        try:
            try:
                proc.stdin.write(job.to_wire())  # type: ignore[union-attr]
                proc.stdin.close()  # type: ignore[union-attr]
            except BrokenPipeError:
                pass
            events, stop_reason = collect_events(read_fd, limits, lambda: has_exited(proc.pid), token)
        finally:
            os.close(read_fd)
            kill_group(proc.pid)  # not reaped before this: proc.wait() below is the reap
            proc.wait()
        return events, stop_reason, describe_exit(proc.returncode)


