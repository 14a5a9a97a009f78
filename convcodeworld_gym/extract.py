"""From a model's reply to the program that is compiled and tested.

The reference takes the first fenced ```python block of the reply, else the first fenced
block, else the whole reply, and removes any stray fences. For BigCodeBench it puts the
imports of ``code_prompt`` (the text before ``def task_func``) in front of the code.

An action that is code, not a reply, says so by its type (:class:`Code`): code carried over to a
later turn, or a BigCodeBench sample (:class:`Sample`, turn 0 of ``--turn0``). It is taken as it is:
a fenced example inside its docstring is part of it, never "the code" (the reference never parsed a
sample: pot.py ``parse_code`` returns a string as it is, 416-417).

Holds:
    Code             an action that is code: no reply extraction
    Sample           a BigCodeBench sample: a whole program, run as the reference's fork ran it
    extract_code     reply text -> code text
    build_program    task + code -> the program that is executed
    visible_program  task + code -> the program as its author wrote it (an I/O task's code, not its wrapper)
    judged_program   the program a step runs, or None when nothing runs
"""

from __future__ import annotations

import re

from .tasks import Task
from .tasks.record import quiet_compiling

__all__ = ["Code", "Sample", "extract_code", "build_program", "visible_program", "judged_program"]

_PYTHON_BLOCK = re.compile(r"```[ \t]*(?:python3?|py)[ \t]*\r?\n(.*?)(?:\r?\n)?[ \t]*```", re.DOTALL | re.IGNORECASE)
_ANY_BLOCK = re.compile(r"```[^\n`]*\r?\n(.*?)(?:\r?\n)?[ \t]*```", re.DOTALL)
_FENCE = "```"


class Code(str):
    """An action that is code, not a model's reply: :func:`extract_code` returns it as it is (fences and all), and
    the task's import header is put in front of it as of any code.

    >>> extract_code(Code("```python\\nx = 1\\n```"))  # as it is
    '```python\\nx = 1\\n```'
    """

    __slots__ = ()


class Sample(Code):
    """A BigCodeBench sample (``task_id``, ``solution``): a model's whole single-turn program, judged as turn 0.

    It is run as the reference's fork ran it (bigcodebench/evaluate.py:134-142 in the fork): the solution alone; from a
    ``*-sanitized-calibrated.jsonl`` file (``calibrated``) the task's ``code_prompt``, ``"\\n    pass\\n"`` and the
    solution, so that a solution that is a function's body alone becomes the body of ``task_func``. The compilation
    feedback is the solution's own, as the reference's next turn compiled it (pot.py:437-447).

    >>> from convcodeworld_gym.tasks import Task
    >>> t = Task("t/0", "p", "import os\\ndef task_func():\\n", "task_func", "    return 1\\n", "")
    >>> Sample("    return os.sep", calibrated=True).program(t)
    'import os\\ndef task_func():\\n\\n    pass\\n    return os.sep'
    >>> Sample("def task_func():\\n    return 2").program(t)
    'def task_func():\\n    return 2'
    """

    calibrated: bool

    def __new__(cls, solution: str, calibrated: bool = False) -> Sample:
        sample = super().__new__(cls, solution)
        sample.calibrated = calibrated
        return sample

    def __getnewargs__(self) -> tuple[str, bool]:  # pickles (vector envs) keep the calibration
        return str(self), self.calibrated

    def program(self, task: Task) -> str:
        """The program the reference's fork ran for this sample of ``task``."""
        return task.code_prompt + "\n    pass\n" + self if self.calibrated else str(self)


def extract_code(reply: str) -> str:
    """Return the code in a model's reply.

    Order: the first ```python (or ```py) block; else the first fenced block with any
    language tag; else the whole reply. Leftover fence markers are removed, as the
    reference does. A reply with an unterminated fence yields everything after it.
    :class:`Code` (a sample, carried code) is no reply: it is returned as it is.

    >>> extract_code("Here:\\n```python\\ndef f():\\n    return 1\\n```\\nDone.")
    'def f():\\n    return 1'
    >>> extract_code("```\\nx = 1\\n```")
    'x = 1'
    >>> extract_code("x = 2")
    'x = 2'
    """
    if isinstance(reply, Code):
        return reply
    match = _PYTHON_BLOCK.search(reply) or _ANY_BLOCK.search(reply)
    if match is not None:
        return match.group(1).replace(_FENCE, "")
    opened = re.search(r"```[ \t]*(?:python3?|py)?[ \t]*\r?\n", reply, re.IGNORECASE)
    if opened is not None:  # unterminated fence: take what follows it
        return reply[opened.end():].replace(_FENCE, "")
    return reply.replace(_FENCE, "")


def build_program(task: Task, code: str) -> str:
    """The program that is executed: :meth:`~.tasks.Task.program_for` the model's code (the task's import header
    followed by it; an input/output task's wrapper of it); a :class:`Sample`'s own program (:meth:`Sample.program`).

    >>> from convcodeworld_gym.tasks import Task
    >>> t = Task("t/0", "p", "import os\\ndef task_func():\\n", "task_func", "    return 1\\n", "")
    >>> build_program(t, "def task_func():\\n    return os.sep")
    'import os\\ndef task_func():\\n    return os.sep'
    """
    if isinstance(code, Sample):
        return code.program(task)
    return task.program_for(code)


def visible_program(task: Task, code: str) -> str:
    """The program as its author wrote it, what compile errors, code facts and simulated users refer to: the program
    run (:func:`build_program`), but an input/output task's code itself, not the wrapper that runs it
    (:meth:`~.tasks.Task.visible_program`).

    >>> from convcodeworld_gym.tasks import IOTask, IOCase
    >>> t = IOTask("io/0", "p", "", "", "", "", cases=(IOCase("1", "1"),))
    >>> visible_program(t, "print(input())")
    'print(input())'
    """
    if isinstance(code, Sample):
        return code.program(task)
    return task.visible_program(code)


def judged_program(task: Task, code: str, compiles: bool) -> str | None:
    """The program a step runs for ``code`` (whose compilation succeeded when ``compiles``), or None when nothing runs:
    code that does not compile is not run, but a :class:`Sample` runs whenever its program compiles (the reference's
    fork ran every sample, and a calibrated one is more than its solution: a body alone compiles in ``task_func``).

    >>> from convcodeworld_gym.tasks import Task
    >>> t = Task("t/0", "p", "def task_func():\\n", "task_func", "    return 1\\n", "")
    >>> judged_program(t, "    return 2", False) is None, judged_program(t, Sample("    return 2", calibrated=True), False)
    (True, 'def task_func():\\n\\n    pass\\n    return 2')
    """
    program = build_program(task, code)
    if compiles:
        return program
    if not isinstance(code, Sample):
        return None
    try:
        with quiet_compiling():
            compile(program, "<sample>", "exec")
    except Exception:  # SyntaxError, ValueError (NUL bytes), RecursionError, ...
        return None
    return program
