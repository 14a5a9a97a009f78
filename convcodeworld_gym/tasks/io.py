"""Input/output tasks: a :class:`~.record.Task` judged by feeding inputs and comparing outputs (:class:`IOTask`).

Beside the unittest tasks of BigCodeBench and HumanEval, competitive-programming task sets (LiveCodeBench, TACO,
CodeContests, APPS) judge a program by its outputs on inputs. Two kinds:

* ``stdio``: the program reads standard input and writes standard output;
* ``call``: a function (or LeetCode's ``class Solution`` method), named by ``func_name``, is called with JSON-decoded
  arguments and its value compared with the JSON-decoded expected one.

An :class:`IOTask` is a :class:`~.record.Task`, so every part downstream (the sandbox and its split judge, per-test
outcomes, execution feedback, partial coverage, canary twins, regressions, the static replay, the runner, the rollout
driver, the doors) takes it as it is. Its ``test`` is a generated unittest module: ``class TestCases`` with one test
method per case (``test_01`` ...; the public cases first, in the dataset's order), each a call of
:func:`~convcodeworld_gym.sandbox.run.iocheck.check_stdio` or ``check_call`` in the judge's process, which compares by
the dataset's own rule (``rule``) on data and times the call on the judge's clock. The program the sandbox runs for a
model's code is a small wrapper (:meth:`IOTask.program_for`: the code as a string literal, given to
:class:`~convcodeworld_gym.sandbox.run.ioprogram.Program`): it binds the entry point the tests call (``run_program`` or
``call_solution``), which returns what the code did as data, never a verdict.

``public_tests`` are the dataset's public cases where it has them (LiveCodeBench, CodeContests), else the first
:data:`~.record.PUBLIC_TEST_COUNT` (TACO, APPS: no split). ``ground_truth`` is the wrapper of the canonical
solution (what calibration and self-checks run); :attr:`IOTask.solution_code` is that solution's own code (what the
simulated expert reads, what a scripted policy replies).

Holds:
    IOCase           one case: its input and expected output, as text
    IOTask           the task record of this kind
    KINDS            the kinds
    ENTRY_POINTS     the entry point the tests call, by kind
    CHECK_MODULE     the judge's module the generated tests import
    LIVECODEBENCH_HEADER  the imports LiveCodeBench's judge runs before the code
    APPS_HEADER      the imports APPS' and TACO's judges run before the code
    io_test_source   the generated unittest module of a task's cases, with where each expected output lies in it
    wrapper_program  the program the sandbox runs for some code of a task
    wrapped_code     the model's code inside such a program (what its run may want warm)
    ExpectedChange   one candidate change of an expected output (a canary twin's)
    changed_expected an expected output changed so that the task's rule reads another answer
    expected_changes the candidate changes of a task's expected outputs
    changed_scalar   the value a canary twin puts in place of a scalar (this kind's and the unittest twins')
"""

from __future__ import annotations

import ast
import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .record import TEST_CLASS, Task, imported_modules

__all__ = ["IOCase", "IOTask", "KINDS", "ENTRY_POINTS", "CHECK_MODULE", "LIVECODEBENCH_HEADER", "APPS_HEADER", "io_test_source",
           "wrapper_program", "wrapped_code", "ExpectedChange", "expected_changes", "changed_expected", "changed_scalar"]

KINDS = ("stdio", "call")
#: The function of the wrapper program the tests call, by kind.
ENTRY_POINTS = {"stdio": "run_program", "call": "call_solution"}
#: Where the comparison runs: the judge's module the generated tests import.
CHECK_MODULE = "convcodeworld_gym.sandbox.run.iocheck"


def _star_then_plain(star: tuple[str, ...], plain: tuple[str, ...], tail: str = "") -> str:
    return "".join(f"from {m} import *\n" for m in star) + "".join(f"import {m}\n" for m in plain) + tail


_LCB_MODULES = ("string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random", "statistics",
                "itertools", "functools", "operator", "io", "sys", "json")
