"""Runs in a run's process (forked by the worker, or a script of the local executor): run one program against its
unittest suite.

Run as a script (``python -s _runner.py``) with the job (a :class:`~..messages.RunnerJob`) on stdin.
The result channel is the file descriptor named by ``$CCW_RESULT_FD``; events go there as
JSON lines, each flushed before the next test starts, so a parent that must kill this
process still knows every test that finished. Each line starts with the run's token (a secret
the parent chose for this run), so that a line the program writes to the
channel without it is recognised as not the runner's and fails the run (see ``collect_events``).
The events are those of :mod:`..messages`:

    Start(name)                a test began
    Fault(name, id, listed, tb) an entry of unittest's failures or errors of the test (sent before its End when the
                               End alone does not tell them: a failing subtest, more than one entry); feedback only
    End(name, outcome, tb)     a test finished
    Crash(tb)                  failure outside any test
    Done()                     the suite ran to its end

Only the test may control its own outcome: a skip or stop raised by the program, or by a class
dressed as unittest's, fails the test (:class:`TestGuard`), and a test that reports nothing is an
error, never a pass.

This file imports nothing from the package but :mod:`..messages` (standard library only, found beside
it when run as a script): it must start fast and stand alone. Sandbox workers import :func:`run_suite`
from it (the same test loop, in a forked child).
"""

from __future__ import annotations

import contextlib
import json
import linecache
import os
import re
import sys
import time
import traceback
import types
import unittest
from collections.abc import Callable

if __package__:  # imported: by a sandbox worker, or a test
    from ..messages import Crash, Done, End, Event, Fault, RunnerJob, Start, seal
else:  # run as a script by LocalExecutor: its own dir is sys.path[0] until main() makes it the work dir
    sys.path.insert(0, os.path.dirname(sys.path[0]))  # the sandbox dir, where messages.py is, for this one import
    from messages import Crash, Done, End, Event, Fault, RunnerJob, Start, seal  # type: ignore[no-redef]

    del sys.path[0], sys.modules["messages"]  # a program's own ``import messages`` must not find ours
    # The judge's own modules the tests may import (an input/output task's checks: ``.iocheck``), found beside this
    # file through bare packages, as a sandbox worker finds them (``host.launch.worker_boot``): none of the package's
    # ``__init__`` runs and nothing is added to ``sys.path``.
    for _name, _path in (("convcodeworld_gym", os.path.dirname(os.path.dirname(sys.path[0]))),
                         ("convcodeworld_gym.sandbox", os.path.dirname(sys.path[0])),
                         ("convcodeworld_gym.sandbox.run", sys.path[0])):
        if _name not in sys.modules:
            sys.modules[_name] = types.ModuleType(_name)
            sys.modules[_name].__path__ = [_path]  # type: ignore[attr-defined]

__all__ = ["emit", "run_suite", "ordered", "TestGuard", "ControlFlowRefused", "NO_OUTCOME"]

# unittest leaves frames of modules that set this out of a test's traceback: the guard's frame is not the program's.
__unittest = True

#: The name a test's failure text gives when the split judge refused an operation on a program object in it.
REFUSED = "RefusedOperation"
#: The text of a test that finished without reporting any outcome (it is not passed).
NO_OUTCOME = "ControlFlowRefused: the test finished without reporting an outcome (no pass, failure, error or skip); it is not passed."

_clock = time.monotonic  # bound at import: a program run in-process before the tests load may patch time.monotonic


def emit(fd: int, event: Event, token: str) -> None:
    """Write ``event`` to the result channel ``fd`` as one line, sealed with the run's ``token``."""
    data = seal(event, token)
    while data:
        data = data[os.write(fd, data):]


# ----------------------------------------------------------------------------- control flow

class ControlFlowRefused(Exception):
    """Raised in place of a test-control exception (skip, stop) that did not come from the test itself."""


