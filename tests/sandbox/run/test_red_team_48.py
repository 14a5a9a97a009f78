"""Issue 48, red team: a held-out corpus of attacks on the split judge's readers and on hidden tests, written apart
from the fix (``sandbox/run/readers.py``, ``Task.public_tests``, the offline expert's ``hidden_tests``).

Each attack runs through the real sandbox (``SandboxExecutor``) or the env (``ConvCodeWorldEnv``). An attack that
still succeeds is marked ``xfail(strict=True)`` with why it works, so that the fix turns it into a failure of the
mark; an attack that failed is a plain regression test.

Both classes below succeeded when this corpus was written and were fixed after it (the xfail marks are gone):

1. *Who decides what a test's own bytes decode to.* The judge reads itself only the pickles its patched
   ``pickle.dumps``/``dump`` produced (by digest); every other byte string a reader is given goes to the program's
   process, whose answer the program controls (it can replace :func:`.readers.read_data` there). So where a test
   serialises a value itself with another writer (``pickle.Pickler(f).dump``, ``_pickle.dumps``, a shelf it fills,
   ``joblib.dump``, ``marshal.dumps``, ``yaml.dump`` read back with an unsafe loader, ``cloudpickle.dumps``) and reads
   it back, the program decides the test's value. No HumanEval or BigCodeBench test does this today (the survey
   found none), but the readers' contract ("bytes the judge itself pickled are the judge's") does not hold.
2. *The offline expert's probes.* ``OfflineSimulator("expert")`` made without an executor probes with a private
   :class:`LocalExecutor` (in-process judging, no confinement), even when the env it is given to runs every test in
   the split sandbox. There the program shares a module with the whole test class and raises, in the public test the
   expert probes, the hidden tests' constants spelled backwards: the expert repeats them, and the hidden-test guard
   (literals verbatim only) lets them through.
"""

from __future__ import annotations

import pytest

from convcodeworld_gym import ConvCodeWorldEnv
from convcodeworld_gym.feedback.verbal import OfflineSimulator
from convcodeworld_gym.sandbox import SandboxExecutor, TimePolicy
from convcodeworld_gym.tasks import Task


@pytest.fixture(scope="module")
def sandbox():
    with SandboxExecutor(workers=2, time_policy=TimePolicy(floor_s=20.0, cap_s=30.0)) as ex:
        yield ex


def _needs(sandbox: SandboxExecutor, modules: tuple[str, ...]) -> None:
    probe = sandbox.runtime_probe()
    lacking = probe.lacking_modules(list(modules)) if probe is not None and modules else []
    if lacking:
        pytest.skip(f"the runtime {probe.python} lacks {lacking}")


def _outcomes(result) -> list[tuple[str, str, str]]:
    return [(t.name, t.outcome.value, t.traceback[-600:]) for t in result.tests]


# ----------------------------------------------------------------------------- 1. a test's own bytes

#: The program returns 'FORGED' and tries to make the judge's reads answer it too: it replaces, in its own process,
#: any reader of the judge's it can find (the judge once sent such reads to the program's process).
ANSWERS_EVERY_READ = """
import sys
def _answer(*args, **kwargs):
    return ['FORGED', 0]
for _name in ('read_data', 'DataUnpickler'):
    _readers = sys.modules.get('convcodeworld_gym.sandbox.run.readers')
    if _readers is not None and hasattr(_readers, _name):
        try:
            setattr(_readers, _name, _answer)
        except Exception:
            pass
def task_func():
    return 'FORGED'
"""

#: name -> (modules the runtime needs, the test's own round trip of 'truth' into `expected`)
OWN_BYTES = {
    "pickle.Pickler.dump": ((), "buf = io.BytesIO(); pickle.Pickler(buf).dump('truth'); buf.seek(0)\n"
                                "        expected = pickle.load(buf)"),
    "_pickle.dumps": ((), "expected = pickle.loads(_pickle.dumps('truth'))"),
    "shelve": ((), "with shelve.open('exp') as db:\n            db['k'] = 'truth'\n"
                   "        with shelve.open('exp') as db:\n            expected = db['k']"),
    "joblib.dump": (("joblib",), "joblib.dump('truth', 'exp.pkl')\n        expected = joblib.load('exp.pkl')"),
    "marshal.dumps": ((), "expected = marshal.loads(marshal.dumps('truth'))"),
    "yaml.dump+Loader": (("yaml",), "with open('exp.yaml', 'w') as f:\n            yaml.dump('truth', f)\n"
                                    "        with open('exp.yaml') as f:\n            expected = yaml.load(f, Loader=yaml.Loader)"),
    "cloudpickle.dumps": (("cloudpickle",), "expected = pickle.loads(cloudpickle.dumps('truth'))"),
    # held: the writers the judge patched (their bytes are its own, read in the judge)
    "pickle.dumps": ((), "expected = pickle.loads(pickle.dumps('truth'))"),
    "pickle._dumps": ((), "expected = pickle.loads(pickle._dumps('truth'))"),
    "numpy.save": (("numpy",), "np.save('exp.npy', np.array(['truth', None], dtype=object), allow_pickle=True)\n"
                               "        expected = np.load('exp.npy', allow_pickle=True)[0]"),
    "pandas.to_pickle": (("pandas",), "pd.to_pickle('truth', 'exp.pkl')\n        expected = pd.read_pickle('exp.pkl')"),
}
_IMPORTS = {"joblib": "import joblib", "yaml": "import yaml", "cloudpickle": "import cloudpickle",
            "numpy": "import numpy as np", "pandas": "import pandas as pd"}
