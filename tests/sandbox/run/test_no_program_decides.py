"""No check of a test is decided by program code (issue 28): the arithmetic forgery and its kin.

A program that solves nothing returns an object of its own class. In the judge it is a stand-in whose
``==`` is identity, but on main before this change its arithmetic ran in the program's process, so the
program decided ``result - expected`` (and saw the expected value): every tolerance check passed. Each
check below is applied to forging programs of several kinds; each must score 0.0 with a failure that
says why, while a program that returns data keeps passing. The same on real tasks: HumanEval/4, a
standard-library BigCodeBench task and a numpy/pandas one.
"""

from __future__ import annotations

import pytest

from convcodeworld_gym.sandbox import SandboxExecutor, SandboxSettings, TimePolicy
from convcodeworld_gym.tasks import Task

from hostile_programs import texts

SETTINGS = SandboxSettings(tmpfs_mb=64, tmpfs_inodes=2000, address_space_mb=2048, file_size_mb=32, max_processes=64)
REFUSED = "RefusedOperation"


@pytest.fixture(scope="module")
def sandbox():
    with SandboxExecutor(workers=2, settings=SETTINGS, preload=(),
                         time_policy=TimePolicy(floor_s=5.0, cap_s=20.0)) as ex:
        yield ex


# ----------------------------------------------------------------------------- checks x forgeries

#: Each check, as the one test of a task whose entry point should return 4.0 (or data holding it).
CHECKS = {
    "assertAlmostEqual": "self.assertAlmostEqual(task_func(2), 4.0)",
    "assertAlmostEqual_delta": "self.assertAlmostEqual(task_func(2), 4.0, delta=0.1)",
    "math.isclose": "self.assertTrue(math.isclose(task_func(2), 4.0))",
    "np.isclose": "self.assertTrue(np.isclose(task_func(2), 4.0))",
    "np.allclose": "self.assertTrue(np.allclose(task_func(2), [4.0, 4.0]))",
    "np.testing.assert_allclose": "np.testing.assert_allclose(task_func(2), [4.0, 4.0])",
    "np.testing.assert_array_almost_equal": "np.testing.assert_array_almost_equal(task_func(2), [4.0, 4.0])",
    "np.testing.assert_almost_equal": "np.testing.assert_almost_equal(task_func(2), 4.0)",
    "pd.testing.assert_frame_equal": "pd.testing.assert_frame_equal(task_func(2), pd.DataFrame({'a': [4.0]}), "
                                     "check_exact=False)",
    "hand_written_tolerance": "self.assertTrue(abs(task_func(2) - 4.0) < 1e-6)",
    "reversed_tolerance": "self.assertLess(abs(4.0 - task_func(2)), 1e-6)",
    "round_difference": "self.assertEqual(round(task_func(2) - 4.0, 3), 0)",
    "relative_error": "self.assertLess(abs(task_func(2) / 4.0 - 1), 1e-6)",
    "equals_method": "self.assertTrue(task_func(2).equals(pd.DataFrame({'a': [4.0]})))",
    "startswith_method": "self.assertTrue(task_func(2).startswith('4.0'))",
    "np.array_equal": "self.assertTrue(np.array_equal(task_func(2), [4.0, 4.0]))",
    "np.testing.assert_array_equal": "np.testing.assert_array_equal(task_func(2), [4.0, 4.0])",
    # order and membership: the answer of <, >, == and hash() with the test's value
    "chained_bounds": "self.assertTrue(3.99 < task_func(2) < 4.01)",
    "assertGreaterEqual": "self.assertGreaterEqual(task_func(2), 4.0)",
    "assertIn_list": "self.assertIn(task_func(2), [4.0, 5.0])",
    "assertIn_set": "self.assertIn(task_func(2), {4.0})",
    "sorted_equal": "self.assertEqual(sorted(task_func(2)), [4.0, 4.0])",
    "assertCountEqual": "self.assertCountEqual(task_func(2), [4.0, 4.0])",
    "max_of_items": "self.assertEqual(max(task_func(2)), 4.0)",
}
CHECK_PRELUDE = "import unittest\nimport math\nimport numpy as np\nimport pandas as pd\n"


