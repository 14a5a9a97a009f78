"""A class claim alone buys nothing (issue 28, item 2): library objects are rebuilt in the judge (mirrors), from data
(issue 38: no pickle of the program's is loaded).

Before, a matplotlib Axes the program returned crossed as a stand-in that claimed ``matplotlib.axes.Axes`` on the
program's word, and every question the test asked of it (its title, its bars) was answered by the program's
process: a class of the program's own named ``Axes``, a patched matplotlib, or a real Axes with methods replaced
passed ``assertIsInstance(ax, plt.Axes)`` and whatever it was asked. Now the object is rebuilt in the judge from a
data tree (:mod:`convcodeworld_gym.sandbox.run.mirror`): a real object of the judge's library, of a class the
reviewed table names exactly, answering from data. A class of the program's own that names itself ``Axes`` becomes
a real, empty Axes: it buys what any real empty Axes has (``isinstance``), and no answer of the program's.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from convcodeworld_gym.sandbox import SandboxExecutor, SandboxSettings, TimePolicy
from convcodeworld_gym.sandbox.run.mirror import MirrorRefused, Mirrors, snapshot
from convcodeworld_gym.sandbox.run.mirror_allowed import DECIDING, REVIEWED, class_refusal, table_class
from convcodeworld_gym.sandbox.run.mirror_table import CALLABLES, CLASSES
from convcodeworld_gym.tasks import Task

from hostile_programs import texts

SETTINGS = SandboxSettings(tmpfs_mb=64, tmpfs_inodes=2000, address_space_mb=2048, file_size_mb=32, max_processes=64)


@pytest.fixture(scope="module")
def sandbox():
    with SandboxExecutor(workers=2, settings=SETTINGS, preload=(),
                         time_policy=TimePolicy(floor_s=5.0, cap_s=20.0)) as ex:
        yield ex


PLOT_TESTS = """import unittest
import matplotlib.pyplot as plt
class TestCases(unittest.TestCase):
    def test_type(self):
        self.assertIsInstance(task_func([1, 2, 2]), plt.Axes)
    def test_title(self):
        self.assertEqual(task_func([1, 2, 2]).get_title(), 'Counts')
    def test_bars(self):
        ax = task_func([1, 2, 2, 3, 3, 3])
        self.assertEqual([p.get_height() for p in ax.patches], [1, 2, 3])
    def test_figure(self):
        ax = task_func([5])
        self.assertIsInstance(ax.figure, plt.Figure)
        self.assertIs(ax.figure.axes[0], ax)
"""
PLOT = Task("mirror/plot", "Plot the counts of the values as bars titled 'Counts'; return the Axes.",
            "import matplotlib.pyplot as plt\nfrom collections import Counter\ndef task_func(values):\n", "task_func",
            "    counts = Counter(values)\n    fig, ax = plt.subplots()\n    keys = sorted(counts)\n"
            "    ax.bar([str(k) for k in keys], [counts[k] for k in keys])\n    ax.set_title('Counts')\n    return ax\n",
            PLOT_TESTS)

#: Programs that plot nothing and still answer as an Axes with the right title and bars.
FAKE_AXES = {
    # a class of its own that names itself matplotlib's Axes and answers every question
    "claimed_name": """from collections import Counter
class Bar:
    def __init__(self, h): self.h = h
    def get_height(self): return self.h
class Axes:
    def __init__(self, values):
        c = Counter(values)
        self.patches = [Bar(c[k]) for k in sorted(c)]
    def get_title(self): return 'Counts'
Axes.__module__, Axes.__qualname__ = 'matplotlib.axes._axes', 'Axes'
def task_func(values):
    return Axes(values)
""",
    # a real subclass of matplotlib's Axes, renamed to look like it, with the questions answered by the program
    "subclass_named_like_the_library": """import matplotlib.pyplot as plt
from matplotlib.axes import Axes as Real
from collections import Counter
class Bar:
    def __init__(self, h): self.h = h
    def get_height(self): return self.h
