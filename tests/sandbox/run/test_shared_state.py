"""What one module shares between program and tests, kept across the split judge, and what it never lets through.

In one process the tests see the ``sys.path`` the program changed, the rcParams it set, the very dict
it changed in place, and hand it their own functions to inspect. Split, each of these crosses as data
or as a function *replica* of the program's process; hostile programs try to turn each of them into a
way to run their code in the judge or to pass a task they do not solve, and must fail.
"""

from __future__ import annotations

import datetime

import pytest

from convcodeworld_gym.sandbox import SandboxExecutor, SandboxSettings, TimePolicy
from convcodeworld_gym.sandbox.run.codec import Codec
from convcodeworld_gym.sandbox.run.shared import PinnedPathFinder, SharedState, rc_keys
from convcodeworld_gym.tasks import Task

from hostile_programs import SQUARE, assert_rejected, texts

SETTINGS = SandboxSettings(tmpfs_mb=64, tmpfs_inodes=2000, address_space_mb=2048, file_size_mb=32, max_processes=64)


@pytest.fixture(scope="module")
def sandbox():
    with SandboxExecutor(workers=2, settings=SETTINGS, preload=(), time_policy=TimePolicy(floor_s=5.0, cap_s=20.0)) as ex:
        yield ex


def split_pass(ex: SandboxExecutor, task: Task, program: str | None = None) -> None:
    result = ex.run(task, task.ground_truth if program is None else program)
    assert result.passed and result.details["judge"] == "split", texts(result)


# ----------------------------------------------------------------------------- sys.path

PATH_TESTS = """import sys
import unittest
class TestCases(unittest.TestCase):
    def test_appended(self):
        n = len(sys.path)
        self.assertEqual(task_func('/ccw/appended'), '/ccw/appended')
        self.assertEqual(sys.path[-1], '/ccw/appended')
        self.assertEqual(len(sys.path), n + 1)
    def test_the_test_resets_it(self):
        n = len(sys.path)
        task_func('/ccw/again')
        sys.path = sys.path[:n]
        self.assertFalse(seen('/ccw/again'))
"""
PATH = Task("shared/sys_path", "Append a path.", "import sys\ndef task_func(p):\n", "task_func",
            "    sys.path.append(p)\n    return p\ndef seen(p):\n    return p in sys.path\n", PATH_TESTS)


def test_the_tests_see_the_sys_path_the_program_changed_and_the_other_way_round(sandbox):
    split_pass(sandbox, PATH)
    wrong = PATH.ground_truth.replace("sys.path.append(p)", "sys.path.insert(0, p)")
    assert_rejected(sandbox, wrong, "AssertionError", task=PATH)


SHADOW_TESTS = """import sys
import unittest
class TestCases(unittest.TestCase):
    def test_square(self):
        task_func(0)
        import colorsys  # a module the judge has not loaded yet: the program put its own on sys.path first
        self.assertEqual(task_func(2), 4)
"""
SHADOW = Task("shared/shadow", "Square x.", "import os\nimport sys\ndef task_func(x):\n", "task_func",
              "    return x * x\n", SHADOW_TESTS)
SHADOWING = """import os, sys
def task_func(x):
    os.makedirs('shadow', exist_ok=True)
    for name in ('colorsys', 'ccw_probe'):
        with open(os.path.join('shadow', name + '.py'), 'w') as fh:
            fh.write('import unittest\\nunittest.TestCase.assertEqual = lambda *a, **k: None\\n')
    sys.path.insert(0, os.path.abspath('shadow'))
    return x
"""


def test_a_module_the_program_put_on_sys_path_is_never_imported_in_the_judge(sandbox):
    result = assert_rejected(sandbox, SHADOWING, "AssertionError: 2 != 4", task=SHADOW)
    assert result.details["judge"] == "split"
    probe = Task("shared/probe", "Nothing.", SHADOW.code_prompt, "task_func", "    return x\n",
                 SHADOW_TESTS.replace("import colorsys", "import ccw_probe").replace("task_func(2), 4", "1, 1"))
    result = sandbox.run(probe, SHADOWING)  # only the program has it: the judge's import does not find it
    assert not result.passed and "No module named 'ccw_probe'" in texts(result), texts(result)


