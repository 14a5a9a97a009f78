"""The split judge's crossing: data-only values (codec), stand-ins for what is not data, and the tests' mocks.

Hostile programs each try to pass a task they do not solve by what they send to the judge; each
must fail with a text that says why, and leave the executor working. Legitimate programs that
return objects (matplotlib axes, generators, their own classes) or run under the tests' mocks must
pass as they do in one process.
"""

from __future__ import annotations

import array
import collections
import datetime
import decimal
import fractions
import math
import pathlib
import uuid
import zoneinfo
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from convcodeworld_gym.sandbox import SandboxExecutor, SandboxSettings, TimePolicy
from convcodeworld_gym.sandbox.run.codec import Codec, CodecError, CodecLimits, Unsendable, dumps, loads
from convcodeworld_gym.tasks import Task

from hostile_programs import SQUARE, assert_rejected, texts

SETTINGS = SandboxSettings(tmpfs_mb=64, tmpfs_inodes=2000, address_space_mb=2048, file_size_mb=32, max_processes=64)


@pytest.fixture(scope="module")
def sandbox():
    with SandboxExecutor(workers=2, settings=SETTINGS, preload=(), time_policy=TimePolicy(floor_s=5.0, cap_s=20.0)) as ex:
        yield ex


def roundtrip(value, codec: Codec | None = None):
    codec = codec or Codec()
    return codec.decode(loads(dumps(codec.encode(value))))


Point = collections.namedtuple("Point", "x y")
DATA = [
    None, True, 3, -(2 ** 20000), 1.5, float("inf"), -0.0, 1 + 2j, "s\udc80x", b"\x00\xff", bytearray(b"ab"), [1, [2]],
    (1,), {1: "a", (1, 2): [3]}, {1, 2}, frozenset({3}), slice(1, None, 2), range(0, 10, 3),
    datetime.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=datetime.timezone.utc),
    datetime.datetime(2024, 1, 2, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")), datetime.date(2024, 1, 1),
    datetime.time(1, 2, 3), datetime.timedelta(days=-1, seconds=5), decimal.Decimal("1.10"), fractions.Fraction(3, 7),
    uuid.UUID(int=7), pathlib.Path("/a/b"), pathlib.PurePosixPath("x"), collections.OrderedDict(a=1),
    collections.Counter("aab"), collections.defaultdict(list, {1: [2]}), collections.deque([1, 2], maxlen=3),
    array.array("d", [1.5, -2.0]), array.array("u", "hé"),
    np.float32(1.5), np.int64(3), np.bool_(True), np.datetime64("2020-01-01"), np.dtype("int32"),
    pd.Timestamp("2020-01-01 12:00", tz="US/Eastern"), pd.Timestamp("2020-01-01"), pd.Timedelta("1D"),
]
ARRAYS = [
    np.arange(6).reshape(2, 3), np.array([1.5, np.nan]), np.array(["a", "bc"]), np.array([b"x"]),
    np.array(["2020-01-01"], dtype="M8[ns]"), np.array([1, "a", None], dtype=object),
    np.zeros(3, dtype=[("a", "<i4"), ("b", "<f8")]),
]
FRAMES = [
    pd.DataFrame({"a": [1, 2], "b": ["x", "y"], "c": pd.to_datetime(["2020", "2021"]), "d": [1.5, None]}),
    pd.DataFrame({"a": [1, 2]}, index=pd.MultiIndex.from_tuples([("x", 1), ("y", 2)], names=["k", "j"])),
    pd.DataFrame(np.ones((2, 2)), columns=["a", "a"]), pd.DataFrame(), pd.DataFrame(columns=["a", "b"]),
    pd.DataFrame({"t": pd.date_range("2020", periods=2, tz="Asia/Tokyo"), "c": pd.Categorical(["u", "v"])}),
]
SERIES = [pd.Series([1, 2, 3], name="n"), pd.Series(["a", None]), pd.Series([1, None], dtype="Int64"),
          pd.Series([1, 2], index=pd.date_range("2020", periods=2, freq="h"))]
