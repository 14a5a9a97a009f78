"""The chat prompts that make an LLM play the novice or the expert user, and the reply clean-up.

Structure as in the paper (our own wording): an instruction for the role, one worked
example (sorting a list of integers), then the fields of this turn: the task, for the
expert the ground-truth program, the previous code, and the feedback the user sees
(novice: compilation feedback and, when EF is on, execution feedback; expert: execution
feedback when EF is on and the shown tests failed). The model answers with a short
``Reasoning:`` and then ``User Feedback:``; only the feedback is kept."""

from __future__ import annotations

import re

from ..context import TurnContext
from ..compilation import NO_SYNTAX_ERRORS
from ..execution import shows_failure
from .rules import Expertise

__all__ = ["build_messages", "parse_reply", "strip_code_blocks", "LEAK_RETRY_MESSAGE", "FEEDBACK_MARKER"]

FEEDBACK_MARKER = "User Feedback:"

_EXAMPLE_TASK = (
    "Write a function that sorts a list of integers in ascending order and returns the sorted list. "
    "Negative numbers and zero must be handled.\n"
    ">>> sort_numbers([4, -2, 0, 7, -9, 1])\n"
    "[-9, -2, 0, 1, 4, 7]\n"
    "You should write self-contained code starting with:\n"
    "```python\ndef sort_numbers(values):\n```"
)
_EXAMPLE_TRUTH = "```python\ndef sort_numbers(values):\n    return sorted(values)\n```"
_EXAMPLE_CODE = (
    "```python\ndef sort_numbers(values):\n"
    "    for i in range(len(values)):\n"
    "        for j in range(len(values) - 1 - i):\n"
    "            if values[j] < values[j + 1]:\n"
    "                values[j], values[j + 1] = values[j + 1], values[j]\n"
    "    return values\n```"
)
_EXAMPLE_CODE_BROKEN = _EXAMPLE_CODE.replace("    return values", "  return values")
_EXAMPLE_CF_ERROR = (
    "Traceback (most recent call last):\n"
    '  File "tmp.py", line 6\n'
    "    return values\n"
    "IndentationError: unindent does not match any outer indentation level"
)
_EXAMPLE_EF = (
    "TEST_ASCENDING\n"
    "Traceback (most recent call last):\n"
    '  File "__test__.py", line 12, in test_ascending\n'
    "AssertionError: Lists differ: [7, 4, 1, 0, -2, -9] != [-9, -2, 0, 1, 4, 7]"
)

_EXPERT_ROLE = """\
You play a user who is an expert programmer and who knows exactly what the finished \
function must do. A code assistant (an LLM, not you) wrote the `Previous Code` for the \
`Task`. You are also given a `Ground Truth Code`: a correct solution that stands for \
your intention. Compare the two and write `User Feedback` that points out, concretely, \
where the previous code behaves differently from the ground truth and how to correct it.

Rules:
- Never reveal the ground truth code, never quote its lines, and never mention that you \
have a reference solution. Pass on its knowledge only indirectly, as an expert would.
- Do not write code, corrected or otherwise; describe the changes in words.
- Be specific: name the wrong values, the missing checks, the library functions to use."""

_NOVICE_ROLE = """\
You play a user with little programming experience. A code assistant (an LLM, not you) \
wrote the `Previous Code` for your `Task`, and running it gave the feedback shown. Write \
`User Feedback` in a novice's words that tells the assistant what went wrong.

Rules:
- Use only what the shown feedback says; you do not know the correct solution and add no \
other details.
- Do not write code, corrected or otherwise.
- It is fine to repeat the error message you got and to guess in plain words what it means."""

_ANSWER_FORMAT = (
    "Answer in this format:\nReasoning: <think step by step about the feedback to give>\n"
    f"{FEEDBACK_MARKER} <the feedback>"
)

_EXPERT_EXAMPLE_FEEDBACK = """\
1. Order: the nested loop swaps two neighbours when the left one is smaller, which moves \
large numbers to the front, so the list ends up in descending order. The comparison has \
to go the other way for ascending order.
2. Simplicity: Python's built-in `sorted()` already sorts in ascending order, handles \
negative numbers and zero, and runs in O(n log n) instead of the O(n^2) of this loop.
3. Side effects: the function reorders the caller's list in place; returning a new sorted \
list leaves the input untouched."""

_NOVICE_EXAMPLE_FEEDBACK_CF = """\
I got this error:
```
IndentationError: unindent does not match any outer indentation level
```
I think the line `return values` is not lined up with the rest of the function. Maybe \
there is also an easier way to sort a list in Python?"""

_NOVICE_EXAMPLE_FEEDBACK_EF = """\
I got this error:
```
AssertionError: Lists differ: [7, 4, 1, 0, -2, -9] != [-9, -2, 0, 1, 4, 7]
```
It looks like the list came back from the biggest number to the smallest, but I wanted \
the smallest first. Maybe there is an easier way to sort a list in Python?"""