_SKIP = unittest.SkipTest
_SHOULD_STOP = unittest.case._ShouldStop  # noqa: SLF001 - raised by unittest itself, never by a program
_SKIP_TEST_CODE = unittest.TestCase.skipTest.__code__
_SUBTEST_CODE = unittest.TestCase.subTest.__wrapped__.__code__  # type: ignore[attr-defined]
_REAL_TRACEBACK = BaseException.__dict__["__traceback__"].__get__  # a subclass's property cannot fake it
#: What a test source that skips says (the word "skip" alone is common in comments and strings: "skiprows").
_SKIP_WORDS = re.compile(r"skipTest|SkipTest|skipIf|skipUnless|__unittest_skip__|\bskip\(")
_UNITTEST_NAMES = frozenset(
    name for module in (unittest, unittest.case) for name, value in vars(module).items()
    if isinstance(value, type) and issubclass(value, BaseException)
)


def _claims_unittest(cls: type) -> bool:
    """Is ``cls`` (the real type of a raised exception) one of unittest's, or dressed as one?"""
    try:
        for klass in cls.__mro__:
            module = str(klass.__dict__.get("__module__", ""))
            if module == "unittest" or module.startswith("unittest."):
                return True
            if klass.__name__ in _UNITTEST_NAMES or str(klass.__qualname__).split(".")[-1] in _UNITTEST_NAMES:
                return True
    except BaseException:  # noqa: BLE001 - a hostile metaclass: a class that cannot say what it is is refused
        return True
    return False


def _innermost_frame(exc: BaseException) -> types.FrameType | None:
    """The frame the exception was raised in, read from its real traceback (never through the exception's own attributes)."""
    tb = _REAL_TRACEBACK(exc)
    if type(tb) is not types.TracebackType:
        return None
    while type(tb.tb_next) is types.TracebackType:
        tb = tb.tb_next
    return tb.tb_frame if type(tb.tb_frame) is types.FrameType else None


def _collect_codes(code: types.CodeType, into: set) -> None:
    into.add(code)
    for const in code.co_consts:
        if type(const) is types.CodeType:
            _collect_codes(const, into)


def _test_codes(test_class: type) -> frozenset:
    """The code objects of the test class's own functions (and the functions decorators wrapped), as loaded."""
    codes: set = set()
    for klass in test_class.__mro__:
        if klass is unittest.TestCase or klass is object:
            continue
        for value in list(vars(klass).values()):
            func = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
            for _ in range(16):  # a chain of decorators (functools.wraps sets __wrapped__)
                code = getattr(func, "__code__", None)
                if type(code) is types.CodeType:
                    _collect_codes(code, codes)
                func = getattr(func, "__wrapped__", None)
                if func is None:
                    break
    return frozenset(codes)


class TestGuard:
    """What the tests themselves may do to control a run, fixed after loading, before any test runs.

    Only the test may skip itself (``self.skipTest``, ``raise SkipTest`` in its own code, or a skip
    decorator present when the tests were loaded), and only where the test source uses one of unittest's
    ways to skip at all; likewise an expected failure needs ``expectedFailure`` in the test source (the marks are read
    after the program ran, which could have set them); only unittest's ``subTest`` of a test that
    expected failure when loaded may stop it. The
    origin of an exception is read from its real traceback (frame objects, which a program cannot
    make up), never from what the exception or its class say of themselves. Any other exception of
    unittest's, or of a class dressed as one (``__module__``, ``__name__``, ``__qualname__``), or one whose
    ``__class__`` lies, fails the test it reached.
    """

    def __init__(self, tests: list[unittest.TestCase], test_class: type, test_source: str) -> None:
        self.codes = _test_codes(test_class)
        self.may_skip = _SKIP_WORDS.search(test_source) is not None
        self.skipped_at_load = {id(t) for t in tests if self.may_skip and _skip_marked(t)}
        may_expect = "expectedfailure" in test_source.lower()
        self.expecting_at_load = {id(t) for t in tests if may_expect and _expecting_failure(t)}
        self._tests = tests  # keeps the ids above valid

    def refusal(self, exc: BaseException, test: unittest.TestCase) -> str | None:
        """None when ``exc`` may take its unittest meaning in ``test`` (a TestCase or subtest), else why it may not."""
        cls = type(exc)
        try:
            lies = exc.__class__ is not cls
        except BaseException:  # noqa: BLE001
            lies = True
        if lies:
            return f"the program raised an exception whose __class__ claims to be another class than its own ({_name_of(cls)})"
        if not _claims_unittest(cls):
            return None  # an ordinary exception: unittest judges it as it always does
        owner = getattr(test, "test_case", test)  # a subtest's test
        frame = _innermost_frame(exc)
        if issubclass(cls, _SKIP) and self.may_skip and frame is not None and self._skipped_by_test(frame, owner):
            return None
        if (issubclass(cls, _SHOULD_STOP) and id(owner) in self.expecting_at_load and frame is not None
                and frame.f_code is _SUBTEST_CODE and frame.f_locals.get("self") is owner):
            return None
        return (f"{_name_of(cls)} was raised by the program, not by the test: only a test may skip or stop itself, "
                "so the test fails")

    def _skipped_by_test(self, frame: types.FrameType, test: unittest.TestCase) -> bool:
        if frame.f_code in self.codes:
            return True  # the test's own code raised it
        if frame.f_code is _SKIP_TEST_CODE and frame.f_locals.get("self") is test:
            caller = frame.f_back
            return caller is not None and caller.f_code in self.codes
        return False

    def static_skip(self, test: unittest.TestCase) -> bool:
        """Was ``test`` marked skipped (by a decorator, on itself or its class) when the tests were loaded?"""
        return id(test) in self.skipped_at_load

    def expected_failure(self, test: unittest.TestCase) -> bool:
        """Was ``test`` marked ``expectedFailure`` when the tests were loaded?"""
        return id(test) in self.expecting_at_load


