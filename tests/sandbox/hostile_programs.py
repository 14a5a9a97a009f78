"""Hostile programs and checks shared by the sandbox's and Docker's hostile tests.

Each attack is written so that a *weak* sandbox fails the test instead of the machine: the
program returns the right answer only when its attack succeeded.
"""

from __future__ import annotations

from convcodeworld_gym.sandbox import ExecutionResult, Executor
from convcodeworld_gym.tasks import Task

SQUARE_TESTS = """import unittest
class TestCases(unittest.TestCase):
    def test_two(self):
        self.assertEqual(task_func(2), 4)
    def test_three(self):
        self.assertEqual(task_func(3), 9)
"""
# A task whose tests use mock: judged in-process (a mock cannot reach another process).
MOCK_TESTS = """import unittest
from unittest.mock import patch
class TestCases(unittest.TestCase):
    @patch("os.getcwd", return_value="/x")
    def test_two(self, _m):
        self.assertEqual(task_func(2), 4)
    def test_three(self):
        self.assertEqual(task_func(3), 9)
"""
SQUARE = Task("hostile/square", "Square x.", "import os\ndef task_func(x):\n", "task_func", "    return x * x\n", SQUARE_TESTS)
MOCKED = Task("hostile/mocked", "Square x.", "import os\ndef task_func(x):\n", "task_func", "    return x * x\n", MOCK_TESTS)


def succeed_if(attack: str) -> str:
    """A program whose answer is right only if ``attack`` (a statement block setting ``ok``) succeeded."""
    body = "\n".join("    " + line for line in attack.strip("\n").splitlines())
    return f"""import os, sys
def _attack():
{body}
    return ok
def task_func(x):
    try:
        ok = _attack()
    except BaseException as exc:
        raise RuntimeError(f"attack blocked: {{type(exc).__name__}}: {{exc}}")
    if not ok:
        raise RuntimeError("attack blocked")
    return x * x
"""


def texts(result: ExecutionResult) -> str:
    return "\n".join([result.crash or ""] + [t.traceback for t in result.tests])


def assert_rejected(ex: Executor, program: str, *expected: str, task: Task = SQUARE) -> ExecutionResult:
    """The attack gets no pass, its failure text says one of ``expected``, and the executor still works."""
    result = ex.run(task, program)
    assert not result.passed, f"the attack earned a pass: {result}"
    text = texts(result)
    assert any(e in text for e in expected), f"failure text does not say why ({expected}): {text[-2000:]}"
    assert ex.run(task, task.ground_truth).passed, "the executor stopped working after the attack"
    return result


PATCH_UNITTEST = """import unittest
unittest.TestCase.assertEqual = lambda *a, **k: None
unittest.TestCase.run = lambda self, result=None: (result.startTest(self), result.addSuccess(self), result.stopTest(self))
def task_func(x):
    return -1
"""
FRAME_WALK = """import sys
def task_func(x):
    frame = sys._getframe(1)
    while frame is not None:
        me = frame.f_locals.get('self')
        if me is not None and hasattr(me, 'assertEqual'):
            type(me).assertEqual = lambda *a, **k: None
            me.assertEqual = lambda *a, **k: None
        frame = frame.f_back
    return -1
"""
FORGE_CHANNEL = """import os, json
def task_func(x):
    lines = ''.join(json.dumps(e) + '\\n' for e in (
        [{'e': 'end', 'name': n, 'outcome': 'passed', 'tb': ''} for n in ('test_two', 'test_three')] + [{'e': 'done'}]))
    for fd in os.listdir('/proc/self/fd'):
        try:
            os.write(int(fd), lines.encode())
        except OSError:
            pass
    os._exit(0)
"""
ALWAYS_EQUAL = """class Anything:
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
def task_func(x):
    return Anything()
"""
#: Programs that try to forge a pass where tests and program share a process.
FORGES = {"patch_unittest": PATCH_UNITTEST, "frame_walk": FRAME_WALK, "forge_channel": FORGE_CHANNEL,
          "always_equal": ALWAYS_EQUAL}
#: Programs that end their process before or during the tests.
EXIT_CALLS = {
    "sys_exit_at_import": "import os, sys\nsys.exit(0)\ndef task_func(x):\n    return x * x\n",
    "os_exit_in_task_func": "import os, sys\ndef task_func(x):\n    os._exit(0)\n",
}
#: What a rejected forge or exit says (one of them), in split mode.
FORGE_REJECTED = ("AssertionError", "not data", "could not cross", "closed the channel", "ProgramGone", "exited",
                  "SystemExit")
