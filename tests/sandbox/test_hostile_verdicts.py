"""Hostile programs against the verdict itself: test-control exceptions (item 1 of issue 13).

Each program would have scored 1.0 before the runner checked where a skip or stop came from; each
must now fail, on an unmocked task (split judge: the program runs in its own process) and on a
mocked one (judged in-process: the program's exception propagates through the test), and on the
unconfined local backend. The in-process variants build ``unittest``'s name from pieces, as an attacker
would, so that the static check of in-process programs does not catch them first.
"""

from __future__ import annotations

import pytest

from convcodeworld_gym.sandbox import LocalExecutor
from convcodeworld_gym.tasks import Task

from hostile_programs import MOCKED, SQUARE, assert_rejected, succeed_if, texts
from test_hostile import inprocess_sandbox, sandbox  # noqa: F401 - the shared module-scoped sandbox fixtures

UNITTEST = "u = __import__('unit' + 'test')\nTC = getattr(u, 'Test' + 'Case')\n"  # past the static check of in-process programs

SKIP_CALLS = {
    "skiptest_at_call": UNITTEST + "def task_func(x):\n    raise u.SkipTest('not today')\n",
    "should_stop_at_call": UNITTEST + "def task_func(x):\n    raise u.case._ShouldStop()\n",
    "unexpected_success_class": UNITTEST + "def task_func(x):\n    raise u.case._UnexpectedSuccess()\n",
    # The program's own class, named as unittest's: the split judge used to rebuild it as the real SkipTest.
    "disguised_skiptest": ("class SkipTest(Exception):\n    pass\n"
                           "SkipTest.__module__ = 'unittest.case'\n"
                           "def task_func(x):\n    raise SkipTest('disguised')\n"),
    "disguised_should_stop": ("class _ShouldStop(Exception):\n    pass\n"
                              "_ShouldStop.__module__ = 'unittest.case'\n"
                              "def task_func(x):\n    raise _ShouldStop()\n"),
    # A real SkipTest subclass that says it is a ValueError, and lies about its class.
    "subclass_dressed_as_builtin": (UNITTEST + "class E(u.SkipTest):\n    pass\n"
                                    "E.__module__, E.__name__, E.__qualname__ = 'builtins', 'ValueError', 'ValueError'\n"
                                    "def task_func(x):\n    raise E('quiet')\n"),
    "lying_class": (UNITTEST + "class E(u.SkipTest):\n    @property\n    def __class__(self):\n        return ValueError\n"
                    "def task_func(x):\n    raise E('quiet')\n"),
    # The test calls skipTest, but through the program's code: not the test's own doing.
    "skiptest_method_from_program": UNITTEST + "def task_func(x):\n    TC.skipTest(TC(), 'r')\n",
}
# Runs when the test class is created (after the program): unittest's own hook first, then the attack.
HOOK = ("orig = TC.__dict__['__init_subclass__'].__func__\n"
        "def hook(cls, **k):\n    orig(cls, **k)\n    if cls.__name__ == 'TestCases':\n")
HOOKED = "TC.__init_subclass__ = classmethod(hook)\n"
# Module-level variants: the program arranges, while it is loaded, for unittest to skip the tests.
MODULE_LEVEL = {
    "skiptest_at_module_level": UNITTEST + "raise u.SkipTest('whole module')\ndef task_func(x):\n    return -1\n",
    "setup_skips": UNITTEST + "TC.setUp = lambda self: self.skipTest('no')\ndef task_func(x):\n    return -1\n",
    "class_marked_skipped_on_creation": (
        UNITTEST + HOOK + "        cls.__unittest_skip__ = True\n" + HOOKED + "def task_func(x):\n    return -1\n"),
    "expected_failure_on_creation": (
        UNITTEST + HOOK + "        for n in dir(cls):\n            if n.startswith('test'):\n"
        "                getattr(cls, n).__unittest_expecting_failure__ = True\n" + HOOKED + "def task_func(x):\n    return -1\n"),
}

SUBTEST_TESTS = """import unittest
class TestCases(unittest.TestCase):
    def test_cases(self):
        for x, want in [(2, 4), (3, 9)]:
            with self.subTest(x=x):
                self.assertEqual(task_func(x), want)
"""
# Old runner: a skip inside a subtest left the test itself with no outcome, which counted as passed.
SUBTESTS = Task("hostile/subtests", "Square x.", "def task_func(x):\n", "task_func", "    return x * x\n", SUBTEST_TESTS)