def _name_of(cls: type) -> str:
    try:
        return f"{cls.__module__}.{cls.__qualname__}"
    except BaseException:  # noqa: BLE001
        return "an exception class"


def _skip_marked(test: unittest.TestCase) -> bool:
    method = getattr(test, test._testMethodName, None)  # noqa: SLF001
    return bool(getattr(type(test), "__unittest_skip__", False) or getattr(method, "__unittest_skip__", False))


def _expecting_failure(test: unittest.TestCase) -> bool:
    method = getattr(test, test._testMethodName, None)  # noqa: SLF001
    return bool(getattr(test, "__unittest_expecting_failure__", False)
                or getattr(method, "__unittest_expecting_failure__", False))


class _GuardedOutcome(unittest.case._Outcome):  # noqa: SLF001 - the one place unittest catches skip and stop
    """unittest's per-test outcome, with each test part (setUp, the test, subtests, tearDown, cleanups)
    checked by the result's :class:`TestGuard` before unittest sees what it raised."""

    @contextlib.contextmanager
    def testPartExecutor(self, test_case, *args, **kwargs):  # noqa: N802 (unittest API)
        with super().testPartExecutor(test_case, *args, **kwargs):
            try:
                yield
            except BaseException as exc:
                guard = getattr(self.result, "guard", None)
                why = guard.refusal(exc, test_case) if isinstance(guard, TestGuard) else None
                if why is None:
                    if issubclass(type(exc), _SKIP) and isinstance(self.result, _StreamingResult):
                        self.result.vouch(test_case)
                    raise
                raise ControlFlowRefused(why) from exc