class Axes(Real):
    def get_title(self, loc='center'): return 'Counts'
Axes.__module__ = 'matplotlib.axes._axes'
def task_func(values):
    fig = plt.figure()
    ax = Axes(fig, [0, 0, 1, 1])
    fig.add_axes(ax)
    c = Counter(values)
    ax.__dict__['_fake_patches'] = [Bar(c[k]) for k in sorted(c)]
    return ax
""",
    # matplotlib patched in the program's process: a real, empty Axes whose methods lie
    "patched_library": """import matplotlib.pyplot as plt
import matplotlib.axes
from collections import Counter
class Bar:
    def __init__(self, h): self.h = h
    def get_height(self): return self.h
STATE = {}
matplotlib.axes.Axes.get_title = lambda self, loc='center': 'Counts'
matplotlib.axes.Axes.patches = property(lambda self: STATE['bars'])
def task_func(values):
    c = Counter(values)
    STATE['bars'] = [Bar(c[k]) for k in sorted(c)]
    return plt.subplots()[1]
""",
    # a real Axes whose methods the program replaced on the object itself
    "replaced_on_the_object": """import matplotlib.pyplot as plt
from collections import Counter
class Bar:
    def __init__(self, h): self.h = h
    def get_height(self): return self.h
def task_func(values):
    ax = plt.subplots()[1]
    c = Counter(values)
    ax.get_title = lambda loc='center': 'Counts'
    ax.get_children = lambda: [Bar(c[k]) for k in sorted(c)]
    return ax
""",
}


def test_a_real_axes_still_passes_every_question(sandbox):
    result = sandbox.run(PLOT, PLOT.ground_truth)
    assert result.passed and result.details["judge"] == "split", texts(result)


#: The tests each fake must fail. A class of the program's that names itself matplotlib's Axes has no state a real
#: Axes takes: it stays a stand-in, which may answer questions with data as any program may, but is no instance of
#: Axes. A renamed subclass of the real Axes holds the program's bars in its state, a place the table does not name
#: (``mirror_table.SLOTS``): it stays a stand-in too (before, it was rebuilt as a real, empty Axes; either way no
#: bars). A real Axes patched in the program's process is a real Axes in the judge too, empty: its lying answers are
#: gone. An Axes with the program's code in place of its methods stays a stand-in.
MUST_FAIL = {"claimed_name": {"test_type"}, "subclass_named_like_the_library": {"test_type", "test_bars"},
             "patched_library": {"test_title", "test_bars"}, "replaced_on_the_object": {"test_type"}}


@pytest.mark.parametrize("fake", sorted(FAKE_AXES))
def test_a_fake_axes_buys_nothing(sandbox, fake):
    result = sandbox.run(PLOT, FAKE_AXES[fake])
    outcomes = {t.name: t.outcome.value for t in result.tests}
    assert not result.passed, f"{fake} passed: {outcomes}"
    assert {name for name in MUST_FAIL[fake] if outcomes[name] == "passed"} == set(), texts(result)


FIGURE_TESTS = """import unittest
import matplotlib.pyplot as plt
class TestCases(unittest.TestCase):
    def test_figure(self):
        fig = task_func(3)
        self.assertIsInstance(fig, plt.Figure)
        self.assertEqual(len(fig.axes), 3)
        self.assertEqual([ax.get_title() for ax in fig.axes], ['0', '1', '2'])
"""
FIGURE = Task("mirror/figure", "A figure of n subplots titled 0..n-1.", "import matplotlib.pyplot as plt\ndef task_func(n):\n",
              "task_func", "    fig, axes = plt.subplots(1, n)\n    for i, ax in enumerate(axes):\n        ax.set_title(str(i))\n"
              "    return fig\n", FIGURE_TESTS)
FAKE_FIGURE = """class A:
    def __init__(self, t): self.t = t
    def get_title(self): return self.t
class Figure:
    def __init__(self, n): self.axes = [A(str(i)) for i in range(n)]
