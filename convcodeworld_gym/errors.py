"""Named errors of convcodeworld-gym, so callers can catch exactly what went wrong.

Every error raised on purpose by this package derives from :class:`ConvCodeWorldError`.
Messages name the bad input and say how to fix it.

Holds:
    ConvCodeWorldError   base class
    DatasetError         a task source cannot be found or read
    MalformedRecordError one record of a task file is wrong (names file, line, field)
    UnknownTaskError     a task id that is not in the loaded task set
    LeftOutTaskError     a task id the task set left out on purpose (says why and how to get it back)
    NoGroundTruth        the expert simulated user needs canonical solutions the task set's tasks lack
    FeedbackUnavailable  a feedback kind that is not configured
    ExecutorError        the executor itself failed (never raised for bad *model* code)
    InfrastructureError  a run was lost to the infrastructure, also on its retry, where a verdict was needed
    SimulatorError       the LLM user simulator's endpoint failed after its retries (names endpoint and status)
    ResetNeeded          ``step`` called before ``reset`` or after the episode ended
    MissingRuntimeDependencies  tasks need modules or data files the runtime lacks (``strict_runtime=True``)
    ReferenceLogError    a ConvCodeBench reference log (or reference result file) lacks a task,
                         a turn or a field, or is inconsistent
    ContextOverflow      a policy's model rejected a prompt as longer than its context
    SamplesError         a BigCodeBench samples file (turn 0) is missing, malformed or lacks a task
    DependencyNotInstalled  an optional extra this feature needs is not installed (names the install command)
    ServerLimitError     a request went over one of the episode server's limits (names the limit and its flag)
    ServerError          the episode server refused a request (the client's side: the server's error kind and message)
    RunFolderError       an output folder cannot be used: a file in its place, not writable, or it holds files this
                         package did not write
    RunFolderBusy        another run holds the output folder (names its pid, host, start time and command)
    RunLogError          a turn log, a run's metadata.json or another JSON(-lines) file a run reads is empty or corrupt
                         (names the file, the line and the fix)
    BanditError          contexts cannot be cut from a log, or a (context, completion) pair cannot be scored as asked
                         (names the input and the fix)
"""

from __future__ import annotations

__all__ = [
    "ConvCodeWorldError",
    "DatasetError",
    "MalformedRecordError",
    "UnknownTaskError",
    "LeftOutTaskError",
    "NoGroundTruth",
    "FeedbackUnavailable",
    "ExecutorError",
    "InfrastructureError",
    "SimulatorError",
    "ResetNeeded",
    "ReferenceLogError",
    "ContextOverflow",
    "SamplesError",
    "MissingRuntimeDependencies",
    "DependencyNotInstalled",
    "ServerLimitError",
    "ServerError",
    "RunFolderError",
    "RunFolderBusy",
    "RunLogError",
    "BanditError",
]


class ConvCodeWorldError(Exception):
    """Base class of every error this package raises on purpose."""


class DatasetError(ConvCodeWorldError):
    """A task source cannot be found, downloaded or parsed as a whole."""


class MalformedRecordError(DatasetError):
    """One record of a task file is malformed.

    The message names the file, the 1-based line (or row) and the field.
    """

    def __init__(self, path: str, line: int, field: str, problem: str) -> None:
        self.path, self.line, self.field, self.problem = path, line, field, problem
        super().__init__(f"{path}, line {line}, field {field!r}: {problem}")