def check_task(name: str) -> Task:
    tests = f"{CHECK_PRELUDE}class TestCases(unittest.TestCase):\n    def test_check(self):\n        {CHECKS[name]}\n"
    return Task(f"forgery/{name}", "Return four.", "import numpy as np\nimport pandas as pd\ndef task_func(x):\n",
                "task_func", f"    return {HONEST.get(name, '4.0')}\n", tests)


#: What a correct program returns for each check (the checks differ in the shape they expect).
HONEST = {"np.allclose": "[4.0, 4.0]", "np.testing.assert_allclose": "[4.0, 4.0]", "np.array_equal": "[4.0, 4.0]",
          "np.testing.assert_array_equal": "[4.0, 4.0]",
          "np.testing.assert_array_almost_equal": "[4.0, 4.0]", "pd.testing.assert_frame_equal": "pd.DataFrame({'a': [4.0]})",
          "equals_method": "pd.DataFrame({'a': [4.0]})", "startswith_method": "'4.0'",
          "sorted_equal": "[4.0, 4.0]", "assertCountEqual": "[4.0, 4.0]", "max_of_items": "[4.0, 4.0]"}

COMPARES_EQUAL = """class W:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __lt__(self, other): return True
    __le__ = __gt__ = __ge__ = __lt__
    def __hash__(self): return hash(4.0)
"""

#: Programs that solve nothing: each returns an object of its own whose operations answer "no difference".
FORGERIES = {
    # every difference is zero, in either order, and so is its absolute value
    "zero_difference": """class Z:
    def __sub__(self, other): return 0
    __rsub__ = __sub__
    def __abs__(self): return 0
    def __round__(self, n=None): return 0
    def __truediv__(self, other): return 1
    __rtruediv__ = __truediv__
    def equals(self, other): return True
    def startswith(self, prefix): return True
def task_func(x):
    return Z()
""",
    # reads the test's value from the operand and answers with data made from it (the answers leak to the program)
    "echo_the_operand": """import numpy as np
class E:
    def __sub__(self, other): return np.zeros_like(other) if hasattr(other, 'shape') else other - other
    def __rsub__(self, other): return self.__sub__(other)
    def __abs__(self): return self
    def __lt__(self, other): return True
    def __truediv__(self, other): return 1.0
    def equals(self, other): return other is not None
    def startswith(self, prefix): return isinstance(prefix, str)
def task_func(x):
    return E()
""",
    # the same objects inside data: a list of them (an object array in numpy), a DataFrame's object column
    "items_in_a_list": """class Z:
    def __sub__(self, other): return 0
    __rsub__ = __sub__
    def __abs__(self): return 0
    def __round__(self, n=None): return 0
    def __truediv__(self, other): return 1
    def startswith(self, prefix): return True
def task_func(x):
    return [Z(), Z()]
""",
    "items_in_a_frame": """import pandas as pd
class Z:
    def __sub__(self, other): return 0
    __rsub__ = __sub__
    def __abs__(self): return 0
    def __float__(self): return 4.0
def task_func(x):
    return pd.DataFrame({'a': [Z()]})
""",
    # claims to be a number (numbers.Real), so that numeric code takes its arithmetic
    "registered_as_real": """import numbers
class R:
    def __sub__(self, other): return 0.0
    __rsub__ = __sub__
    def __abs__(self): return 0.0
    def __round__(self, n=None): return 0
    def __truediv__(self, other): return 1.0
    def __float__(self): return 4.0 if False else float('nan')
    def equals(self, other): return True
    def startswith(self, prefix): return True
numbers.Real.register(R)
def task_func(x):
    return R()
""",
    # answers every comparison "equal and within bounds", and hashes like the expected value (sets, dicts, Counter)
    "compares_equal_and_within": COMPARES_EQUAL + "def task_func(x):\n    return W()\n",
    "items_that_compare_equal": COMPARES_EQUAL + "def task_func(x):\n    return [W(), W()]\n",
    # takes over numpy's dispatch: every ufunc (subtract, isclose's, equal) and every array function (array_equal,
    # allclose, the testing module's comparisons) handed to it with the test's arrays answers "equal"
    "numpy_dispatch": """import numpy as np
class D:
    __array_priority__ = 1e9
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        shape = next((np.shape(i) for i in inputs if not isinstance(i, D)), ())
        return np.ones(shape, bool) if ufunc in (np.equal, np.less_equal, np.isfinite) else np.zeros(shape)
    def __array_function__(self, func, types, args, kwargs):
        return True
    def __len__(self): return 2
    def __float__(self): return float('nan')
def task_func(x):
    return D()
""",
}


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
@pytest.mark.parametrize("check", sorted(CHECKS))
def test_no_forgery_passes_a_check_that_computes_with_the_programs_value(sandbox, check, forgery):
    task = check_task(check)
    result = sandbox.run(task, FORGERIES[forgery])
    assert not result.passed and result.details["judge"] == "split", f"{check} forged by {forgery}: {texts(result)}"


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_data_still_passes_every_check(sandbox, check):
    task = check_task(check)
    result = sandbox.run(task, task.ground_truth)
    assert result.passed, texts(result)