TEST_SKIPS_ITSELF = """import unittest
class TestCases(unittest.TestCase):
    def test_two(self):
        self.assertEqual(task_func(2), 4)
    def test_skipped_by_itself(self):
        self.skipTest('the test decides')
    @unittest.skip('decorated')
    def test_skipped_by_decorator(self):
        self.fail('never runs')
    def test_subtest_skips(self):
        with self.subTest(k=1):
            raise unittest.SkipTest('the test raises it')
"""
SKIPPING = Task("hostile/skipping", "Square x.", "def task_func(x):\n", "task_func", "    return x * x\n", TEST_SKIPS_ITSELF)

REFUSED = ("ControlFlowRefused", "SkipTest", "_ShouldStop", "_UnexpectedSuccess", "RemoteError", "claims", "Not run",
           "the program failed", "quiet")


#: Where each variant runs: (executor fixture, task). Mocked tasks are judged split by default, in-process on request.
MODES = {"split": ("sandbox", SQUARE), "split_mocked": ("sandbox", MOCKED), "inprocess": ("inprocess_sandbox", MOCKED),
         "subtests": ("sandbox", SUBTESTS)}


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("name", sorted(SKIP_CALLS))
def test_control_flow_exceptions_raised_by_the_program_fail_the_test(request, mode, name):
    fixture, task = MODES[mode]
    result = assert_rejected(request.getfixturevalue(fixture), SKIP_CALLS[name], *REFUSED, task=task)
    assert result.details["judge"] == ("inprocess" if mode == "inprocess" else "split")
    assert all(t.outcome.value != "skipped" for t in result.tests), texts(result)


@pytest.mark.parametrize("mode", ["split", "split_mocked", "inprocess"])
@pytest.mark.parametrize("name", sorted(MODULE_LEVEL))
def test_a_program_cannot_make_unittest_skip_or_expect_failure_while_it_loads(request, mode, name):
    fixture, task = MODES[mode]
    assert_rejected(request.getfixturevalue(fixture), MODULE_LEVEL[name], *REFUSED, "AssertionError", task=task)


@pytest.mark.parametrize("name", ["skiptest_at_call", "should_stop_at_call", "disguised_skiptest", "setup_skips"])
def test_control_flow_exceptions_fail_on_the_local_backend(name):
    program = {**SKIP_CALLS, **MODULE_LEVEL}[name]
    with LocalExecutor() as ex:
        assert_rejected(ex, program, *REFUSED, "AssertionError")


@pytest.mark.parametrize("mode", ["split", "inprocess"])
def test_skips_written_by_the_test_itself_keep_their_meaning(mode):
    from convcodeworld_gym.sandbox import SandboxExecutor

    from test_hostile import SETTINGS

    with SandboxExecutor(workers=1, settings=SETTINGS, preload=(), judge=mode) as ex:
        result = ex.run(SKIPPING, SKIPPING.ground_truth)
        outcomes = {t.name: t.outcome.value for t in result.tests}
        assert result.passed, texts(result)
        assert outcomes == {"test_two": "passed", "test_skipped_by_itself": "skipped",
                            "test_skipped_by_decorator": "skipped", "test_subtest_skips": "skipped"}, outcomes
        # The same skips from the program's side fail.
        assert not ex.run(SKIPPING, SKIP_CALLS["skiptest_at_call"]).passed


def test_a_test_that_reports_no_outcome_is_an_error_not_a_pass():
    import json
    import os
    import unittest

    from convcodeworld_gym.sandbox.run.runner import NO_OUTCOME, _StreamingResult

    class Silent(unittest.TestCase):
        def test_nothing(self):
            pass

    read_fd, write_fd = os.pipe()
    try:
        token = "t" * 32
        result = _StreamingResult(write_fd, token)
        test = Silent("test_nothing")
        result.startTest(test)  # unittest reported neither success, failure, error nor skip
        result.stopTest(test)
        os.close(write_fd)
        lines = os.read(read_fd, 1 << 16).decode().splitlines()
        events = [json.loads(line.removeprefix(token)) for line in lines]
    finally:
        os.close(read_fd)
    assert events[-1] == {"e": "end", "name": "test_nothing", "outcome": "error", "tb": NO_OUTCOME}


# ----------------------------------------------------------------------------- item 5: the program's output

def write_everywhere(payload: str, then: str) -> str:
    """A program that writes ``payload`` (a bytes expression) to every descriptor it holds, then does ``then``.

    Names are built from pieces so that the static check of in-process programs does not catch it first.
    """
    return f"""import os
def task_func(x):
    data = {payload}
    for fd in os.listdir('/proc/self/' + 'f' + 'd'):
        if int(fd) > 2:
            try:
                os.write(int(fd), data)
            except OSError:
                pass
    {then}
"""


