"""The :class:`Task` record and facts derived from its source text."""

from __future__ import annotations

import ast
import contextlib
import hashlib
import io
import sys
import threading
import tokenize
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property

__all__ = ["Task", "test_method_names", "imported_modules", "imported_module_paths", "third_party", "parse_source", "parse_result", "quiet_compiling",
           "TEST_CLASS", "PUBLIC_TEST_COUNT", "dotted_name"]

#: Name of the unittest class every task's test source defines.
TEST_CLASS = "TestCases"

_STDLIB = frozenset(sys.stdlib_module_names) | {"__future__"}


#: ``warnings.catch_warnings`` swaps process-wide state: parses from several threads (batch runs) take turns.
_PARSE_LOCK = threading.Lock()


@contextlib.contextmanager
def quiet_compiling() -> Iterator[None]:
    """Around a ``compile()`` or ``ast.parse`` of task or program text: no warning is shown, and none is raised
    whatever this process's warning filters say (``-W error`` would turn an invalid escape into a SyntaxError),
    so what compiles does not depend on where it runs. Safe from any thread (they take turns)."""
    with _PARSE_LOCK, warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        yield


def parse_result(source: str) -> ast.Module | str:
    """``source``'s syntax tree, or why there is none: ``"syntax"`` (a syntax error or NUL bytes: the same in
    every process) or the name of what stopped the tree's construction (``RecursionError``, ``MemoryError``:
    nesting deeper than this process could go from where it was called; 5000 characters of ``-`` do it, and
    200 do when the caller is already 950 frames deep, so another process may well parse it). Never executes
    ``source``, never warns (:func:`quiet_compiling`), never raises.

    >>> parse_result("x = (")
    'syntax'
    """
    with quiet_compiling():
        try:
            return ast.parse(source)
        except (SyntaxError, ValueError):
            return "syntax"
        except (RecursionError, MemoryError) as exc:
            return type(exc).__name__


def parse_source(source: str) -> ast.Module | None:
    """``source``'s syntax tree, or None where it has none (:func:`parse_result` says why)."""
    tree = parse_result(source)
    return tree if isinstance(tree, ast.Module) else None


def dotted_name(node: ast.AST) -> str | None:
    """The dotted name an expression spells (``pd.read_csv`` -> ``"pd.read_csv"``), or None where it is no chain of
    names and attributes.

    >>> dotted_name(ast.parse("a.b.c").body[0].value), dotted_name(ast.parse("f().x").body[0].value)
    ('a.b.c', None)
    """
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


#: How many test methods of a task are public (shown by partial execution feedback): the reference's first 3.
PUBLIC_TEST_COUNT = 3


def test_method_names(test_source: str, class_name: str = TEST_CLASS) -> tuple[str, ...]:
    """Return the names of the test methods (``test*``) of ``class_name``, in source order.

    The source is parsed, never executed. Helpers such as ``setUp`` are not tests; a name
    defined twice counts once, at its first position (as in the class's namespace).
    Returns ``()`` when the source does not parse or has no such class.

    >>> test_method_names("class TestCases:\\n def setUp(self): pass\\n def test_b(self): pass\\n def test_a(self): pass")
    ('test_b', 'test_a')
    """
    tree = parse_source(test_source)
    for node in tree.body if tree is not None else ():
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            names = (
                item.name
                for item in node.body
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith("test")
            )
            return tuple(dict.fromkeys(names))  # a method defined twice is one test
    return ()


test_method_names.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


def third_party(modules: Iterable[str]) -> frozenset[str]:
    """The names among ``modules`` (top-level) that are not of the standard library.

    >>> sorted(third_party(["os", "numpy", "__future__"]))
    ['numpy']
    """
    return frozenset(m for m in modules if m not in _STDLIB)


def imported_modules(source: str) -> frozenset[str]:
    """Top-level names of every module that ``source`` imports, at any depth.

    Relative imports are ignored. Returns an empty set when the source does not parse.

    >>> sorted(imported_modules("import os.path\\nfrom numpy import array\\ndef f():\\n    import pandas as pd"))
    ['numpy', 'os', 'pandas']
    """
    return frozenset(path.split(".")[0] for path in imported_module_paths(source))


def imported_module_paths(source: str) -> frozenset[str]:
    """The dotted names ``source`` may import as modules: ``import a.b`` gives ``a.b``; ``from a.b import c`` gives
    ``a.b`` and, where ``c`` is lower case (it may be a submodule: ``from scipy import stats``), ``a.b.c``.
    Relative imports are ignored; a source with a syntax error gives none. Where the source is nested too deep for
    a tree from here (another process may well build one), the top-level names, read from its tokens.

    >>> sorted(imported_module_paths("import os.path\\nfrom scipy import stats\\nfrom sklearn.preprocessing import StandardScaler"))
    ['os.path', 'scipy', 'scipy.stats', 'sklearn.preprocessing']
    """
    tree = parse_result(source)
    if tree == "syntax":
        return frozenset()
    if not isinstance(tree, ast.Module):
        return _imported_by_tokens(source)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names if alias.name.islower())
    return frozenset(names)


