"""Run a program on the inputs of one test, through an :class:`Executor`, and record each call.

The probe wraps the task's entry point, runs one test method of ``TestCases`` (with its
``setUp``/``tearDown``), and reports for every call of the entry point the arguments (as
``repr`` before the call), and what it returned or raised. Nothing runs in this process:
the probe is a test suite handed to the executor, so it is confined like any program."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from ...sandbox.host.executor import Executor
from ...tasks import Task

__all__ = ["Call", "probe_calls", "first_difference", "PROBE_TEST"]

PROBE_TEST = "test_ccw_probe"
_MARK = "CCW_PROBE "
_MAX_CALLS = 50

# Appended after the task's test source: rebinds ``TestCases`` to a one-test class whose test
# runs the original test method with the entry point wrapped, then reports the calls as the
# message of an AssertionError (the one channel every executor returns: the traceback).
_PROBE_SOURCE = '''

import json as _ccw_json, os as _ccw_os, re as _ccw_re, unittest as _ccw_unittest
_CCW_ORIGINAL_CASES = TestCases
_CCW_WORKDIR = _ccw_os.getcwd()


def _ccw_short(value, limit=300):
    try:
        text = repr(value)
    except BaseException:
        text = "<" + type(value).__name__ + ">"
    text = _ccw_re.sub(r" at 0x[0-9a-fA-F]+", "", text.replace(_CCW_WORKDIR, "."))
    text = _ccw_re.sub(r"\\btmp[a-z0-9_]{{8}}\\b", "tmpdir", text)  # tempfile names differ between runs
    return text if len(text) <= limit else text[:limit] + "..."


class TestCases(_ccw_unittest.TestCase):
    def {probe}(self):
        calls, scope = [], globals()
        original = scope[{entry!r}]

        def wrapper(*args, **kwargs):
            record = {{"args": ", ".join([_ccw_short(a) for a in args] + [k + "=" + _ccw_short(v) for k, v in kwargs.items()])}}
            if len(calls) < {max_calls}:
                calls.append(record)
            try:
                out = original(*args, **kwargs)
            except BaseException as exc:
                record["raised"] = type(exc).__name__
                record["message"] = str(exc)[:200]
                raise
            record["returned"] = _ccw_short(out)
            return out

        scope[{entry!r}] = wrapper
        try:
            _CCW_ORIGINAL_CASES({method!r}).run(_ccw_unittest.TestResult())
        finally:
            scope[{entry!r}] = original
        raise AssertionError({mark!r} + _ccw_json.dumps(calls))
'''


@dataclass(frozen=True)
class Call:
    """One call of the entry point: ``args`` as written by ``repr``; ``returned`` or ``raised`` (+ ``message``)."""

    args: str
    returned: str | None = None
    raised: str | None = None
    message: str = ""


def probe_calls(executor: Executor, task: Task, program: str, test_name: str) -> tuple[Call, ...] | None:
    """Run ``program`` on test ``test_name`` of ``task`` and return the entry-point calls it made.

    ``None`` when the probe could not report (the program crashed on import, the test
    name is unknown, or the run timed out).
    """
    if test_name not in task.test_names:
        return None
    source = _PROBE_SOURCE.format(probe=PROBE_TEST, entry=task.entry_point, method=test_name, max_calls=_MAX_CALLS, mark=_MARK)
    probe_task = dataclasses.replace(task, test=task.test + source)
    executor.derive(task, probe_task)  # its probe test never passes: it runs as the task does, uncalibrated
    result = executor.run(probe_task, program)
    if result.details.get("judge") == "inprocess" or result.details.get("forgeable"):
        return None  # the program ran in the tests' own module there: what it says may be what it read of them
    report = result.by_name().get(PROBE_TEST)
    if report is None or _MARK not in report.traceback:
        return None
    payload = report.traceback[report.traceback.rindex(_MARK) + len(_MARK):].strip().splitlines()[0]
    try:
        records = json.loads(payload)
    except ValueError:
        return None
    return tuple(Call(r.get("args", ""), r.get("returned"), r.get("raised"), r.get("message", "")) for r in records)


def first_difference(expected: tuple[Call, ...], actual: tuple[Call, ...]) -> tuple[Call, Call | None] | None:
    """The first ``(expected_call, actual_call)`` pair that differs in what it returned or raised.

    ``actual_call`` is ``None`` when the candidate stopped calling before the ground truth
    did. Pairs are compared in order while the arguments agree; ``None`` when no difference.

    >>> first_difference((Call("1", "2"), Call("3", "4")), (Call("1", "2"), Call("3", "5")))
    (Call(args='3', returned='4', raised=None, message=''), Call(args='3', returned='5', raised=None, message=''))
    """
    for index, want in enumerate(expected):
        if index >= len(actual):
            return want, None
        got = actual[index]
        if got.args != want.args:
            return None  # the inputs diverged (they depend on earlier outputs): nothing comparable
        if (got.returned, got.raised) != (want.returned, want.raised):
            return want, got
    return None
