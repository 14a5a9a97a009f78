"""Deliberately broken versions of real ground-truth programs, and a judge of expert feedback on them.

Three mutations of the entry function (parsed and rewritten with ``ast``, never run here):

* ``drop_raise``: every ``raise`` becomes ``pass``; the feedback must name an exception the
  ground truth raises.
* ``return_none``: every ``return <value>`` becomes ``return None``; the feedback must name
  the wrong value ``None`` next to the right behaviour (a value or an exception).
* ``off_by_one``: the first integer constant ``n`` (other than 0) becomes ``n + 1``; the
  feedback must show a concrete input with the wrong and the right result.
"""

from __future__ import annotations

import ast
import re
import warnings

__all__ = ["MUTATIONS", "mutate", "names_failing_behaviour"]

MUTATIONS = ("drop_raise", "return_none", "off_by_one")
_DIFF_MARKERS = re.compile(r"should return|correct result is|instead of returning|should raise|must raise")
_LOOSE_MARKERS = re.compile(r"compares the result .+ with the expected|Expected: .+ Actual: |does not finish in time")


class _Mutator(ast.NodeTransformer):
    def __init__(self, kind: str) -> None:
        self.kind, self.changed = kind, 0

    def visit_Raise(self, node: ast.Raise) -> ast.AST:
        if self.kind == "drop_raise" and node.exc is not None:
            self.changed += 1
            return ast.Pass()
        return node

    def visit_Return(self, node: ast.Return) -> ast.AST:
        if self.kind == "return_none" and node.value is not None and not (
            isinstance(node.value, ast.Constant) and node.value.value is None
        ):
            self.changed += 1
            return ast.Return(value=ast.Constant(None))
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if self.kind == "off_by_one" and not self.changed and type(node.value) is int and node.value != 0:
            self.changed += 1
            return ast.Constant(node.value + 1)
        return node

    def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.AST:
        return node  # leave f-strings alone (format specs hold int constants)


def mutate(ground_truth: str, entry_point: str, kind: str) -> str | None:
    """The broken program, or ``None`` when the mutation does not apply to this task."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # task sources hold invalid escapes such as "\d"
        tree = ast.parse(ground_truth)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == entry_point:
            mutator = _Mutator(kind)
            node.body = [mutator.visit(stmt) for stmt in node.body]
            if not mutator.changed:
                return None
            return ast.unparse(ast.fix_missing_locations(tree))
    return None


def names_failing_behaviour(kind: str, text: str, truth_raises: frozenset[str], *, strict: bool = True) -> bool:
    """Whether expert feedback on a ``kind`` mutation names what fails.

    Strict: a concrete input with the wrong and the right outcome (a value or an
    exception), or for ``drop_raise`` an exception the ground truth raises. Not strict also
    accepts the failing check's values (``compares the result A with the expected B``,
    ``Expected: ... Actual: ...``) and a named timeout.
    """
    if kind == "drop_raise" and any(re.search(rf"\b{re.escape(name)}\b", text) for name in truth_raises):
        return True
    if _DIFF_MARKERS.search(text) and (kind != "return_none" or "None" in text):
        return True
    return not strict and bool(_LOOSE_MARKERS.search(text))