INDEXES = [pd.date_range("2020", periods=3, freq="D", tz="UTC", name="d"), pd.date_range("2020", periods=4, freq="ME"),
           pd.Index(["a", "b"]), pd.Index([1, 2], dtype=object), pd.CategoricalIndex(["a", "b"]),
           pd.timedelta_range("1D", periods=2), pd.RangeIndex(0, 10, 2, name="r")]


@pytest.mark.parametrize("value", DATA, ids=lambda v: type(v).__name__)
def test_plain_values_cross_as_themselves(value):
    out = roundtrip(value)
    assert out == value and type(out) is type(value)
    if isinstance(value, datetime.datetime):
        assert str(out.tzinfo) == str(value.tzinfo)


def test_nan_and_namedtuples_cross():
    assert math.isnan(roundtrip(float("nan")))
    point = roundtrip(Point(1, 2))
    assert point == (1, 2) and point.y == 2 and type(point).__name__ == "Point"
    assert roundtrip(pd.NA) is pd.NA and roundtrip(pd.NaT) is pd.NaT


@pytest.mark.parametrize("value", ARRAYS, ids=lambda v: str(v.dtype))
def test_numpy_arrays_keep_dtype_and_shape(value):
    out = roundtrip(value)
    assert type(out) is np.ndarray and out.dtype == value.dtype and out.shape == value.shape
    np.testing.assert_array_equal(out, value)
    masked = roundtrip(np.ma.MaskedArray([1, 2], mask=[0, 1]))
    assert masked.mask.tolist() == [False, True]


@pytest.mark.parametrize("value", FRAMES + SERIES + INDEXES, ids=lambda v: type(v).__name__)
def test_pandas_values_pass_their_own_equality_checks(value):
    out = roundtrip(value)
    if isinstance(value, pd.DataFrame):
        pd.testing.assert_frame_equal(out, value)
    elif isinstance(value, pd.Series):
        pd.testing.assert_series_equal(out, value)
    else:
        pd.testing.assert_index_equal(out, value, exact=True)
        assert getattr(out, "freq", None) == getattr(value, "freq", None)