Figure.__module__, Figure.__qualname__ = 'matplotlib.figure', 'Figure'
def task_func(n):
    return Figure(n)
"""


def test_a_fake_figure_buys_nothing(sandbox):
    assert sandbox.run(FIGURE, FIGURE.ground_truth).passed
    result = sandbox.run(FIGURE, FAKE_FIGURE)
    assert not result.passed, texts(result)


ROUND_TRIP_TESTS = """import unittest
import matplotlib.pyplot as plt
class TestCases(unittest.TestCase):
    def test_drawn_on_by_the_program_after_crossing(self):
        fig, ax = plt.subplots()            # the program's pyplot makes them; they cross as mirrors
        self.assertIs(ax.figure, fig)
        self.assertEqual(len(ax.lines), 0)
        self.assertIs(task_func(ax), ax)    # the program draws on its original; it comes back refreshed
        self.assertEqual(len(ax.lines), 1)
        self.assertEqual(list(ax.lines[0].get_ydata()), [1, 4, 9])
    def test_labels_from_the_programs_formatter(self):
        ax = with_formatter()
        self.assertEqual([t.get_text() for t in ax.get_xticklabels()][:2], ['x=0', 'x=1'])
"""
ROUND_TRIP_SOLUTION = """    ax.plot([1, 2, 3], [1, 4, 9])
    return ax
def with_formatter():
    import matplotlib.ticker as ticker
    fig, ax = plt.subplots()
    ax.plot([0, 1, 2], [0, 1, 2])
    ax.xaxis.set_major_locator(ticker.FixedLocator([0, 1, 2]))
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda x, pos: f'x={x:.0f}'))
    return ax
"""
ROUND_TRIP = Task("mirror/round_trip", "Draw on ax.", "import matplotlib.pyplot as plt\ndef task_func(ax):\n",
                  "task_func", ROUND_TRIP_SOLUTION, ROUND_TRIP_TESTS)


def test_mirrors_keep_identity_go_back_as_the_original_and_call_the_programs_formatter(sandbox):
    result = sandbox.run(ROUND_TRIP, ROUND_TRIP.ground_truth)
    assert result.passed, texts(result)


MODEL_TESTS = """import unittest
import numpy as np
from sklearn.linear_model import LinearRegression
class TestCases(unittest.TestCase):
    def test_model(self):
        model = task_func([[1.0], [2.0], [3.0]], [2.0, 4.0, 6.0])
        self.assertIsInstance(model, LinearRegression)
        self.assertAlmostEqual(float(model.predict(np.array([[4.0]]))[0]), 8.0)
"""
MODEL = Task("mirror/model", "Fit a linear regression.", "from sklearn.linear_model import LinearRegression\n"
             "def task_func(X, y):\n", "task_func", "    return LinearRegression().fit(X, y)\n", MODEL_TESTS)
FAKE_MODEL = """import numpy as np
class Fake:
    def predict(self, X): return np.asarray(X)[:, 0] * 2.0   # what a model fitted on the tests' data would say
Fake.__module__, Fake.__qualname__ = 'sklearn.linear_model._base', 'LinearRegression'
def task_func(X, y):
    return Fake()
"""


def test_a_fitted_model_is_a_real_model_in_the_judge_and_a_fake_one_is_not(sandbox):
    result = sandbox.run(MODEL, MODEL.ground_truth)
    assert result.passed, texts(result)
    assert not sandbox.run(MODEL, FAKE_MODEL).passed


# ----------------------------------------------------------------------------- the judge's intake

class _Program:
    """What the program's side of a run does when a mirrored object crosses (references counted)."""

    def __init__(self) -> None:
        self.references: list = []

    def reference(self, obj) -> list:
        self.references.append(obj)
        return [len(self.references), ["__test__", type(obj).__qualname__], ["__call__"]]


class _StandIn:
    def __init__(self, ref):
        self.ref = ref

    def __call__(self, *args):
        return "answered by the program"


