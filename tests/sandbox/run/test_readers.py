"""Issue 48, item 1: a file or bytes the program wrote are data to the judge, whatever reader a test applies.

Each reader a test can apply to a path or bytes the program's side wrote, and that can run code or build any object,
gets a task here whose tests read the program's file with it and compare what they read; for each, an honest program
(writes the data: passes) and forgeries that do not write it (a ``__reduce__`` that patches ``unittest`` in whatever
process unpickles it, ``unittest.mock.ANY``, a hand-made stream of ``setattr``/``getattr`` only, a YAML tag that calls
``exec``, a marshalled code object): none may pass. Every forgery here scored 1.0 before the judge's readers were
made data-only (``sandbox/run/readers.py``: read in the judge by a data-only unpickler); BigCodeBench/832 is the real task of the kind.
"""

from __future__ import annotations

import os
import pickle

import pytest

from convcodeworld_gym.sandbox import SandboxExecutor, TimePolicy
from convcodeworld_gym.tasks import BIGCODEBENCH_ENV, Task

DATA = "{'key': [1, 2, 3], 'name': 'value'}"

#: reader -> (the test's imports, the test's read of path 'out.bin' into `got`, the honest writer of `data`)
READERS = {
    "pickle.load": ("import pickle", "with open('out.bin', 'rb') as f:\n            got = pickle.load(f)",
                    "import pickle\n    with open(path, 'wb') as f:\n        pickle.dump(data, f)"),
    "pickle.loads": ("import pickle", "with open('out.bin', 'rb') as f:\n            got = pickle.loads(f.read())",
                     "import pickle\n    with open(path, 'wb') as f:\n        pickle.dump(data, f)"),
    "pickle.Unpickler": ("import pickle", "with open('out.bin', 'rb') as f:\n            got = pickle.Unpickler(f).load()",
                         "import pickle\n    with open(path, 'wb') as f:\n        pickle.dump(data, f)"),
    "pickle._Unpickler": ("import pickle", "with open('out.bin', 'rb') as f:\n            got = pickle._Unpickler(f).load()",
                          "import pickle\n    with open(path, 'wb') as f:\n        pickle.dump(data, f)"),
    "_pickle.loads": ("import _pickle", "with open('out.bin', 'rb') as f:\n            got = _pickle.loads(f.read())",
                      "import pickle\n    with open(path, 'wb') as f:\n        pickle.dump(data, f)"),
    "pandas.read_pickle": ("import pandas as pd", "got = pd.read_pickle('out.bin')",
                           "import pickle\n    with open(path, 'wb') as f:\n        pickle.dump(data, f)"),
    "numpy.load": ("import numpy as np", "got = np.load('out.bin', allow_pickle=True).item()",
                   "import numpy as np\n    with open(path, 'wb') as f:\n        np.save(f, np.array(data, dtype=object), allow_pickle=True)"),
    "joblib.load": ("import joblib", "got = joblib.load('out.bin')",
                    "import joblib\n    joblib.dump(data, path)"),
    "shelve": ("import shelve, os", "with shelve.open('out') as db:\n            got = db['k']",
               "import shelve\n    with shelve.open(path[:-4]) as db:\n        db['k'] = data"),
    "dill.load": ("import dill", "with open('out.bin', 'rb') as f:\n            got = dill.load(f)",
                  "import dill\n    with open(path, 'wb') as f:\n        dill.dump(data, f)"),
    "yaml.load": ("import yaml", "with open('out.bin') as f:\n            got = yaml.load(f, Loader=yaml.Loader)",
                  "import yaml\n    with open(path, 'w') as f:\n        yaml.dump(data, f)"),
    "yaml.unsafe_load": ("import yaml", "with open('out.bin') as f:\n            got = yaml.unsafe_load(f)",
                         "import yaml\n    with open(path, 'w') as f:\n        yaml.dump(data, f)"),
    "marshal.loads": ("import marshal", "with open('out.bin', 'rb') as f:\n            got = marshal.loads(f.read())",
                      "import marshal\n    with open(path, 'wb') as f:\n        f.write(marshal.dumps(data))"),
}
_NEEDS = {"pandas.read_pickle": "pandas", "numpy.load": "numpy", "joblib.load": "joblib", "dill.load": "dill",
          "yaml.load": "yaml", "yaml.unsafe_load": "yaml"}

PATCH_UNITTEST = "import unittest; unittest.TestCase.assertEqual = lambda *a, **k: None"

