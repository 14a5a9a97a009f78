"""From a model's reply to the program that is compiled and tested.

The reference takes the first fenced ```python block of the reply, else the first fenced
block, else the whole reply, and removes any stray fences. For BigCodeBench it puts the
imports of ``code_prompt`` (the text before ``def task_func``) in front of the code.

Holds:
    extract_code   reply text -> code text
    build_program  task + code -> the program that is executed
"""

from __future__ import annotations

import re

from .tasks import Task

__all__ = ["extract_code", "build_program"]

_PYTHON_BLOCK = re.compile(r"```[ \t]*(?:python3?|py)[ \t]*\r?\n(.*?)(?:\r?\n)?[ \t]*```", re.DOTALL | re.IGNORECASE)
_ANY_BLOCK = re.compile(r"```[^\n`]*\r?\n(.*?)(?:\r?\n)?[ \t]*```", re.DOTALL)
_FENCE = "```"


def extract_code(reply: str) -> str:
    """Return the code in a model's reply.

    Order: the first ```python (or ```py) block; else the first fenced block with any
    language tag; else the whole reply. Leftover fence markers are removed, as the
    reference does. A reply with an unterminated fence yields everything after it.

    >>> extract_code("Here:\\n```python\\ndef f():\\n    return 1\\n```\\nDone.")
    'def f():\\n    return 1'
    >>> extract_code("```\\nx = 1\\n```")
    'x = 1'
    >>> extract_code("x = 2")
    'x = 2'
    """
    match = _PYTHON_BLOCK.search(reply) or _ANY_BLOCK.search(reply)
    if match is not None:
        return match.group(1).replace(_FENCE, "")
    opened = re.search(r"```[ \t]*(?:python3?|py)?[ \t]*\r?\n", reply, re.IGNORECASE)
    if opened is not None:  # unterminated fence: take what follows it
        return reply[opened.end():].replace(_FENCE, "")
    return reply.replace(_FENCE, "")


def build_program(task: Task, code: str) -> str:
    """The program that is executed: the task's import header followed by the model's code.

    >>> from convcodeworld_gym.tasks import Task
    >>> t = Task("t/0", "p", "import os\\ndef task_func():\\n", "task_func", "    return 1\\n", "")
    >>> build_program(t, "def task_func():\\n    return os.sep")
    'import os\\ndef task_func():\\n    return os.sep'
    """
    return task.header + code
