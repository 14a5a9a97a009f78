"""From a model's reply to the program that is compiled and tested.

The reference takes the first fenced ```python block of the reply, else the first fenced
block, else the whole reply, and removes any stray fences. For BigCodeBench it puts the
imports of ``code_prompt`` (the text before ``def task_func``) in front of the code.

A reasoning model's reply holds a thought before its answer (``<think>...</think>``: Qwen3, DeepSeek-R1; or a
reply that starts inside the thought and holds only ``</think>``, as R1-Distill's chat templates open the thought in
the prompt). Under ``reasoning="strip"`` (the env's default) the code judged is the answer's: :func:`read_reply`
removes the thoughts first, and a reply whose thought never closes, or that is a thought and nothing else, has no
answer: nothing is compiled or run. ``reasoning="keep"`` reads the reply as it is, as the reference did (its models
did not think).

An action that is code, not a reply, says so by its type (:class:`Code`): code carried over to a
later turn, or a BigCodeBench sample (:class:`Sample`, turn 0 of ``--turn0``). It is taken as it is:
a fenced example inside its docstring is part of it, never "the code" (the reference never parsed a
sample: pot.py ``parse_code`` returns a string as it is, 416-417).

Holds:
    Code             an action that is code: no reply extraction
    Sample           a BigCodeBench sample: a whole program, run as the reference's fork ran it
    REASONING_MODES  ``("strip", "keep")``: how a reply's thoughts are read
    ReasoningMode    their type
    Reading          a reply read for its answer: the answer (or None), the thought, why there is no answer
    read_reply       reply text -> its :class:`Reading`
    reply_code       reply text -> the code judged, or None when the reply has no answer
    UNCLOSED_THOUGHT the compilation feedback of a reply whose thought never closes
    ONLY_A_THOUGHT   the compilation feedback of a reply that is only a thought
    extract_code     reply text -> code text
    build_program    task + code -> the program that is executed
    visible_program  task + code -> the program as its author wrote it (an I/O task's code, not its wrapper)
    judged_program   the program a step runs, or None when nothing runs
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from .tasks import Task
from .tasks.record import quiet_compiling

__all__ = ["Code", "Sample", "REASONING_MODES", "ReasoningMode", "Reading", "read_reply", "reply_code", "extract_code",
           "build_program", "visible_program", "judged_program", "UNCLOSED_THOUGHT", "ONLY_A_THOUGHT"]

_PYTHON_BLOCK = re.compile(r"```[ \t]*(?:python3?|py)[ \t]*\r?\n(.*?)(?:\r?\n)?[ \t]*```", re.DOTALL | re.IGNORECASE)
_ANY_BLOCK = re.compile(r"```[^\n`]*\r?\n(.*?)(?:\r?\n)?[ \t]*```", re.DOTALL)
_FENCE = "```"
_THINK = re.compile(r"<(/?)think>", re.IGNORECASE)

#: How a reply's thoughts are read: ``"strip"`` removes them before the code is extracted (the default); ``"keep"``
#: reads the reply as it is, as the reference did.
REASONING_MODES: tuple[str, ...] = ("strip", "keep")
ReasoningMode = Literal["strip", "keep"]

#: The compilation feedback of a reply whose thought never closes: it has no answer.
UNCLOSED_THOUGHT = ("No answer: the reply's thought (<think>) never closes with </think>, so it has no answer; "
                    "nothing was compiled or run.")
#: The compilation feedback of a reply that is a thought and nothing else.
ONLY_A_THOUGHT = ("No answer: the reply holds a thought (<think>...</think>) and nothing after it; nothing was "
                  "compiled or run.")


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


@dataclass(frozen=True)
class Reading:
    """A reply read for its answer (:func:`read_reply`).

    Attributes:
        answer: the reply without its thoughts (the reply itself, of its own type, when it has none or under
            ``"keep"``); None when it has no answer.
        thought: the thoughts removed, joined by blank lines (``""`` when none).
        no_answer: why there is no answer (:data:`UNCLOSED_THOUGHT` or :data:`ONLY_A_THOUGHT`, the compilation
            feedback shown); None when there is one.
    """

    answer: str | None
    thought: str = ""
    no_answer: str | None = None


def read_reply(reply: str, reasoning: ReasoningMode = "strip") -> Reading:
    """The answer of ``reply`` and the thoughts removed from it.

    Under ``"strip"``, a thought is the text from ``<think>`` to the first ``</think>`` after it (tags in any case; a
    ``<think>`` inside a thought is its text: the model's tokenizer and vLLM's reasoning parsers end a thought at its
    first ``</think>``), and every ``</think>`` that no ``<think>`` opened closes a thought that began at the start of
    the reply, or where the answer text began after the previous thought: a reply can start inside its thought
    (R1-Distill's templates write ``<think>`` into the prompt), and the text between a thought's first ``</think>`` and
    a later one (a thought that nested its tags) is thought too. Inside the answer, a tag within a fenced block (an
    odd number of fences before it) is the code's own text. A thought that never closes leaves the reply without an
    answer, as does a reply that is thoughts and whitespace. ``"keep"`` reads nothing out: the reply is its own answer. A :class:`Code` action is code, never a
    reply: it is its own answer under either mode.

    >>> read_reply("<think>\\n```python\\nwrong\\n```\\n</think>\\n```python\\nright\\n```").answer
    '\\n```python\\nright\\n```'
    >>> read_reply("Drafting...\\n</think>\\nx = 1").answer  # R1-Distill: the thought was opened in the prompt
    '\\nx = 1'
    >>> read_reply("<think>still thinking ```python\\nx = 1\\n```").no_answer == UNCLOSED_THOUGHT
    True
    >>> read_reply('```python\\ns = "<think>"\\n```').answer  # a tag in the answer's code is code
    '```python\\ns = "<think>"\\n```'
    >>> read_reply("<think>a</think>b", "keep").answer
    '<think>a</think>b'
    """
    if reasoning not in REASONING_MODES:
        raise ValueError(f"reasoning must be one of {REASONING_MODES}, got {reasoning!r}")
    tags = list(_THINK.finditer(reply))
    if reasoning == "keep" or isinstance(reply, Code) or not tags:
        return Reading(reply)
    events = sorted([(t.start(), t.end(), "close" if t.group(1) else "open") for t in tags]
                    + [(f.start(), f.end(), "fence") for f in re.finditer(_FENCE, reply)])
    answer: list[str] = []
    thoughts: list[str] = []
    thinking = bool(tags[0].group(1))  # the first tag closes: the reply starts inside a thought
    thought_from = answer_from = 0
    in_code = False  # inside a fenced block of the answer
    for start, end, kind in events:
        if thinking:  # a thought ends at its first close; its fences and opening tags are its text
            if kind == "close":
                thoughts.append(reply[thought_from:start])
                thinking, answer_from = False, end
        elif kind == "fence":
            in_code = not in_code
        elif in_code:
            continue  # the answer's code mentions a tag
        elif kind == "open":
            answer.append(reply[answer_from:start])
            thinking, thought_from = True, end
        else:  # a close no open matched: the answer text so far was a thought
            thoughts.append("".join(answer) + reply[answer_from:start])
            answer, answer_from = [], end
    thought = "\n\n".join(t.strip() for t in thoughts)
    if thinking:
        return Reading(None, "\n\n".join(filter(None, (thought, reply[thought_from:].strip()))), UNCLOSED_THOUGHT)
    answer.append(reply[answer_from:])
    text = "".join(answer)
    return Reading(text, thought) if text.strip() else Reading(None, thought, ONLY_A_THOUGHT)


def reply_code(reply: str, reasoning: ReasoningMode = "strip") -> str | None:
    """The code judged for ``reply``: :func:`extract_code` of its answer (:func:`read_reply`); None when it has
    none.

    >>> reply_code("<think>```python\\nx = 0\\n```</think>```python\\nx = 1\\n```"), reply_code("<think>x = 0")
    ('x = 1', None)
    >>> reply_code("<think>```python\\nx = 0\\n```</think>```python\\nx = 1\\n```", "keep")
    'x = 0'
    """
    answer = read_reply(reply, reasoning).answer
    return None if answer is None else extract_code(answer)


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
