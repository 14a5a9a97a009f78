"""Compilation feedback (CF): Python's ``compile()`` of the model's code."""

from __future__ import annotations

import traceback

from ..tasks.record import quiet_compiling

__all__ = ["NO_SYNTAX_ERRORS", "COMPILE_FILENAME", "compilation_feedback", "compiled"]

NO_SYNTAX_ERRORS = "No syntax errors"
#: File name ``compile()`` is given, as in the reference (tracebacks say ``File "tmp.py"``).
COMPILE_FILENAME = "tmp.py"


def compilation_feedback(code: str) -> tuple[bool, str]:
    """Compile ``code`` (never run it) and return ``(ok, text)``.

    ``text`` is ``"No syntax errors"`` on success, else the traceback of the error.

    >>> compilation_feedback("x = 1")
    (True, 'No syntax errors')
    >>> ok, text = compilation_feedback("def f(:\\n  pass")
    >>> ok, text.splitlines()[0], text.splitlines()[-1]
    (False, 'Traceback (most recent call last):', 'SyntaxError: invalid syntax')
    """
    try:
        with quiet_compiling():
            compile(code, COMPILE_FILENAME, "exec")
    except Exception as exc:  # SyntaxError, ValueError (NUL bytes), RecursionError, MemoryError ...
        detail = "".join(traceback.format_exception_only(type(exc), exc))
        return False, "Traceback (most recent call last):\n" + detail
    return True, NO_SYNTAX_ERRORS


def compiled(text: str | None) -> bool:
    """Whether a CF text (as :func:`compilation_feedback` writes it) says the code compiled.

    >>> compiled(NO_SYNTAX_ERRORS), compiled(compilation_feedback("def f(:")[1]), compiled("")
    (True, False, False)
    """
    return text == NO_SYNTAX_ERRORS
