"""The prompts the LLM policy sends, following the reference's structure in our own words.

Turn 0 asks for code from the task alone, in BigCodeBench's instruct prompt (a run with
``--turn0`` plays the model's BigCodeBench samples instead, as the paper does). A later turn gives the task, the previous code
and the feedback of this turn (compilation, then execution, then the user's words, each
only when shown; "No syntax errors" is never shown, as in the reference), and asks for
corrected code. The reply is expected in a ```python block.

Holds:
    SYSTEM_PROMPT      the system message
    initial_prompt     the user message of turn 0
    feedback_sections  this turn's feedback as the model is shown it
    refinement_prompt  the user message of a feedback turn
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..feedback.compilation import compiled

__all__ = ["SYSTEM_PROMPT", "initial_prompt", "feedback_sections", "refinement_prompt"]

SYSTEM_PROMPT = (
    "You are an expert Python programmer. You write complete, executable, self-contained code "
    "that meets the user's specification. Answer with the code in one ```python block."
)

_SECTIONS = (
    ("compilation_feedback", "Compilation feedback", "what the compiler said about the previous code"),
    ("execution_feedback", "Execution feedback", "results of running the tests on the previous code"),
    ("verbal_feedback", "User feedback", "what the user said about the previous code"),
)


def initial_prompt(task: str) -> str:
    """The first request: BigCodeBench's own instruct prompt for chat models (the task in a
    fenced block), so that turn 0 is the single-turn generation BigCodeBench scores.

    >>> print(initial_prompt("Add two numbers."))
    Please provide a self-contained Python script that solves the following problem in a markdown code block:
    ```
    Add two numbers.
    ```
    <BLANKLINE>
    """
    return (
        "Please provide a self-contained Python script that solves the following problem in a markdown code block:\n"
        f"```\n{task.strip()}\n```\n"
    )


def feedback_sections(observation: Mapping[str, Any]) -> list[str]:
    """This turn's feedback as the model is shown it: compilation, execution, the user's words, each with its label,
    only when shown ("No syntax errors" never is, as in the reference).

    >>> feedback_sections({"compilation_feedback": "No syntax errors", "execution_feedback": "TEST_1\\nAssertionError",
    ...                    "verbal_feedback": ""})
    ['Execution feedback (results of running the tests on the previous code):\\nTEST_1\\nAssertionError']
    """
    shown = {key: str(observation.get(key) or "").strip() for key, _, _ in _SECTIONS}
    if compiled(shown["compilation_feedback"]):
        shown["compilation_feedback"] = ""  # the reference never shows it to the model
    return [f"{label} ({what}):\n{shown[key]}" for key, label, what in _SECTIONS if shown[key]]


def refinement_prompt(observation: Mapping[str, Any]) -> str:
    """A feedback turn: the task, the previous code and this turn's feedback, asking for a fix.

    >>> obs = {"task": "T.", "code": "x = 1", "compilation_feedback": "No syntax errors",
    ...        "execution_feedback": "TEST_1\\nAssertionError", "verbal_feedback": ""}
    >>> text = refinement_prompt(obs)
    >>> "Previous code:\\n```python\\nx = 1\\n```" in text, "Execution feedback" in text, "User feedback" in text
    (True, True, False)
    >>> "No syntax errors" in text, "Compilation feedback" in text
    (False, False)
    """
    sections = feedback_sections(observation)
    given = ["the task", "your previous code"] + [section.split(" (", 1)[0].lower() for section in sections]
    parts = [
        f"Task:\n{str(observation['task']).strip()}",
        f"Previous code:\n```python\n{str(observation.get('code', '')).rstrip()}\n```",
        *sections,
    ]
    parts.append(
        f"You are given {', '.join(given)} because the previous code did not meet the requirements. "
        "Correct it and reply with the complete new code in one ```python block."
    )
    return "\n\n".join(parts)