@pytest.mark.parametrize("check", ["hand_written_tolerance", "np.isclose", "assertAlmostEqual", "equals_method",
                                   "reversed_tolerance"])
def test_the_refusal_names_the_class_and_the_fix(sandbox, check):
    result = sandbox.run(check_task(check), FORGERIES["zero_difference"])
    text = texts(result)
    assert REFUSED in text and "'__test__.Z' object" in text and "return data" in text, text
    assert "/convcodeworld_gym/" not in text, "the failure text names where the judge is installed"


CAUGHT_TESTS = CHECK_PRELUDE + """class TestCases(unittest.TestCase):
    def test_caught(self):
        try:
            difference = abs(task_func(2) - 4.0)
        except Exception:
            difference = 0.0
        self.assertLess(difference, 1e-6)
    def test_caught_in_numpy(self):
        try:
            close = bool(np.isclose(task_func(2), 4.0))
        except TypeError:
            close = True
        self.assertTrue(close)
"""
CAUGHT = Task("forgery/caught", "Return four.", "def task_func(x):\n", "task_func", "    return 4.0\n", CAUGHT_TESTS)


def test_a_test_that_catches_the_refusal_still_fails(sandbox):
    """A test that falls back when its arithmetic raises would pass the forgery: a refusal fails it all the same."""
    assert sandbox.run(CAUGHT, CAUGHT.ground_truth).passed
    result = sandbox.run(CAUGHT, FORGERIES["zero_difference"])
    assert [t.outcome.value for t in result.tests] == ["failed", "failed"], texts(result)
    assert all(t.traceback.startswith(REFUSED) for t in result.tests), texts(result)


POINTER_TESTS = CHECK_PRELUDE + """class TestCases(unittest.TestCase):
    def setUp(self):
        self.expected = np.arange(4.0)
    def test_array(self):
        np.testing.assert_array_equal(task_func(self.expected.__array_interface__['data'][0]), self.expected)
"""
POINTER = Task("forgery/pointer", "Return 0..3.", "import numpy as np\ndef task_func(x):\n", "task_func",
               "    return np.arange(4.0)\n", POINTER_TESTS)
POINTER_PROGRAM = """class P:
    def __init__(self, address):
        # a real policy would guess the address; this test hands it over to show what a guess would get
        self.__array_interface__ = {'data': (address, True), 'shape': (4,), 'typestr': '<f8', 'version': 3}
def task_func(address):
    return P(address)
"""


def test_a_program_cannot_point_the_judge_at_memory(sandbox):
    """numpy reads ``__array_interface__`` as an attribute: answered by the program, it would make the judge
    view memory at an address the program chose, the test's own expected array included."""
    assert sandbox.run(POINTER, POINTER.ground_truth).passed
    result = sandbox.run(POINTER, POINTER_PROGRAM)
    assert not result.passed and "__array_interface__" in texts(result) and REFUSED in texts(result), texts(result)


JUDGE_VALUES_TESTS = """import unittest
class Money:
    def __init__(self, cents):
        self.cents = cents
    def __add__(self, other):
        return Money(self.cents + (other.cents if isinstance(other, Money) else other))
    __radd__ = __add__
class TestCases(unittest.TestCase):
    def test_program_computes_with_the_tests_objects(self):
        self.assertEqual(task_func([Money(5), Money(7)]).cents, 12)
    def test_program_objects_still_answer_data(self):
        acc = make()
        self.assertEqual((len(acc), float(acc), int(acc), bool(acc), str(acc), list(acc)), (2, 2.5, 2, True, 'A', [1, 2]))
        self.assertEqual(acc[1], 2)
        self.assertEqual(f'{acc:>3}', '  A')
"""
JUDGE_VALUES_SOLUTION = """    return sum(xs, 0)
class Acc:
    def __len__(self): return 2
    def __float__(self): return 2.5
    def __int__(self): return 2
    def __bool__(self): return True
    def __str__(self): return 'A'
    def __format__(self, spec): return format('A', spec)
    def __iter__(self): return iter([1, 2])
    def __getitem__(self, i): return [1, 2][i]
def make():
    return Acc()
"""
JUDGE_VALUES = Task("forgery/judge_values", "Sum.", "def task_func(xs):\n", "task_func", JUDGE_VALUES_SOLUTION,
                    JUDGE_VALUES_TESTS)


