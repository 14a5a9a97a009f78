"""The offline simulated user: deterministic rules, no network, no cost.

**Novice**: retells the compile error, or the first failing test shown in the execution
feedback, in a novice's plain words ("I got this error ...", "the function gave X but
I expected Y"), and never writes code.

**Expert**: additionally uses the ground truth without quoting it. It runs the ground
truth and the candidate on the inputs of the first failing test the feedback shows (through the executor, as
a probe test, see :mod:`.probe`) and says what differs; it compares the library calls and
imports of both programs to name what is missing; it names exceptions the ground truth
raises and the candidate never does. It never uses a test the feedback combination hides
(:attr:`..context.TurnContext.hidden_tests`: every test without EF, those beyond the public ones under partial EF):
their inputs, expected values and outcomes are not its to tell. Its text passes the same leak guard as the LLM's.

Phrasing is drawn from a few variants with a generator seeded by ``seed``, the task id,
the turn and the code: the same seed gives the same text."""

from __future__ import annotations

import hashlib
import random
import re
import time
from dataclasses import dataclass

from ...extract import build_program, visible_program
from ...sandbox import SandboxExecutor
from ...sandbox.host.executor import Executor
from ...sandbox.result import Outcome, TestResult
from ...tasks.io import IOTask
from ..compilation import REFERENCE_FRAME
from ..context import TurnContext, VerbalReply
from .leak import leaked_lines, redact
from .probe import Call, first_difference, probe_calls
from .rules import Expertise, check_expertise, should_speak, shown_failures
from .static import code_facts

__all__ = ["OfflineSimulator", "ErrorSummary", "error_summary", "OFFLINE_SOURCE"]

OFFLINE_SOURCE = "offline"
_MAX_SHOWN = 300

_NOVICE_HINTS = {
    "SyntaxError": "something is written in a way Python does not understand",
    "IndentationError": "some lines are not lined up the way Python expects",
    "TabError": "tabs and spaces seem to be mixed in the indentation",
    "NameError": "something is used that was never defined or imported",
    "ModuleNotFoundError": "a library it needs is not there or has another name",
    "ImportError": "something it tries to import does not exist",
    "AttributeError": "it uses something on an object that the object does not have",
    "KeyError": "it looks up a key or column that is not there",
    "IndexError": "it reaches past the end of a list",
    "TypeError": "some value has the wrong type, or a function gets the wrong arguments",
    "ValueError": "some value is not what a function accepts",
    "ZeroDivisionError": "it divides by zero somewhere",
    "FileNotFoundError": "it looks for a file that is not there",
    "RecursionError": "it keeps calling itself without stopping",
    "TimeoutError": "it runs too long and gets stopped",
    "AssertionError": "the result is not what the test expected",
}
_NOVICE_OPENERS = ("I got this error: {error}", "When I ran it, I got this error: {error}", "It failed with this error: {error}")
_NOVICE_GUESSES = ("It seems like {hint}.", "I think {hint}.", "Maybe {hint}?")
_NOVICE_DIFF = (
    "It looks like the function gave {actual}, but I expected {expected}.",
    "The function returned {actual} where I wanted {expected}.",
)
_EXPERT_DIFF_RETURN = (
    "When the function is called with ({args}), it returns {actual}, but it should return {expected}.",
    "For the input ({args}) the result is {actual}; the correct result is {expected}.",
)
_EXPERT_DIFF_RAISES = (
    "When the function is called with ({args}), it raises {actual}, but it should return {expected}.",
    "For the input ({args}) it fails with {actual} instead of returning {expected}.",
)
_EXPERT_SHOULD_RAISE = (
    "When the function is called with ({args}), it should raise {expected}, but it {actual}.",
    "For the input ({args}) the function must raise {expected}; instead it {actual}.",
)