def test_pinned_finder_ignores_entries_only_the_program_listed(tmp_path, monkeypatch):
    (tmp_path / "ccw_only_here.py").write_text("X = 1\n")
    finder = PinnedPathFinder()
    monkeypatch.setattr("sys.path", [*finder._own, str(tmp_path)])
    assert finder.find_spec("ccw_only_here") is not None  # the judge's own entry: found
    finder.listed_by_program.add(str(tmp_path))
    assert finder.find_spec("ccw_only_here") is None
    monkeypatch.setattr("sys.path", [str(tmp_path)])  # the program emptied it: the judge's own entries still serve
    assert finder.find_spec("json") is not None


def test_shared_state_sends_only_what_changed_and_keeps_private_paths(monkeypatch):
    import random

    monkeypatch.setattr("sys.path", ["/work", "/a", "/b"])
    program = SharedState.program(private_paths=("/work",))
    assert program.out() == {}  # both sides start from the state they were forked from
    random.random()
    sys_path_now = ["/work", "/a", "/b", "/x"]
    monkeypatch.setattr("sys.path", sys_path_now)
    first = program.out()
    assert first == {"path": ["/a", "/b", "/x"]}  # its random state never goes to the judge
    assert program.out() == {}  # unchanged since sent
    program.apply({"path": ["/a", "/b", "/c"]})
    import sys

    assert sys.path == ["/work", "/a", "/b", "/c"] and "path" not in program.out()
    program.apply({"path": ["/a", 3]})  # not a list of strings: not applied
    assert sys.path == ["/work", "/a", "/b", "/c"]


SEEDED_TESTS = """import random
import unittest
class TestCases(unittest.TestCase):
    def test_seeded_at_import(self):
        self.assertEqual(task_func(), 0.13436424411240122)
    def test_the_tests_seed_reaches_the_program(self):
        random.seed(2)
        self.assertEqual(task_func(), 0.9560342718892494)
"""
SEEDED = Task("shared/seeded", "Draw.", "import random\ndef task_func():\n", "task_func",
              "    return random.random()\nrandom.seed(1)  # the program's own module-level code: not in the tests' module\n",
              SEEDED_TESTS)


def test_the_programs_module_level_seed_is_kept_and_the_tests_seed_reaches_it(sandbox):
    split_pass(sandbox, SEEDED)


# ----------------------------------------------------------------------------- rcParams

RC_TESTS = """import unittest
import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt
class TestCases(unittest.TestCase):
    def test_font(self):
        task_func()
        self.assertIn('Arial', plt.rcParams['font.family'])
        self.assertNotEqual(plt.rcParams['backend'].lower(), 'ccw')
"""
RC = Task("shared/rc", "Set the font.", "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
          "def task_func():\n", "task_func", "    plt.rc('font', family='Arial')\n", RC_TESTS)


def test_the_rcparams_the_tests_name_are_shared(sandbox):
    pytest.importorskip("matplotlib")
    split_pass(sandbox, RC)
    assert_rejected(sandbox, RC.ground_truth.replace("Arial", "DejaVu Sans"), "AssertionError", task=RC)


def test_rc_keys_are_the_dotted_names_where_the_tests_read_rcparams():
    assert rc_keys(RC_TESTS) == ["font.family"]
    assert rc_keys("x = 'font.family'") == []


# ----------------------------------------------------------------------------- arguments changed in place

IDENTITY_TESTS = """import unittest
class TestCases(unittest.TestCase):
    def test_same_dict(self):
        d = {'a': 1}
        result = task_func(d)
        self.assertIs(result, d)
        self.assertEqual(d, {'a': 1, 'b': 2})
    def test_inside_a_tuple(self):
        items = [3, 1, 2]
        same, n = task_func(items, sort=True)
        self.assertIs(same, items)
        self.assertEqual(items, [1, 2, 3])
"""
IDENTITY = Task("shared/identity", "Change it in place.", "def task_func(x, sort=False):\n", "task_func",
                "    if sort:\n        x.sort()\n        return x, len(x)\n    x['b'] = 2\n    return x\n", IDENTITY_TESTS)