class _StreamingResult(unittest.TestResult):
    """Reports each test's outcome on the channel as soon as it is known.

    It also keeps each test's entries of unittest's ``failures`` and ``errors`` lists (the test's own, its subtests'),
    and sends them as :class:`~..messages.Fault` events before the test's ``End`` when that alone does not tell them (a
    failing subtest, or more than one entry): the reference's feedback had one block per entry. Entries never decide
    an outcome.
    """

    def __init__(self, fd: int, token: str, guard: TestGuard | None = None,
                 refusals: Callable[[], list[str]] | None = None) -> None:
        super().__init__()
        self._send = lambda event: emit(fd, event, token)
        self.guard = guard
        self._refusals = refusals
        self._current: dict[str, tuple[str, str]] = {}
        self._entries: dict[str, list[tuple[str, str, str, bool]]] = {}  # test -> (list, id, tb, of a subtest)
        self._vouched: set[int] = set()

    def vouch(self, test) -> None:
        """The guard let a skip raised in ``test`` (a test or subtest) through: it may be recorded."""
        self._vouched.add(id(test))

    @staticmethod
    def _name(test: unittest.TestCase) -> str:
        return test.id().split(".")[-1]

    def _record(self, test, outcome: str, tb: str = "") -> None:
        name = self._name(test)
        prev = self._current.get(name)
        if prev is None or prev[0] in ("passed", "skipped"):  # first failure of a test wins
            self._current[name] = (outcome, tb)

    def _enter(self, test, listed: str, tb: str, subtest=None) -> None:
        """Keep an entry of unittest's ``listed`` list (``failures``/``errors``) for ``test``, or for its ``subtest``."""
        try:
            entry_id = str((subtest if subtest is not None else test).id())  # a subtest's id reprs its parameters
        except BaseException:  # noqa: BLE001 - a parameter whose repr fails: the test's own id
            entry_id = str(test.id())
        self._entries.setdefault(self._name(test), []).append((listed, entry_id, tb, subtest is not None))

    def _send_entries(self, name: str) -> None:
        """Send ``name``'s entries as Fault events when its End alone does not tell them."""
        entries = self._entries.pop(name, [])
        if len(entries) > 1 or any(of_subtest for *_, of_subtest in entries):
            for listed, entry_id, tb, _ in entries:
                self._send(Fault(name, entry_id, listed, tb))

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
        if self._refusals is not None:
            self._refusals()  # those met outside any test (a class fixture's) are not this test's
        self._send(Start(self._name(test)))

    def stopTest(self, test) -> None:  # noqa: N802
        super().stopTest(test)
        name = self._name(test)
        outcome, tb = self._current.pop(name, ("error", NO_OUTCOME))
        refused = self._refusals() if self._refusals is not None else []
        if refused and outcome in ("passed", "skipped"):  # the test caught the refusal: it still fails
            outcome, tb = "failed", f"{REFUSED}: " + "\n".join(dict.fromkeys(refused))
        self._send_entries(name)
        self._send(End(name, outcome, tb))

    def addSuccess(self, test) -> None:  # noqa: N802
        super().addSuccess(test)
        self._record(test, "passed")

    def addSkip(self, test, reason) -> None:  # noqa: N802
        super().addSkip(test, reason)
        why = self._skip_refusal(test)
        if why is None:
            self._record(getattr(test, "test_case", test), "skipped", str(reason))
        elif not isinstance(test, unittest.TestCase):  # setUpClass / module fixture
            self._send(End(str(test), "error", f"ControlFlowRefused: {why}"))
        else:
            self._record(getattr(test, "test_case", test), "error", f"ControlFlowRefused: {why}")

    def _skip_refusal(self, test) -> str | None:
        """None when a skip of ``test`` is the test's own doing (see :class:`TestGuard`), else why it is refused."""
        if self.guard is None:
            return None
        if id(test) in self._vouched:
            self._vouched.discard(id(test))
            return None
        if isinstance(test, unittest.TestCase):
            if not isinstance(test, unittest.case._SubTest) and self.guard.static_skip(test):  # noqa: SLF001
                return None
            return "the test was skipped, but not by its own code or a skip decorator it had when loaded; it fails"
        exc = sys.exc_info()[1]  # a fixture (setUpClass, setUpModule): unittest reports it while handling the exception
        if exc is None:
            return "a fixture was skipped without an exception; the tests it covers fail"
        return self.guard.refusal(exc, test) if issubclass(type(exc), _SKIP) else (
            f"{_name_of(type(exc))} made unittest skip a fixture, but it is no SkipTest; the tests it covers fail")

    def addExpectedFailure(self, test, err) -> None:  # noqa: N802
        super().addExpectedFailure(test, err)
        if self.guard is not None and not self.guard.expected_failure(test):
            self._record(test, "error", "ControlFlowRefused: the test was not marked expectedFailure when loaded; "
                         "its failure counts:\n" + self._exc_info_to_string(err, test))
            return
        self._record(test, "passed")

    def addUnexpectedSuccess(self, test) -> None:  # noqa: N802
        super().addUnexpectedSuccess(test)
        self._record(test, "passed")

    def addFailure(self, test, err) -> None:  # noqa: N802
        super().addFailure(test, err)
        self._record(test, "failed", self.failures[-1][1])
        self._enter(test, "failures", self.failures[-1][1])

    def addError(self, test, err) -> None:  # noqa: N802
        super().addError(test, err)
        if not isinstance(test, unittest.TestCase):  # setUpClass / module fixture failures
            self._send(End(str(test), "error", self.errors[-1][1]))
            return
        self._record(test, "error", self.errors[-1][1])
        self._enter(test, "errors", self.errors[-1][1])

    def addSubTest(self, test, subtest, err) -> None:  # noqa: N802
        super().addSubTest(test, subtest, err)
        if err is not None:
            failed = issubclass(err[0], test.failureException)
            self._record(test, "failed" if failed else "error", (self.failures if failed else self.errors)[-1][1])
            self._enter(test, "failures" if failed else "errors", (self.failures if failed else self.errors)[-1][1], subtest)