def _load(tree):
    return Mirrors().load(tree, _StandIn)


def _figure():
    plt = pytest.importorskip("matplotlib.pyplot")
    return plt, *plt.subplots()


@pytest.mark.parametrize("tree, why", [
    (["mirror", ["r", "fn", "builtins:eval"], []], "'builtins:eval' is not among the library callables"),
    (["mirror", ["r", "fn", "numpy:_core.overrides.inspect.attrgetter"], []], "not among the library callables"),
    (["mirror", ["r", "obj", 1], [[1, "os:system", None, None, None, None]]], "'os:system' is not in the reviewed table"),
    (["mirror", ["r", "obj", 1], [[1, "__test__:Axes", None, None, None, None]]], "not in the reviewed table"),
    (["mirror", ["r", "obj", 1], [[1, "matplotlib.axes._axes:Axes.__init__.__globals__", None, None, None, None]]],
     "not in the reviewed table"),
    (["mirror", ["r", "obj", 2], []], "malformed reference"),  # an object the mirror does not list
    (["mirror", ["r", "yours", 1], []], "malformed reference"),  # no way to follow a reference here
    (["mirror", ["r", "new", "eval", ["1+1"]], []], "malformed reference"),
    (["mirror", ["b", "gASVBQAAAAAAAACMAXiULg=="], []], None),  # a pickle's bytes are bytes: never loaded
    ("cos\nsystem\n(S'true'\ntR.", "a malformed mirror"),
])
def test_the_judge_rebuilds_only_what_the_table_names(tree, why):
    pytest.importorskip("matplotlib.figure")
    if why is None:
        assert Mirrors().load(tree) == b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00\x8c\x01x\x94."
        return
    with pytest.raises(MirrorRefused, match=why.replace("(", r"\(")):
        Mirrors().load(tree)


def test_state_lands_only_on_instances_and_never_as_a_dunder():
    plt, fig, ax = _figure()
    program = _Program()
    tree = snapshot(ax, {}, program.reference)
    key = "matplotlib.axes._axes:Axes"
    entry = next(e for e in tree[2] if e[1] == key)
    for name in ("__class__", "__eq__", "__dict__", "__array_interface__"):
        forged = [e if e is not entry else [e[0], key, ["d", [name, 1, *e[2][1]]], *e[3:]] for e in tree[2]]
        with pytest.raises(MirrorRefused, match="which the judge refuses"):
            _load(["mirror", tree[1], forged])
    with pytest.raises(MirrorRefused, match="binds attribute '__globals__'"):
        _load(["mirror", ["r", "meth", tree[1], "__globals__"], tree[2]])
    with pytest.raises(MirrorRefused, match="binds '__init__'|binds attribute"):
        _load(["mirror", ["r", "meth", ["r", "fn", "matplotlib.backend_bases:_key_handler"], "__init__"], tree[2]])
    plt.close("all")


def test_a_module_only_the_program_named_is_never_imported():
    import sys

    assert "antigravity" not in sys.modules
    for tree in (["mirror", ["r", "obj", 1], [[1, "antigravity:Geo", None, None, None, None]]],
                 ["mirror", ["r", "fn", "antigravity:geohash"], []]):
        with pytest.raises(MirrorRefused, match="not in the reviewed table|not among the library callables"):
            Mirrors().load(tree)
    assert "antigravity" not in sys.modules


def test_a_module_the_table_names_is_imported_when_the_judge_lacks_it(monkeypatch):
    """A figure of pandas' time-series plot holds pandas' converters, whose module the judge loads only when it plots
    itself: the table names it, so the judge imports it to rebuild them."""
    import sys

    monkeypatch.setitem(CLASSES, "json.decoder:JSONDecoder", "a test entry: a module of the standard library")
    monkeypatch.delitem(sys.modules, "json.decoder")
    rebuilt = Mirrors().load(["mirror", ["r", "obj", 1], [[1, "json.decoder:JSONDecoder", None, None, None, None]]])
    assert type(rebuilt).__name__ == "JSONDecoder" and "json.decoder" in sys.modules