def test_an_argument_the_program_returns_comes_back_as_the_tests_own_object(sandbox):
    split_pass(sandbox, IDENTITY)
    copy = IDENTITY.ground_truth.replace("    return x\n", "    return dict(x)\n")
    result = assert_rejected(sandbox, copy, "is not", task=IDENTITY)
    assert [t.name for t in result.tests if not t.outcome.ok] == ["test_same_dict"]


def test_a_forged_argument_reference_from_the_program_is_refused(sandbox):
    from test_split_judge import CHANNEL_WRITER

    payload = "b'[\"a\", \"ok\", [\"t\", [[\"r\", \"arg\", 5], [\"l\", []]]], null]'"
    assert_rejected(sandbox, CHANNEL_WRITER.format(payload=payload), "malformed", "cannot be read", "argument",
                    "AssertionError")


# ----------------------------------------------------------------------------- the tests' functions

INSPECT_TESTS = """import inspect
import types
import unittest
calls = []
class TestCases(unittest.TestCase):
    def test_signature(self):
        def f(a: int, b, /, c=1, *rest, d: str = 'x', **kw) -> None:
            calls.append((a, b, c, rest, d, kw))
            return a + b
        spec = task_func(f)
        self.assertEqual(spec, (['a', 'b', 'c'], (1,), 'rest', ['d'], {'d': 'x'}, 'kw',
                                {'a': 'int', 'd': 'str', 'return': 'None'}, True, 'f', 3))
        self.assertEqual(calls, [(1, 2, 1, (), 'x', {})])
    def test_lambda_and_lambdas_in_defaults(self):
        g = lambda x, y=lambda z: z * 2: y(x)
        self.assertEqual(lambda_name(g), ('<lambda>', 1, 6))
    def test_same_function_back(self):
        h = lambda: 0
        self.assertIs(identity(h), h)
"""
INSPECT_SOLUTION = """    spec = inspect.getfullargspec(f)
    names = {k: (v.__name__ if isinstance(v, type) else str(v)) for k, v in spec.annotations.items()}
    return (spec.args, spec.defaults, spec.varargs, spec.kwonlyargs, spec.kwonlydefaults, spec.varkw, names,
            isinstance(f, types.FunctionType), f.__name__, f(1, 2))
def lambda_name(g):
    default = inspect.signature(g).parameters['y'].default
    return g.__name__, sum(isinstance(d, types.LambdaType) for d in g.__defaults__), default(3)
def identity(h):
    return h
"""
INSPECT = Task("shared/inspect", "Inspect.", "import inspect\nimport types\ndef task_func(f):\n", "task_func",
               INSPECT_SOLUTION, INSPECT_TESTS)


def test_the_tests_functions_reach_the_program_as_functions_whose_calls_run_in_the_judge(sandbox):
    split_pass(sandbox, INSPECT)


REPLICA_TESTS = """import unittest
calls = []
class TestCases(unittest.TestCase):
    def test_calls_recorded(self):
        def f(x):
            calls.append(x)
            return x
        self.assertEqual(task_func(f), 5)
        self.assertEqual(calls, [5])
"""
REPLICA = Task("shared/replica", "Return f(5).", "def task_func(f):\n", "task_func", "    return f(5)\n", REPLICA_TESTS)
#: Each tries to put 5 in the judge's ``calls`` without calling ``f`` (the test then passes only if it got in).
REPLICA_ATTACKS = {
    "closure": "t.__closure__[0].cell_contents.append(5)",
    "globals": "t.__globals__['calls'].append(5)",
    "peer_request": "t._ccw_peer.request('getattr', t._ccw_handle, '__globals__')['calls'].append(5)",
    "set_code": "t.__code__ = (lambda x: x).__code__",
    "defaults": "f.__defaults__ = (5,); t.__defaults__ = (5,)",
}


@pytest.mark.parametrize("attack", sorted(REPLICA_ATTACKS))
def test_a_replica_gives_the_program_no_way_into_the_judges_function(sandbox, attack):
    program = (f"def task_func(f):\n    t = f.__globals__['_ccw_target']\n    try:\n        {REPLICA_ATTACKS[attack]}\n"
               "    except Exception:\n        pass\n    return 5\n")
    result = assert_rejected(sandbox, program, "Lists differ: [] != [5]", task=REPLICA)
    assert result.details["judge"] == "split"