#: The imports LiveCodeBench's judge runs before every program (its ``import_string``): every name of those modules,
#: then the modules, then a recursion limit of 50000.
LIVECODEBENCH_HEADER = _star_then_plain((*_LCB_MODULES, "builtins", "typing"), _LCB_MODULES,
                                        "sys.setrecursionlimit(50000)\n")
#: The imports APPS's and TACO's judges run before every program (numpy among them).
APPS_HEADER = (
    "import sys\nimport time\nimport itertools\nfrom itertools import accumulate, product, permutations, combinations\n"
    "import collections\nfrom collections import Counter, OrderedDict, deque, defaultdict, ChainMap\n"
    "from functools import lru_cache\nimport math\n"
    "from math import sqrt, sin, cos, tan, ceil, fabs, floor, gcd, exp, log, log2\nimport fractions\n"
    "from typing import List, Tuple\nimport numpy as np\nimport random\nimport heapq\nfrom heapq import *\n"
)
#: What APPS's and TACO's judges add before a standard-input program: the two streams under short names.
APPS_STDIO_TAIL = "stdin = sys.stdin\nstdout = sys.stdout\n"

#: The module of the program's process that runs the code (the wrapper program imports it).
PROGRAM_MODULE = "convcodeworld_gym.sandbox.run.ioprogram"
_SCRIPT_TAIL = ('\n\nif __name__ == "__main__":  # run as a script: the code on this process\'s standard input\n'
                "    import sys as _sys\n\n"
                "    _result = run_program(_sys.stdin.read())\n"
                "    _sys.stdout.write(_result['stdout'])\n"
                "    _sys.stderr.write(_result['stderr'] + (_result['error'] or ''))\n"
                "    raise SystemExit(_result['exit'])\n")


@dataclass(frozen=True)
class IOCase:
    """One test case: ``input`` (the standard input, or the call's arguments as JSON text) and ``output`` (the
    expected standard output, or the expected value as JSON text)."""

    input: str
    output: str


#: What the wrapper program and the generated tests import (the standard library: the package's own module that runs
#: the code is the sandbox's, no need of the task's).
_WRAPPER_IMPORTS = frozenset({"builtins", "io", "json", "linecache", "sys", "threading", "traceback", "unittest"})


def wrapper_program(code: str, *, kind: str, header: str = "", func_name: str = "", args: str = "lines") -> str:
    """The program the sandbox runs for ``code``: a few lines that give ``code`` and the task's facts, as string
    literals (nothing of ``code`` runs as the module loads), to a :class:`~convcodeworld_gym.sandbox.run.ioprogram.Program`
    of the package, and bind its entry point (:data:`ENTRY_POINTS`). Run as a script (with the package importable), a
    ``stdio`` program reads its own standard input.

    >>> program = wrapper_program("print(int(input()) * 2)", kind="stdio")
    >>> namespace = {"__name__": "wrapped"}
    >>> exec(program, namespace)
    >>> namespace["run_program"]("21\\n")["stdout"]
    '42\\n'
    """
    entry = ENTRY_POINTS[kind]
    return (f"from {PROGRAM_MODULE} import Program as _Program\n\n"
            f"_program = _Program({code!r}, kind={kind!r}, header={header!r}, func_name={func_name!r}, args={args!r})\n"
            f"{entry} = _program.{entry}\n" + (_SCRIPT_TAIL if kind == "stdio" else ""))


def wrapped_code(program: str) -> str | None:
    """The model's code that :func:`wrapper_program` wrapped in ``program``, or None where ``program`` is not such a
    wrapper (it reads the one ``_Program(...)`` call's first argument; nothing of ``program`` runs).

    >>> wrapped_code(wrapper_program("import numpy\\nprint(1)", kind="stdio"))
    'import numpy\\nprint(1)'
    >>> wrapped_code("print(1)") is None
    True
    """
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for node in tree.body:
        call = node.value if isinstance(node, ast.Assign) else None
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "_Program" and call.args
                and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)):
            return call.args[0].value
    return None


