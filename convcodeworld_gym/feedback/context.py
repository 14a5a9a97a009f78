"""What a verbal-feedback provider is given about one turn, and what it may return."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Union, runtime_checkable

from ..combos import FeedbackConfig
from ..sandbox.result import ExecutionResult
from ..tasks import Task

__all__ = ["TurnContext", "VerbalReply", "VerbalFeedback", "Usage"]


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

    @property
    def hidden_tests(self) -> tuple[str, ...]:
        """The tests whose results the feedback combination never shows: every test without execution feedback, the
        tests beyond :attr:`~..tasks.Task.public_tests` under partial coverage, none under full coverage. A provider
        may use ``result`` for the others only; nothing of these (their inputs, expected values or outcomes) may
        reach its words (the env redacts their literals: :func:`.verbal.leak.guard_hidden_tests`).

        >>> from convcodeworld_gym.sandbox import ExecutionResult
        >>> task = Task("t/0", "p", "def f():\\n", "f", "", "class TestCases:\\n" + "".join(
        ...     f" def test_{i}(s): pass\\n" for i in range(5)))
        >>> def hidden(execution):
        ...     return TurnContext(task, 0, "", True, "", None, ExecutionResult(()), FeedbackConfig(execution)).hidden_tests
        >>> hidden("none"), hidden("partial"), hidden("full")
        (('test_0', 'test_1', 'test_2', 'test_3', 'test_4'), ('test_3', 'test_4'), ())
        """
        if self.config.execution == "full":
            return ()
        public = set(self.task.public_tests) if self.config.execution == "partial" else set()
        return tuple(name for name in self.task.test_names if name not in public)


@dataclass(frozen=True)
class Usage:
    """Tokens spent by the API calls of one feedback (all zero when served from cache or offline)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    api_calls: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.api_calls + other.api_calls,
        )


@dataclass(frozen=True)
class VerbalReply:
    """Feedback text with the facts about how it was made; the env copies them into ``info``.

    Attributes:
        text: the feedback shown to the model.
        source: e.g. ``"offline"``, ``"llm:gpt-4o"``.
        cached: every API answer behind ``text`` came from the cache (no call was made).
        usage: tokens spent on API calls for this text (zero when cached or offline).
        leak: the expert leak guard's findings: ``{"detected", "regenerated", "redacted_lines"}``.
        latency_s: seconds spent producing it; excluded from equality (a measurement).
    """

    text: str
    source: str
    cached: bool = False
    usage: Usage = Usage()
    leak: dict[str, Any] = field(default_factory=dict)
    latency_s: float = field(default=0.0, compare=False)

    def info(self) -> dict[str, Any]:
        """The JSON-ready ``info["verbal_feedback_details"]`` entry (latency left out: see ``timings``)."""
        return {
            "source": self.source,
            "cached": self.cached,
            "usage": {
                "prompt_tokens": self.usage.prompt_tokens,
                "completion_tokens": self.usage.completion_tokens,
                "total_tokens": self.usage.total_tokens,
                "api_calls": self.usage.api_calls,
            },
            "leak": dict(self.leak),
        }


@runtime_checkable
class VerbalFeedback(Protocol):
    """A simulated user: novice or expert.

    Returns the feedback text (a ``str`` or a :class:`VerbalReply`), or ``None`` to stay
    silent. ``source`` names the provider in ``info["verbal_feedback_source"]``.

    A provider may also define ``async def acall(context)`` returning the same: an env's ``astep`` awaits it
    (the LLM user does, with an async client); without it, ``astep`` runs the provider in a thread.
    """

    expertise: str  # "novice" or "expert"

    def __call__(self, context: TurnContext) -> Union[str, VerbalReply, None]: ...