def test_a_function_description_from_the_program_is_refused(sandbox):
    from test_split_judge import CHANNEL_WRITER

    payload = ("b'[\"a\", \"ok\", [\"t\", [[\"r\", \"fn\", 1, {\"name\": \"f\", \"qualname\": \"f\", \"positional\": [], "
               "\"posonly\": 0, \"kwonly\": []}], [\"l\", []]]], null]'")
    assert_rejected(sandbox, CHANNEL_WRITER.format(payload=payload), "malformed", "cannot be read", "AssertionError")


# ----------------------------------------------------------------------------- values

def test_pytz_datetimes_keep_their_localized_zone():
    pytz = pytest.importorskip("pytz")
    codec = Codec()
    for zone in ("Asia/Tokyo", "US/Eastern", "Europe/London", "UTC"):
        stamp = datetime.datetime(2024, 7, 1, 12, 30, tzinfo=datetime.timezone.utc).astimezone(pytz.timezone(zone))
        back = codec.decode(codec.encode(stamp))
        assert back == stamp and back.tzinfo == stamp.tzinfo and back.utcoffset() == stamp.utcoffset()
    eastern = pytz.timezone("US/Eastern")
    for dst in (True, False):  # the hour that happens twice
        stamp = eastern.localize(datetime.datetime(2024, 11, 3, 1, 30), is_dst=dst)
        back = codec.decode(codec.encode(stamp))
        assert back == stamp and back.utcoffset() == stamp.utcoffset()


COOKIE_TESTS = """import unittest
class TestCases(unittest.TestCase):
    def test_morsel(self):
        cookies = task_func('abc')
        self.assertIn('session', cookies)
        self.assertEqual(cookies['session'].value, 'abc')
        self.assertEqual(cookies['session']['max-age'], 60)
"""
COOKIES = Task("shared/cookies", "Cookies.", "from http.cookies import SimpleCookie\ndef task_func(v):\n", "task_func",
               "    c = SimpleCookie()\n    c['session'] = v\n    c['session']['max-age'] = 60\n    return c\n",
               COOKIE_TESTS)


def test_standard_library_dicts_cross_as_stand_ins_with_their_attributes(sandbox):
    split_pass(sandbox, COOKIES)


def test_square_still_passes(sandbox):
    split_pass(sandbox, SQUARE)


# ----------------------------------------------------------------------------- exceptions and attributes

EXCEPTION_TESTS = """import unittest
import urllib.error
from unittest.mock import patch
class TestCases(unittest.TestCase):
    @patch('urllib.request.urlopen')
    def test_the_judges_exception_keeps_its_attributes(self, urlopen):
        urlopen.side_effect = urllib.error.HTTPError('http://x', 404, 'Not Found', hdrs={}, fp=None)
        self.assertEqual(task_func('http://x'), '404 Not Found')
    def test_the_programs_exception_keeps_its_data(self):
        with self.assertRaises(ValueError) as caught:
            fail()
        self.assertEqual(caught.exception.code, 7)
        self.assertFalse(callable(getattr(caught.exception, 'hook', None)))
        self.assertEqual(caught.exception.with_traceback(None).args, ('bad',))
    def test_explicit_getattribute(self):
        self.assertEqual(box().__getattribute__('label'), 'x')
"""
EXCEPTION_SOLUTION = """    try:
        urllib.request.urlopen(url)
    except urllib.error.HTTPError as e:
        return f'{e.code} {e.reason}'
def fail():
    e = ValueError('bad')
    e.code = 7
    e.hook = lambda *a: None  # a callable: never set on the judge's copy
    e.with_traceback = lambda *a: None  # a name its class defines: never set either
    raise e
class Box:
    label = 'x'
def box():
    return Box()
"""
EXCEPTIONS = Task("shared/exceptions", "Report the error.", "import urllib.error\nimport urllib.request\n"
                  "def task_func(url):\n", "task_func", EXCEPTION_SOLUTION, EXCEPTION_TESTS)