def _imported_by_tokens(source: str) -> frozenset[str]:
    """What :func:`imported_modules` finds, read from ``source``'s tokens instead of its tree, so that nesting
    depth (and so the caller's stack) does not matter: ``import`` is a keyword, so every ``import`` token
    begins an import or ends a ``from X`` before one. Empty where the source does not tokenize.

    >>> sorted(_imported_by_tokens("x = " + "-" * 9000 + "1\\nimport os.path as p, json\\nfrom numpy import (a,\\n b)\\n"
    ...                            "from . import m\\ny = yield from z\\nif x: import pandas"))
    ['json', 'numpy', 'os', 'pandas']
    """
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(source).readline)
                  if t.type not in (tokenize.NL, tokenize.COMMENT)]
    except (tokenize.TokenError, SyntaxError, ValueError):  # IndentationError is a SyntaxError
        return frozenset()
    names: set[str] = set()
    for i, token in enumerate(tokens):
        if token.type != tokenize.NAME or token.string != "import":
            continue
        start = _from_clause_start(tokens, i)
        if start is not None:  # from a.b import ...: the dotted name before, unless relative
            if tokens[start + 1].string not in (".", "..."):
                names.add(tokens[start + 1].string)
            continue
        expect_name = True  # import a.b as c, d
        for following in tokens[i + 1:]:
            if following.type == tokenize.NAME and expect_name:
                names.add(following.string)
                expect_name = False
            elif following.string == ",":
                expect_name = True
            elif following.type in (tokenize.NEWLINE, tokenize.ENDMARKER) or following.string == ";":
                break
    return frozenset(names)


def _from_clause_start(tokens: list[tokenize.TokenInfo], i: int) -> int | None:
    """The index of the ``from`` whose clause the ``import`` at ``i`` ends, if it ends one (dots and names between)."""
    j = i - 1
    while j >= 0 and (tokens[j].type == tokenize.NAME and tokens[j].string != "from" or tokens[j].string in (".", "...")):
        j -= 1
    return j if j >= 0 and j < i - 1 and tokens[j].string == "from" else None