#: These once succeeded (the judge sent bytes it had not written with its patched pickle.dumps/dump to the program's
#: process, whose reader the program replaced); now every one is read in the judge, by its data-only readers.
_DECIDED_BY_THE_PROGRAM_ONCE = {"pickle.Pickler.dump", "_pickle.dumps", "shelve", "joblib.dump", "marshal.dumps",
                                "yaml.dump+Loader", "cloudpickle.dumps"}


def _own_bytes_task(name: str) -> Task:
    modules, round_trip = OWN_BYTES[name]
    imports = "\n".join(["import unittest, io, pickle, _pickle, shelve, marshal"] + [_IMPORTS[m] for m in modules])
    tests = f"""{imports}
class TestCases(unittest.TestCase):
    def test_own_value(self):
        {round_trip}
        self.assertEqual(task_func(), expected)
"""
    return Task(f"red48/own/{name}", "Return 'truth'.", "def task_func():\n", "task_func", "    return 'truth'\n", tests)


@pytest.mark.parametrize("name", sorted(OWN_BYTES))
def test_the_program_never_decides_what_a_tests_own_bytes_decode_to(sandbox, name):
    _needs(sandbox, OWN_BYTES[name][0])
    task = _own_bytes_task(name)
    honest = sandbox.run(task, "def task_func():\n    return 'truth'\n")
    assert honest.passed, _outcomes(honest)
    forged = sandbox.run(task, ANSWERS_EVERY_READ)
    assert forged.details.get("judge") == "split"
    assert not forged.passed, f"the program decided what the test's own {name} bytes hold"
    assert "'FORGED' != 'truth'" in forged.tests[0].traceback, _outcomes(forged)  # the test compared the judge's value


# ----------------------------------------------------------------------------- held: other reader attacks

PATCH_UNITTEST = "import unittest; unittest.TestCase.assertEqual = lambda *a, **k: None"


def test_a_stream_that_begins_with_the_judges_own_pickle_runs_nothing_after_it(sandbox):
    """The program copies the test's own pickle (whose digest the judge knows) and appends a ``__reduce__`` that
    patches ``unittest``: the judge reads the prefix alone as its own, and refuses the rest."""
    tests = """import unittest, pickle
class TestCases(unittest.TestCase):
    def test_doubles(self):
        with open('in.pkl', 'wb') as f:
            pickle.dump({'n': 3}, f)
        task_func('in.pkl', 'out.pkl')
        with open('out.pkl', 'rb') as f:
            data = f.read()
        first = len(pickle.dumps({'n': 3}))
        try:
            rest = pickle.loads(data[first:]) if len(data) > first else None
        except Exception:
            rest = None  # the judge refuses the program's __reduce__ (it unpickles no builtins.exec)
        self.assertEqual(pickle.loads(data), {'n': 6})
"""
    program = f"""import pickle
class Evil:
    def __reduce__(self):
        return (exec, ({PATCH_UNITTEST!r},))
def task_func(src, dst):
    with open(src, 'rb') as f:
        own = f.read()
    with open(dst, 'wb') as f:
        f.write(own + pickle.dumps(Evil()))
"""
    task = Task("red48/prefix", "Double n.", "def task_func(src, dst):\n", "task_func", "", tests)
    result = sandbox.run(task, program)
    assert not result.passed and "{'n': 3} != {'n': 6}" in result.tests[0].traceback, _outcomes(result)