def test_exceptions_cross_with_their_public_attributes_and_stand_ins_answer_explicit_getattribute(sandbox):
    split_pass(sandbox, EXCEPTIONS)


STEER_TESTS = """import random
import unittest
class TestCases(unittest.TestCase):
    def test_random_inputs(self):
        random.seed(7)
        for _ in range(20):
            x = random.randint(0, 10 ** 6)
            self.assertEqual(task_func(x), 2 * x)
"""
STEER = Task("shared/steer", "Double it.", "import random\ndef task_func(x):\n", "task_func", "    return 2 * x\n", STEER_TESTS)
#: Knows the answer for the tests' first input only (they seed 7), and after each call reseeds the random state that
#: travels back to the judge, so that every later input the tests draw is that first one again.
STEERING = ("import random\nrandom.seed(7)\n_FIRST = random.randint(0, 10 ** 6)\n"
            "def task_func(x):\n    random.seed(7)\n    return 2 * _FIRST\n")


def test_a_program_cannot_steer_the_random_inputs_the_tests_draw_between_its_calls(sandbox):
    split_pass(sandbox, STEER)
    assert_rejected(sandbox, STEERING, "AssertionError", task=STEER)


NP_STEER_TESTS = """import numpy as np
import unittest
class TestCases(unittest.TestCase):
    def test_random_inputs(self):
        np.random.seed(7)
        for _ in range(20):
            x = int(np.random.randint(0, 10 ** 6))
            self.assertEqual(task_func(x), 2 * x)
"""
NP_STEER = Task("shared/np_steer", "Double it.", "import numpy as np\ndef task_func(x):\n", "task_func",
                "    return 2 * x\n", NP_STEER_TESTS)
NP_STEERING = ("import numpy as np\nnp.random.seed(7)\n_FIRST = int(np.random.randint(0, 10 ** 6))\n"
               "def task_func(x):\n    np.random.seed(7)\n    return 2 * _FIRST\n")


def test_a_program_cannot_steer_the_numpy_random_inputs_either(sandbox):
    pytest.importorskip("numpy")
    split_pass(sandbox, NP_STEER)
    assert_rejected(sandbox, NP_STEERING, "AssertionError", task=NP_STEER)


STREAM_TESTS = """import random
import unittest
class TestCases(unittest.TestCase):
    def test_calls_continue_the_seeded_stream(self):
        random.seed(3)
        expected = [random.random() for _ in range(4)]
        random.seed(3)
        self.assertEqual([task_func(), task_func()], [expected[0:2], expected[2:4]])
"""
STREAM = Task("shared/stream", "Draw two.", "import random\ndef task_func():\n", "task_func",
              "    return [random.random(), random.random()]\n", STREAM_TESTS)


def test_the_programs_draws_continue_the_tests_seeded_stream_from_call_to_call(sandbox):
    split_pass(sandbox, STREAM)
    assert_rejected(sandbox, STREAM.ground_truth.replace("return [", "random.seed(3)\n    return ["), "AssertionError",
                    task=STREAM)


RESEED_TESTS = """import random
import numpy as np
import unittest
class TestCases(unittest.TestCase):
    def setUp(self):
        random.seed(0)
        np.random.seed(0)
    def test_first(self):
        self.assertEqual(task_func(), (0.8444218515250481, 0.5488135039273248))
    def test_second_reseeds_to_the_same_value_after_the_program_drew(self):
        self.assertEqual(task_func(), (0.8444218515250481, 0.5488135039273248))
    def test_restored_state(self):
        state = random.getstate()
        task_func()
        random.setstate(state)
        self.assertEqual(task_func()[0], 0.8444218515250481)
"""
RESEED = Task("shared/reseed", "Draw one of each.", "import random\nimport numpy as np\ndef task_func():\n", "task_func",
              "    return random.random(), float(np.random.random())\n", RESEED_TESTS)


def test_a_reseed_to_the_value_sent_before_still_reaches_the_program_that_drew_since(sandbox):
    pytest.importorskip("numpy")
    split_pass(sandbox, RESEED)
