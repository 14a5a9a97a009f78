"""Runs in the episode server's process: what a remote caller is told of the server's errors and of the machine.

A caller of the episode server is a stranger: an error it gets names *its* mistake and what it can change, and says
nothing of how the operator set the server up. The server's own log keeps the whole story.

* :func:`refusal` turns what a session's ``reset`` or ``step`` raised into a :class:`Refused`: the caller's mistakes
  (a bad argument, an unknown or left-out task, a step with no episode, a limit) keep a message written for the
  caller, with OpenEnv's error code ``VALIDATION_ERROR`` (its protocol's code for a request that is not valid; a limit
  has a code of its own) and HTTP 400; the server's failures (the simulated user's endpoint, a run the sandbox lost, a
  bug) become a short message with a reference to the log line that holds the cause (HTTP 503 / 500, OpenEnv's
  ``EXECUTION_ERROR``). A task left out by the operator is told as such (*not played here; choose another*), never
  with the runtime's path, its install lines or the operator's switches (``allow_forgeable``, ``task_ids=``), and a
  simulated user's failure never names its endpoint or model.
* :class:`Redactor` masks the machine's paths (the runtime's and the server's interpreter prefixes, the package's
  dir, the cgroup tree) in the text a caller is shown: a traceback into the standard library reads
  ``<python>/lib/python3.11/json/decoder.py``.

Holds:
    Refused        the error a reset or step ends with, as the caller is told it: kind, message, HTTP status, code
    refusal        a reset's or step's exception as a Refused, logged in full
    ServerFault    wraps what an env raised during a step: never the caller's mistake
    Redactor       masks the machine's paths in text and in JSON data
    machine_paths  the paths :class:`Redactor` masks for a server on an executor
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import (InfrastructureError, LeftOutTaskError, ResetNeeded, ServerLimitError, SimulatorError,
                      UnknownTaskError)
from ..sandbox import Executor
from .guard import ClientGone

__all__ = ["Refused", "refusal", "ServerFault", "Redactor", "machine_paths"]

_log = logging.getLogger("convcodeworld_gym.service.environment")

#: OpenEnv's WebSocket error code for a request that is not valid (the caller's mistake).
VALIDATION_ERROR = "VALIDATION_ERROR"
#: OpenEnv's WebSocket error code for an error of the env (the server's failure).
EXECUTION_ERROR = "EXECUTION_ERROR"
#: Codes of the limits a reset or step can reach (the guard's own limits have theirs: REQUEST_TOO_LARGE, ...).
_LIMIT_CODES = {"max_episode_s": "EPISODE_TIMEOUT", "max_sessions": "CAPACITY_REACHED"}
#: Limits whose refusal means "busy now, ask again" (HTTP 503) rather than "this request is wrong" (400).
_BUSY_LIMITS = frozenset({"max_sessions"})


class ServerFault(Exception):
    """What the env raised while judging a step (the sandbox, the simulated user, a bug): never the caller's mistake,
    whatever its type (a ValueError deep in the server is no bad argument). ``cause`` is the exception."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class Refused(Exception):
    """A reset or step that did not happen, as the caller is told: ``str()`` is ``"<kind>: <message>"``; ``status``
    is the HTTP status (400: the caller's mistake; 503 / 500: the server's), ``code`` OpenEnv's error code."""

    def __init__(self, kind: str, message: str, *, status: int, code: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind, self.message, self.status, self.code = kind, message, status, code


def _callers(exc: BaseException, redactor: Redactor) -> Refused | None:
    """The refusal of a caller's mistake, or None when ``exc`` is not one."""
    if isinstance(exc, LeftOutTaskError):
        return Refused("UnknownTaskError", f"task {exc.task_id!r} is not played on this server (its operator left it "
                       "out: it cannot be judged here); reset with another task (task_id or task_index)",
                       status=400, code=VALIDATION_ERROR)
    if isinstance(exc, ClientGone):  # nobody hears it
        return Refused("ClientGone", str(exc), status=400, code=VALIDATION_ERROR)
    if isinstance(exc, (UnknownTaskError, ResetNeeded)):
        return Refused(type(exc).__name__, redactor.text(str(exc)), status=400, code=VALIDATION_ERROR)
    if isinstance(exc, ServerLimitError):
        return Refused("ServerLimitError", redactor.text(str(exc)), status=503 if exc.limit in _BUSY_LIMITS else 400,
                       code=_LIMIT_CODES.get(exc.limit, VALIDATION_ERROR))
    if isinstance(exc, (ValueError, TypeError)) and not isinstance(exc, ServerFault):
        return Refused(type(exc).__name__, redactor.text(str(exc)), status=400, code=VALIDATION_ERROR)
    return None


def _servers(exc: BaseException, call: str, ref: str) -> Refused:
    """The refusal of a server's failure: what happened to the call, in the caller's terms, and the log's reference."""
    cause = exc.cause if isinstance(exc, ServerFault) else exc
    where = f"the server's log has the details (ref {ref})"
    if isinstance(cause, SimulatorError):
        return Refused("SimulatorError", f"the simulated user (a model this server calls) did not answer, so this {call} "
                       f"did not happen; send it again later; {where}", status=503, code=EXECUTION_ERROR)
    if isinstance(cause, InfrastructureError):
        return Refused("InfrastructureError", f"the sandbox lost this {call}'s run, also on its retry, so it has no "
                       f"verdict and did not happen; send it again; {where}", status=503, code=EXECUTION_ERROR)
    return Refused("InternalError", f"the server failed on this {call}; {where}", status=500, code=EXECUTION_ERROR)


def refusal(call: str, exc: BaseException, redactor: Redactor | None = None) -> Refused:
    """``exc`` (raised by a session's ``call``, ``"reset"`` or ``"step"``) as the caller is told it, logged in full:
    the caller's mistakes at INFO, the server's failures at WARNING with the traceback and a reference that the
    caller's message quotes.

    >>> from convcodeworld_gym.errors import ResetNeeded, SimulatorError
    >>> str(refusal("step", ResetNeeded("no episode in this session: send reset first")))
    'ResetNeeded: no episode in this session: send reset first'
    >>> lost = SimulatorError("HTTP 401 from http://10.0.0.7:8000/v1 (model m)", endpoint="http://10.0.0.7:8000/v1")
    >>> failed = refusal("step", ServerFault(lost))
    >>> failed.kind, failed.status, failed.code, "10.0.0.7" in str(failed)
    ('SimulatorError', 503, 'EXECUTION_ERROR', False)
    """
    redactor = redactor or Redactor(())
    refused = _callers(exc, redactor)
    if refused is not None:
        _log.info("%s refused: %s: %s", call, type(exc).__name__, exc)
        return refused
    ref = secrets.token_hex(4)
    cause = exc.cause if isinstance(exc, ServerFault) else exc
    _log.warning("%s failed: %s: %s (ref %s)", call, type(cause).__name__, cause, ref, exc_info=cause)
    return _servers(exc, call, ref)


class Redactor:
    """Masks the machine's paths in text a caller is shown: each prefix (a dir), where a path starts with it, by its
    label (``<python>``, ``<server>``, ``<cgroup>``). Longest prefixes first; ``/`` itself is never one.

    >>> r = Redactor([("/opt/rt", "<python>"), ("/opt/rt/lib/site", "<libs>")])
    >>> r.text('File "/opt/rt/lib/python3.11/json/decoder.py", line 3; /opt/rt/lib/site/x.py; /opt/rtx')
    'File "<python>/lib/python3.11/json/decoder.py", line 3; <libs>/x.py; /opt/rtx'
    >>> r.data({"tests": [{"traceback": "/opt/rt/bin/python"}], "n": 1})
    {'tests': [{'traceback': '<python>/bin/python'}], 'n': 1}
    """

    def __init__(self, prefixes: Iterable[tuple[str, str]]) -> None:
        kept = {os.path.normpath(path): label for path, label in prefixes if path and os.path.normpath(path) != "/"}
        self.prefixes = tuple(sorted(kept.items(), key=lambda item: len(item[0]), reverse=True))
        self._pattern = (re.compile("|".join(f"({re.escape(path)})(?![\\w.-])" for path, _ in self.prefixes))
                         if self.prefixes else None)

    def text(self, text: str) -> str:
        """``text`` with each prefix replaced by its label."""
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(lambda m: self.prefixes[m.lastindex - 1][1], text)  # type: ignore[operator]

    def data(self, value: Any) -> Any:
        """``value`` (JSON data: dicts, lists, strings, numbers) with every string masked."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {key: self.data(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.data(item) for item in value]
        return value


def machine_paths(executor: Executor) -> list[tuple[str, str]]:
    """The prefixes a server on ``executor`` masks: its runtime interpreter's (as given and resolved), this
    interpreter's (``sys.prefix``, ``sys.base_prefix``), the package's dir, and the cgroup tree."""
    from ..sandbox.confinement.slot_cgroup import DEFAULT_ROOT

    found: list[tuple[str, str]] = []
    probe = executor.runtime_probe()
    pythons = [probe.python] if probe is not None else []
    for python in [*pythons, sys.executable]:
        for path in (python, os.path.realpath(python)):
            found.append((os.path.dirname(os.path.dirname(path)), "<python>"))
    found += [(sys.prefix, "<python>"), (sys.base_prefix, "<python>"), (sys.exec_prefix, "<python>")]
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    found += [(package_root, "<server>"), (DEFAULT_ROOT, "<cgroup>")]
    return found
