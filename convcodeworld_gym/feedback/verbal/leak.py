"""Leak guards: find and redact, in a simulated user's words, verbatim ground-truth lines and hidden tests' literals.

**Ground truth** (the expert's guard). The secret is the reference *solution* (``task.canonical_solution``): lines that
also appear in the public instruction (signature, docstring examples) reveal nothing.

A line of the ground truth is *non-trivial* when, stripped, it is at least
``MIN_LINE_CHARS`` long and is not an import, a ``def``/``class`` line, a decorator, a
comment or docstring quote, and holds some computation (one of ``= ( [ { + - * / % < >``):
``raise ValueError`` or ``return result`` alone reveal nothing. Matching ignores
differences in whitespace.

**Hidden tests** (every provider's guard, applied by the env: :func:`guard_hidden_tests`). The secret is what the
tests the feedback combination does not show hold (:attr:`~..context.TurnContext.hidden_tests`): their literals
(:func:`hidden_literals`) that are specific enough to tell (a string of 4 characters or more, a number of 3 digits or
more, a literal list, tuple, set or dict) and that neither a shown test, the rest of the test module, the instruction,
the program, the feedback shown nor the ground truth holds."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import replace

from ...tasks import TEST_CLASS, Task
from ...tasks.record import parse_source
from ..context import TurnContext, VerbalReply

__all__ = ["leaked_lines", "redact", "nontrivial_lines", "hidden_literals", "guard_hidden_tests", "mentions",
           "MIN_LINE_CHARS", "REDACTED"]

MIN_LINE_CHARS = 16
REDACTED = "[...]"
_TRIVIAL_START = ("import ", "from ", "def ", "async def ", "class ", "@", "#", '"""', "'''")
_COMPUTATION = frozenset("=([{+-*/%<>")


def _squash(text: str) -> str:
    return " ".join(text.split())


def nontrivial_lines(ground_truth: str, public: str = "") -> list[str]:
    """The ground-truth lines (stripped, whitespace squashed) that would reveal the solution if
    quoted; lines that occur in the ``public`` text (the task's instruction) are left out.

    >>> nontrivial_lines("import os\\ndef f(x):\\n    return sorted(x, key=len)[::-1]\\n    raise ValueError")
    ['return sorted(x, key=len)[::-1]']
    """
    out: list[str] = []
    known = _squash(public)
    for raw in ground_truth.splitlines():
        line = _squash(raw)
        if (
            len(line) >= MIN_LINE_CHARS
            and not line.startswith(_TRIVIAL_START)
            and not _COMPUTATION.isdisjoint(line)
            and line not in out
            and line not in known
        ):
            out.append(line)
    return out


def leaked_lines(text: str, ground_truth: str, public: str = "") -> list[str]:
    """The non-trivial ground-truth lines that ``text`` contains verbatim (whitespace-insensitive).

    >>> gt = "def f(x):\\n    return sorted(x, key=len)[::-1]\\n"
    >>> leaked_lines("Sort by length, longest first.", gt)
    []
    >>> leaked_lines("Use `return sorted(x,  key=len)[::-1]` here", gt)
    ['return sorted(x, key=len)[::-1]']
    """
    squashed = _squash(text)
    return [line for line in nontrivial_lines(ground_truth, public) if line in squashed]


def _pattern(line: str) -> re.Pattern[str]:
    return re.compile(r"\s+".join(re.escape(part) for part in line.split()))


def redact(text: str, lines: Sequence[str]) -> str:
    """Replace every occurrence of ``lines`` (whitespace-insensitive) in ``text`` with ``[...]``.

    >>> redact("Try: return sorted(x, key=len)[::-1] now", ["return sorted(x, key=len)[::-1]"])
    'Try: [...] now'
    """
    for line in sorted(lines, key=len, reverse=True):
        text = _pattern(line).sub(REDACTED, text)
    return text


#: The shortest string literal of a hidden test the guard treats as telling (shorter ones are everywhere).
MIN_STRING_CHARS = 4
#: The longest string literal of letters alone that is taken for a word of prose, not a test's.
MAX_PLAIN_WORD_CHARS = 8
#: The fewest digits a number literal of a hidden test needs to be treated as telling.
MIN_NUMBER_DIGITS = 3


def _telling(node: ast.AST) -> list[str]:
    """The texts a literal at ``node`` would be written as in prose, if it is specific enough to tell a hidden test."""
    if isinstance(node, ast.Constant):
        value = node.value
        text = value.strip() if isinstance(value, str) else ""
        # a word alone ("which", "apple") is prose, not a test's: a longer one, or one with more than letters, tells
        if len(text) >= MIN_STRING_CHARS and (len(text) > MAX_PLAIN_WORD_CHARS or not text.isalpha()):
            return [text]
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            text = repr(value)
            if sum(c.isdigit() for c in text) >= MIN_NUMBER_DIGITS:
                return [text] + ([f"{value:_}"] if isinstance(value, int) else [])
        return []
    if isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
        try:
            value = ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return []
        text = repr(value)
        return [text] if len(text) >= 6 else []
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return ["-" + text for text in _telling(node.operand)]
    return []


