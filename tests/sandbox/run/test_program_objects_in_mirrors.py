"""The program's objects inside a library object (a mirror) sit only where the reviewed table says they may.

A mirror is a real object of the judge's library, so ``isinstance`` checks pass and the judge's library answers the
test's questions. Where the mirror's state held an object of the program's (``["r", "mine", ...]``: any place,
before), that object became a stand-in *inside* the real library object, and the judge's library called it with the
test's values and trusted what came back as its own computation. The attacks below are programs that solve nothing
and return a real library object with the program's object at such a place; run through the confined sandbox on
the split judge, on a real task (BigCodeBench from ``$CONVCODEWORLD_BIGCODEBENCH_PATH``) or a small one of this file
where no BigCodeBench test asks the question.

Now the judge reads, before it makes anything, where the mirror's library objects hold objects by reference
(:func:`convcodeworld_gym.sandbox.run.mirror.references_held`) and refuses the whole mirror unless each place is
one the reviewed table names (``mirror_table.SLOTS``: where canonical solutions put such objects, each read for what
the library does with it); the value then crosses as a stand-in, whose class the judge never grants.

Measured on this machine (confinement ``full``, the BigCodeBench runtime: Django 4.2, gensim 4.3, matplotlib 3.7,
scikit-learn 1.3); old: daed214's judge (any place), new: the table's places only:

=========================================  ================  ======  ========
attack                                     task              old     new
=========================================  ================  ======  ========
django_headers_store_holds_every_header    BigCodeBench/183  pass    refused
django_headers_store_shows_what_is_asked   BigCodeBench/183  leaked  refused
gensim_vocabulary_holds_every_word         mirror/vocab      pass    refused
gensim_vocabulary_shows_what_is_asked      mirror/vocab      leaked  refused
=========================================  ================  ======  ========

* ``django_headers_store_holds_every_header``: a real ``HttpResponse`` with the right content and no ``UUID`` header,
  whose ``headers._store`` (the dict ``CaseInsensitiveMapping`` looks names up in) is the program's object:
  ``'UUID' in response`` is Django's ``has_header`` -> ``Mapping.__contains__`` -> ``self._store['uuid']``, which
  the program answers for any name;
* ``django_headers_store_shows_what_is_asked``: the same store, which raises the name it was asked for (the failure
  text shows what the test looked for);
* ``gensim_vocabulary_holds_every_word``: a real, empty ``KeyedVectors`` whose ``key_to_index`` is the program's:
  ``'python' in kv`` is gensim's ``get_index`` -> ``self.key_to_index.get('python', -1)``, answered ``0``;
* ``gensim_vocabulary_shows_what_is_asked``: the same, raising the word asked for.

Unit checks (no sandbox) show where references are found (any depth of a place: lists, partials, boxes a place refers
to) and that the places canonical solutions use (a ``FuncFormatter``'s function) still take the program's object.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import pytest

from convcodeworld_gym.sandbox import SandboxExecutor, SandboxSettings, TimePolicy
from convcodeworld_gym.sandbox.run.mirror import MirrorRefused, Mirrors, references_held, snapshot
from convcodeworld_gym.sandbox.run.mirror_table import CLASSES, SLOTS
from convcodeworld_gym.tasks import BIGCODEBENCH_ENV, Task

from hostile_programs import texts

SETTINGS = SandboxSettings(tmpfs_mb=64, tmpfs_inodes=2000, address_space_mb=2048, file_size_mb=32, max_processes=64)


@pytest.fixture(scope="module")
def sandbox():
    with SandboxExecutor(workers=2, settings=SETTINGS, preload=(),
                         time_policy=TimePolicy(floor_s=30.0, cap_s=60.0)) as ex:
        yield ex


VOCAB_TESTS = """import unittest
from gensim.models import KeyedVectors
class TestCases(unittest.TestCase):
    def test_vocabulary(self):
        kv = task_func(["Hello world", "Python is fun"])
        self.assertIsInstance(kv, KeyedVectors)
        self.assertIn('python', kv)
        self.assertIn('hello', kv)