FORGED = ("b''.join(__import__('json').dumps(e).encode() + b'\\n' for e in "
          "[{'e': 'end', 'name': n, 'outcome': 'passed', 'tb': ''} for n in ('test_two', 'test_three')] + [{'e': 'done'}])")
EXIT = "getattr(os, '_ex' + 'it')(0)"
OUTPUTS = {
    # Each returns the right answer (or exits, for the forgery): on the old collector all but the gigabyte
    # line earned 1.0 in-process, and the nested one made env.step raise.
    "malformed_json": write_everywhere("b'{\"e\": \"end\", \"name\": \\n'", "return x * x"),
    "deeply_nested_json": write_everywhere("b'[' * 200000 + b'\\n'", "return x * x"),
    "invalid_utf8": write_everywhere("b'\\xff\\xfe{\"e\": \"start\", \"name\": \"test_two\"}\\n'", "return x * x"),
    "huge_line": write_everywhere("b'x' * (64 << 20)", "return x * x"),
    "forged_events_then_exit": write_everywhere(FORGED, EXIT),
    "forged_done_mid_test": write_everywhere("b'{\"e\": \"done\"}\\n'", "return x * x"),
}


@pytest.mark.parametrize("mode", ["split", "split_mocked", "inprocess"])
@pytest.mark.parametrize("name", sorted(OUTPUTS))
def test_no_output_of_a_program_breaks_the_env_or_earns_a_pass(request, mode, name):
    from convcodeworld_gym import ConvCodeWorldEnv

    fixture, task = MODES[mode]
    env = ConvCodeWorldEnv("CF-EF_full", dataset=[task], executor=request.getfixturevalue(fixture))
    env.reset(options={"task_id": task.task_id})
    _, reward, terminated, _, info = env.step(OUTPUTS[name])  # never raises
    text = "\n".join([info["crash"] or ""] + [t["traceback"] for t in info["tests"]])
    assert (reward, terminated) == (0.0, False), text
    if mode == "inprocess":  # the program reached the result channel, and the text says so
        assert "ProtocolViolation" in text or "OutputLimitExceeded" in text, text
    _, reward, terminated, _, _ = env.step(task.ground_truth)
    assert (reward, terminated) == (1.0, True)


def test_collector_fails_the_run_on_any_line_the_runner_did_not_seal():
    import os

    from convcodeworld_gym.sandbox import Limits
    from convcodeworld_gym.sandbox.messages import Start, Violation
    from convcodeworld_gym.sandbox.run.events import PROTOCOL_VIOLATION, collect_events, new_token

    token = new_token()
    good = token.encode() + b'{"e": "start", "name": "test_a"}\n'
    bad_lines = {
        "unsealed": b'{"e": "done"}\n',
        "other token": new_token().encode() + b'{"e": "done"}\n',
        "sealed garbage": token.encode() + b"\xff\xfe\n",
        "sealed deep": token.encode() + b"[" * 30_000 + b"\n",  # fits in a pipe buffer
        "sealed unknown kind": token.encode() + b'{"e": "pass"}\n',
        "sealed extra field": token.encode() + b'{"e": "done", "x": 1}\n',
        "sealed bad outcome": token.encode() + b'{"e": "end", "name": "a", "outcome": "timeout", "tb": ""}\n',
        "sealed non-string": token.encode() + b'{"e": "end", "name": ["a"], "outcome": "passed", "tb": ""}\n',
    }
    for what, line in bad_lines.items():
        read_fd, write_fd = os.pipe()
        os.write(write_fd, good + line + token.encode() + b'{"e": "done"}\n')
        os.close(write_fd)
        try:
            events, stop = collect_events(read_fd, Limits(suite_timeout_s=5), lambda: True, token)
        finally:
            os.close(read_fd)
        assert stop == PROTOCOL_VIOLATION and isinstance(events[-1], Violation) and "line 2" in events[-1].tb, what
        assert events[0] == Start("test_a"), what


def test_forged_events_fail_on_the_local_backend():
    with LocalExecutor() as ex:
        assert_rejected(ex, OUTPUTS["forged_events_then_exit"], "ProtocolViolation")
        assert_rejected(ex, OUTPUTS["deeply_nested_json"], "ProtocolViolation")


