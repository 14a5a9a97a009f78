"""The offline SYNTHETIC coder: the canonical solution with seeded bugs, repaired turn by turn.

SYNTHETIC: its numbers are no claim about any model. It exists so that the runner, the
metrics and RL loops can be exercised anywhere, with no model, deterministically.

An episode starts from the task's ground truth with 0..``max_bugs`` bugs injected by AST
mutations (a flipped comparison, an off-by-one, a wrong constant, a dropped statement, a
wrong library call) or a syntax slip (a missing ``:``); programs holding a ``while`` loop get
only syntax slips, since any other bug there tends to hang the tests until the suite times out. At each feedback turn it repairs
one bug with probability ``strength * PRECISION[level]``, where ``level`` is how precisely
this turn's feedback locates a bug: ``none`` < ``compile`` (a compile error, which locates
the syntax slip) < ``novice`` (a novice's words) < ``test`` (a failing test shown) <
``expert`` (an expert's words). Bugs and random draws depend only on ``(seed, task_id)``,
not on the combination, so turn 0 is the same in every combination and more precise
feedback never repairs later than less precise feedback on the same task."""

from __future__ import annotations

import ast
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..feedback.compilation import compiled
from ..feedback.execution import shows_failure
from ..tasks import Task
from ..tasks.record import parse_source
from .base import Policy, PolicyEpisode, PolicyReply, fenced

__all__ = ["SyntheticCoder", "Mutation", "inject_bugs", "apply_mutations", "feedback_level", "PRECISION", "KINDS"]

#: Repair probability factor for each feedback level (multiplied by the coder's strength).
PRECISION: dict[str, float] = {"none": 0.15, "compile": 0.5, "novice": 0.55, "test": 0.7, "expert": 0.95}
KINDS = ("flip_comparison", "off_by_one", "wrong_constant", "drop_statement", "wrong_call", "syntax_slip")
_KIND_WEIGHT = {"syntax_slip": 0.3}

_FLIP: dict[type, type] = {
    ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt, ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}
_SWAP_CALL = {
    "min": "max", "max": "min", "any": "all", "all": "any", "lower": "upper", "upper": "lower",
    "startswith": "endswith", "endswith": "startswith", "floor": "ceil", "ceil": "floor",
    "keys": "values", "values": "keys", "lstrip": "rstrip", "rstrip": "lstrip", "strip": "lstrip",
    "isdigit": "isalpha", "isalpha": "isdigit", "loads": "dumps", "dumps": "loads",
    "sorted": "list", "abs": "int", "sum": "len", "append": "remove", "extend": "append",
}
_BLOCK_KEYWORDS = ("def ", "if ", "elif ", "else", "for ", "while ", "try", "except", "finally", "with ", "class ")


@dataclass(frozen=True)
class Mutation:
    """One bug: the ``index``-th site of ``kind`` in the ground truth (sites in ``ast.walk`` order)."""

    kind: str
    index: int


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                ids.add(id(first))
                ids.add(id(first.value))
    return ids


def _looping(tree: ast.Module) -> set[int]:
    """Every node, when the program holds a ``while`` loop anywhere (a bug in any function it
    calls can keep it from ending), else none."""
    if any(isinstance(n, ast.While) for n in ast.walk(tree)):
        return {id(n) for n in ast.walk(tree)}
    return set()


def _sites(tree: ast.Module) -> dict[str, list[Any]]:
    """Mutable sites per AST kind; for ``drop_statement`` a (body list, position) pair.

    Programs with a ``while`` loop are left alone: a bug there tends to loop forever,
    which costs a whole suite timeout per turn and says nothing more.
    """
    docs = _docstrings(tree)
    skip = _looping(tree)
    sites: dict[str, list[Any]] = {k: [] for k in KINDS if k != "syntax_slip"}
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Compare) and type(node.ops[0]) in _FLIP:
            sites["flip_comparison"].append(node)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range" and node.args:
            sites["off_by_one"].append(node)
        if isinstance(node, ast.Constant) and id(node) not in docs:
            value = node.value
            if (isinstance(value, (int, float)) and not isinstance(value, bool)) or (isinstance(value, str) and 0 < len(value) <= 40):
                sites["wrong_constant"].append(node)
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr if isinstance(node.func, ast.Attribute) else None
            if name in _SWAP_CALL:
                sites["wrong_call"].append(node)
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if isinstance(body, list):
                for pos, stmt in enumerate(body):
                    if id(stmt) in docs:
                        continue
                    if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)) or (
                        isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                    ):
                        sites["drop_statement"].append((body, pos))
    return sites