@dataclass(frozen=True)
class Task:
    """One programming task: an instruction, a reference solution and a unittest suite.

    Attributes:
        task_id: unique id, e.g. ``"BigCodeBench/0"`` or ``"HumanEval/0"``.
        prompt: the natural-language instruction shown to the model (BigCodeBench ``instruct_prompt``).
        code_prompt: the code the solution starts from (imports + ``def entry_point(...)`` line).
        entry_point: name of the function under test.
        canonical_solution: the reference body; ``code_prompt + canonical_solution`` is the ground truth.
        test: unittest source defining ``class TestCases(unittest.TestCase)``.
        libs: libraries the task declares (BigCodeBench ``libs``).
        source: where the task came from, e.g. ``"bigcodebench:v0.1.0_hf"``.

    >>> t = Task("demo/0", "Add one.", "def f(x):\\n", "f", "    return x + 1\\n",
    ...          "import unittest\\nclass TestCases(unittest.TestCase):\\n    def test_1(self):\\n        self.assertEqual(f(1), 2)\\n")
    >>> t.header, t.test_names, t.stdlib_only
    ('', ('test_1',), True)
    """

    task_id: str
    prompt: str
    code_prompt: str
    entry_point: str
    canonical_solution: str
    test: str
    libs: tuple[str, ...] = ()
    source: str = "custom"

    @property
    def ground_truth(self) -> str:
        """The reference program: ``code_prompt + canonical_solution``; what the executor runs to calibrate and
        check the task."""
        return self.code_prompt + self.canonical_solution

    @property
    def solution_code(self) -> str:
        """The canonical solution as its author wrote it: the code a reply holding it would give, what the simulated
        expert reads and a scripted policy replies. For a unittest task, :attr:`ground_truth` itself; an I/O task's
        ground truth is a wrapper of it (:class:`~.io.IOTask`)."""
        return self.ground_truth

    @property
    def has_ground_truth(self) -> bool:
        """Whether the task holds a canonical solution (a row of LiveCodeBench, say, has none)."""
        return bool(self.canonical_solution.strip())

    def program_for(self, code: str) -> str:
        """The program the sandbox runs for the model's ``code``: the import header (:attr:`header`) followed by it,
        as the reference runs BigCodeBench code.

        >>> Task("t/0", "p", "import os\\ndef f():\\n", "f", "", "").program_for("def f():\\n    return os.sep")
        'import os\\ndef f():\\n    return os.sep'
        """
        return self.header + code

    def program_imports(self, program: str) -> frozenset[str]:
        """Top-level names of the modules ``program`` (one :meth:`program_for` made) imports, at any depth: what its
        run may want warm in the sandbox (:meth:`~convcodeworld_gym.sandbox.SandboxExecutor.group_of`).

        >>> sorted(Task("t/0", "p", "", "f", "", "").program_imports("import numpy\\ndef f():\\n    import os"))
        ['numpy', 'os']
        """
        return imported_modules(program)

    def visible_program(self, code: str) -> str:
        """The program as the model wrote it, what compile errors, code facts and simulated users refer to: here the
        program run (:meth:`program_for`)."""
        return self.program_for(code)

    @property
    def own_time_limits(self) -> tuple[float, float] | None:
        """The least time limits the task's own data asks for, ``(each test, the whole suite)`` in seconds, which an
        executor's calibrated limits never go below; None (the default) when calibration alone decides."""
        return None

    @cached_property
    def header(self) -> str:
        """The part of ``code_prompt`` before ``def <entry_point>`` (its imports).

        The reference prepends this to every program the model writes.
        """
        return self.code_prompt.split(f"def {self.entry_point}")[0]

    @cached_property
    def test_names(self) -> tuple[str, ...]:
        """Test methods of ``TestCases`` in source order (parsed, not executed)."""
        return test_method_names(self.test)

    @cached_property
    def public_tests(self) -> tuple[str, ...]:
        """The tests partial execution feedback may show: the first :data:`PUBLIC_TEST_COUNT` test methods in source
        order. Every executor runs them first (alphabetically, as unittest does), then the others (alphabetically), so
        that nothing run for a hidden test can change what a public test reports.

        >>> Task("d/0", "", "def f():\\n", "f", "", "class TestCases:\\n def test_d(s): pass\\n def test_c(s): pass\\n"
        ...      " def test_b(s): pass\\n def test_a(s): pass\\n").public_tests
        ('test_d', 'test_c', 'test_b')
        """
        return self.test_names[:PUBLIC_TEST_COUNT]

    @cached_property
    def test_digest(self) -> str:
        """SHA-256 of the test source: identifies the suite for result caches."""
        return hashlib.sha256(self.test.encode("utf-8", "surrogatepass")).hexdigest()

    @cached_property
    def module_paths(self) -> frozenset[str]:
        """The dotted names of the modules the ground truth or the tests may import (:func:`imported_module_paths`;
        each text parsed once per task)."""
        return imported_module_paths(self.ground_truth) | imported_module_paths(self.test)

    @cached_property
    def modules(self) -> frozenset[str]:
        """Top-level names of the modules the ground truth or the tests import."""
        return frozenset(path.split(".")[0] for path in self.module_paths)

    @cached_property
    def third_party_modules(self) -> frozenset[str]:
        """Non-standard-library modules named by ``libs`` or imported by the ground truth or the tests."""
        return third_party(set(self.libs) | self.modules)

    @cached_property
    def third_party_imports(self) -> frozenset[str]:
        """:attr:`third_party_modules` with the submodules the ground truth or the tests import by name
        (``scipy.stats`` for ``from scipy import stats``; :func:`imported_module_paths`): what a warm worker imports
        for the task, since a package's submodules load only when imported (scipy.stats takes over a second).

        >>> task = Task("d/0", "", "from scipy import stats\\ndef f():\\n", "f", "    pass\\n", "")
        >>> sorted(task.third_party_imports)
        ['scipy', 'scipy.stats']
        """
        return self.third_party_modules | {p for p in self.module_paths if p.split(".")[0] in self.third_party_modules}

    @property
    def stdlib_only(self) -> bool:
        """True when solution, tests and ``libs`` need only the standard library."""
        return not self.third_party_modules

    @property
    def from_bigcodebench(self) -> bool:
        """True for a BigCodeBench task: its source says so (``load_tasks("bigcodebench")``) or its id is
        BigCodeBench's (``BigCodeBench/<n>``, as in a copy loaded from a file, whose source is ``file:<name>``).
        It decides advice only (the pinned BigCodeBench runtime for what the task lacks), never what is judged.

        >>> Task("BigCodeBench/1", "", "def f():\\n", "f", "", "", source="file:BigCodeBench.jsonl.gz").from_bigcodebench
        True
        >>> Task("HumanEval/1", "", "def f():\\n", "f", "", "", source="humaneval:1.0").from_bigcodebench
        False
        """
        return self.source.startswith("bigcodebench") or self.task_id.startswith("BigCodeBench/")