def test_a_split_program_cannot_reach_the_judges_result_channel(sandbox):  # noqa: F811
    # The judge (the program's parent) holds the channel; through /proc the program would reach it, but the
    # judge is not dumpable, so its fd entries are not the program's to open.
    attack = f"""
data = {FORGED}
wrote = False
for fd in os.listdir(f'/proc/{{os.getppid()}}/fd'):
    try:
        with open(f'/proc/{{os.getppid()}}/fd/{{fd}}', 'wb', buffering=0) as fh:
            fh.write(data)
            wrote = True
    except OSError:
        pass
ok = wrote
"""
    result = assert_rejected(sandbox, succeed_if(attack), "attack blocked", "Permission denied")
    assert result.details["judge"] == "split" and "ProtocolViolation" not in texts(result)


def test_the_word_skip_in_a_test_source_does_not_let_a_program_skip(inprocess_sandbox):  # noqa: F811
    # 'skip' in a comment or an argument name (pandas' skiprows) is no skip of unittest's.
    wordy = Task("hostile/mocked_skiprows", MOCKED.prompt, MOCKED.code_prompt, MOCKED.entry_point, MOCKED.canonical_solution,
                 MOCKED.test + "# read_csv(..., skiprows=1) would skip the header\n")
    result = assert_rejected(inprocess_sandbox, MODULE_LEVEL["class_marked_skipped_on_creation"], *REFUSED, task=wordy)
    assert result.details["judge"] == "inprocess"


LEAK_TESTS = """import unittest
class TestCases(unittest.TestCase):
    def test_hidden(self):
        self.assertEqual(task_func(3), 'HIDDEN-' + '%s')
"""
#: Walks its frames up to the loop of the process it was forked from, where a job might still be a local.
FRAME_SPY = r"""
import sys
found = []
f = sys._getframe()
while f is not None:
    for k, v in list(f.f_locals.items()):
        for text in (v, getattr(v, "test", None), getattr(v, "program", None)):
            if isinstance(text, (str, bytes)) and ("HIDDEN-" in text if isinstance(text, str) else b"HIDDEN-" in text):
                found.append(repr(text)[:200])
    f = f.f_back
scanned = 1 << 30
"""
#: Reads its own anonymous memory (heap, arenas, stack: freed memory too) for an earlier job's secret.
MEMORY_SPY = r"""
import ctypes, re
found, scanned = [], 0
pattern = re.compile(rb"HIDDEN-[0-9a-f]{16}")
for line in open("/proc/self/maps").read().splitlines():
    parts = line.split()
    if not parts[1].startswith("r") or (len(parts) > 5 and parts[5] not in ("[heap]", "[stack]")):
        continue  # file mappings can fault past their file's end; their bytes are no job's anyway
    start, end = (int(x, 16) for x in parts[0].split("-"))
    chunk = ctypes.string_at(start, end - start)
    scanned += len(chunk)
    found += [m.decode() for m in pattern.findall(chunk)]
"""
LEAK_REPORT = """
def task_func(x):
    return None
raise RuntimeError(f"SCANNED {scanned} FOUND " + " | ".join(found))
"""


@pytest.mark.parametrize("judge", ["split", "inprocess"])
@pytest.mark.parametrize("spy", [FRAME_SPY, MEMORY_SPY], ids=["frames", "memory"])
def test_a_program_cannot_read_an_earlier_jobs_hidden_tests_from_inherited_memory(spy, judge):
    # Each secret is in one job only: the first task's hidden tests and canonical solution, run (as a calibration
    # would) before the spy runs as a program of a second task in the same worker.
    import re
    import secrets

    from convcodeworld_gym.sandbox import SandboxExecutor

    first, second = secrets.token_hex(8), secrets.token_hex(8)
    earlier = Task("x/earlier", "Leak.", "def task_func(x):\n", "task_func", f"    return 'HIDDEN-{first}'\n",
                   LEAK_TESTS % first)
    spied = Task("x/spied", "Leak.", "def task_func(x):\n", "task_func", "    return None\n", LEAK_TESTS % second)
    with SandboxExecutor(workers=1, cache=False, preload=(), judge=judge) as ex:
        assert ex.run(earlier, earlier.ground_truth).passed
        result = ex.run(spied, spy + LEAK_REPORT)
    report = (result.crash or "") + "".join(t.traceback for t in result.tests)
    scanned = re.search(r"SCANNED (\d+)", report)
    assert scanned, report  # the spy ran to its end
    assert int(scanned.group(1)) > 10_000_000, report  # it did read its memory (a scan that read nothing proves nothing)
    assert first not in report, report
    if judge == "split":  # the program's process was forked before its own job came: that job is not in it either
        assert second not in report, report