def _test_name(index: int, count: int) -> str:
    """The name of test ``index`` (0-based) of ``count``: zero-padded so that unittest's order is the cases' order."""
    return f"test_{index + 1:0{max(2, len(str(count)))}d}"


def io_test_source(cases: tuple[IOCase, ...], *, kind: str, rule: str, time_limit_s: float
                   ) -> tuple[str, tuple[tuple[int, int], ...]]:
    """The unittest module of ``cases`` and, for each case, the span of its expected output's literal in it.

    Each test method binds the case's input and expected output (literals of its own body, so that a hidden test's
    values lie in that test's method alone: what the hidden-test guard reads,
    :func:`~convcodeworld_gym.feedback.verbal.leak.hidden_literals`) and makes one call of the judge's check
    (:mod:`convcodeworld_gym.sandbox.run.iocheck`), a short line that a traceback shows.

    >>> source, spans = io_test_source((IOCase("1\\n", "2\\n"),), kind="stdio", rule="livecodebench", time_limit_s=6)
    >>> print(source)
    import unittest
    <BLANKLINE>
    from convcodeworld_gym.sandbox.run.iocheck import check_stdio
    <BLANKLINE>
    RULE = 'livecodebench'
    LIMIT_S = 6.0
    <BLANKLINE>
    <BLANKLINE>
    class TestCases(unittest.TestCase):
        def test_01(self):
            given = '1\\n'
            expected = '2\\n'
            check_stdio(self, run_program, given, expected, RULE, LIMIT_S)
    <BLANKLINE>
    >>> source[slice(*spans[0])]
    "'2\\\\n'"
    """
    check = "check_stdio" if kind == "stdio" else "check_call"
    entry = ENTRY_POINTS[kind]
    parts = [f"import unittest\n\nfrom {CHECK_MODULE} import {check}\n\nRULE = {rule!r}\nLIMIT_S = {float(time_limit_s)!r}"
             f"\n\n\nclass {TEST_CLASS}(unittest.TestCase):\n"]
    size = len(parts[0])
    spans: list[tuple[int, int]] = []
    for index, case in enumerate(cases):
        head = f"    def {_test_name(index, len(cases))}(self):\n        given = {case.input!r}\n        expected = "
        expected = repr(case.output)
        spans.append((size + len(head), size + len(head) + len(expected)))
        lines = f"{head}{expected}\n        {check}(self, {entry}, given, expected, RULE, LIMIT_S)\n"
        parts.append(lines)
        size += len(lines)
    return "".join(parts), tuple(spans)