def _slip_lines(text: str) -> list[int]:
    return [
        i
        for i, line in enumerate(text.split("\n"))
        if line.rstrip().endswith(":") and line.strip().startswith(_BLOCK_KEYWORDS) and not line.strip().startswith("while ")
    ]


def _mutate(kind: str, site: Any) -> None:
    if kind == "flip_comparison":
        site.ops[0] = _FLIP[type(site.ops[0])]()
    elif kind == "off_by_one":
        site.args[-1] = ast.BinOp(left=site.args[-1], op=ast.Add(), right=ast.Constant(1))
    elif kind == "wrong_constant":
        value = site.value
        site.value = value + "_" if isinstance(value, str) else value * 2 + 1
    elif kind == "drop_statement":
        body, pos = site
        body[pos] = ast.Pass()
    elif kind == "wrong_call":
        if isinstance(site.func, ast.Name):
            site.func = ast.Name(id=_SWAP_CALL[site.func.id], ctx=ast.Load())
        else:
            site.func.attr = _SWAP_CALL[site.func.attr]


def apply_mutations(ground_truth: str, mutations: Sequence[Mutation]) -> str:
    """The program with ``mutations`` applied; the ground truth itself (verbatim) when there are none.

    >>> gt = "def f(x):\\n    if x < 3:\\n        return 1\\n    return 2\\n"
    >>> print(apply_mutations(gt, [Mutation("flip_comparison", 0)]), end="")
    def f(x):
        if x >= 3:
            return 1
        return 2
    >>> compile(apply_mutations(gt, [Mutation("syntax_slip", 1)]), "f", "exec")
    Traceback (most recent call last):
    ...
    SyntaxError: expected ':'
    """
    if not mutations:
        return ground_truth
    tree = parse_source(ground_truth)
    if tree is None:
        return ground_truth
    sites = _sites(tree)
    for m in mutations:
        if m.kind != "syntax_slip":
            _mutate(m.kind, sites[m.kind][m.index])
    text = ast.unparse(ast.fix_missing_locations(tree))
    for m in mutations:
        if m.kind == "syntax_slip":
            lines = text.split("\n")
            target = _slip_lines(text)[m.index]
            lines[target] = lines[target].rstrip()[:-1]
            text = "\n".join(lines)
    return text + "\n"


def inject_bugs(ground_truth: str, rng: random.Random, count: int) -> list[Mutation]:
    """Up to ``count`` distinct bugs for ``ground_truth``, drawn with ``rng`` (fewer if it has few sites)."""
    tree = parse_source(ground_truth)
    if tree is None or count <= 0:
        return []
    available = {k: len(v) for k, v in _sites(tree).items()}
    available["syntax_slip"] = len(_slip_lines(ast.unparse(tree)))
    chosen: list[Mutation] = []
    for _ in range(count):
        kinds = [k for k in KINDS if available[k] > sum(1 for m in chosen if m.kind == k)]
        if not kinds:
            break
        kind = rng.choices(kinds, weights=[_KIND_WEIGHT.get(k, 1.0) for k in kinds])[0]
        free = [i for i in range(available[kind]) if Mutation(kind, i) not in chosen]
        if kind == "syntax_slip" and any(m.kind == "syntax_slip" for m in chosen):
            continue
        chosen.append(Mutation(kind, rng.choice(free)))
    return chosen


