"""Local executor: one fresh child interpreter per execution, in its own process group.

The parent, not the child, owns the clock: it reads per-test events from a pipe and
kills the whole process group when a test or the suite runs over its limit. Whatever
the child reported before that stands; the running test is ``TIMEOUT`` and the tests
after it are ``NOT_RUN``.
"""

from __future__ import annotations

import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..tasks import TEST_CLASS, Task
from .clock import SuiteClock
from .executor import Executor, Limits
from .interpreter import shim_dir
from .messages import Crash, Done, End, Event, Fault, RunnerJob, Start, Violation, unseal
from .reap import has_exited, kill_group
from .result import ExecutionResult, Outcome, TestFault, TestResult, cut_middle

if TYPE_CHECKING:
    from .needs import RuntimeProbe

__all__ = ["LocalExecutor", "child_env", "new_token", "collect_events", "assemble", "describe_exit", "MODULE_NAME",
           "MAX_EVENT_BYTES", "PROTOCOL_VIOLATION"]

#: Module (and file) name the program runs as; tracebacks name ``__test__.py``, as in the reference.
MODULE_NAME = "__test__"
_RUNNER = Path(__file__).with_name("_runner.py")
_POLL_S = 0.25
#: Most bytes of events one run may send (tracebacks included); more stops the run (``output_limit``).
MAX_EVENT_BYTES = 8 << 20
#: Longest traceback text kept per test; the middle of a longer one is cut.
MAX_TRACEBACK_CHARS = 20_000
#: The stop reason of a run whose result channel carried a line that is not a sealed runner event.
PROTOCOL_VIOLATION = "protocol_violation"
_TOKEN_BYTES = 16
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")