"""
VOCAB = Task("mirror/vocab",
             "Return a KeyedVectors (4 dimensions, zero vectors) of the lower-cased words of the texts.",
             "import numpy as np\nfrom gensim.models import KeyedVectors\ndef task_func(texts):\n", "task_func",
             "    words = sorted({w.lower() for t in texts for w in t.split()})\n    kv = KeyedVectors(4)\n"
             "    kv.add_vectors(words, np.zeros((len(words), 4)))\n    return kv\n", VOCAB_TESTS)

#: A headers store of the program's: every name the test asks for is there (``ASKED``: it says which instead).
HEADERS_STORE = """from django.http import HttpResponse
class Store:
    def __init__(self, real): self.real = real
    def __getitem__(self, name):
        if ASKED and name not in self.real:
            raise RuntimeError('LEAKED: the test asked for ' + name)
        return self.real.get(name, (name, 'anything'))
    def __iter__(self): return iter(self.real)
    def __len__(self): return len(self.real)
    def values(self): return self.real.values()
    def items(self): return self.real.items()
    def get(self, name, default=None): return self[name]
def task_func(data):
    response = HttpResponse(data, content_type='application/json')   # no UUID header
    response.headers._store = Store(response.headers._store)
    return response
"""
#: A vocabulary of the program's: it holds every word the test asks for (``ASKED``: it says which instead).
VOCABULARY = """from gensim.models import KeyedVectors
class Every:
    def get(self, word, default=None):
        if ASKED and isinstance(word, str):
            raise RuntimeError('LEAKED: the test asked for ' + word)
        return 0
    def __len__(self): return 0
    def __iter__(self): return iter(())
def task_func(texts):
    kv = KeyedVectors(4)                                               # no word of the texts
    kv.key_to_index = Every()
    return kv
"""


@dataclass(frozen=True)
class Attack:
    """A program that solves nothing; ``leak``: the text its failure shows when the test's value reached it."""

    task_id: str
    program: str
    leak: str | None = None


ATTACKS = {
    "django_headers_store_holds_every_header": Attack("BigCodeBench/183", "ASKED = False\n" + HEADERS_STORE),
    "django_headers_store_shows_what_is_asked": Attack("BigCodeBench/183", "ASKED = True\n" + HEADERS_STORE,
                                                       leak="LEAKED"),
    "gensim_vocabulary_holds_every_word": Attack("mirror/vocab", "ASKED = False\n" + VOCABULARY),
    "gensim_vocabulary_shows_what_is_asked": Attack("mirror/vocab", "ASKED = True\n" + VOCABULARY, leak="LEAKED"),
}
_canonical: dict[str, bool] = {}


def _task(request: pytest.FixtureRequest, task_id: str) -> Task:
    if task_id == VOCAB.task_id:
        return VOCAB
    if not os.environ.get(BIGCODEBENCH_ENV):
        pytest.skip(f"set ${BIGCODEBENCH_ENV} to a local BigCodeBench.jsonl.gz to run BigCodeBench attacks")
    return request.getfixturevalue("bigcodebench")[task_id]


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_a_program_object_inside_a_library_object_decides_nothing(sandbox, request, name):
    attack = ATTACKS[name]
    task = _task(request, attack.task_id)
    if task.task_id not in _canonical:  # the judge works for this task here: a failure below is the attack's
        _canonical[task.task_id] = sandbox.run(task, task.ground_truth).passed
    if not _canonical[task.task_id]:
        pytest.skip(f"{task.task_id}'s canonical solution does not pass here (its library is missing?)")
    result = sandbox.run(task, attack.program)
    outcomes = {t.name: t.outcome.value for t in result.tests}
    assert result.details.get("judge") == "split", result.details.get("judge")
    assert not result.passed, f"{name} forged a pass on {task.task_id}: {outcomes}"
    if attack.leak is not None:
        text = texts(result)
        assert attack.leak not in text, f"{name}: the test's value reached the program: {text[-1500:]}"


# ----------------------------------------------------------------------------- the judge's intake, no sandbox

class _Program:
    """What the program's side does for its own objects inside a mirror: a reference, its class claimed."""

    def reference(self, obj) -> list:
        return [1, [type(obj).__module__, type(obj).__qualname__], ["__call__"]]


