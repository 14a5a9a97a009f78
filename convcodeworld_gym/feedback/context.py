"""What a verbal-feedback provider is given about one turn.

Holds:
    TurnContext    the task, the code just judged, and the feedback shown for it
    VerbalFeedback the protocol every novice/expert provider implements
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..combos import FeedbackConfig
from ..sandbox.result import ExecutionResult
from ..tasks import Task

__all__ = ["TurnContext", "VerbalFeedback"]


@dataclass(frozen=True)
class TurnContext:
    """One turn, as a verbal-feedback provider sees it.

    Attributes:
        task: the task (an expert may use ``task.ground_truth``; a novice must not).
        turn: index of the turn whose code is judged (0 = first submission).
        code: the code the model submitted this turn (before the import header).
        compile_ok: whether ``code`` compiled.
        compilation_feedback: the CF text shown.
        execution_feedback: the EF text shown, or ``None`` when EF is off or the code did not compile.
        result: the full execution result (the truth, all tests), for offline simulators.
        config: the feedback combination being played.
    """

    task: Task
    turn: int
    code: str
    compile_ok: bool
    compilation_feedback: str
    execution_feedback: str | None
    result: ExecutionResult
    config: FeedbackConfig


@runtime_checkable
class VerbalFeedback(Protocol):
    """A simulated user: novice or expert. Returns the feedback text, or ``None`` to stay silent."""

    expertise: str  # "novice" or "expert"

    def __call__(self, context: TurnContext) -> str | None: ...