#: Forgeries: a program that writes, instead of the data, bytes that make the reader forge the test.
FORGERIES = {
    "reduce_exec": f"""import pickle
class Evil:
    def __reduce__(self):
        return (exec, ({PATCH_UNITTEST!r},))
def task_func(path, data):
    with open(path, 'wb') as f:
        pickle.dump(Evil(), f)
""",
    "mock_any": """import pickle
from unittest import mock
def task_func(path, data):
    with open(path, 'wb') as f:
        pickle.dump(mock.ANY, f)
""",
    # no exec, eval, os or import in the stream: getattr and setattr by name only
    "setattr_stream": """import pickle
def task_func(path, data):
    stream = (b"\\x80\\x04cbuiltins\\nsetattr\\n(cunittest\\nTestCase\\nVassertEqual\\ncbuiltins\\ngetattr\\n"
              b"(cunittest\\nTestCase\\nVassertIsNotNone\\ntRtR0K\\x01.")  # then pops None, returns 1
    with open(path, 'wb') as f:
        f.write(stream)
""",
    "yaml_exec_tag": f"""def task_func(path, data):
    with open(path, 'w') as f:
        f.write({"!!python/object/apply:exec [" + repr(PATCH_UNITTEST) + "]"!r})
""",
    "marshal_code": f"""import marshal
def task_func(path, data):
    with open(path, 'wb') as f:
        f.write(marshal.dumps(compile({PATCH_UNITTEST!r}, 'x', 'exec')))
""",
}


def reader_task(reader: str) -> Task:
    imports, read, _ = READERS[reader]
    tests = f"""import unittest
{imports}
class TestCases(unittest.TestCase):
    def test_reads_what_was_written(self):
        task_func('out.bin', {DATA})
        {read}
        self.assertEqual(got, {DATA})
        if isinstance(got, dict):  # what a forgery could patch is the judge's own
            self.assertNotEqual(got, {{'other': 1}})
"""
    return Task(f"reader/{reader}", "Write data to path.", "def task_func(path, data):\n", "task_func", "", tests)


def honest(reader: str) -> str:
    return f"def task_func(path, data):\n    {READERS[reader][2]}\n"


@pytest.fixture(scope="module")
def sandbox():
    # The default worker groups: a task's libraries are imported (and bind their readers) before its run forks
    with SandboxExecutor(workers=2, time_policy=TimePolicy(floor_s=20.0, cap_s=30.0)) as ex:
        yield ex


def _needs(reader: str, sandbox: SandboxExecutor) -> None:
    """Skip where the sandbox's runtime lacks the reader's library (the pinned BigCodeBench runtime has no dill)."""
    probe = sandbox.runtime_probe()
    if reader in _NEEDS and probe is not None and probe.lacking_modules([_NEEDS[reader]]):
        pytest.skip(f"{reader} needs {_NEEDS[reader]}, which the runtime {probe.python} lacks")


@pytest.mark.parametrize("reader", sorted(READERS))
def test_an_honest_program_passes_through_every_reader(sandbox, reader):
    _needs(reader, sandbox)
    result = sandbox.run(reader_task(reader), honest(reader))
    assert result.details.get("judge") == "split"
    assert result.passed, [(t.name, t.outcome.value, t.traceback[-800:]) for t in result.tests]


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
@pytest.mark.parametrize("reader", sorted(READERS))
def test_no_forged_file_passes_any_reader(sandbox, reader, forgery):
    _needs(reader, sandbox)
    result = sandbox.run(reader_task(reader), FORGERIES[forgery])
    assert result.details.get("judge") == "split"
    assert not result.passed, f"{forgery} forged a pass through {reader}"


def test_the_judge_unpickles_its_own_bytes_itself(sandbox):
    """A test's own pickles (a deep copy through pickle, a fixture it wrote) are the judge's: read as they are."""
    tests = """import unittest, pickle, collections, datetime
class TestCases(unittest.TestCase):
    def test_round_trip(self):
        value = {'c': collections.Counter('abca'), 'd': datetime.date(2024, 1, 2)}
        self.assertEqual(pickle.loads(pickle.dumps(value)), value)
        with open('mine.pkl', 'wb') as f:
            pickle.dump(value, f)
            pickle.dump([1, 2], f)
        with open('mine.pkl', 'rb') as f:
            self.assertEqual(pickle.load(f), value)
            self.assertEqual(pickle.load(f), [1, 2])
        self.assertEqual(task_func(), 1)
"""
    task = Task("reader/own", "Return 1.", "def task_func():\n", "task_func", "    return 1\n", tests)
    result = sandbox.run(task, task.ground_truth)
    assert result.passed, [(t.name, t.traceback[-800:]) for t in result.tests]


def test_a_class_in_a_programs_pickle_is_refused_and_a_value_type_is_data(sandbox):
    """What a program's pickle holds is read in the judge by its table: a Counter is data (equal to the test's), a
    class of the program's own is refused (the test that reads it errs), never an object whose equality it decides."""
    tests = """import unittest, pickle, collections
class TestCases(unittest.TestCase):
    def test_counter(self):
        task_func('c.pkl', 'counter')
        with open('c.pkl', 'rb') as f:
            self.assertEqual(pickle.load(f), collections.Counter('abca'))
    def test_own_class(self):
        task_func('o.pkl', 'own')
        with open('o.pkl', 'rb') as f:
            got = pickle.load(f)
        self.assertEqual(got, got)
        self.assertNotEqual(got, 'anything')
"""
    program = """import pickle, collections
class Liar:
    def __eq__(self, other):
        return True
def task_func(path, kind):
    with open(path, 'wb') as f:
        pickle.dump(collections.Counter('abca') if kind == 'counter' else Liar(), f)
"""
    task = Task("reader/classes", "Write.", "def task_func(path, kind):\n", "task_func", "", tests)
    outcomes = {t.name: t.outcome.value for t in sandbox.run(task, program).tests}
    assert outcomes == {"test_counter": "passed", "test_own_class": "error"}, outcomes