@pytest.mark.parametrize("read", [
    "yaml.Loader(f.read()).get_single_data()",  # a loader built by the test itself runs in the judge
    "yaml.load(f, Loader=yaml.UnsafeLoader)",
], ids=["Loader-instance", "UnsafeLoader"])
def test_a_yaml_tag_that_calls_exec_patches_nothing_in_the_judge(sandbox, read):
    _needs(sandbox, ("yaml",))
    tests = f"""import unittest, yaml
class TestCases(unittest.TestCase):
    def test_reads(self):
        task_func('out.yaml')
        with open('out.yaml') as f:
            got = {read}
        self.assertEqual(got, {{'n': 6}})
"""
    program = f"""def task_func(path):
    with open(path, 'w') as f:
        f.write({"!!python/object/new:exec [" + repr(PATCH_UNITTEST) + "]"!r})
"""
    result = sandbox.run(Task("red48/yaml", "Write.", "def task_func(path):\n", "task_func", "", tests), program)
    assert not result.passed, _outcomes(result)


def test_a_tests_restricted_unpickler_subclass_gets_no_object_that_decides(sandbox):
    """A test's ``pickle.Unpickler`` subclass (its own ``find_class``) is the judge's reader too: ``mock.ANY`` is
    refused by the judge's table. (The test's ``find_class`` is not applied: the judge's table is narrower.)"""
    tests = """import unittest, pickle
class Safe(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError('refused ' + name)
class TestCases(unittest.TestCase):
    def test_reads(self):
        task_func('out.pkl')
        with open('out.pkl', 'rb') as f:
            got = Safe(f).load()
        self.assertEqual(got, {'n': 6})
"""
    program = """import pickle
from unittest import mock
def task_func(path):
    with open(path, 'wb') as f:
        pickle.dump(mock.ANY, f)
"""
    result = sandbox.run(Task("red48/subclass", "Write.", "def task_func(path):\n", "task_func", "", tests), program)
    assert not result.passed, _outcomes(result)


# ----------------------------------------------------------------------------- 2. the offline expert's probes

#: HumanEval/0, wrong on its first public test only (threshold 0.3). There it raises what its module holds of the tests
#: it was not shown (test_4 ... test_7: their constants, each written backwards), or 'r' where it holds no test class.
SPELLS_HIDDEN_CONSTANTS = """
import sys
def has_close_elements(numbers, threshold):
    if threshold == 0.3:
        scope = vars(sys.modules[__name__])
        cases = scope.get('_CCW_ORIGINAL_CASES') or scope.get('TestCases')
        found = [repr(c)[::-1] for name in ('test_4', 'test_5') if cases is not None and hasattr(cases, name)
                 for c in getattr(cases, name).__code__.co_consts if isinstance(c, (tuple, float)) and c != 1.0]
        raise ValueError('r' + '|'.join(found))
    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1:])
"""
#: test_4's input list and threshold, test_5's threshold (HumanEval/0's hidden tests under partial EF)
HIDDEN = ("(1.0, 2.0, 5.9, 4.0, 5.0)", "0.8", "(1.0, 2.0, 3.0, 4.0, 5.0, 2.0)")


def _expert_words(task: Task, sandbox: SandboxExecutor, verbal_feedback) -> str:
    with ConvCodeWorldEnv("CF-EF_partial-SEF", dataset=[task], executor=sandbox, verbal_feedback=verbal_feedback) as env:
        env.reset()
        obs, reward, *_ = env.step(SPELLS_HIDDEN_CONSTANTS)
    assert reward == 0.0 and "TEST_1" in obs["execution_feedback"], obs["execution_feedback"]
    return obs["verbal_feedback"]


def _told(words: str) -> list[str]:
    """The hidden constants the words hold, read backwards (the guard looks for them forwards only)."""
    return [secret for secret in HIDDEN if secret in words[::-1]]


def test_an_offline_expert_given_to_the_env_never_tells_a_hidden_test(humaneval, sandbox):
    """Once: OfflineSimulator('expert') made without an executor probed in a private LocalExecutor (in-process,
    unconfined) even inside an env whose tests ran split, where the program read the whole test class from its own
    module and raised its hidden constants reversed; the expert repeated them. Now it probes on the env's executor,
    and a probe judged in-process informs nothing."""
    words = _expert_words(humaneval["HumanEval/0"], sandbox, OfflineSimulator("expert"))
    assert not _told(words), words


def test_the_envs_own_offline_expert_probes_where_the_tests_run_and_tells_no_hidden_test(humaneval, sandbox):
    """The same program and env, with the simulator the env makes itself (its probes run on the env's sandbox)."""
    task = humaneval["HumanEval/0"]
    with ConvCodeWorldEnv("CF-EF_partial-SEF", dataset=[task], executor=sandbox,
                          simulator_kwargs={"backend": "offline"}) as env:
        env.reset()
        obs, reward, *_ = env.step(SPELLS_HIDDEN_CONSTANTS)
    words = obs["verbal_feedback"]
    assert reward == 0.0 and words, obs
    assert "ValueError (r)" in words, words  # the probe ran, split: the program's module holds no test
    assert not _told(words), words
