"""Runs in every process: the messages between an executor, its sandbox workers and each run's test runner, typed
records and their wire form.

Every message crosses as one JSON text (``json.dumps``: ASCII only, so never a raw newline; a lone
surrogate in a string crosses escaped). The records here are the only code that writes or reads one:
a sender builds a record and sends ``record.to_wire()``, a receiver reads it back with ``from_wire``
(:func:`reply_from_wire` for whatever a worker answers, :func:`unseal` for an event line).

Who sends what, and how it is framed:

* executor -> worker: :class:`WorkerConfig`, the worker's one command-line argument; then one :class:`Job`
  per line on its stdin. The worker hands the same job to the run's confined child (on a pipe of its own,
  closed after it).
* worker -> executor, one line each on its stdout: :class:`Ready` once, at start; then per job a
  :class:`RunReply` or, when the worker itself failed on the job, a :class:`WorkerFailed`.
* test runner (:mod:`.run.runner`) -> worker or :class:`~.backends.local.LocalExecutor`, on the run's result channel:
  :class:`Start`, :class:`Fault`, :class:`End`, :class:`Crash`, :class:`Done`, one line each, sealed with the run's
  secret token (:func:`seal`). Any line that is not exactly one of them under the token is refused
  (:func:`unseal`), and the collector notes it as a :class:`Violation`, which is never on the channel.
* :class:`~.backends.local.LocalExecutor` -> the runner script: one :class:`RunnerJob` on its stdin.

Records that belong to other modules (:class:`~.limits.Limits`,
:class:`~.confinement.confine.SandboxSettings`, the confinement report) cross as their fields by name.
Standard library only, and nothing of the package: the worker boots with the standard library alone
(:func:`.host.launch.worker_boot`), and the runner script imports this module on its own.

Holds:
    WorkerConfig     what a worker is started with
    Job              one run, sent to a worker and handed to the run's child
    Ready            a worker's first line: the confinement it achieved
    RunReply         a worker's answer to a job: the run's events, why it stopped, how it ended, its timings
    WorkerFailed     a worker's answer to a job it failed on itself
    Reply            any of those three
    reply_from_wire  read a worker's line
    Event            a test runner's event (base class)
    Start            a test began
    Fault            one entry of unittest's failures or errors of a test (a subtest's, say): feedback, never a verdict
    End              a test finished, with its outcome
    Crash            a failure outside any test
    Done             the suite ran to its end
    Violation        the collector's note of a line on the result channel that was not a sealed event
    RUNNER_OUTCOMES  the outcomes an ``End`` may report
    FAULT_LISTS      the lists of unittest's result a ``Fault`` may be an entry of
    seal             an event as the runner writes it: the run's token, the event, a newline
    unseal           the event on a line of the result channel, or why the line is none
    RunnerJob        the local executor's job for the runner script
    Mode             how a job's tests are judged: ``split`` or ``inprocess`` (a job's ``mode``)
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

__all__ = ["WorkerConfig", "Job", "Ready", "RunReply", "WorkerFailed", "Reply", "reply_from_wire", "Event", "Start",
           "Fault", "End", "Crash", "Done", "Violation", "RUNNER_OUTCOMES", "FAULT_LISTS", "seal", "unseal", "RunnerJob",
           "Mode"]


class Mode(str, enum.Enum):
    """How the tests of a task are judged."""

    SPLIT = "split"
    INPROCESS = "inprocess"


def _dumps(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode("utf-8", "surrogatepass")


def _loads(data: bytes | str) -> Any:
    return json.loads(data.decode("utf-8", "surrogatepass") if isinstance(data, bytes) else data)


def _fields_of(record: Any) -> dict[str, Any]:
    """A dataclass record's fields by name, in order (not a deep copy, unlike ``dataclasses.asdict``)."""
    return {f.name: getattr(record, f.name) for f in fields(record)}


class _Record:
    """A record that crosses as the JSON object of its fields, by name and in order."""

    def to_wire(self) -> bytes:
        return _dumps(_fields_of(self))


# ----------------------------------------------------------------------------- executor <-> worker