def feedback_level(observation: Mapping[str, Any], verbal: str) -> str:
    """How precisely this observation's feedback locates a bug (a key of :data:`PRECISION`).

    ``verbal`` is the combination's verbal mode: ``"none"``, ``"novice"`` or ``"expert"``.

    >>> feedback_level({"compilation_feedback": "No syntax errors", "execution_feedback": "TEST_1\\n..."}, "none")
    'test'
    >>> feedback_level({"compilation_feedback": "Traceback ...", "verbal_feedback": "I got an error"}, "novice")
    'novice'
    >>> feedback_level({"compilation_feedback": "No syntax errors", "execution_feedback": "Passed all test runs"}, "none")
    'none'
    """
    levels = ["none"]
    cf = str(observation.get("compilation_feedback") or "")
    if cf and not compiled(cf):
        levels.append("compile")
    ef = str(observation.get("execution_feedback") or "")
    if ef and shows_failure(ef):
        levels.append("test")
    if observation.get("verbal_feedback") and verbal in ("novice", "expert"):
        levels.append(verbal)
    order = list(PRECISION)
    return max(levels, key=order.index)


class _SyntheticEpisode(PolicyEpisode):
    def __init__(self, coder: SyntheticCoder, task: Task, verbal: str, rng: random.Random) -> None:
        self._coder, self._task, self._verbal, self._rng = coder, task, verbal, rng
        count = sum(rng.random() < coder.bug_rate for _ in range(coder.max_bugs))
        self.bugs: list[Mutation] = inject_bugs(task.solution_code, rng, count)
        self._started = False

    def act(self, observation: Mapping[str, Any]) -> PolicyReply:
        if self._started:
            draw = self._rng.random()  # one draw per turn, whatever the feedback: keeps combinations coupled
            level = feedback_level(observation, self._verbal)
            if self.bugs and draw < self._coder.strength * PRECISION[level]:
                slips = [m for m in self.bugs if m.kind == "syntax_slip"]
                self.bugs.remove(slips[0] if level == "compile" and slips else self.bugs[0])
        self._started = True
        code = apply_mutations(self._task.solution_code, self.bugs)
        return PolicyReply(f"# SYNTHETIC coder reply ({len(self.bugs)} injected bug(s) left)\n{fenced(code)}")


class SyntheticCoder(Policy):
    """SYNTHETIC offline coder (see the module docstring). Deterministic given ``seed``.

    Args:
        strength: in [0, 1]. Scales the repair probability and lowers the bug rate:
            0 never repairs; 1 repairs at ``PRECISION[level]`` per turn.
        max_bugs: bugs an episode can start with; each is injected with probability
            ``bug_rate = 0.8 - 0.5 * strength``.

    >>> from convcodeworld_gym.tasks import load_tasks
    >>> task = load_tasks("humaneval")["HumanEval/0"]
    >>> a = SyntheticCoder(0.5).start(task, feedback="CF", seed=1).act({"turn": 0}).text
    >>> a == SyntheticCoder(0.5).start(task, feedback="CF-EF_full", seed=1).act({"turn": 0}).text
    True
    """

    synthetic = True

    def __init__(self, strength: float = 0.5, *, max_bugs: int = 3) -> None:
        if not 0.0 <= strength <= 1.0:
            raise ValueError(f"strength must be in [0, 1], got {strength}")
        if max_bugs < 0:
            raise ValueError(f"max_bugs must be >= 0, got {max_bugs}")
        self.strength = float(strength)
        self.max_bugs = max_bugs
        self.bug_rate = 0.8 - 0.5 * self.strength
        self.name = f"SYNTHETIC-coder(strength={self.strength:g})"

    def start(self, task: Task, *, feedback: str, seed: int) -> PolicyEpisode:
        verbal = "expert" if feedback.endswith("SEF") else "novice" if feedback.endswith("SNF") else "none"
        return _SyntheticEpisode(self, task, verbal, random.Random(f"synthetic:{seed}:{task.task_id}"))

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "strength": self.strength, "max_bugs": self.max_bugs, "precision": dict(PRECISION)}
