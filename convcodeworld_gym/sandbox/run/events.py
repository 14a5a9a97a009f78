"""Runs in a run's parent (the warm worker, or the host for :class:`~..backends.local.LocalExecutor`): the test
runner's events read back, timed and turned into a result.

The runner (:mod:`.runner`) writes its events (:mod:`..messages`: ``Start`` / ``Fault`` / ``End`` / ``Crash`` /
``Done``) on the run's result channel, each sealed with the run's token (:func:`new_token`). :func:`collect_events`
reads them until the suite ends, the child dies or a limit is hit, feeding each to a :class:`SuiteClock` for the next
deadline (the suite limit always, the per-test limit while a test runs), and :func:`assemble` turns them into
per-test results, never a pass for a test that did not report one.

Holds:
    SuiteClock           deadlines of one execution and whether the suite has reported its end
    new_token            a fresh secret that seals one run's events
    collect_events       read a run's events until its end or a limit
    assemble             the per-test result of a run's events
    MODULE_NAME          the module name the program runs as (``__test__``)
    MAX_EVENT_BYTES      most bytes of events one run may send
    MAX_TRACEBACK_CHARS  longest traceback text kept per test
    PROTOCOL_VIOLATION   the stop reason of a channel that carried a line the runner did not write
"""

from __future__ import annotations

import os
import secrets
import selectors
import time
from collections.abc import Callable, Sequence

from ..limits import Limits
from ..messages import Crash, Done, End, Event, Fault, Start, Violation, unseal
from ..result import ExecutionResult, Outcome, TestFault, TestResult, cut_middle

__all__ = ["SuiteClock", "new_token", "collect_events", "assemble", "MODULE_NAME", "MAX_EVENT_BYTES",
           "MAX_TRACEBACK_CHARS", "PROTOCOL_VIOLATION"]

#: Module (and file) name the program runs as; tracebacks name ``__test__.py``, as in the reference.
MODULE_NAME = "__test__"
_POLL_S = 0.25
#: Most bytes of events one run may send (tracebacks included); more stops the run (``output_limit``).
MAX_EVENT_BYTES = 8 << 20
#: Longest traceback text kept per test; the middle of a longer one is cut.
MAX_TRACEBACK_CHARS = 20_000
#: The stop reason of a run whose result channel carried a line that is not a sealed runner event.
PROTOCOL_VIOLATION = "protocol_violation"
_TOKEN_BYTES = 16


class SuiteClock:
    """Deadlines of one execution, started at construction.

    >>> clock = SuiteClock(Limits(suite_timeout_s=10, test_timeout_s=1))
    >>> clock.observe(Start("test_a")), clock.deadline()[1]
    (False, 'test_timeout')
    >>> clock.observe(End("test_a", "passed", "")), clock.deadline()[1]
    (False, 'suite_timeout')
    >>> clock.observe(Done())
    True
    """

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.suite_deadline = time.monotonic() + limits.suite_timeout_s
        self.test_deadline: float | None = None

    def observe(self, event: Event) -> bool:
        """Account for one runner event; True when it ends the suite (``Done`` or ``Crash``)."""
        if isinstance(event, Start) and self.limits.test_timeout_s is not None:
            self.test_deadline = time.monotonic() + self.limits.test_timeout_s
        elif isinstance(event, End):
            self.test_deadline = None
        return isinstance(event, (Done, Crash))

    def deadline(self) -> tuple[float, str]:
        """The next monotonic deadline and the limit it stands for (``suite_timeout`` / ``test_timeout``)."""
        if self.test_deadline is not None and self.test_deadline < self.suite_deadline:
            return self.test_deadline, "test_timeout"
        return self.suite_deadline, "suite_timeout"


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
    garbage of any kind, :func:`..messages.unseal`). Reading stops there; the last event is then a
    :class:`~..messages.Violation` saying which line and why.
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


def _cap(text: str) -> str:
    return cut_middle(text, MAX_TRACEBACK_CHARS, own_lines=True)


def assemble(
    expected: tuple[str, ...], events: Sequence[Event], stop_reason: str | None, exit_desc: str, limits: Limits
) -> ExecutionResult:
    """Turn the event stream into per-test results. Unreported tests are never passed.

    A test's :class:`~..messages.Fault` events become its ``faults`` (what the reference's feedback listed); only its
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