@dataclass(frozen=True)
class WorkerConfig(_Record):
    """What a worker is started with: its one command-line argument.

    Attributes:
        uid: the slot's sandbox uid, which each run drops to (where the worker may switch uids).
        settings: the :class:`~.confinement.confine.SandboxSettings` fields by name (``dataclasses.asdict``).
        preload: modules the worker imports before it answers :class:`Ready`.
        readable: paths, as the worker sees them, that runs must be able to read (the package, the interpreter).
        own_cgroup: True when the worker has a memory cgroup to itself (a container), so that an OOM kill
            counted there during a run is that run's.
        cpu_bound: the slot's bound on its runs' CPU and processes: the slot's cgroup, made by the pool
            (:meth:`.confinement.slot_cgroup.SlotCgroup.to_data`), which each run joins; or what bounds them instead
            (``{"kind": "container", ...}``), or ``{"kind": "none", "why": ...}``.

    >>> WorkerConfig.from_wire(WorkerConfig(1, {"tmpfs_mb": 64}, ("numpy",)).to_wire())
    WorkerConfig(uid=1, settings={'tmpfs_mb': 64}, preload=('numpy',), readable=(), own_cgroup=False, cpu_bound={})
    """

    uid: int
    settings: dict[str, Any]
    preload: tuple[str, ...] = ()
    readable: tuple[str, ...] = ()
    own_cgroup: bool = False
    cpu_bound: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_wire(cls, data: bytes | str) -> WorkerConfig:
        message = _loads(data)
        return cls(message["uid"], dict(message["settings"]), tuple(message.get("preload", ())),
                   tuple(message["readable"]), bool(message.get("own_cgroup")), dict(message.get("cpu_bound") or {}))


@dataclass(frozen=True)
class Job(_Record):
    """One run: the executor sends it to a worker, which hands it to the run's confined child.

    Attributes:
        program: the program's source.
        test: the tests' source (a unittest module).
        prelude: the task's imports: the split judge's module starts with them (:func:`.run.judge.judge_source`).
        entry_point: the name the tests call.
        module: the module name program and tests run as (:data:`.run.events.MODULE_NAME`).
        test_class: the ``TestCase`` class to run.
        mode: how the run is judged: a :class:`~.messages.Mode` value (``"split"`` or ``"inprocess"``).
        limits: the run's :class:`~.limits.Limits` fields by name (``dataclasses.asdict``).
        preload: the task's own libraries, which the worker imports before it forks the run (those its
            runtime holds).
        network: the run's network, :func:`.runtimes.packages.network_policy`: ``"none"`` or ``"loopback"``; a run is
            never given more than its job says.
        facts: the split judge's :class:`~.run.judge.JudgeFacts` of the task's tests, as data (found once per task by
            the executor; None: the run finds them).
        first: the tests run first (the task's public tests, :attr:`~..tasks.Task.public_tests`), then the others:
            nothing run for a hidden test can change what a public one reports (:func:`.run.runner.run_suite`).

    >>> job = Job("def f(): pass", "T", "", "f", "__test__", "TestCases", "split", {"suite_timeout_s": 5.0})
    >>> Job.from_wire(job.to_wire()) == job
    True
    """

    program: str
    test: str
    prelude: str
    entry_point: str
    module: str
    test_class: str
    mode: str
    limits: dict[str, Any]
    preload: tuple[str, ...] = ()
    network: str = "none"
    facts: dict[str, Any] | None = None
    first: tuple[str, ...] = ()

    @classmethod
    def from_wire(cls, data: bytes | str) -> Job:
        message = _loads(data)
        return cls(message["program"], message["test"], message["prelude"], message["entry_point"], message["module"],
                   message["test_class"], message.get("mode", "split"), dict(message["limits"]),
                   tuple(message.get("preload", ())), message.get("network", "none"), message.get("facts"),
                   tuple(message.get("first", ())))


@dataclass(frozen=True)
class Ready:
    """A worker's first line: what confinement it achieved (:meth:`.confinement.confine.Confinement.as_dict`).

    >>> reply_from_wire(Ready({"level": "full"}).to_wire())
    Ready(confinement={'level': 'full'})
    """

    confinement: dict[str, Any]

    def to_wire(self) -> bytes:
        return _dumps({"ready": self.confinement})


