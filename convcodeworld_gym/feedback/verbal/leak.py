"""Expert leak guard: find and redact verbatim ground-truth lines in feedback text.

The secret is the reference *solution* (``task.canonical_solution``): lines that also
appear in the public instruction (signature, docstring examples) reveal nothing.

A line of the ground truth is *non-trivial* when, stripped, it is at least
``MIN_LINE_CHARS`` long and is not an import, a ``def``/``class`` line, a decorator, a
comment or docstring quote, and holds some computation (one of ``= ( [ { + - * / % < >``):
``raise ValueError`` or ``return result`` alone reveal nothing. Matching ignores
differences in whitespace."""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["leaked_lines", "redact", "nontrivial_lines", "MIN_LINE_CHARS", "REDACTED"]

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