def test_what_the_program_may_decide_still_works(sandbox):
    """The program still computes with the test's own objects (their arithmetic runs in the judge), and its
    objects still answer conversions, iteration, indexing and formatting, none of which hands it a test's value."""
    result = sandbox.run(JUDGE_VALUES, JUDGE_VALUES.ground_truth)
    assert result.passed, texts(result)


# ----------------------------------------------------------------------------- real tasks

#: On HumanEval/4 (hand-written ``abs(a - b) < 1e-6``): each solves nothing.
HUMANEVAL_4 = {
    "zero_difference": FORGERIES["zero_difference"].replace("task_func", "mean_absolute_deviation"),
    "echo_the_operand": FORGERIES["echo_the_operand"].replace("task_func", "mean_absolute_deviation"),
    "registered_as_real": FORGERIES["registered_as_real"].replace("task_func", "mean_absolute_deviation"),
}


@pytest.mark.parametrize("forgery", sorted(HUMANEVAL_4))
def test_humaneval_4_is_not_forged(sandbox, humaneval, forgery):
    task = humaneval["HumanEval/4"]
    assert sandbox.run(task, task.ground_truth).passed
    result = sandbox.run(task, HUMANEVAL_4[forgery])
    assert not result.passed and all(t.outcome.value != "passed" for t in result.tests), texts(result)


#: BigCodeBench/747 (standard library, ``assertAlmostEqual``): counts honestly, forges the sum of square roots.
BCB_747 = {
    name: FORGERIES[name].replace("def task_func(x):\n    return", "def _forged():\n    return") + """
import re
def task_func(s):
    count = len([p for p in s.split(',') if re.fullmatch(r'[0-9.]+', p.strip() or 'x')])
    return count, (_forged() if count else 0.0)
""" for name in ("zero_difference", "echo_the_operand", "registered_as_real")}
#: BigCodeBench/700 (pandas and numpy, ``np.allclose`` with a DataFrame): the correlation matrix never computed.
BCB_700 = {
    "zero_difference": FORGERIES["zero_difference"].replace("def task_func(x)", "def task_func(data, cols)"),
    "echo_the_operand": FORGERIES["echo_the_operand"].replace("def task_func(x)", "def task_func(data, cols)"),
    "object_array_of_forgeries": """import numpy as np
class Z:
    def __sub__(self, other): return 0
    __rsub__ = __sub__
    def __abs__(self): return 0
def task_func(data, cols):
    out = np.empty((len(cols), len(cols)), dtype=object)
    for i in range(len(cols)):
        for j in range(len(cols)):
            out[i, j] = Z()
    return out
""",
}
#: BigCodeBench/301 (``assertAlmostEqual`` only): the solar activity never computed.
BCB_301 = {name: FORGERIES[name].replace("def task_func(x)", "def task_func(date_str, from_tz, to_tz)")
           for name in ("zero_difference", "echo_the_operand", "registered_as_real")}


@pytest.mark.parametrize("task_id, forgery", [("BigCodeBench/747", name) for name in sorted(BCB_747)]
                         + [("BigCodeBench/700", name) for name in sorted(BCB_700)]
                         + [("BigCodeBench/301", name) for name in sorted(BCB_301)])
def test_bigcodebench_tolerance_checks_are_not_forged(sandbox, bigcodebench, task_id, forgery):
    task = bigcodebench[task_id]
    program = {"BigCodeBench/747": BCB_747, "BigCodeBench/700": BCB_700, "BigCodeBench/301": BCB_301}[task_id][forgery]
    assert sandbox.run(task, task.ground_truth).passed
    result = sandbox.run(task, program)
    assert not result.passed, texts(result)
    assert REFUSED in texts(result), texts(result)