@dataclass(frozen=True)
class ErrorSummary:
    """The exception of a traceback: ``kind`` (e.g. ``KeyError``), ``message``, the line number
    and the source line shown in the innermost frame (if any)."""

    kind: str
    message: str
    line: int | None
    source: str = ""

    @property
    def text(self) -> str:
        return f"{self.kind}: {self.message}" if self.message else self.kind


def _short(text: str, limit: int = _MAX_SHOWN) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


def _sentence(text: str) -> str:
    return text if text.endswith((".", "!", "?")) else text + "."


def error_summary(traceback_text: str) -> ErrorSummary | None:
    """Find the (last) exception of a traceback text: its kind, message and the line it points at.

    The frame of the reference's ``compile`` call that opens a compilation feedback (:data:`REFERENCE_FRAME`)
    is the harness's, never the code's: an error with no frame of its own (null bytes) points at no line.

    >>> error_summary('Traceback (most recent call last):\\n  File "tmp.py", line 3\\n    x = (\\n        ^\\nSyntaxError: \\'(\\' was never closed')
    ErrorSummary(kind='SyntaxError', message="'(' was never closed", line=3, source='x = (')
    >>> error_summary("Not run: the test did not report a result.") is None
    True
    """
    lines = traceback_text.replace(REFERENCE_FRAME, "").splitlines()
    frames = [i for i, line in enumerate(lines) if line.startswith("  File ")]
    start = frames[-1] + 1 if frames else 0
    for i in range(start, len(lines)):
        match = re.match(r"^([A-Za-z_][\w.]*)(?::\s?(.*))?$", lines[i])
        if match and not lines[i].startswith(("Traceback", "During handling")) and re.search(r"(Error|Exception|Exit|Interrupt|Warning|Failure)$", match.group(1)):
            message = "\n".join([match.group(2) or "", *lines[i + 1 :]]).strip()
            number = re.search(r"line (\d+)", lines[frames[-1]]) if frames else None
            shown = lines[start].strip() if frames and start < i else ""
            return ErrorSummary(match.group(1).split(".")[-1], message, int(number.group(1)) if number else None, shown)
    return None


_DIFFERS = re.compile(r"^(?P<actual>.+?) != (?P<expected>.+?)(?:\s*:.*)?$")


def _assertion_values(message: str) -> tuple[str, str] | None:
    """``(actual, expected)`` from an assertEqual-style message ``A != B`` (first line)."""
    first = message.splitlines()[0] if message else ""
    first = re.sub(r"^(Lists|Tuples|Items|Sets|Dicts|Sequences) differ: ", "", first)
    match = _DIFFERS.match(first)
    return (_short(match.group("actual"), 150), _short(match.group("expected"), 150)) if match else None