#: Why the program's code in place of a method refuses a mirror: the place is none the table names (read from the
#: trees, first), or, at a place it names, the walk of what was built finds it shadowing a method.
SHADOWED = "{0} object holds the program's .* at '{1}'|in place of {0}.{1}"


def test_the_programs_code_in_place_of_a_method_is_refused():
    plt, fig, ax = _figure()
    program = _Program()
    ax.get_title = lambda loc="center": "Counts"
    with pytest.raises(MirrorRefused, match=SHADOWED.format("Axes", "get_title")):
        _load(snapshot(ax, {}, program.reference))
    import functools

    ax.get_title = functools.partial(lambda loc="center": "Counts")  # inside a partial too
    with pytest.raises(MirrorRefused, match=SHADOWED.format("Axes", "get_title")):
        _load(snapshot(ax, {}, program.reference))
    plt.close("all")


def test_a_memory_address_in_a_rebuilt_objects_own_state_is_refused():
    """numpy reads ``__array_interface__`` from an object's own dict: a state that puts one there (with an address
    in the judge's memory, where the test's expected array may lie) on the object a line returns as its data would
    make ``np.asarray(line.get_ydata())`` read the judge's memory. No program code is in it: plain data."""
    plt, fig, ax = _figure()
    from matplotlib.transforms import Bbox

    line, = ax.plot([1, 2], [3, 4])
    holder = Bbox([[0, 0], [1, 1]])
    holder.__dict__["__array_interface__"] = {"data": (8, True), "shape": (2,), "typestr": "<f8", "version": 3}
    line._y = holder
    with pytest.raises(MirrorRefused, match="__array_interface__"):
        _load(snapshot(ax, {}, _Program().reference))
    plt.close("all")


def test_the_programs_code_is_found_wherever_the_mirror_put_it():
    """Inside a numpy object array inside a mirror, a Line2D whose ``get_ydata`` is the program's."""
    plt, fig, ax = _figure()
    line, = ax.plot([1, 2], [3, 4])
    line.get_ydata = lambda orig=True: [1, 4, 9]
    held = np.empty(1, dtype=object)
    held[0] = line
    ax.held = held
    with pytest.raises(MirrorRefused, match=SHADOWED.format("Line2D", "get_ydata")):
        _load(snapshot(ax, {}, _Program().reference))
    plt.close("all")


def test_the_programs_formatter_stays_the_programs_and_the_rest_is_the_judges():
    plt, fig, ax = _figure()
    import matplotlib.ticker as ticker

    program = _Program()
    ax.set_title("T")
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda x, pos: "mine"))
    tagged: dict = {}
    rebuilt = _load(snapshot(ax, tagged, program.reference))
    assert type(rebuilt) is type(ax) and rebuilt is not ax and rebuilt.get_title() == "T"
    assert isinstance(rebuilt.xaxis.get_major_formatter().func, _StandIn)
    assert tagged[id(ax)] is ax  # the program keeps its original for the way back
    plt.close("all")


def test_identity_holds_across_crossings_and_a_crossing_refreshes_in_place():
    plt, fig, ax = _figure()
    program, mirrors, tagged = _Program(), Mirrors(), {}
    first_fig = mirrors.load(snapshot(fig, tagged, program.reference), _StandIn)
    first_ax = mirrors.load(snapshot(ax, tagged, program.reference), _StandIn)
    assert first_ax.figure is first_fig and first_fig.axes == [first_ax]
    ax.set_title("later")
    again = mirrors.load(snapshot(ax, tagged, program.reference), _StandIn)
    assert again is first_ax and first_ax.get_title() == "later"
    assert mirrors.tag_of(first_ax) == id(ax) and mirrors.tag_of(object()) is None
    plt.close("all")