class _StandIn:
    def __init__(self, ref):
        self.ref = ref

    def __call__(self, *args):
        return "answered by the program"


class Mine:
    """An object of the program's (no library class)."""

    def __str__(self) -> str:
        return "Counts"

    def __call__(self, *args: object) -> str:
        return "Counts"


def _figure():
    plt = pytest.importorskip("matplotlib.pyplot")
    return plt, *plt.subplots()


def test_a_program_object_where_the_table_names_no_place_refuses_the_whole_mirror():
    plt, fig, ax = _figure()
    ax.set_title("T")
    ax.title._text = Mine()  # the title's text, read by get_title(): the program's answer in a real Axes
    with pytest.raises(MirrorRefused, match=r"Text object holds the program's .*Mine object at '_text'"):
        Mirrors().load(snapshot(ax, {}, _Program().reference), _StandIn)
    plt.close("all")


def test_a_program_object_found_at_any_depth_of_a_place():
    """Inside a list inside a partial inside a dict of the place; inside a box (a plain container methods are bound
    to) that the place refers to; as a key."""
    plt, fig, ax = _figure()
    line, = ax.plot([1, 2], [3, 4])
    for hidden in ({"a": [functools.partial(Mine(), 1)]}, {Mine(): 1}):
        line._ccw_hidden = hidden
        held = references_held(*snapshot(ax, {}, _Program().reference)[2:4])
        assert held == {("matplotlib.lines:Line2D", "_ccw_hidden"): {f"{__name__}:Mine"}}, held
    del line._ccw_hidden
    ax._children.append(Mine())  # the box every artist's _remove_method (list.remove) is bound to
    held = references_held(*snapshot(ax, {}, _Program().reference)[2:4])
    assert ("matplotlib.lines:Line2D", "_remove_method") in held and ("matplotlib.axes._axes:Axes", "_children") in held
    with pytest.raises(MirrorRefused, match="holds the program's"):
        Mirrors().load(snapshot(ax, {}, _Program().reference), _StandIn)
    plt.close("all")


def test_a_hand_made_mirror_is_read_the_same_way():
    """The judge reads the trees as sent: a place, at any depth, a reference of the judge's own objects too."""
    key = "matplotlib.transforms:Bbox"
    for state in (["d", ["_points", ["r", "mine", 7, ["x", "Y"], []]]],
                  ["d", ["_points", ["l", [["t", [["r", "yours", 3]]]]]]],
                  ["t", [None, ["d", ["_points", ["r", "new", "partial", [["r", "mine", 7, ["x", "Y"], ["__call__"]],
                                                                         ["t", []], ["d", []]]]]]]]):
        with pytest.raises(MirrorRefused, match="Bbox object holds the program's"):
            Mirrors().load(["mirror", ["r", "obj", 1], [[1, key, state, None, None, None]]], _StandIn)
    # at the mirror's root, outside every library object, it is the program's value itself
    root = ["t", [["r", "obj", 1], ["r", "mine", 7, ["x", "Y"], ["__call__"]]]]
    pytest.importorskip("matplotlib.transforms")
    bbox, mine = Mirrors().load(["mirror", root, [[1, key, None, None, None, None]]], _StandIn)
    assert type(bbox).__name__ == "Bbox" and isinstance(mine, _StandIn)


def test_the_places_canonical_solutions_use_still_take_the_programs_object():
    plt, fig, ax = _figure()
    import matplotlib.ticker as ticker

    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda x, pos: "mine"))
    rebuilt = Mirrors().load(snapshot(ax, {}, _Program().reference), _StandIn)
    assert isinstance(rebuilt.xaxis.get_major_formatter().func, _StandIn)
    assert ("matplotlib.ticker:FuncFormatter", "func") in SLOTS
    plt.close("all")


def test_every_place_of_the_table_is_of_a_table_class_and_says_what_it_is():
    for (key, place), why in SLOTS.items():
        assert key in CLASSES, key
        assert place and why and not why.startswith("UNREAD"), (key, place)