@dataclass(frozen=True)
class IOTask(Task):
    """A task judged by input/output cases (see the module docstring).

    Attributes (beside :class:`~.record.Task`'s; ``code_prompt`` is the starter code, ``canonical_solution`` the
    canonical solution's whole code, ``""`` where the row has none):
        kind: ``"stdio"`` or ``"call"``.
        rule: the dataset's comparison rule, by name (:data:`~convcodeworld_gym.sandbox.run.iocheck.RULES`).
        func_name: the function or ``Solution`` method a ``call`` task calls.
        cases: every case, the public ones first.
        public_count: how many of the first cases are public.
        time_limit_s: each case's time limit (the judge's clock, the call's wall time).
        memory_limit_mb: the dataset's memory limit, kept as a fact (the sandbox's own limit applies).
        import_header: the imports the dataset's judge runs before the code.
        args: how a call's arguments are encoded: ``"lines"`` (one JSON value a line) or ``"list"`` (one JSON list).
        meta: the row's other facts, as ``(name, value)`` text pairs (platform, difficulty, contest date, url).

    ``test`` and ``entry_point`` are made from the rest when left empty.

    >>> task = IOTask("demo/1", "Print twice the number read.", "", "", "print(int(input()) * 2)", "",
    ...               kind="stdio", rule="livecodebench", cases=(IOCase("2\\n", "4\\n"), IOCase("5\\n", "10\\n")),
    ...               public_count=1)
    >>> task.entry_point, task.test_names, task.public_tests, task.solution_code
    ('run_program', ('test_01', 'test_02'), ('test_01',), 'print(int(input()) * 2)')
    """

    kind: str = "stdio"
    rule: str = "livecodebench"
    func_name: str = ""
    cases: tuple[IOCase, ...] = ()
    public_count: int = 0
    time_limit_s: float = 6.0
    memory_limit_mb: int | None = None
    import_header: str = ""
    args: str = "lines"
    meta: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"IOTask {self.task_id}: kind must be one of {KINDS}, got {self.kind!r}")
        if self.kind == "call" and not self.func_name:
            raise ValueError(f"IOTask {self.task_id}: a call task needs func_name")
        if not 0 <= self.public_count <= len(self.cases):
            raise ValueError(f"IOTask {self.task_id}: public_count {self.public_count} is outside 0..{len(self.cases)}")
        if not (isinstance(self.time_limit_s, (int, float)) and math.isfinite(self.time_limit_s) and self.time_limit_s > 0):
            raise ValueError(f"IOTask {self.task_id}: time_limit_s must be a positive number, got {self.time_limit_s!r}")
        if not self.entry_point:
            object.__setattr__(self, "entry_point", ENTRY_POINTS[self.kind])
        if not self.test:
            source, _ = io_test_source(self.cases, kind=self.kind, rule=self.rule, time_limit_s=self.time_limit_s)
            object.__setattr__(self, "test", source)

    # ----------------------------------------------------------------- what differs from a unittest task

    @property
    def header(self) -> str:  # type: ignore[override]
        """Nothing: the judge's module needs no imports of the task's (the tests import their check)."""
        return ""

    @property
    def ground_truth(self) -> str:
        """The wrapper program of the canonical solution: what the executor runs to calibrate and check the task."""
        return self.program_for(self.canonical_solution)

    @property
    def solution_code(self) -> str:
        """The canonical solution's own code (``""`` where the row has none)."""
        return self.canonical_solution

    def program_for(self, code: str) -> str:
        """The wrapper program (:func:`wrapper_program`) that runs ``code`` for this task's tests."""
        return wrapper_program(code, kind=self.kind, header=self.import_header, func_name=self.func_name, args=self.args)

    def visible_program(self, code: str) -> str:
        """``code`` itself: what compile errors, tracebacks and a simulated user refer to."""
        return code

    def program_imports(self, program: str) -> frozenset[str]:
        """What the model's code in ``program`` imports, and the import header's modules: never the wrapper's own
        runner (this package's, preloaded by every sandbox worker), which sent every I/O run to the heaviest
        worker. A program this task's :meth:`program_for` did not make: what it imports itself."""
        code = wrapped_code(program)
        return imported_modules(program) if code is None else imported_modules(code) | self._header_imports

    @cached_property
    def _header_imports(self) -> frozenset[str]:
        """What the import header imports (parsed once a task, not once a run)."""
        return imported_modules(self.import_header)

    @cached_property
    def module_paths(self) -> frozenset[str]:
        """The modules the program and the tests import: the wrapper's and ``unittest`` (the standard library), and the
        task's ``libs``; the judge's own check module is the sandbox's, no need of the task's."""
        return _WRAPPER_IMPORTS | frozenset(self.libs)

    @cached_property
    def test_names(self) -> tuple[str, ...]:
        """``test_01`` ... one per case, in the cases' order (known without parsing the generated module)."""
        return tuple(_test_name(i, len(self.cases)) for i in range(len(self.cases)))

    @cached_property
    def public_tests(self) -> tuple[str, ...]:
        """The dataset's public cases' tests (LiveCodeBench, CodeContests), or the first
        :data:`~.record.PUBLIC_TEST_COUNT` where it has no split (TACO, APPS: their loaders set ``public_count``)."""
        return self.test_names[:self.public_count]

    @property
    def own_time_limits(self) -> tuple[float, float]:
        """(each test method, the whole suite) in seconds at least: a case's limit and a second, and that for every
        case plus 5 s (LiveCodeBench's own whole-run limit, ``(timeout + 1) * n + 5``)."""
        per_test = float(self.time_limit_s) + 1.0
        return per_test, per_test * max(1, len(self.cases)) + 5.0

    def case_of(self, test_name: str) -> IOCase:
        """The case of test ``test_name``."""
        return self.cases[self.test_names.index(test_name)]

    @cached_property
    def expected_spans(self) -> tuple[tuple[int, int], ...]:
        """Where each case's expected output lies in :attr:`test` (as generated)."""
        return io_test_source(self.cases, kind=self.kind, rule=self.rule, time_limit_s=self.time_limit_s)[1]