@dataclass(frozen=True)
class RunReply:
    """A worker's answer to a job: what the run's test runner reported and how the run ended.

    Attributes:
        events: the runner's events in order (a :class:`Violation` last where a line was refused).
        stop_reason: None when the run ended by itself, else the limit that stopped it (``"suite_timeout"``,
            ``"test_timeout"``, ``"output_limit"``) or :data:`.run.events.PROTOCOL_VIOLATION`.
        exit_desc: how the run's process ended, in words (``"ended"`` once the suite reported its end).
        run_s: seconds from the hand-off to the end of the run, on the worker's clock; None where no run was
            made (the executor's own replies for a lost or failed worker).
        stages: seconds per stage of the run (``details["stages"]``); empty where none was timed.
        oom_kills: processes of the run the kernel's OOM killer ended (counted where the worker has its own
            memory cgroup).
        lost: None, or why the sandbox lost this run before any of the program's code could run: no spare could
            be made for it, or its spare refused before it was ready (see :func:`.worker.main._lost_before_ready`).
            The worker alone says so, from what it saw, never from what the run wrote; the executor retries
            such a run on a fresh worker.

    >>> reply = RunReply((Start("test_a"), End("test_a", "passed", ""), Done()), None, "ended", 0.5)
    >>> reply_from_wire(reply.to_wire()) == reply
    True
    """

    events: tuple[Event, ...]
    stop_reason: str | None
    exit_desc: str
    run_s: float | None = None
    stages: dict[str, float] = field(default_factory=dict)
    oom_kills: int = 0
    lost: str | None = None

    def to_wire(self) -> bytes:
        return _dumps({**_fields_of(self), "events": [event.message() for event in self.events]})


@dataclass(frozen=True)
class WorkerFailed:
    """A worker's answer to a job it failed on itself (never because of the program): the run is failed and the
    worker replaced.

    >>> reply_from_wire(WorkerFailed("KeyError: 'x'").to_wire())
    WorkerFailed(error="KeyError: 'x'")
    """

    error: str

    def to_wire(self) -> bytes:
        return _dumps({"worker_error": self.error})


#: Whatever a worker writes to the executor.
Reply = Ready | RunReply | WorkerFailed


def reply_from_wire(data: bytes | str) -> Reply:
    """The :class:`Ready`, :class:`RunReply` or :class:`WorkerFailed` a worker wrote as ``data`` (one line).

    The worker is trusted; its events were checked when they came off the run's result channel. Raises
    ValueError (or KeyError) for a line that is none of them."""
    message = _loads(data)
    if "ready" in message:
        return Ready(dict(message["ready"]))
    if "worker_error" in message:
        return WorkerFailed(str(message["worker_error"]))
    events = []
    for item in message["events"]:
        event, why = _event(item, _ANY_EVENT)
        if event is None:
            raise ValueError(f"a worker's reply holds an event that {why}: {item!r:.200}")
        events.append(event)
    lost = message.get("lost")
    return RunReply(tuple(events), message["stop_reason"], message["exit_desc"], message.get("run_s"),
                    dict(message.get("stages") or {}), int(message.get("oom_kills") or 0),
                    str(lost) if lost is not None else None)


# ----------------------------------------------------------------------------- test runner -> collector

class Event:
    """One event of a run's test runner; on the wire ``{"e": kind, field: value, ...}``, every field a string."""

    kind: ClassVar[str]

    def message(self) -> dict[str, Any]:
        """The event as it crosses: ``e`` (its kind) first, then its fields in order."""
        return {"e": self.kind, **_fields_of(self)}

    def to_wire(self) -> bytes:
        return _dumps(self.message())


@dataclass(frozen=True)
class Start(Event):
    """A test began (``name``: the test method's name); the per-test clock starts."""

    name: str
    kind: ClassVar[str] = "start"


@dataclass(frozen=True)
class Fault(Event):
    """One entry of unittest's ``failures`` or ``errors`` list (``listed``) as the test ``name`` ran: ``id`` is the
    unittest id of the test or subtest it is about (``__test__.TestCases.test_a (x=1)``), ``tb`` its traceback text.

    The runner sends a test's entries, in order and before its :class:`End`, when the :class:`End` alone does not
    tell them: the test had a failing subtest, or more than one entry. They only say what the reference's feedback
    listed (one block per entry); the test's outcome is its :class:`End`'s, whatever they say.
    """

    name: str
    id: str
    listed: str
    tb: str
    kind: ClassVar[str] = "fault"


@dataclass(frozen=True)
class End(Event):
    """A test finished: its ``outcome`` (one of :data:`RUNNER_OUTCOMES`) and traceback text ``tb`` ("" when passed)."""

    name: str
    outcome: str
    tb: str
    kind: ClassVar[str] = "end"


@dataclass(frozen=True)
class Crash(Event):
    """Something failed outside any test (the module, the loader, the sandbox); ``tb`` says what. The run ends."""

    tb: str
    kind: ClassVar[str] = "crash"


@dataclass(frozen=True)
class Done(Event):
    """The suite ran to its end. ``stats``: timings only, never a verdict, as JSON: the split judge's round
    trips to the program (``round_trips``, ``round_trip_s``) and the ``time.monotonic()`` of a run's steps
    (``read_at``, ``sent_at``, ``ready_at``, ``connected_at``, ``loaded_at``; see :mod:`.worker`)."""

    stats: str = ""
    kind: ClassVar[str] = "done"