def child_env(workdir: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a child: nothing inherited but ``PATH`` (with this interpreter first, then the
    sandbox's ``python``/``python3`` shims where a worker made them, :func:`.interpreter.shim_dir`) and locale.

    No API keys or other secrets can reach the program, because nothing else is copied.
    """
    first = [os.path.dirname(sys.executable), *filter(None, [shim_dir()])]
    path = os.pathsep.join([*first, *[p for p in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep) if p not in first]])
    env = {
        "PATH": path,
        "HOME": workdir,
        "TMPDIR": workdir,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONIOENCODING": "utf-8",
        "MPLBACKEND": "Agg",
        **{var: "1" for var in _THREAD_VARS},
    }
    if extra:
        env.update(extra)
    return env


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
            from .needs import RuntimeProbe

            self._probe = RuntimeProbe(self.python)
        return self._probe

    def run(self, task: Task, program: str) -> ExecutionResult:
        if (refused := self.refuse_oversized(task, program)) is not None:
            return refused
        started = time.monotonic()
        workdir = tempfile.mkdtemp(prefix="ccw_")  # no "-": task 1127 splits paths on it
        try:
            events, stop_reason, exit_desc = self._execute(task, program, workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        result = assemble(task.test_names, events, stop_reason, exit_desc, self.limits)
        return ExecutionResult(
            tests=result.tests,
            executed=True,
            crash=result.crash,
            limits_hit=result.limits_hit,
            wall_time_s=time.monotonic() - started,
            details={"backend": "local", "confinement": {"level": "process"}, "judge": "inprocess", "forgeable": True},  # the keys the other executors report
        )

    def _execute(self, task: Task, program: str, workdir: str) -> tuple[list[Event], str | None, str]:
        token = new_token()
        job = RunnerJob(program=program, test=task.test, test_class=TEST_CLASS, module=MODULE_NAME, token=token)
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
            events, stop_reason = collect_events(read_fd, self.limits, lambda: has_exited(proc.pid), token)
        finally:
            os.close(read_fd)
            kill_group(proc.pid)  # not reaped before this: proc.wait() below is the reap
            proc.wait()
        return events, stop_reason, describe_exit(proc.returncode)


def new_token() -> str:
    """A fresh secret for one run: the runner starts each event line with it (``_runner.emit``)."""
    return secrets.token_hex(_TOKEN_BYTES)


def collect_events(
    read_fd: int, limits: Limits, exited: Callable[[], bool], token: str, max_bytes: int = MAX_EVENT_BYTES,
    marks: dict[str, float] | None = None,
) -> tuple[list[Event], str | None]:
    """Read events until the suite ends, the child dies, or a limit is hit; returns (events, stop reason).

    The stop reason is ``None``, ``"suite_timeout"``, ``"test_timeout"``, ``"output_limit"`` (the
    channel carried more than ``max_bytes``) or :data:`PROTOCOL_VIOLATION`: a line that does not start with
    the run's ``token`` or is not one of the runner's events (a program that wrote to the channel, or
    garbage of any kind, :func:`.messages.unseal`). Reading stops there; the last event is then a
    :class:`~.messages.Violation` saying which line and why.
    The channel can stay open after the child exits (a grandchild inherited it), so ``exited()`` turning
    true also ends the read once the pipe is drained. ``marks``, when given, gets the ``time.monotonic()``
    of the first event's arrival (``"first"``) for the sandbox's per-stage timings.
    """
    clock = SuiteClock(limits)
    events: list[Event] = []
    buffer = bytearray()
    total = 0
    seal = token.encode("ascii")
    with selectors.DefaultSelector() as sel:
        sel.register(read_fd, selectors.EVENT_READ)
        while True:
            now = time.monotonic()
            deadline, limit = clock.deadline()
            if now >= deadline:
                return events, limit
            if not sel.select(timeout=min(deadline - now, _POLL_S)):
                if exited() and not sel.select(timeout=0):
                    return events, None
                continue
            chunk = os.read(read_fd, 1 << 16)
            if not chunk:
                return events, None
            total += len(chunk)
            if total > max_bytes:
                return events, "output_limit"
            start = len(buffer)
            buffer += chunk
            if b"\n" not in chunk:
                continue
            end = buffer.rindex(b"\n", start)
            lines = bytes(buffer[:end]).split(b"\n")
            del buffer[: end + 1]
            for line in lines:
                event, why = unseal(line, seal)
                if event is None:
                    events.append(Violation(f"line {len(events) + 1} {why}"))
                    return events, PROTOCOL_VIOLATION
                events.append(event)
                if marks is not None:
                    marks.setdefault("first", time.monotonic())
                if clock.observe(event):
                    return events, None


def describe_exit(returncode: int | None, unfinished: str = "did not exit") -> str:
    """``returncode`` as :mod:`subprocess` gives it (negative: killed by that signal), in words.

    >>> describe_exit(-9), describe_exit(3), describe_exit(None)
    ('was killed by signal SIGKILL', 'exited with code 3', 'did not exit')
    """
    if returncode is None:
        return unfinished
    if returncode < 0:
        try:
            return f"was killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


def _cap(text: str) -> str:
    return cut_middle(text, MAX_TRACEBACK_CHARS, own_lines=True)


def assemble(
    expected: tuple[str, ...], events: Sequence[Event], stop_reason: str | None, exit_desc: str, limits: Limits
) -> ExecutionResult:
    """Turn the event stream into per-test results. Unreported tests are never passed.

    A test's :class:`~.messages.Fault` events become its ``faults`` (what the reference's feedback listed); only its
    ``End`` gives its outcome."""
    finished: dict[str, TestResult] = {}
    faults: dict[str, list[TestFault]] = {}
    running: str | None = None
    crash: str | None = None
    done = False
    for event in events:
        if isinstance(event, Start):
            running = event.name
        elif isinstance(event, End):
            try:
                outcome = Outcome(event.outcome)
            except ValueError:
                outcome = Outcome.ERROR
            finished.setdefault(event.name, TestResult(event.name, outcome, _cap(event.tb),
                                                       tuple(faults.pop(event.name, ()))))
            running = None if running == event.name else running
        elif isinstance(event, Fault):
            faults.setdefault(event.name, []).append(TestFault(event.listed, event.id, _cap(event.tb)))
        elif isinstance(event, Crash):
            crash = _cap(event.tb)
        elif isinstance(event, Done):
            done = True

    limits_hit: tuple[str, ...] = ()
    if stop_reason == PROTOCOL_VIOLATION:
        why = next((e.tb for e in reversed(events) if isinstance(e, Violation)), "")
        crash = (f"ProtocolViolation: the run's result channel carried something other than the test runner's events "
                 f"(its {why}); a program cannot write its own verdict, so the run is failed.")
        if running is not None:
            finished[running] = TestResult(running, Outcome.ERROR, crash)
        not_run = "Not run: the run was stopped when its result channel carried a line the test runner did not write."
    elif stop_reason == "output_limit":
        limits_hit = (stop_reason,)
        stop_text = f"OutputLimitExceeded: the run sent more than {MAX_EVENT_BYTES} bytes of results and was stopped"
        if running is not None:
            finished[running] = TestResult(running, Outcome.ERROR, stop_text)
        elif crash is None:
            crash = stop_text
        not_run = "Not run: the suite was stopped for exceeding the output limit."
    elif stop_reason is not None:
        limits_hit = (stop_reason,)
        seconds = limits.test_timeout_s if stop_reason == "test_timeout" else limits.suite_timeout_s
        what = "the per-test time limit" if stop_reason == "test_timeout" else "the suite time limit"
        stop_text = f"TimeoutError: stopped after exceeding {what} of {seconds:g} s"
        if running is not None:
            finished[running] = TestResult(running, Outcome.TIMEOUT, stop_text)
        elif crash is None and not finished:
            crash = f"{stop_text} before any test started (while loading the program or the tests)"
        not_run = f"Not run: the suite was stopped after exceeding {what} of {seconds:g} s."
    elif not done and crash is None:
        reason = f"The test process {exit_desc} before reporting all results."
        if running is not None:
            finished[running] = TestResult(running, Outcome.ERROR, reason + f" It was running {running}.")
        elif not finished:
            crash = reason
        not_run = f"Not run: the test process {exit_desc} before this test."
    else:
        not_run = "Not run: the program failed before the tests could run." if crash else "Not run: the test did not report a result."

    tests = [finished.pop(name, None) or TestResult(name, Outcome.NOT_RUN, not_run) for name in expected]
    tests.extend(finished.values())  # fixture errors and tests the parser did not see
    return ExecutionResult(tests=tuple(tests), crash=crash, limits_hit=limits_hit)
