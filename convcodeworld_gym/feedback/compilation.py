"""Compilation feedback (CF): Python's ``compile()`` of the model's code.

The text has the reference's shape: its ``compile_code`` (``convcodeworld/pot.py``, lines 21-26) returns
``traceback.format_exc()`` of the failed ``compile(code, 'tmp.py', mode='exec')``, so the traceback starts
with the frame of that call in the reference's own file, then the error as ``compile`` reports it. The
reference's frame is written with its path normalised to the file's name (:data:`REFERENCE_FRAME`): the
directory the reference was installed in is no part of the feedback.

A model's reply is compiled by :func:`reply_feedback`: the code of its answer (a reasoning model's thoughts removed,
:func:`~convcodeworld_gym.extract.read_reply`), or, for a reply with no answer, no compilation at all and one line
saying why.

Holds:
    NO_SYNTAX_ERRORS      the text of code that compiles
    COMPILE_FILENAME      the file name ``compile()`` is given
    REFERENCE_FRAME       the reference's own frame, first in every CF traceback
    compilation_feedback  code -> (ok, text)
    ReplyFeedback         a reply's code judged, whether it compiled, the text, and how the reply was read
    reply_feedback        reply -> its ReplyFeedback
    compiled              does a CF text say the code compiled
"""

from __future__ import annotations

import traceback
from typing import NamedTuple

from ..extract import ReasoningMode, Reading, extract_code, read_reply
from ..tasks.record import quiet_compiling

__all__ = ["NO_SYNTAX_ERRORS", "COMPILE_FILENAME", "REFERENCE_FRAME", "compilation_feedback", "ReplyFeedback",
           "reply_feedback", "compiled"]

NO_SYNTAX_ERRORS = "No syntax errors"
#: File name ``compile()`` is given, as in the reference (tracebacks say ``File "tmp.py"``).
COMPILE_FILENAME = "tmp.py"
#: The frame of the reference's ``compile`` call (``convcodeworld/pot.py``, line 23) that its traceback shows
#: first, with the path normalised to the file's name.
REFERENCE_FRAME = """  File "pot.py", line 23, in compile_code\n    compile(code, 'tmp.py', mode='exec')\n"""
_HEADER = "Traceback (most recent call last):\n"


def compilation_feedback(code: str) -> tuple[bool, str]:
    """Compile ``code`` (never run it) and return ``(ok, text)``.

    ``text`` is ``"No syntax errors"`` on success, else the traceback of the error as the reference's
    ``compile_code`` writes it: its own frame (:data:`REFERENCE_FRAME`), then the error.

    >>> compilation_feedback("x = 1")
    (True, 'No syntax errors')
    >>> ok, text = compilation_feedback("def f(:\\n  pass")
    >>> print(text, end="")
    Traceback (most recent call last):
      File "pot.py", line 23, in compile_code
        compile(code, 'tmp.py', mode='exec')
      File "tmp.py", line 1
        def f(:
              ^
    SyntaxError: invalid syntax
    """
    try:
        with quiet_compiling():
            compile(code, COMPILE_FILENAME, "exec")
    except Exception as exc:  # SyntaxError, ValueError (NUL bytes), RecursionError, MemoryError ...
        detail = "".join(traceback.format_exception_only(type(exc), exc))
        return False, _HEADER + REFERENCE_FRAME + detail
    return True, NO_SYNTAX_ERRORS


class ReplyFeedback(NamedTuple):
    """The compilation of one reply: ``code`` (the code judged; ``""`` when the reply has no answer), ``ok`` (it
    compiled; False without an answer), ``text`` (the compilation feedback, or the one line saying why there is no
    answer) and ``reading`` (how the reply was read: its answer and thought)."""

    code: str
    ok: bool
    text: str
    reading: Reading


def reply_feedback(reply: str, reasoning: ReasoningMode = "strip") -> ReplyFeedback:
    """Compile the code of ``reply``'s answer (its thoughts removed under ``"strip"``); a reply with no answer (its
    thought never closes, or it is only a thought) is not compiled: ``ok`` False and the text says why.

    >>> reply_feedback("<think>```python\\ndef f(:\\n```</think>```python\\nx = 1\\n```")[:3]
    ('x = 1', True, 'No syntax errors')
    >>> reply_feedback("<think>```python\\nx = 1\\n```").text.startswith("No answer:")
    True
    """
    reading = read_reply(reply, reasoning)
    if reading.answer is None:
        return ReplyFeedback("", False, str(reading.no_answer), reading)
    code = extract_code(reading.answer)
    ok, text = compilation_feedback(code)
    return ReplyFeedback(code, ok, text, reading)


def compiled(text: str | None) -> bool:
    """Whether a CF text (as :func:`compilation_feedback` writes it) says the code compiled.

    >>> compiled(NO_SYNTAX_ERRORS), compiled(compilation_feedback("def f(:")[1]), compiled("")
    (True, False, False)
    """
    return text == NO_SYNTAX_ERRORS