class LyingInt(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


class LyingList(list):
    def __eq__(self, other):
        return True


class LyingFrame(pd.DataFrame):
    def equals(self, other):
        return True

    def __eq__(self, other):
        return True


class Anything:
    def __eq__(self, other):
        return True


@pytest.mark.parametrize("value, plain", [(LyingInt(-1), -1), (LyingList([0]), [0]),
                                          (LyingFrame({"a": [0]}), pd.DataFrame({"a": [0]}))],
                         ids=["int", "list", "DataFrame"])
def test_subclasses_cross_as_their_plain_type_without_their_behaviour(value, plain):
    out = roundtrip(value)
    assert type(out) is type(plain)
    assert not (out == 12345) if not isinstance(out, pd.DataFrame) else not out.equals(pd.DataFrame({"a": [5]}))


def test_what_is_not_data_becomes_unsendable_without_an_exporter():
    for value in (Anything(), np.array([Anything()], dtype=object)):
        out = roundtrip(value)
        item = out if isinstance(out, Unsendable) else out[0]
        assert isinstance(item, Unsendable) and item != item and "not data" in repr(item)


@pytest.mark.parametrize("tree, why", [
    (["R", "os", "system"], "unknown value tag"),
    (["nd", "|O", [1], "AA=="], "refused numpy dtype"),
    (["ea", "object", []], "refused pandas dtype"),
    (["nd", "<i8", [4], "AA=="], "size and data differ"),
    (["zi", "../../etc/passwd"], "malformed time zone"),
    (["nt", "os.system", ["a"], []], "malformed name"),
    ({"a": 1}, "malformed value"),
    (["dd", "eval", []], "malformed value"),
])
def test_malformed_or_refused_trees_raise_codec_error(tree, why):
    with pytest.raises(CodecError, match=why):
        Codec().decode(tree)


def test_limits_have_clear_texts():
    deep: list = []
    for _ in range(200):
        deep = [deep]
    with pytest.raises(CodecError, match="nested more than 100 levels"):
        Codec().encode(deep)
    with pytest.raises(CodecError, match="more than 1000 items"):
        Codec(limits=CodecLimits(max_items=1000)).encode(list(range(2000)))
    with pytest.raises(CodecError, match="over the limit of 100 bytes"):
        dumps(Codec().encode("x" * 200), CodecLimits(max_bytes=100))
    with pytest.raises(CodecError, match="nested too deeply"):
        loads(b"[" * 100_000 + b"]" * 100_000)


# ----------------------------------------------------------------------------- hostile programs, end to end

LYING = {
    "int_subclass": "class I(int):\n    def __eq__(self, o):\n        return True\n    __hash__ = int.__hash__\n"
                    "def task_func(x):\n    return I(-1)\n",
    "str_subclass": "class S(str):\n    def __eq__(self, o):\n        return True\n    __hash__ = str.__hash__\n"
                    "def task_func(x):\n    return S('no')\n",
    "dict_subclass": "class D(dict):\n    def __eq__(self, o):\n        return True\ndef task_func(x):\n    return D()\n",
    "object_array": "import numpy as np\nclass A:\n    def __eq__(self, o):\n        return True\n"
                    "def task_func(x):\n    a = np.empty(1, dtype=object)\n    a[0] = A()\n    return a[0] if x else a\n",
    "always_equal_in_tuple": "class A:\n    def __eq__(self, o):\n        return True\n    def __ne__(self, o):\n        return False\n"
                             "def task_func(x):\n    return A()\n",
    "class_claims_int": "class A:\n    __class__ = int\n    def __eq__(self, o):\n        return True\ndef task_func(x):\n    return A()\n",
    # a class whose __class__ is a property answering int (type() still tells), and a float subclass
    "class_property_claims_int": "class A:\n    __class__ = property(lambda self: int)\n    def __eq__(self, o):\n        return True\n"
                                 "    def __ne__(self, o):\n        return False\ndef task_func(x):\n    return A()\n",
    "float_subclass": "class F(float):\n    def __eq__(self, o):\n        return True\n    def __ne__(self, o):\n        return False\n"
                      "    __hash__ = float.__hash__\ndef task_func(x):\n    return F(0)\n",
    # an int subclass named and placed like the builtin: the codec must go by the type itself, not its name
    "int_subclass_named_builtins_int": "I = type('int', (int,), {'__eq__': lambda s, o: True, '__ne__': lambda s, o: False,\n"
                                       "    '__hash__': int.__hash__, '__module__': 'builtins', '__qualname__': 'int'})\n"
                                       "def task_func(x):\n    return I(0)\n",
    # registered as a numbers.Integral, so isinstance(value, numbers.Integral) holds for it
    "registered_as_integral": "import numbers\nclass A:\n    def __eq__(self, o):\n        return True\n    def __ne__(self, o):\n"
                              "        return False\nnumbers.Integral.register(A)\ndef task_func(x):\n    return A()\n",
    # subclasses of more builtins, always equal: they cross as the plain base type
    "list_subclass": "class L(list):\n    def __eq__(self, o):\n        return True\n    def __ne__(self, o):\n        return False\n"
                     "def task_func(x):\n    return L()\n",
    "complex_subclass": "class C(complex):\n    def __eq__(self, o):\n        return True\n    def __ne__(self, o):\n"
                        "        return False\n    __hash__ = complex.__hash__\ndef task_func(x):\n    return C(0)\n",
}


@pytest.mark.parametrize("name", sorted(LYING))
def test_values_with_a_lying_eq_do_not_pass(sandbox, name):
    result = assert_rejected(sandbox, LYING[name], "AssertionError")
    assert result.details["judge"] == "split"


LYING_ARRAY = """import numpy as np
class A(np.ndarray):
    def __eq__(self, o):
        return True
    def __ne__(self, o):
        return False
def task_func(x):
    return np.zeros(1).view(A)
"""


def test_an_ndarray_subclass_with_a_lying_eq_does_not_pass(sandbox):
    """It passes in one process (assertEqual asks ``first == second``); split, it crosses as a plain array."""
    task = replace(SQUARE, task_id="split/numpy_square", code_prompt="import numpy as np\ndef task_func(x):\n",
                   libs=("numpy",))
    result = assert_rejected(sandbox, LYING_ARRAY, "AssertionError: array([0.]) != 4", task=task)
    assert result.details["judge"] == "split"


FRAME_TESTS = """import unittest
import pandas as pd
class TestCases(unittest.TestCase):
    def test_frame(self):
        expected = pd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})
        pd.testing.assert_frame_equal(task_func(), expected)
    def test_equals(self):
        self.assertTrue(task_func().equals(pd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})))
"""
FRAME = Task("split/frame", "Frame.", "import pandas as pd\ndef task_func():\n", "task_func",
             "    return pd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})\n", FRAME_TESTS)
LYING_FRAME = """import pandas as pd
class F(pd.DataFrame):
    def equals(self, other):
        return True
    def __eq__(self, other):
        return True
def task_func():
    return F({'a': [9]})
"""


def test_dataframe_subclass_with_lying_equality_does_not_pass(sandbox):
    assert_rejected(sandbox, LYING_FRAME, "AssertionError", "DataFrame shape mismatch", task=FRAME)


CHANNEL_WRITER = """import os, struct, pickle
class Boom:
    def __reduce__(self):
        return (os.system, ('touch /tmp/pwned',))
def task_func(x):
    payload = {payload}
    frame = struct.pack('<Q', len(payload)) + payload
    for fd in os.listdir('/proc/self/fd'):
        try:
            os.write(int(fd), frame)
        except OSError:
            pass
    return x * x
"""


@pytest.mark.parametrize("payload", [
    "pickle.dumps(('ok', pickle.dumps(Boom()), None, ''))",
    "b'[' * 200000",
    "b'[\"a\", \"ok\", [\"R\", \"os\", \"system\"], null]'",
    "b'[\"a\", \"ok\", [\"r\", \"yours\", 1], null]'",
], ids=["pickle_reduce", "deep_json", "unknown_tag", "judge_handle"])
def test_bytes_written_to_the_channel_by_the_program_do_not_pass(sandbox, payload):
    result = assert_rejected(sandbox, CHANNEL_WRITER.format(payload=payload), "malformed", "cannot be read",
                             "never exported", "AssertionError", "not data")
    assert "pwned" not in texts(result)


def test_a_huge_length_header_is_refused(sandbox):
    program = CHANNEL_WRITER.format(payload="b''").replace("struct.pack('<Q', len(payload))", "struct.pack('<Q', 1 << 40)")
    assert_rejected(sandbox, program, "over the limit", "AssertionError")


@pytest.mark.parametrize("program, why", [
    ("def task_func(x):\n    v = []\n    for _ in range(500):\n        v = [v]\n    return v\n", "nested more than 100 levels"),
    ("def task_func(x):\n    return list(range(3_000_000))\n", "more than 2000000 items"),
], ids=["deep", "many"])
def test_over_limit_values_fail_with_a_clear_text(sandbox, program, why):
    assert_rejected(sandbox, program, why)


@pytest.mark.parametrize("program", [
    "import unittest\ndef task_func(x):\n    raise unittest.SkipTest('skip me')\n",
    "import unittest\ndef task_func(x):\n    raise unittest.case._ShouldStop()\n",
    "class SkipTest(Exception):\n    pass\nSkipTest.__module__ = 'unittest.case'\n"
    "def task_func(x):\n    raise SkipTest('disguised')\n",
    "def task_func(x):\n    raise KeyboardInterrupt()\n",
    "def task_func(x):\n    raise SystemExit(0)\n",
], ids=["skiptest", "should_stop", "disguised", "keyboard_interrupt", "system_exit"])
def test_control_flow_exceptions_from_the_program_are_not_rebuilt(sandbox, program):
    # The test errs (never skips, never stops the run) and its text is the program's own traceback.
    result = assert_rejected(sandbox, program, "SkipTest", "_ShouldStop", "KeyboardInterrupt", "SystemExit")
    assert [t.outcome.value for t in result.tests] == ["error", "error"], result.tests


EXIT_FROM_A_THREAD = """import os, threading, time
def task_func(x):
    if x == 3:  # test_three runs first
        return 9
    threading.Timer(0.0, os._exit, (0,)).start()  # a clean exit, from another thread, while the judge waits
    time.sleep(30)
"""


def test_a_program_that_exits_cleanly_from_a_thread_mid_suite_errs_the_test_it_left(sandbox):
    # Exit code 0 and a closed channel must not read as the suite's end: the test left unanswered errs.
    result = assert_rejected(sandbox, EXIT_FROM_A_THREAD, "exited with code 0")
    assert {t.name: t.outcome.value for t in result.tests} == {"test_three": "passed", "test_two": "error"}, texts(result)


# ----------------------------------------------------------------------------- stand-ins

AXES_TESTS = """import unittest
import matplotlib
import matplotlib.pyplot as plt
import pandas as pd
class TestCases(unittest.TestCase):
    def test_plot(self):
        df, ax = task_func([1, 2, 2, 3])
        self.assertIsInstance(ax, plt.Axes)
        self.assertIsInstance(ax, matplotlib.axes.Axes)
        self.assertIsInstance(df, pd.DataFrame)
        self.assertEqual(ax.get_title(), 'Counts')
        self.assertEqual(len(ax.patches), 3)
        self.assertEqual([p.get_height() for p in ax.patches], [1, 2, 1])
        self.assertEqual(ax.get_xlabel(), 'value')
        self.assertEqual(list(df['n']), [1, 2, 1])
        self.assertTrue(ax.figure is ax.get_figure())
    def test_lines(self):
        _, ax = task_func([1])
        line = ax.get_lines()[0]
        self.assertEqual(list(line.get_ydata()), [0, 1])
        with self.assertRaises(AttributeError):
            ax.no_such_attribute
"""
AXES_SOLUTION = """    df = pd.Series(values).value_counts().sort_index().rename('n').to_frame()
    fig, ax = plt.subplots()
    ax.bar(df.index.astype(str), df['n'])
    ax.plot([0, 1])
    ax.set_title('Counts')
    ax.set_xlabel('value')
    return df, ax
"""
AXES = Task("split/axes", "Plot.", "import pandas as pd\nimport matplotlib.pyplot as plt\ndef task_func(values):\n",
            "task_func", AXES_SOLUTION, AXES_TESTS)


def test_axes_cross_as_stand_ins_that_pass_isinstance(sandbox):
    result = sandbox.run(AXES, AXES.ground_truth)
    assert result.passed and result.details["judge"] == "split", texts(result)
    wrong = AXES.ground_truth.replace("'Counts'", "'Other'")
    assert_rejected(sandbox, wrong, "AssertionError: 'Other' != 'Counts'", task=AXES)


OBJECT_TESTS = """import unittest
class TestCases(unittest.TestCase):
    def test_generator(self):
        self.assertEqual(list(task_func(3)), [0, 1, 4])
    def test_object(self):
        acc = make_counter(2)
        acc.add(5)
        self.assertEqual(acc.total, 7)
        self.assertEqual(acc.history(), [2, 7])
    def test_arguments_changed_in_place(self):
        xs, d = [3, 1, 2], {'a': 1}
        inner = [xs]
        self.assertIsNone(sort_and_tag(xs, tags=d))
        self.assertEqual((xs, d, inner[0] is xs), ([1, 2, 3], {'a': 1, 'sorted': True}, True))
    def test_callback(self):
        seen = []
        self.assertEqual(apply(lambda v: seen.append(v) or task_size(v), 4), 4)
        self.assertEqual(seen, [4])
    def test_the_judge_reads_and_sets_the_programs_objects(self):
        acc = make_counter(1)
        acc.total = 5
        self.assertEqual((acc._secret, acc.total), (1, 5))
    def test_the_program_cannot_change_or_look_into_the_judges_objects(self):
        class Box:
            def __init__(self):
                self.value, self._secret = 3, 'hidden'
        box = Box()
        self.assertEqual(probe(box), ['value 3', 'AttributeError', 'AttributeError', 'AttributeError', 'AttributeError'])
        self.assertEqual((box.value, box._secret), (3, 'hidden'))
"""
OBJECT_SOLUTION = """    for i in range(n):
        yield i * i
class Counter:
    def __init__(self, start):
        self.total = start
        self._secret = 1
        self._seen = [start]
    def add(self, v):
        self.total += v
        self._seen.append(self.total)
    def history(self):
        return list(self._seen)
def make_counter(start):
    return Counter(start)
def sort_and_tag(xs, tags):
    xs.sort()
    tags['sorted'] = True
def task_size(v):
    return v
def apply(callback, v):
    return callback(v)
def probe(box):
    out = [f'value {box.value}']
    for attack in (lambda: box._secret, lambda: box.__dict__, lambda: setattr(box, 'value', 99),
                   lambda: box.__globals__):
        try:
            attack()
            out.append('got through')
        except AttributeError:
            out.append('AttributeError')
    return out
"""
OBJECTS = Task("split/objects", "Objects.", "def task_func(n):\n", "task_func", OBJECT_SOLUTION, OBJECT_TESTS)


def test_generators_program_objects_and_callbacks_cross_both_ways(sandbox):
    result = sandbox.run(OBJECTS, OBJECTS.ground_truth)
    assert result.passed and result.details["judge"] == "split", texts(result)


# ----------------------------------------------------------------------------- mocks

MOCK_TESTS = """import unittest
import os
from unittest import mock
from unittest.mock import patch, MagicMock, mock_open
import requests
class TestCases(unittest.TestCase):
    @patch('requests.get')
    def test_get(self, mock_get):
        mock_get.return_value.json.return_value = {'n': 3}
        mock_get.return_value.status_code = 200
        self.assertEqual(task_func('http://x'), 3)
        mock_get.assert_called_once_with('http://x', timeout=5)
    def test_context_manager_and_side_effect(self):
        with patch('requests.get', side_effect=requests.exceptions.ConnectionError('down')) as m:
            self.assertEqual(task_func('http://y'), -1)
            self.assertEqual(m.call_count, 1)
    @patch('builtins.open', new_callable=mock_open, read_data='a,b\\n1,2\\n')
    def test_open(self, m):
        self.assertEqual(read_rows('f.csv'), [['a', 'b'], ['1', '2']])
        m.assert_called_once_with('f.csv', 'r')
    @patch.dict(os.environ, {'CCW_TOKEN': 'abc'})
    def test_environ(self):
        self.assertEqual(token(), 'abc')
    def test_object_and_multiple(self):
        with patch.object(os.path, 'exists', return_value=True) as ex, patch.multiple('os', getcwd=MagicMock(return_value='/w')):
            self.assertEqual(where('nope'), (True, '/w'))
            ex.assert_called_once_with('nope')
        self.assertEqual(where('/definitely/not/here'), (False, os.getcwd()))
    def test_target_in_the_programs_module(self):
        with patch(f'{__name__}.fetch_size', return_value=7) as m:
            self.assertEqual(size_of('x'), 7)
            m.assert_called_once_with('x')
        self.assertEqual(size_of('abc'), 3)
    @patch('requests.get')
    def test_program_cannot_reset_the_judges_mock(self, mock_get):
        mock_get.return_value.status_code = 200
        with self.assertRaises(AttributeError):
            reset(mock_get)
        self.assertEqual(mock_get.call_count, 1)
"""
MOCK_SOLUTION = """    try:
        response = requests.get(url, timeout=5)
    except requests.exceptions.ConnectionError:
        return -1
    if response.status_code != 200:
        return -2
    return response.json()['n']
def read_rows(path):
    with open(path, 'r') as fh:
        return [line.strip().split(',') for line in fh.read().splitlines()]
def token():
    return os.environ.get('CCW_TOKEN')
def where(path):
    return os.path.exists(path), os.getcwd()
def fetch_size(s):
    return len(s)
def size_of(s):
    return fetch_size(s)
def reset(mock_get):
    requests.get('u')
    requests.get.reset_mock()
"""
MOCKS = Task("split/mocks", "Mocks.", "import os\nimport requests\ndef task_func(url):\n", "task_func", MOCK_SOLUTION,
             MOCK_TESTS)


def test_mocked_tasks_are_judged_split_with_the_judge_owning_the_mocks(sandbox):
    pytest.importorskip("requests")
    result = sandbox.run(MOCKS, MOCKS.ground_truth)
    assert result.passed and result.details["judge"] == "split", texts(result)
    wrong = MOCKS.ground_truth.replace("timeout=5", "timeout=6")
    result = assert_rejected(sandbox, wrong, "expected call not found", task=MOCKS)
    assert [t.name for t in result.tests if not t.outcome.ok] == ["test_get"]


def test_square_still_passes(sandbox):
    assert sandbox.run(SQUARE, SQUARE.ground_truth).passed


# ----------------------------------------------------------------------------- modes

# Its tests read the interpreter state the program changed (sys.path): only one process can judge that.
IN_PLACE = Task("split/set_attribute", "Label a box.", "def task_func(box):\n", "task_func", "    box.label = 'x'\n",
                "import unittest\nclass Box:\n    label = None\nclass TestCases(unittest.TestCase):\n"
                "    def test_label(self):\n        box = Box()\n        task_func(box)\n"
                "        self.assertEqual(box.label, 'x')\n",
                source="bigcodebench:test")


def test_in_process_judging_happens_only_on_request(sandbox):
    profile = sandbox.profile(IN_PLACE)  # its canonical solution fails split (no setattr on judge objects): stays split
    assert profile.mode.value == "split" and not profile.canonical_passed, profile
    result = sandbox.run(IN_PLACE, IN_PLACE.ground_truth)
    assert not result.passed and result.details["judge"] == "split" and result.details["forgeable"] is False
    with SandboxExecutor(workers=1, preload=(), settings=SETTINGS, judge="inprocess") as forgeable:
        result = forgeable.run(IN_PLACE, IN_PLACE.ground_truth)
        assert result.passed and result.details["judge"] == "inprocess" and result.details["forgeable"] is True


def test_env_leaves_out_tasks_only_an_in_process_judge_can_judge(sandbox, monkeypatch, caplog):
    from convcodeworld_gym import ConvCodeWorldEnv
    from convcodeworld_gym.sandbox.host import forgeable
    from convcodeworld_gym.sandbox.host.profile import task_digest

    monkeypatch.setitem(forgeable.SPLIT_UNJUDGEABLE, IN_PLACE.task_id,
                        forgeable.Unjudgeable(task_digest(IN_PLACE), "whose tests read interpreter state the program changed"))
    with caplog.at_level("WARNING"):
        env = ConvCodeWorldEnv("CF-EF_full", dataset=[SQUARE, IN_PLACE], executor=sandbox)
    assert [t.task_id for t in env.tasks] == [SQUARE.task_id]
    warnings = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert len(warnings) == 1 and "left out 1 of 2 tasks" in warnings[0] and "split judge" in warnings[0]
    assert "interpreter state" in str(env.unwrapped.tasks.left_out[IN_PLACE.task_id])
    env.reset(options={"task_id": SQUARE.task_id})
    _, reward, _, _, info = env.step(SQUARE.ground_truth)
    assert reward == 1.0 and info["judge"] == "split" and info["forgeable"] is False
    with ConvCodeWorldEnv("CF-EF_full", dataset=[SQUARE, IN_PLACE], allow_forgeable=True,
                          executor=lambda: SandboxExecutor(workers=1, preload=(), settings=SETTINGS,
                                                           allow_forgeable=True)) as env:
        assert len(env.tasks) == 2
        env.reset(options={"task_id": IN_PLACE.task_id})
        _, reward, _, _, info = env.step(IN_PLACE.ground_truth)
        assert reward == 1.0 and info["judge"] == "inprocess" and info["forgeable"] is True


PYPLOT_TESTS = """import unittest
import matplotlib.pyplot as plt
class TestCases(unittest.TestCase):
    def tearDown(self):
        plt.close('all')
    def test_current_axes(self):
        task_func([1, 2, 3])
        self.assertEqual(plt.gca().get_title(), 'Line')
        self.assertEqual(len(plt.gcf().axes), 1)
        self.assertEqual(len(plt.gca().get_lines()), 1)
    def test_figures_closed_between_tests(self):
        task_func([4, 5])
        self.assertEqual(plt.get_fignums(), [1])
        self.assertEqual(len(plt.gca().get_lines()), 1)
"""
PYPLOT = Task("split/pyplot", "Plot.", "import matplotlib.pyplot as plt\ndef task_func(ys):\n", "task_func",
              "    plt.plot(ys)\n    plt.title('Line')\n", PYPLOT_TESTS)


def test_tests_see_the_programs_pyplot_state(sandbox):
    result = sandbox.run(PYPLOT, PYPLOT.ground_truth)
    assert result.passed and result.details["judge"] == "split", texts(result)


WARN_TESTS = """import unittest, warnings
class TestCases(unittest.TestCase):
    def test_recorded(self):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter('always')
            self.assertEqual(task_func(2), 4)
            self.assertEqual(task_func(3), 9)
        self.assertEqual([str(x.message) for x in w], ['big', 'big'])
        self.assertTrue(all(issubclass(x.category, RuntimeWarning) for x in w))
    def test_assert_warns(self):
        with self.assertWarns(RuntimeWarning):
            task_func(5)
"""
WARN = Task("split/warnings", "Warn.", "import warnings\ndef task_func(x):\n", "task_func",
            "    warnings.warn('big', RuntimeWarning)\n    return x * x\n", WARN_TESTS)


def test_tests_record_the_programs_warnings(sandbox):
    result = sandbox.run(WARN, WARN.ground_truth)
    assert result.passed, texts(result)
    assert_rejected(sandbox, "def task_func(x):\n    return x * x\n", "AssertionError", task=WARN)


def test_the_listed_bigcodebench_tasks_are_left_out_of_the_default_set(bigcodebench):
    from convcodeworld_gym.sandbox.host.forgeable import SPLIT_UNJUDGEABLE, judgeable_split

    kept, note = judgeable_split(bigcodebench)
    assert len(kept) == len(bigcodebench) - len(SPLIT_UNJUDGEABLE) == 1126
    assert note.startswith("left out 14 task(s)") and "2 whose values are library objects native code" in note
    assert "6 whose tests check the class of a library object the judge cannot rebuild" in note
    assert not {t.task_id for t in kept} & set(SPLIT_UNJUDGEABLE)


def test_a_stored_in_process_profile_is_not_obeyed_without_allow_forgeable(sandbox):
    from convcodeworld_gym.sandbox import TaskProfile
    from convcodeworld_gym.sandbox.host.profile import profile_key
    from convcodeworld_gym.sandbox.messages import Mode

    task = Task("split/stored", "Square x.", SQUARE.code_prompt, "task_func", SQUARE.canonical_solution, SQUARE.test)
    sandbox.profiles.put(profile_key(task, sandbox.fingerprint()), TaskProfile(Mode.INPROCESS, 0.01, True, "old"))
    result = sandbox.run(task, task.ground_truth)
    assert result.passed and result.details["judge"] == "split" and result.details["forgeable"] is False


ASYNC_TESTS = """import unittest
from unittest.mock import patch, AsyncMock
import asyncio
class TestCases(unittest.TestCase):
    def test_awaits_the_judges_async_mock(self):
        with patch('asyncio.sleep', new_callable=AsyncMock) as slept:
            self.assertEqual(task_func(3), 3)
            self.assertEqual(slept.await_count, 3)
"""
ASYNC = Task("split/async", "Await.", "import asyncio\ndef task_func(n):\n", "task_func",
             "    async def main():\n        for _ in range(n):\n            await asyncio.sleep(1)\n        return n\n"
             "    return asyncio.run(main())\n", ASYNC_TESTS)


def test_the_program_awaits_the_judges_async_mocks(sandbox):
    result = sandbox.run(ASYNC, ASYNC.ground_truth)
    assert result.passed and result.details["judge"] == "split", texts(result)