@dataclass(frozen=True)
class Violation(Event):
    """The collector's note that a line of the result channel was not a sealed runner event (``tb``: which line
    and why); it ends the read and fails the run. Never on the channel itself."""

    tb: str
    kind: ClassVar[str] = "violation"


#: The outcomes a test runner reports in an :class:`End` (a timeout or a test not run is the collector's verdict).
RUNNER_OUTCOMES = frozenset({"passed", "skipped", "failed", "error"})
#: The lists of unittest's result a :class:`Fault` may be an entry of.
FAULT_LISTS = frozenset({"failures", "errors"})
_RUNNER_EVENTS: dict[str, type[Event]] = {cls.kind: cls for cls in (Start, Fault, End, Crash, Done)}
_ANY_EVENT: dict[str, type[Event]] = {**_RUNNER_EVENTS, Violation.kind: Violation}


def seal(event: Event, token: str) -> bytes:
    r"""``event`` as the runner writes it to the result channel: the run's ``token``, the event, a newline.

    >>> seal(Start("test_a"), "t0k")
    b't0k{"e": "start", "name": "test_a"}\n'
    """
    return token.encode("utf-8", "surrogatepass") + event.to_wire() + b"\n"


def unseal(line: bytes, token: bytes) -> tuple[Event | None, str]:
    """The runner's event on ``line`` (one line of the result channel, without its newline), or None and what is
    wrong with the line: it lacks the run's ``token``, is not JSON, or is not exactly one of the runner's events
    (its kind, exactly its fields, each a string; an ``End``'s outcome one of :data:`RUNNER_OUTCOMES`, a ``Fault``'s
    list one of :data:`FAULT_LISTS`).

    >>> unseal(b't0k{"e": "end", "name": "test_a", "outcome": "passed", "tb": ""}', b"t0k")
    (End(name='test_a', outcome='passed', tb=''), '')
    >>> unseal(b'{"e": "done"}', b"t0k")[1]
    "does not carry the run's token: the test runner did not write it"
    >>> unseal(b't0k{"e": "done", "x": 1}', b"t0k")[1]
    "is a malformed 'done' event"
    >>> unseal(b't0k{"e": []}', b"t0k")[1]  # a kind that is not even a string
    'is not an event of the test runner'
    """
    if not line.startswith(token):
        return None, "does not carry the run's token: the test runner did not write it"
    try:
        message = json.loads(line[len(token):].decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        return None, f"carries the token but is not JSON ({type(exc).__name__})"
    return _event(message, _RUNNER_EVENTS)


def _event(message: Any, kinds: dict[str, type[Event]]) -> tuple[Event | None, str]:
    """The event of one of ``kinds`` that ``message`` (decoded JSON) is, or None and why it is none."""
    if not isinstance(message, dict) or not isinstance(message.get("e"), str) or message["e"] not in kinds:
        return None, "is not an event of the test runner"
    cls = kinds[message["e"]]
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    if set(message) != {"e", *names} or not all(isinstance(message[name], str) for name in names):
        return None, f"is a malformed {message['e']!r} event"
    if cls is End and message["outcome"] not in RUNNER_OUTCOMES:
        return None, f"reports an outcome the runner never reports ({message['outcome'][:40]!r})"
    if cls is Fault and message["listed"] not in FAULT_LISTS:
        return None, f"names a list of unittest's the runner never reports ({message['listed'][:40]!r})"
    return cls(**{name: message[name] for name in names}), ""


# ----------------------------------------------------------------------------- local executor -> runner script

@dataclass(frozen=True)
class RunnerJob(_Record):
    """The :class:`~.backends.local.LocalExecutor`'s job for the runner script (``python -s _runner.py``), on its stdin.

    Attributes:
        program: the program's source.
        test: the tests' source; program and tests run as one module, in-process.
        test_class: the ``TestCase`` class to run.
        module: the module name they run as.
        token: the run's secret: every event line on the result channel starts with it (:func:`seal`).
        first: the tests run first (:attr:`Job.first`).

    >>> RunnerJob.from_wire(RunnerJob("p", "t", "TestCases", "__test__", "t0k", ("test_b",)).to_wire()).first
    ('test_b',)
    """

    program: str
    test: str
    test_class: str
    module: str
    token: str
    first: tuple[str, ...] = ()

    @classmethod
    def from_wire(cls, data: bytes | str) -> RunnerJob:
        message = _loads(data)
        return cls(message["program"], message["test"], message["test_class"], message["module"], message["token"],
                   tuple(message.get("first", ())))