def _fence(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


def _fields(pairs: list[tuple[str, str]]) -> str:
    return "\n\n".join(f"{name}:\n{value}" for name, value in pairs)


def _example(expertise: Expertise, with_ef: bool) -> str:
    if expertise == "expert":
        pairs = [("Task", _EXAMPLE_TASK), ("Ground Truth Code", _EXAMPLE_TRUTH), ("Previous Code", _EXAMPLE_CODE)]
        if with_ef:
            pairs.append(("Execution Feedback", _EXAMPLE_EF))
        reasoning = "The previous code sorts in the wrong direction; compare it with the intended behaviour."
        answer = _EXPERT_EXAMPLE_FEEDBACK
    elif with_ef:
        pairs = [
            ("Task", _EXAMPLE_TASK),
            ("Previous Code", _EXAMPLE_CODE),
            ("Compilation Feedback", NO_SYNTAX_ERRORS),
            ("Execution Feedback", _EXAMPLE_EF),
        ]
        reasoning = "The test shows the numbers in the reverse order."
        answer = _NOVICE_EXAMPLE_FEEDBACK_EF
    else:
        pairs = [("Task", _EXAMPLE_TASK), ("Previous Code", _EXAMPLE_CODE_BROKEN), ("Compilation Feedback", _EXAMPLE_CF_ERROR)]
        reasoning = "The error points at the indentation of the last line."
        answer = _NOVICE_EXAMPLE_FEEDBACK_CF
    return f"{_fields(pairs)}\n\nReasoning: {reasoning}\n{FEEDBACK_MARKER}\n{answer}"


def build_messages(expertise: Expertise, context: TurnContext) -> list[dict[str, str]]:
    """The chat messages asking the LLM for this turn's feedback.

    The novice's messages never contain the task's ground truth; the expert's always do.
    """
    ef = context.execution_feedback
    ef_failing = shows_failure(ef)
    if expertise == "expert":
        pairs = [("Ground Truth Code", _fence(context.task.solution_code)), ("Previous Code", _fence(context.code))]
        if ef_failing:
            pairs.append(("Execution Feedback", ef))  # type: ignore[arg-type]
        role, with_ef = _EXPERT_ROLE, ef_failing
    else:
        pairs = [("Previous Code", _fence(context.code)), ("Compilation Feedback", context.compilation_feedback)]
        if ef is not None:
            pairs.append(("Execution Feedback", ef))
        role, with_ef = _NOVICE_ROLE, ef is not None
    system = f"{role}\n\n{_ANSWER_FORMAT}\n\n---\nExample\n\n{_example(expertise, with_ef)}\n---"
    user = _fields([("Task", context.task.prompt), *pairs]) + "\n\nReasoning:"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


LEAK_RETRY_MESSAGE = (
    "Your feedback quotes lines of the ground truth code. Rewrite it so that it contains no line of "
    "that code and does not mention it, and write no code at all. Keep the same format."
)

_FENCED = re.compile(r"```[^\n`]*\n?(.*?)(?:```|\Z)", re.DOTALL)
_ERROR_LINE = re.compile(r"^\s*(Traceback \(most recent call last\)|File \"|\w*(Error|Exception|Warning)\b)", re.MULTILINE)


def strip_code_blocks(text: str, *, keep_error_output: bool = False) -> str:
    """Remove fenced blocks (```...```, an unclosed fence runs to the end).

    With ``keep_error_output`` a block that quotes an error message or traceback stays:
    novices paste the error they got.

    >>> strip_code_blocks("Fix it.\\n```python\\nx = 1\\n```\\nThanks")
    'Fix it.\\n\\nThanks'
    >>> strip_code_blocks("I got:\\n```\\nKeyError: 'a'\\n```", keep_error_output=True)
    "I got:\\n```\\nKeyError: 'a'\\n```"
    """

    def replace(match: re.Match[str]) -> str:
        body = match.group(1)
        if keep_error_output and _ERROR_LINE.search(body) and not re.search(r"^\s*(def|class|import)\s", body, re.MULTILINE):
            return match.group(0)
        return ""

    return _FENCED.sub(replace, text)


def parse_reply(reply: str, expertise: Expertise) -> str:
    """The feedback part of an LLM reply: after the last ``User Feedback:``, code blocks removed.

    >>> parse_reply("Reasoning: hmm\\nUser Feedback: Sort ascending.\\n```python\\nsorted(x)\\n```", "expert")
    'Sort ascending.'
    """
    _, marker, after = reply.rpartition(FEEDBACK_MARKER)
    text = after if marker else reply
    text = strip_code_blocks(text, keep_error_output=expertise == "novice")
    return re.sub(r"\n{3,}", "\n\n", text).strip()
