"""Child side of the local executor: run one program against its unittest suite.

Run as a script (``python -s _runner.py``) with the job as JSON on stdin:
``{"program": str, "test": str, "test_class": str, "module": str}``.
The result channel is the file descriptor named by ``$CCW_RESULT_FD``; events go there as
JSON lines, each flushed before the next test starts, so a parent that must kill this
process still knows every test that finished:

    {"e": "start", "name": ...}                       a test began
    {"e": "end", "name": ..., "outcome": ..., "tb": ...}  a test finished
    {"e": "crash", "tb": ...}                          failure outside any test
    {"e": "done"}                                      the suite ran to its end

This file imports nothing from the package: it must start fast and stand alone. Sandbox
workers import :func:`run_suite` from it (the same test loop, in a forked child).
"""

from __future__ import annotations

import json
import linecache
import os
import sys
import traceback
import types
import unittest


def emit(fd: int, event: dict) -> None:
    data = (json.dumps(event) + "\n").encode("utf-8", "surrogatepass")
    while data:
        data = data[os.write(fd, data):]


class _StreamingResult(unittest.TestResult):
    """Reports each test's outcome on the channel as soon as it is known."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd
        self._current: dict[str, tuple[str, str]] = {}

    @staticmethod
    def _name(test: unittest.TestCase) -> str:
        return test.id().split(".")[-1]

    def _record(self, test, outcome: str, tb: str = "") -> None:
        name = self._name(test)
        prev = self._current.get(name)
        if prev is None or prev[0] in ("passed", "skipped"):  # first failure of a test wins
            self._current[name] = (outcome, tb)

    def _exc_info_to_string(self, err, test) -> str:
        """unittest's text, except for an exception from the program's process (split judge): then the
        test's frames followed by the program's own traceback, as one same-process traceback would read."""
        remote = getattr(err[1], "ccw_remote_traceback", None)
        if not isinstance(remote, str) or not remote:
            return super()._exc_info_to_string(err, test)
        head = "Traceback (most recent call last):\n"
        frames = [f for f in traceback.extract_tb(err[2]) if f.filename == test.__class__.__module__ + ".py"]
        earlier, _, last = remote.rpartition(head)
        return earlier + head + "".join(traceback.format_list(frames)) + last

    def startTest(self, test) -> None:  # noqa: N802 (unittest API)
        super().startTest(test)
        emit(self._fd, {"e": "start", "name": self._name(test)})

    def stopTest(self, test) -> None:  # noqa: N802
        super().stopTest(test)
        name = self._name(test)
        outcome, tb = self._current.pop(name, ("passed", ""))
        emit(self._fd, {"e": "end", "name": name, "outcome": outcome, "tb": tb})

    def addSuccess(self, test) -> None:  # noqa: N802
        super().addSuccess(test)
        self._record(test, "passed")

    def addSkip(self, test, reason) -> None:  # noqa: N802
        super().addSkip(test, reason)
        self._record(test, "skipped", reason)

    def addExpectedFailure(self, test, err) -> None:  # noqa: N802
        super().addExpectedFailure(test, err)
        self._record(test, "passed")

    def addUnexpectedSuccess(self, test) -> None:  # noqa: N802
        super().addUnexpectedSuccess(test)
        self._record(test, "passed")

    def addFailure(self, test, err) -> None:  # noqa: N802
        super().addFailure(test, err)
        self._record(test, "failed", self.failures[-1][1])

    def addError(self, test, err) -> None:  # noqa: N802
        super().addError(test, err)
        if not isinstance(test, unittest.TestCase):  # setUpClass / module fixture failures
            emit(self._fd, {"e": "end", "name": str(test), "outcome": "error", "tb": self.errors[-1][1]})
            return
        self._record(test, "error", self.errors[-1][1])

    def addSubTest(self, test, subtest, err) -> None:  # noqa: N802
        super().addSubTest(test, subtest, err)
        if err is not None:
            failed = issubclass(err[0], test.failureException)
            self._record(test, "failed" if failed else "error", (self.failures if failed else self.errors)[-1][1])


def run_suite(fd: int, source: str, module_name: str, test_class: str, inject: dict | None = None) -> None:
    """Exec ``source`` as module ``module_name`` (with ``inject`` preset in it), run ``test_class``, stream events.

    Emits ``crash`` for anything that escapes the tests (``SystemExit`` included), else ``done``.
    """
    filename = f"{module_name}.py"
    # Let tracebacks show source lines of the program under test.
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    module = types.ModuleType(module_name)
    module.__file__ = filename
    module.__dict__.update(inject or {})
    sys.modules[module_name] = module
    try:
        exec(compile(source, filename, "exec"), module.__dict__)
        test_case = module.__dict__[test_class]
        suite = unittest.TestLoader().loadTestsFromTestCase(test_case)
        suite.run(_StreamingResult(fd))
    except BaseException as exc:  # noqa: BLE001 - anything outside the tests is a crash, SystemExit included
        tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None  # drop this frame
        emit(fd, {"e": "crash", "tb": "".join(traceback.format_exception(type(exc), exc, tb))})
        return
    emit(fd, {"e": "done"})


def main() -> None:
    fd = int(os.environ.pop("CCW_RESULT_FD"))
    job = json.loads(sys.stdin.buffer.read().decode("utf-8", "surrogatepass"))
    sys.stdin.close()
    sys.path[0] = os.getcwd()  # like `python script.py` run in the work dir, not in this package
    run_suite(fd, job["program"] + "\n" + job["test"], job["module"], job["test_class"])
    os._exit(0)  # skip interpreter teardown: atexit hooks of the program are not ours to run


if __name__ == "__main__":
    main()