def _literals(nodes: Iterable[ast.AST]) -> set[str]:
    found: set[str] = set()
    for root in nodes:
        for node in ast.walk(root):
            found.update(_telling(node))
    return found


@functools.lru_cache(maxsize=1024)
def _split_literals(test_source: str, hidden: frozenset[str]) -> tuple[frozenset[str], frozenset[str]]:
    """(literals of the ``hidden`` test methods, literals of everything else in the test module)."""
    tree = parse_source(test_source)
    if tree is None:
        return frozenset(), frozenset()
    secret: list[ast.AST] = []
    public: list[ast.AST] = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == TEST_CLASS:
            for item in node.body:
                is_hidden = isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name in hidden
                (secret if is_hidden else public).append(item)
        else:
            public.append(node)
    return frozenset(_literals(secret)), frozenset(_literals(public))


def hidden_literals(task: Task, hidden: Iterable[str], public: str = "") -> list[str]:
    """The literals of ``task``'s ``hidden`` test methods that would tell one if a text quoted them: specific enough
    (see the module docstring), in no other part of the test module and not in ``public`` (what the model may see:
    the instruction, its program, the feedback shown); longest first.

    >>> task = Task("d/0", "Sum a list.", "def f(xs):\\n", "f", "", "class TestCases:\\n"
    ...     " def test_a(s): assert f([1, 2]) == 3\\n"
    ...     " def test_b(s): assert f([40, 2, 1]) == 43 and f(['secret word']) == 'secret word'\\n")
    >>> hidden_literals(task, ["test_b"])
    ["['secret word']", 'secret word', '[40, 2, 1]']
    >>> hidden_literals(task, ["test_b"], public="the list [40, 2, 1]")
    ["['secret word']", 'secret word']
    """
    secret, elsewhere = _split_literals(task.test, frozenset(hidden))
    squashed = _squash(public)
    return sorted((lit for lit in secret - elsewhere if _squash(lit) not in squashed and not _named_in(lit, public)),
                  key=lambda t: (-len(t), t))


_DOTTED = re.compile(r"(?=.*\.)\.?[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def _named_in(literal: str, public: str) -> bool:
    """Is ``literal`` a dotted name (a patch target: ``'random.shuffle'``, ``'.choice'``) whose last part ``public`` names? Then it
    says which library function the solution uses, not what a test holds."""
    return _DOTTED.fullmatch(literal) is not None and re.search(rf"\b{re.escape(literal.rsplit('.', 1)[1])}\b", public) is not None


def mentions(text: str, literal: str) -> bool:
    """Does ``text`` hold ``literal`` (whitespace-insensitive), not as a part of a longer word or number?

    >>> mentions("try 1234 here", "1234"), mentions("try 12345", "1234"), mentions("a  [1,  2]", "[1, 2]")
    (True, False, True)

    A literal with more characters than ``text`` (whitespace aside) is not looked for: an input/output task's hidden
    input can be megabytes, and its pattern would take seconds to build.
    """
    if len(literal) > len(text) and len("".join(literal.split())) > len("".join(text.split())):
        return False
    return _bounded(literal).search(text) is not None


def _bounded(literal: str) -> re.Pattern[str]:
    core = _pattern(literal).pattern
    return re.compile((r"(?<!\w)" if literal[:1].isalnum() or literal[:1] == "_" else "") + core
                      + (r"(?!\w)" if literal[-1:].isalnum() or literal[-1:] == "_" else ""))


def guard_hidden_tests(reply: VerbalReply | str | None, context: TurnContext) -> VerbalReply | str | None:
    """``reply`` with every literal of a hidden test (:func:`hidden_literals` of ``context.hidden_tests``, public
    being what the model is shown this turn) replaced by :data:`REDACTED`; a :class:`~..context.VerbalReply` records
    how many in ``leak["hidden_literals_redacted"]``. What a simulated user says must not tell a policy what the
    feedback hides, whoever wrote it (an LLM, the offline rules, a provider of the user's)."""
    text = reply.text if isinstance(reply, VerbalReply) else reply
    if not text or not context.hidden_tests:
        return reply
    # What the model is shown, and the ground truth: an expert may speak of the solution (its own guard keeps it from
    # quoting it), and a literal the solution holds tells nothing of a test that another reading of the task would not.
    public = "\n".join((context.task.prompt, context.code, context.compilation_feedback, context.execution_feedback or "",
                        context.task.solution_code))
    found = [lit for lit in hidden_literals(context.task, context.hidden_tests, public) if mentions(text, lit)]
    if not found:
        return reply
    guarded = text
    for literal in found:
        guarded = _bounded(literal).sub(REDACTED, guarded)
    if not isinstance(reply, VerbalReply):
        return guarded
    return replace(reply, text=guarded, leak={**reply.leak, "hidden_literals_redacted": len(found)})