class OfflineSimulator:
    """A rule-based novice or expert user; deterministic and offline.

    Args:
        expertise: ``"novice"`` or ``"expert"``.
        seed: picks among phrasings; the same seed gives the same text.
        executor: runs the expert's probes; default the env's (:meth:`use_executor`), else a confined
            :class:`~convcodeworld_gym.sandbox.SandboxExecutor` owned by the simulator. A probe judged in-process (where
            a program could read the tests) informs nothing.
        probe: let the expert run the ground truth and the candidate on the failing test's inputs.

    >>> from convcodeworld_gym import ConvCodeWorldEnv
    >>> env = ConvCodeWorldEnv("CF-EF_full-SNF", dataset="humaneval", verbal_feedback=OfflineSimulator("novice"))
    >>> _ = env.reset(options={"task_id": "HumanEval/0"})
    >>> obs, *_ = env.step("def has_close_elements(numbers, threshold):\\n    return numbers[10]")
    >>> obs["verbal_feedback"].split(":")[0] in ("I got this error", "When I ran it, I got this error", "It failed with this error")
    True
    >>> env.close()
    """

    source = OFFLINE_SOURCE

    def __init__(self, expertise: Expertise, *, seed: int = 0, executor: Executor | None = None, probe: bool = True) -> None:
        self.expertise = check_expertise(expertise)
        self.seed = seed
        self.probe = probe
        self._owns_executor = executor is None
        self._executor = executor
        self._truth_calls: dict[tuple[str, str, str], tuple[Call, ...] | None] = {}

    def __repr__(self) -> str:
        return f"OfflineSimulator({self.expertise!r}, seed={self.seed})"

    @property
    def executor(self) -> Executor:
        """Where the probes run: the executor given, the env's (:meth:`use_executor`), else a confined sandbox of
        the simulator's own (one worker, made on the first probe)."""
        if self._executor is None:
            self._executor = SandboxExecutor(workers=1)
        return self._executor

    def use_executor(self, executor: Executor) -> None:
        """Run the probes on ``executor`` (the env's: confined as its tests are) unless one was given already."""
        if self._executor is None:
            self._executor, self._owns_executor = executor, False

    def __call__(self, context: TurnContext) -> VerbalReply | None:
        if not should_speak(self.expertise, context):
            return None
        started = time.perf_counter()
        digest = hashlib.sha256(context.code.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        rng = random.Random(f"{self.seed}:{self.expertise}:{context.task.task_id}:{context.turn}:{digest}")
        if self.expertise == "novice":
            text, leak = self._novice(context, rng), {}
        else:
            text = self._expert(context, rng)
            found = leaked_lines(text, context.task.canonical_solution, context.task.prompt)
            leak = {"detected": bool(found), "regenerated": False, "redacted_lines": len(found)}
            text = redact(text, found) if found else text
        return VerbalReply(text=text, source=self.source, leak=leak, latency_s=time.perf_counter() - started)

    def close(self) -> None:
        """Close the executor if the simulator created it."""
        if self._owns_executor and self._executor is not None:
            self._executor.close()
            self._executor = None

    # --------------------------------------------------------------- novice

    def _novice(self, context: TurnContext, rng: random.Random) -> str:
        if not context.compile_ok:
            summary = error_summary(context.compilation_feedback)
            if summary is None:  # e.g. a rejected reply: the CF text says why
                return "I could not run the code: " + _short(context.compilation_feedback)
            return self._novice_error(summary, rng, "the code")
        failing, crash = shown_failures(context)
        if crash is not None:
            summary = error_summary(crash)
            if summary is not None:
                return self._novice_error(summary, rng, "the program before any test")
            return "The program stopped before any test could run."
        return self._describe_test(failing[0], rng, novice=True) if failing else "Some tests did not pass."

    def _novice_error(self, summary: ErrorSummary, rng: random.Random, where: str) -> str:
        parts = [_sentence(rng.choice(_NOVICE_OPENERS).format(error=_short(summary.text)))]
        hint = _NOVICE_HINTS.get(summary.kind)
        if hint:
            parts.append(rng.choice(_NOVICE_GUESSES).format(hint=hint))
        if summary.line is not None and summary.kind in ("SyntaxError", "IndentationError", "TabError"):
            parts.append(f"The error points at line {summary.line} of {where}.")
        return " ".join(parts)

    def _describe_test(self, test: TestResult, rng: random.Random, *, novice: bool) -> str:
        """One failing test in words: timeout, the assertion's values, or the exception raised."""
        if test.outcome is Outcome.TIMEOUT:
            return (
                "It never finished: it ran so long that it was stopped."
                if novice
                else "The function does not finish in time on one of the checks; look for a loop that never ends or work that grows too fast."
            )
        summary = error_summary(test.traceback)
        if summary is None:
            return "One of the checks did not finish." if novice else "One of the checks never reported a result."
        if summary.kind == "AssertionError":
            values = _assertion_values(summary.message)
            if values is not None:
                actual, expected = values
                if novice:
                    return rng.choice(_NOVICE_DIFF).format(actual=actual, expected=expected)
                return f"One check compares the result {actual} with the expected {expected}, and they differ."
            if not summary.message and summary.source:
                check = _short(summary.source, 200)
                return _sentence(("This check did not pass: " if novice else "This check on the result fails: ") + check)
            if novice:
                return _sentence("The result was not what I expected: " + _short(summary.text))
            return _sentence("A check on the result fails: " + _short(summary.text))
        if novice:
            return self._novice_error(summary, rng, "the code")
        return _sentence(f"A check fails with {_short(summary.text)}")

    # --------------------------------------------------------------- expert

    def _expert(self, context: TurnContext, rng: random.Random) -> str:
        task = context.task
        failing, crash = shown_failures(context)
        if not failing and crash is None:  # EF off, or partial EF passed: only what no test decides may be said
            hidden = set(context.hidden_tests)
            failing = [t for t in context.result.tests if not t.outcome.ok and t.name not in hidden]
            if not any(t.outcome is not Outcome.NOT_RUN for t in context.result.tests):
                crash = context.result.crash  # the program failed as it loaded, before any test called it
        program = build_program(task, context.code)
        points: list[str] = []
        if crash is not None:
            summary = error_summary(crash)
            what = _short(summary.text) if summary else "an error"
            points.append(f"The program fails with {what} as soon as it is loaded, before the function is ever called.")
        elif failing:
            difference = self._probe_difference(context, program, failing, rng)
            points.append(difference or self._describe_test(failing[0], rng, novice=False))

        truth, mine = code_facts(task.solution_code), code_facts(visible_program(task, context.code))
        missing_calls = sorted(c for c in truth.calls - mine.calls if c.split(".")[0] in truth.modules)
        if missing_calls:
            names = ", ".join(f"`{c}`" for c in missing_calls[:3])
            points.append(f"The solution needs {names}, which your code never calls.")
        missing_modules = sorted(truth.modules - mine.modules)
        if missing_modules:
            points.append("It should use " + ", ".join(f"`{m}`" for m in missing_modules[:3]) + ", which your code does not import.")
        missing_raises = sorted(truth.raises - mine.raises)
        if missing_raises:
            names = ", ".join(missing_raises[:3])
            points.append(
                f"The function is expected to raise {names} for invalid input, as the task describes; your code never raises it."
            )
        if not points:
            points.append("The behaviour differs from what the task asks on some inputs; re-read the requirements of the task.")
        return "\n".join(f"{i}. {p}" for i, p in enumerate(points, 1))

    def _probe_difference(
        self, context: TurnContext, program: str, failing: list[TestResult], rng: random.Random
    ) -> str | None:
        """Run both programs on the first failing test's inputs and describe the first differing call."""
        test = failing[0]
        if not self.probe or test.outcome is Outcome.TIMEOUT or test.name not in context.task.test_names:
            return None
        if isinstance(context.task, IOTask):  # its test's failure text already has the input, the output and the expected
            return None
        key = (context.task.task_id, context.task.test_digest, test.name)
        if key not in self._truth_calls:
            self._truth_calls[key] = probe_calls(self.executor, context.task, context.task.ground_truth, test.name)
        truth = self._truth_calls[key]
        mine = probe_calls(self.executor, context.task, program, test.name)
        if not truth or mine is None:
            return None
        found = first_difference(truth, mine)
        if found is None:
            return None
        want, got = found
        args = _short(want.args, 200)
        if got is None:
            return f"The function should be called again with ({args}) and return {want.returned}, but the run stops before that."
        actual = f"{got.raised} ({_short(got.message, 120)})" if got.raised else None
        if want.raised:
            does = f"raises {actual}" if actual else f"returns {got.returned}"
            return rng.choice(_EXPERT_SHOULD_RAISE).format(args=args, expected=want.raised, actual=does)
        if got.raised:
            return rng.choice(_EXPERT_DIFF_RAISES).format(args=args, actual=actual, expected=want.returned)
        return rng.choice(_EXPERT_DIFF_RETURN).format(args=args, actual=got.returned, expected=want.returned)