# ----------------------------------------------------------------------------- canary twins of I/O tasks

@dataclass(frozen=True)
class ExpectedChange:
    """One candidate change of an I/O task: case ``index``'s expected output ``before`` becomes ``after``."""

    index: int
    before: str
    after: str


def changed_scalar(value: Any) -> Any:
    """The value a canary twin puts in place of a scalar (same type: a bool negated, a number plus one, a string or
    bytes with ``!`` appended), or None where it changes none of that type (a float too large to move by one).

    >>> changed_scalar(3), changed_scalar(False), changed_scalar("ab"), changed_scalar(b"x"), changed_scalar(1e300)
    (4, True, 'ab!', b'x!', None)
    """
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 1.0 if math.isfinite(value) and value + 1.0 != value else None
    if isinstance(value, (str, bytes)):
        return value + ("!" if isinstance(value, str) else b"!")
    return None


def _changed_json(value: Any) -> tuple[Any, bool]:
    """``value`` with its first scalar (depth first) changed keeping its type, and whether one was."""
    if isinstance(value, list):
        out = list(value)
        for i, item in enumerate(out):
            out[i], done = _changed_json(item)
            if done:
                return out, True
        return value, False
    if isinstance(value, dict):
        out_dict = dict(value)
        for key, item in out_dict.items():
            out_dict[key], done = _changed_json(item)
            if done:
                return out_dict, True
        return value, False
    changed = changed_scalar(value)
    return (changed, True) if changed is not None else (value, False)


def changed_expected(task: IOTask, output: str) -> str | None:
    """A case's expected output changed so that the task's rule reads it as another answer, or None where none can
    be: a ``call`` output's first JSON scalar changed keeping its type (an int + 1, a float + 1.0, a bool negated, a
    text with ``!`` added); a ``stdio`` output's last token: a number + 1 (kept an integer where it is one), any other
    token with ``!`` added, an empty output ``0``.

    >>> t = IOTask("d/0", "", "", "", "", "", cases=(IOCase("", ""),))
    >>> changed_expected(t, "3 4\\n"), changed_expected(t, "YES\\n"), changed_expected(t, "0.5"), changed_expected(t, "")
    ('3 5\\n', 'YES!\\n', '1.5', '0')
    """
    if task.kind == "call":
        try:
            value = json.loads(output)
        except ValueError:
            return None
        changed, done = _changed_json(value)
        return json.dumps(changed) if done else None
    stripped = output.rstrip()
    if not stripped:
        return "0" + output[len(stripped):]
    cut = max(stripped.rfind(c) for c in " \t\n") + 1
    token = stripped[cut:]
    try:
        number: Any = int(token)
        new = str(number + 1)
    except ValueError:
        try:
            number = float(token)
            new = repr(number + 1.0) if math.isfinite(number) else token + "!"
        except ValueError:
            new = token + "!"
    return stripped[:cut] + new + output[len(stripped):]


def expected_changes(task: IOTask) -> tuple[ExpectedChange, ...]:
    """The candidate changes of ``task``'s expected outputs, in case order (public cases first).

    >>> t = IOTask("d/0", "", "", "", "", "", cases=(IOCase("1", "2"), IOCase("3", "4")))
    >>> [(c.index, c.after) for c in expected_changes(t)]
    [(0, '3'), (1, '5')]
    """
    out = []
    for index, case in enumerate(task.cases):
        after = changed_expected(task, case.output)
        if after is not None and after != case.output:
            out.append(ExpectedChange(index, case.output, after))
    return tuple(out)