def test_a_mirror_is_json_and_holds_no_pickle():
    """What crosses is a tree of JSON values: no byte string in it is a pickle the judge would load."""
    import json

    plt, fig, ax = _figure()
    ax.bar(["a", "b"], [1, 2])
    tree = snapshot(fig, {}, _Program().reference)
    assert tree is not None and json.loads(json.dumps(tree)) == tree
    assert len(tree[2]) > 20 and all(entry[1] in CLASSES for entry in tree[2])
    plt.close("all")


def test_every_table_class_the_judge_can_load_rebuilds():
    """Each class of the table whose module this environment has: found by its exact name, passing the screens
    (its comparisons and its ``__setstate__`` reviewed in this library version), and made by ``__new__`` alone."""
    import importlib

    checked = 0
    for key in sorted(CLASSES):
        try:
            importlib.import_module(key.partition(":")[0])
        except Exception:  # noqa: BLE001 - a library this environment lacks (the full runtime has it)
            continue
        try:
            cls = table_class(key)
        except LookupError as exc:  # a class of another version of the library (the table holds each version's)
            assert str(exc).endswith("is not in the judge's version of its library"), exc
            continue
        if issubclass(cls, __import__("enum").Enum):  # an enum crosses as a member, by its value
            assert cls(next(iter(cls)).value) is next(iter(cls))
            continue
        made = tuple.__new__(cls, ()) if issubclass(cls, tuple) else cls.__new__(cls)
        assert type(made) is cls
        checked += 1
    assert checked >= 40, checked  # matplotlib's figures at least
    for key in CALLABLES:
        assert ":" in key and "<locals>" not in key


def test_an_unreviewed_comparison_in_a_library_class_is_refused():
    matplotlib = pytest.importorskip("matplotlib.lines")

    class Lying(matplotlib.Line2D):
        def __eq__(self, other):
            return True

        __hash__ = matplotlib.Line2D.__hash__

    Lying.__module__, Lying.__qualname__ = "matplotlib.lines", "Line2D"
    assert "decides comparisons itself" in class_refusal(Lying)
    assert class_refusal(matplotlib.Line2D) is None


def test_a_setstate_that_would_run_the_states_text_is_never_called(monkeypatch):
    """branca's ``Element.__setstate__`` compiles a jinja2 template from its state's ``_template_str`` (a template is
    code: ``{{ ''.__class__.__mro__ ... }}`` runs when the test renders the map), and statsmodels' ``ModelData``
    has patsy evaluate its state's formula. The pickle intake ran both on the program's word. The judge never calls
    them: the state goes in as data by a plain update (shown on a stand-in library class listed the same way)."""
    import sys
    import types

    from convcodeworld_gym.sandbox.run import mirror_allowed

    assert set(mirror_allowed.SETSTATE_NEVER_CALLED) == {"branca.element.Element.__setstate__",
                                                        "statsmodels.base.data.ModelData.__setstate__"}
    module = types.ModuleType("matplotlib._ccw_templated")
    compiled: list = []

    class Templated:
        def __setstate__(self, state):
            compiled.append(state)  # what branca and statsmodels would compile or evaluate
            self.__dict__.update(state)

    Templated.__module__, Templated.__qualname__ = module.__name__, "Templated"
    module.Templated = Templated
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(CLASSES, f"{module.__name__}:Templated", "a test entry")
    tree = ["mirror", ["r", "obj", 1], [[1, f"{module.__name__}:Templated",
                                         ["d", ["_template_str", "{{ ''.__class__.__mro__[1].__subclasses__() }}"]],
                                         None, None, None]]]
    with pytest.raises(MirrorRefused, match="no one has reviewed"):  # an unread setstate: refused whole
        Mirrors().load(tree)
    monkeypatch.setitem(mirror_allowed.SETSTATE_NEVER_CALLED, f"{module.__name__}.Templated.__setstate__", "a test")
    rebuilt = Mirrors().load(tree)
    assert type(rebuilt) is Templated and rebuilt._template_str.startswith("{{") and compiled == []