def ordered(suite: unittest.TestSuite, first: tuple[str, ...]) -> unittest.TestSuite:
    """``suite`` (one class's tests, as unittest's loader sorts them: by name) with the tests named in ``first`` moved
    to the front, each group keeping its order: the public tests run before any hidden one, so that a hidden test's
    call can neither reach the program's process before a public test reports nor change what one reports.

    >>> class T(unittest.TestCase):
    ...     def test_a(self): pass
    ...     def test_b(self): pass
    ...     def test_c(self): pass
    >>> [t._testMethodName for t in ordered(unittest.TestLoader().loadTestsFromTestCase(T), ("test_c", "test_b"))]
    ['test_b', 'test_c', 'test_a']
    """
    if not first:
        return suite
    public = frozenset(first)
    tests = list(suite)
    return unittest.TestSuite(sorted(tests, key=lambda t: getattr(t, "_testMethodName", "") not in public))


def run_suite(fd: int, source: str, module_name: str, test_class: str, inject: dict | None = None,
              *, token: str, tests: str | None = None, code: types.CodeType | None = None,
              stats: Callable[[], dict] | None = None, refusals: Callable[[], list[str]] | None = None,
              first: tuple[str, ...] = ()) -> None:
    """Exec ``source`` as module ``module_name`` (with ``inject`` preset in it), run ``test_class``, stream events.

    ``first``: the tests run before the others (the task's public tests; :func:`ordered`).

    ``refusals`` gives (and forgets) the operations the split judge refused on the program's objects since it
    was last asked (:meth:`.standin.Peer.take_refusals`): a test that met one fails, even where it caught it.

    ``code`` is ``source`` already compiled (as ``<module_name>.py``), where the caller had the time;
    ``stats`` gives the numbers the ``done`` event carries (the split judge's round trips, the caller's
    times), to which this adds ``loaded_at``: the ``time.monotonic()`` at which the tests were loaded.

    ``tests`` is the test source's own text when ``source`` also holds the program (in-process), so that
    only the tests' text can allow skips; None when all of ``source`` is trusted (the split judge's module).
    Emits ``crash`` for anything that escapes the tests (``SystemExit`` included), else ``done``; every
    line sealed with ``token``.
    """
    filename = f"{module_name}.py"
    # Let tracebacks show source lines of the program under test.
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    module = types.ModuleType(module_name)
    module.__file__ = filename
    module.__dict__.update(inject or {})
    sys.modules[module_name] = module
    try:
        exec(code if code is not None else compile(source, filename, "exec"), module.__dict__)
        test_case = module.__dict__[test_class]
        suite = ordered(unittest.TestLoader().loadTestsFromTestCase(test_case), first)
        guard = TestGuard(list(suite), test_case, source if tests is None else tests)
        unittest.case._Outcome = _GuardedOutcome  # noqa: SLF001 - this process runs one suite, then exits
        loaded_at = _clock()
        suite.run(_StreamingResult(fd, token, guard, refusals))
    except BaseException as exc:  # noqa: BLE001 - anything outside the tests is a crash, SystemExit included
        tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None  # drop this frame
        emit(fd, Crash("".join(traceback.format_exception(type(exc), exc, tb))), token)
        return
    emit(fd, Done(json.dumps({**(stats() if stats is not None else {}), "loaded_at": loaded_at})), token)


def main() -> None:
    fd = int(os.environ.pop("CCW_RESULT_FD"))
    job = RunnerJob.from_wire(sys.stdin.buffer.read())
    sys.stdin.close()
    sys.path[0] = os.getcwd()  # like `python script.py` run in the work dir, not in this package
    run_suite(fd, job.program + "\n" + job.test, job.module, job.test_class, token=job.token, tests=job.test,
              first=job.first)
    os._exit(0)  # skip interpreter teardown: atexit hooks of the program are not ours to run


if __name__ == "__main__":
    main()