class UnknownTaskError(ConvCodeWorldError, KeyError):
    """A task id was asked for that the loaded task set does not hold."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class LeftOutTaskError(UnknownTaskError):
    """A task id was asked for that the task set left out on purpose: a default task set leaves out the tasks
    whose needs the runtime lacks and those only an in-process judge can judge.

    Caught as :class:`UnknownTaskError` (and ``KeyError``) like any id the set lacks. The message names the
    task, the set, why it was left out and how to get it back; ``task_id`` and ``reason`` hold the id and
    that explanation.
    """

    def __init__(self, message: str, task_id: str, reason: str) -> None:
        super().__init__(message, task_id, reason)  # all in args, so that it pickles (vector env workers)
        self.task_id, self.reason = task_id, reason


class NoGroundTruth(ConvCodeWorldError, ValueError):
    """The expert simulated user (SEF) compares the model's code with the task's canonical solution, and the task set
    holds tasks that have none (every LiveCodeBench row, some TACO and APPS rows). The message names how many and
    which, and the fix: a combination without SEF, or ``task_ids=`` of tasks that have one. ``task_ids`` holds the
    tasks without one."""

    def __init__(self, message: str, task_ids: tuple[str, ...]) -> None:
        super().__init__(message, task_ids)  # all in args, so that it pickles (vector env workers)
        self.task_ids = task_ids

    def __str__(self) -> str:
        return str(self.args[0])


class FeedbackUnavailable(ConvCodeWorldError, NotImplementedError):
    """A feedback kind was requested that has no provider configured."""


class ExecutorError(ConvCodeWorldError):
    """The executor could not run at all (bad configuration, missing interpreter).

    Failures of the *program under test* are never raised: they come back as a
    failed :class:`~convcodeworld_gym.sandbox.ExecutionResult`.
    """


class InfrastructureError(ConvCodeWorldError, RuntimeError):
    """A run was lost to the infrastructure (its worker, actor or container died from outside, or the sandbox
    refused to start it), and lost again on its retry, where the caller needs a verdict that does not exist:
    raised instead of a reward of 0, which would say the program failed. ``reason`` is the result's
    ``infra_error``; ``task_id`` names the task."""

    def __init__(self, message: str, task_id: str, reason: str) -> None:
        super().__init__(message, task_id, reason)  # all in args, so that it pickles (vector env workers)
        self.task_id, self.reason = task_id, reason

    def __str__(self) -> str:
        return str(self.args[0])


class SimulatorError(ConvCodeWorldError, RuntimeError):
    """The LLM that simulates the user could not give feedback (after retries).

    Raised instead of returning empty feedback: a dead endpoint must never look like a
    silent user. ``endpoint`` is the base URL, ``status`` the last HTTP status (or
    ``None`` for timeouts, connection failures and malformed replies).
    """

    def __init__(self, message: str, *, endpoint: str, status: int | None = None) -> None:
        self.endpoint, self.status = endpoint, status
        super().__init__(message)


class ResetNeeded(ConvCodeWorldError, RuntimeError):
    """``step`` was called before ``reset`` or after the episode had ended."""


class ReferenceLogError(ConvCodeWorldError, ValueError):
    """A reference log cannot be replayed or imported: it lacks a task, a turn or a field, or
    contradicts itself. The message names the log, the task (and turn) and the fix."""


class ContextOverflow(ConvCodeWorldError):
    """A policy's model could not take the prompt: it is longer than the model's context.

    Raised by a policy's ``act``; the reference protocol answers it by trimming the execution
    feedback shorter and asking again (:func:`convcodeworld_gym.protocol.act_with_retrim`)."""


class SamplesError(ConvCodeWorldError, ValueError):
    """A BigCodeBench samples file (``--turn0``) is missing, malformed, or lacks a task of the run."""


class MissingRuntimeDependencies(ConvCodeWorldError):
    """Tasks need modules or data files (NLTK corpora) that the runtime running their tests lacks, and
    ``strict_runtime=True`` asked for an error instead of leaving them out (or running them to fail).
    The message names the tasks, what they lack and the command that installs it."""


class DependencyNotInstalled(ConvCodeWorldError, ImportError):
    """An optional extra a feature needs is not installed; the message names the feature and the install command
    (``pip install 'convcodeworld-gym[openenv]'``). The core install never needs it."""


class ServerLimitError(ConvCodeWorldError):
    """A request to the episode server went over one of its limits: sessions, request size, episode time or idle
    time (:mod:`convcodeworld_gym.service`). The message names the limit, its value and the ``convcodeworld serve``
    flag that sets it; ``limit`` is the limit's name (``"max_sessions"``, ``"max_request_bytes"``,
    ``"max_episode_s"``, ``"idle_timeout_s"``)."""

    def __init__(self, message: str, limit: str) -> None:
        super().__init__(message, limit)
        self.limit = limit

    def __str__(self) -> str:
        return str(self.args[0])


class ServerError(ConvCodeWorldError, RuntimeError):
    """The episode server refused a request (raised by :class:`~convcodeworld_gym.service.client.ConvCodeWorldClient`).

    ``kind`` is the name of the error the server raised (``"UnknownTaskError"``, ``"ResetNeeded"``,
    ``"ServerLimitError"``, ``"ValidationError"``, ...), ``code`` OpenEnv's error code (``"EXECUTION_ERROR"``,
    ``"CAPACITY_REACHED"``, ...), and the message the server's own."""

    def __init__(self, message: str, kind: str, code: str) -> None:
        super().__init__(message, kind, code)
        self.kind, self.code = kind, code

    def __str__(self) -> str:
        return str(self.args[0])


class RunFolderError(ConvCodeWorldError):
    """An output folder (``--out``) cannot be used as asked: a file stands in its place, it cannot be written, or it
    holds files this package did not write and would overwrite. The message names the folder, the files and the fix."""


class RunFolderBusy(RunFolderError):
    """Another run holds the output folder (one run at a time: :class:`~convcodeworld_gym.records.RunFolderLock`).
    ``holder`` is what its lock file says: ``pid``, ``host``, ``started`` and ``command``."""

    def __init__(self, message: str, holder: dict[str, object]) -> None:
        super().__init__(message, holder)
        self.holder = holder

    def __str__(self) -> str:
        return str(self.args[0])


class RunLogError(ConvCodeWorldError, ValueError):
    """A run's turn log, its ``metadata.json``, or another JSON(-lines) file a run reads is empty or corrupt. The
    message names the file (and the line) and what to do."""


class BanditError(ConvCodeWorldError, ValueError):
    """Contexts cannot be cut from a log as asked (no trajectory of the combination, a task the task set lacks), or
    a (context, completion) pair cannot be scored (a context without its task, an unknown reward): the message names
    the input and the fix (:mod:`~convcodeworld_gym.bandit`)."""