def test_every_binding_of_a_code_capable_reader_in_a_loaded_judge_is_the_judges(sandbox):
    """A library that bound the standard library's unpickler under a name of its own (``from pickle import loads``)
    would read program bytes with it: a loaded judge holds none but reviewed ones (the test scans the judge's
    modules and their classes; the audit hook still refuses any global such a binding would unpickle)."""
    tests = """import unittest, sys, types
for _name in ('numpy', 'pandas', 'joblib', 'yaml', 'dill', 'cloudpickle', 'multiprocessing.reduction'):
    try:  # each the runtime has is preloaded by the worker before the run forks
        __import__(_name)
    except ImportError:
        pass
import numpy, pandas, joblib, multiprocessing.reduction
class TestCases(unittest.TestCase):
    def test_scan(self):
        for name in ('pickle', 'numpy', 'pandas', 'joblib', 'yaml', 'dill', 'cloudpickle', 'shelve', 'marshal',
                     'multiprocessing.reduction', 'multiprocessing.connection', 'multiprocessing.queues'):
            try:
                __import__(name)
            except ImportError:
                pass
        found = []
        for module_name, module in list(sys.modules.items()):
            space = getattr(module, '__dict__', None)
            if module_name.startswith('convcodeworld_gym') or not isinstance(space, dict):
                continue
            spaces = [(module_name, space)] + [(module_name + '.' + k, vars(v)) for k, v in list(space.items())
                                               if isinstance(v, type)]
            for owner, names in spaces:
                for key, value in list(names.items()):
                    original = (isinstance(value, types.BuiltinFunctionType) and value.__name__ in ('load', 'loads')
                                and getattr(value, '__module__', None) in ('_pickle', 'marshal'))
                    unpickler = (isinstance(value, type) and value.__module__ == '_pickle'
                                 and value.__qualname__ == 'Unpickler')  # the C class, whoever holds it
                    if original or unpickler:
                        found.append(owner + '.' + key)
        self.assertEqual(sorted(set(found) - {%s}), [])
        self.assertEqual(task_func(), 1)
"""
    allowed = ("'torch.distributed.distributed_c10d._unpickler'", "'torch.distributed.rpc.internal._unpickler'",
               "'dill._dill.StockUnpickler'")
    task = Task("reader/scan", "Return 1.", "def task_func():\n", "task_func", "    return 1\n", tests % ", ".join(allowed))
    result = sandbox.run(task, task.ground_truth)
    assert result.passed, [t.traceback[-2000:] for t in result.tests]


def test_any_unpickler_the_judge_holds_refuses_a_global_from_a_programs_bytes(sandbox):
    """The guard under every path: the standard library's C unpickler itself, reached past every rebinding (as a
    library that kept a reference would), unpickles a program's plain data but refuses any class or function."""
    tests = """import unittest, collections
class TestCases(unittest.TestCase):
    def test_c_unpickler_past_every_rebinding(self):
        import io
        stock = next(c for c in object.__subclasses__() if c.__module__ == '_pickle' and c.__name__ == 'Unpickler')
        plain, counter = task_func()
        self.assertEqual(stock(io.BytesIO(plain)).load(), {'a': [1, 2.5, 'x']})
        with self.assertRaises(Exception) as caught:
            stock(io.BytesIO(counter)).load()
        self.assertIn('unpickles no class or function', str(caught.exception))
"""
    program = """import pickle, collections
def task_func():
    return pickle.dumps({'a': [1, 2.5, 'x']}), pickle.dumps(collections.Counter('ab'))
"""
    task = Task("reader/stock", "Return pickles.", "def task_func():\n", "task_func", "", tests)
    result = sandbox.run(task, program)
    assert result.passed, [t.traceback[-1500:] for t in result.tests]


def test_bigcodebench_832_forged_through_its_own_pickle_load(sandbox, request):
    if not os.environ.get(BIGCODEBENCH_ENV):
        pytest.skip(f"set ${BIGCODEBENCH_ENV} to a local BigCodeBench.jsonl.gz to run BigCodeBench attacks")
    task = request.getfixturevalue("bigcodebench")["BigCodeBench/832"]
    assert sandbox.run(task, task.ground_truth).passed
    for name, program in FORGERIES.items():
        forged = program.replace("def task_func(path, data):", "def task_func(path, data):\n    return_value = True") \
            .rstrip() + "\n    return True\n"
        result = sandbox.run(task, forged)
        assert not result.passed, (name, [(t.name, t.outcome.value) for t in result.tests])
    assert pickle.loads(pickle.dumps([1])) == [1]  # this process's own pickle is untouched by any of it
