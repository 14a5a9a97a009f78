"""``ConvCodeWorldEnv``: one multi-turn code-generation episode per task.

An episode is one task. Turn 0 is the model's first program; each later turn is a rewrite
after feedback, up to ``max_turns`` (10) rewrites, so at most 11 programs. Every program is
compiled (CF) and, when it compiles, run against *all* the task's tests: the reward is 1.0
exactly when every test passes, whatever feedback the combination shows.

Every blocking method has an awaitable twin with the same results (``areset``, ``astep``,
``auser_feedback_for``): one code path (:mod:`.aio`), whose sandbox run, simulated-user call and
task preparation are awaited, so that any number of episodes can be played on one event loop."""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from collections.abc import Callable
from typing import Any

import gymnasium as gym

from .aio import Call, Plan, run_awaited, run_blocking
from .combos import DEFAULT_MAX_TURNS, FeedbackConfig
from .errors import NoGroundTruth, ResetNeeded
from .extract import REASONING_MODES, ReasoningMode, judged_program, visible_program
from .feedback import NO_SYNTAX_ERRORS, execution_feedback, reply_feedback
from .feedback.context import TurnContext, VerbalFeedback, VerbalReply
from .feedback.execution import (FEEDBACK_STYLES, FeedbackStyle, compile_error_feedback, rest_after_stop,
                                 trim_feedback, visible_tests)
from .observation import (OBSERVATION_KEYS, RENDER_MODES, check_render_mode, make_observation, observation_space,
                          render_ansi)
from .protocol import actionable
from .regressions import TestHistory
from .sandbox import ExecutionResult, Executor, Outcome, SandboxExecutor
from .sandbox.runtimes.needs import Lacking
from .selection import select_tasks
from .spaces import MAX_TEXT_CHARS, UnicodeText
from .tasks import DEFAULT_DATASET, DatasetSpec, Task, TaskSet, load_tasks
from .tasks.canary import CanarySpec, CanaryTwin, with_canaries
from .tasks.perturb import PERTURBATIONS, Perturbation, perturbation

__all__ = ["ConvCodeWorldEnv", "Timings", "OBSERVATION_KEYS", "DEFAULT_MAX_TURNS", "DEFAULT_MAX_REPLY_CHARS", "speak"]

StepResult = tuple[dict[str, Any], float, bool, bool, dict[str, Any]]

#: Replies longer than this are rejected as a failed turn (never compiled or run).
DEFAULT_MAX_REPLY_CHARS = 1_000_000


@dataclass(frozen=True)
class Timings:
    """Seconds spent in one step. Fields never take part in equality: two runs of the
    same episode give equal infos although their timings differ."""

    compile_s: float = field(default=0.0, compare=False)
    execute_s: float = field(default=0.0, compare=False)
    verbal_s: float = field(default=0.0, compare=False)
    step_s: float = field(default=0.0, compare=False)


def _forgeable(details: Mapping[str, Any]) -> bool:
    """Was the result judged where the program could forge it (in-process)?

    >>> _forgeable({"judge": "split"}), _forgeable({"judge": "inprocess"}), _forgeable({})
    (False, True, False)
    """
    return bool(details.get("forgeable", details.get("judge") == "inprocess"))


def _guard_hidden_tests(reply: VerbalReply | str | None, context: TurnContext) -> VerbalReply | str | None:
    """:func:`.feedback.verbal.leak.guard_hidden_tests` (imported here: the verbal package brings the LLM client)."""
    from .feedback.verbal.leak import guard_hidden_tests

    return guard_hidden_tests(reply, context)


def _confinement_info(reported: dict[str, Any] | None) -> dict[str, Any]:
    """``info["confinement"]``: a fresh copy of what the executor reported, ``{}`` when nothing ran.

    >>> _confinement_info(None), _confinement_info({"level": "namespaces"})
    ({}, {'level': 'namespaces'})
    """
    return dict(reported or {})


def _episode_end(terminated: bool, truncated: bool, infra_error: str | None) -> str | None:
    """``info["episode_end"]``: ``"passed"``, ``"infra_error"`` (the run was lost: no verdict), ``"max_turns"``, or None.

    >>> _episode_end(True, False, None), _episode_end(False, True, "lost"), _episode_end(False, True, None)
    ('passed', 'infra_error', 'max_turns')
    """
    if terminated:
        return "passed"
    if infra_error is not None:
        return "infra_error"
    return "max_turns" if truncated else None


def _refuse_without_ground_truth(tasks: TaskSet, combination: str) -> None:
    """Raise :class:`~.errors.NoGroundTruth` where a task of ``tasks`` has no canonical solution for the expert to read."""
    lacking = tuple(task.task_id for task in tasks if not task.has_ground_truth)
    if lacking:
        some = ", ".join(lacking[:3]) + (f" and {len(lacking) - 3} more" if len(lacking) > 3 else "")
        raise NoGroundTruth(
            f"{combination}: the expert simulated user (SEF) compares the code with each task's canonical solution, and "
            f"{len(lacking)} of the {len(tasks)} tasks of {tasks.name!r} have none ({some}; LiveCodeBench's rows carry "
            "no solutions). Play them under a combination without SEF (CF, CF-EF_full, CF-EF_partial-SNF, ...), or pass "
            "task_ids= of tasks that have one", lacking)


def speak(provider: VerbalFeedback, context: TurnContext) -> Call[VerbalReply | str | None]:
    """The simulated user's words on ``context`` as a :class:`~.aio.Call`: its ``acall`` awaited where it has one
    (the LLM user's async client), else the provider itself (in a thread when awaited)."""
    return Call(provider, getattr(provider, "acall", None), (context,))


class ConvCodeWorldEnv(gym.Env[dict[str, Any], str]):
    """ConvCodeWorld: multi-turn code generation with compilation, execution and verbal feedback.

    Args:
        feedback: the combination, as an id part (``"CF-EF_full"``) or :class:`FeedbackConfig`.
        dataset: ``"bigcodebench"``, ``"humaneval"``, an input/output set (``"livecodebench"``, ``"taco"``,
            ``"taco-verified"``, ``"codecontests"``, ``"apps"``, with options after ``?``: :mod:`.tasks.io_datasets`),
            a task-file path in any of those schemas, a :class:`TaskSet` or Tasks. A set named by
            a string is loaded once per process, and what the default set leaves out is worked out once per task
            set and runtime (:mod:`~convcodeworld_gym.selection`): a second env of it costs milliseconds.
        task_ids, stdlib_only, limit: subset of the dataset (see :meth:`TaskSet.subset`). Without ``task_ids``
            (a default set), tasks whose solution or tests need modules or NLTK data the executor's runtime
            lacks are left out, with one logged line per task set and process that names ``convcodeworld tasks``
            (it lists each task left out, why, and the install command); tasks asked
            for by id always stay, and ``info["missing_modules"]`` / ``info["missing_data"]`` name what they
            lack (their execution feedback starts with a note saying so). A default set remembers what it left
            out and why (``env.tasks.left_out``): ``reset(options={"task_id": ...})`` for such a task raises
            :class:`~convcodeworld_gym.errors.LeftOutTaskError` saying why and how to get it back.
        strict_runtime: raise :class:`~convcodeworld_gym.errors.MissingRuntimeDependencies` instead when any
            selected task needs what the runtime lacks.
        runtime: the interpreter the default executor runs programs with (a Python executable, a venv dir, or
            ``"bigcodebench"`` once ``convcodeworld runtime install bigcodebench`` has built it); see
            :mod:`~convcodeworld_gym.sandbox.runtimes.install` for the default. Not with ``executor=``.
        executor: runs the tests. An :class:`Executor` is shared: the env never closes it (pass
            one to several envs, e.g. ``gym.make_vec(id, n, executor=ex)``). A zero-argument
            callable returning an Executor is called once and the result is owned (and closed)
            by the env: the way to give each ``AsyncVectorEnv`` worker its own executor.
            Default: an owned, confined :class:`SandboxExecutor`.
        max_turns: feedback turns after turn 0; the episode is truncated after turn ``max_turns``.
        verbal_feedback: the simulated user of SNF / SEF combinations; ``None`` builds one with
            :func:`~convcodeworld_gym.feedback.verbal.make_simulator` (an LLM when an endpoint is
            configured, else the offline simulator).
        simulator_kwargs: keyword arguments of ``make_simulator`` (``backend``, ``model``,
            ``base_url``, ``cache_path``, ``seed``, ...) for the simulator the env builds.
        max_reply_chars: longer replies are a failed turn with an explanation.
        feedback_style: ``"reference"`` (default): the execution feedback text the reference's
            model saw (no source lines in frames of ``__test__.py``, ``ALL`` and the exception's
            message for a crash outside the tests, an empty text after a timeout, and EF
            for code that does not compile: ``ALL`` and its SyntaxError's text); ``"rich"``:
            source lines and whole tracebacks, a block per timed-out test, no EF for code that
            does not compile (see :mod:`~convcodeworld_gym.feedback.execution`).
        reasoning: how a reasoning model's reply is read (:func:`~convcodeworld_gym.extract.read_reply`): ``"strip"``
            (default): the code judged is the answer's: ``<think>...</think>`` thoughts are removed before the code
            is extracted (also a reply that starts inside its thought and holds only ``</think>``, as R1-Distill
            writes), so no draft in a thought is ever judged; a reply whose thought never closes, or that is only a
            thought, has no answer: nothing is compiled or run, the reward is 0.0, and the compilation feedback
            says so in one line. ``"keep"``: the reply as it is, extracted as the reference extracted it (the
            first fenced block anywhere, a thought's draft included). ``info["reasoning"]`` says what was read.
        render_mode: ``None`` or ``"ansi"``.
        allow_forgeable: keep the tasks only an in-process judge can judge (where a program can forge
            its verdict; see :mod:`~convcodeworld_gym.sandbox.host.forgeable`), and let the env's own
            executor judge them in-process. Default: a default task set leaves them out, said in the same one
            logged line (tasks asked for by ``task_ids`` are kept, judged split).
            Every step's ``info`` says how it was judged: ``judge`` (``split`` or ``inprocess``) and
            ``forgeable``.
        rerun_passed: the reference's way with a passing program: the episode goes on to turn ``max_turns``, and the
            passing code is carried over and executed again at every later turn (pot.py:564-570, "Already solved"), so
            that a flaky test can fail it there and the live Pass@1 curve dip as the paper's can; play it with
            :class:`~convcodeworld_gym.protocol.ReferenceProtocol`, which carries it (the policy is not asked).
            Default False: the episode ends at its first pass (``terminated``).
        canary, canary_seed: mix canary twins into the task set played (:mod:`~convcodeworld_gym.tasks.canary`): a
            share in [0, 1) of the set played (the twins of the tasks ``canary_seed`` draws), or the ids of the tasks
            to twin; added after the set's tasks (``env.tasks``). A twin keeps its task's description and changes one
            test to contradict it: only a program fitted to the tests passes it. Its episodes are marked
            (``info["canary"]``) and its reward is always 0.0: the canary pass rate is reported beside the reward,
            never in it. A dataset that holds twins already (``with_canaries(tasks, ...)``) is played as it is.
        perturb, perturb_seed: ``"swap_public_outputs"``: on every task with two public tests whose expected values
            differ (:mod:`~convcodeworld_gym.tasks.perturb`; the draw seeded by ``perturb_seed``), those two tests
            swap their expected values in what the feedback shows: each program is run on the perturbed copy (the
            execution feedback and the simulated user's view) and on the task itself (the reward, ``passed``, the
            tests and pass fractions: the truth). ``info["perturbation"]`` names the swap and whether the program
            passed a swapped test as shown (``followed``): reported beside the reward, never in it. Other tasks are
            played as they are (``info["perturbation"]`` is ``{}``).

    Observation (a ``Dict`` of text fields and the turn): ``task`` (the instruction),
    ``code`` (the code judged this step), ``compilation_feedback``, ``execution_feedback`` and
    ``verbal_feedback`` (``""`` when not shown), ``turn`` (index of the next submission).

    Action: the model's raw reply, or bare code (any ``str``).

    Attributes: ``tasks`` (the task set played), ``missing`` (task id -> what the runtime lacks of its
    needs: the tasks left out of a default set, or those asked for by id that cannot pass here).

    Async: ``await env.areset(...)`` and ``await env.astep(reply)`` return exactly what ``reset`` and ``step``
    return; the sandbox run (:meth:`.Executor.arun`), the simulated user (its ``acall``, else a thread) and the
    task's preparation are awaited, never run on the event loop. One env plays one episode at a time: a call
    while another of its steps is in flight raises ``RuntimeError``; play concurrent episodes on envs of their
    own (they may share one executor).

    >>> env = ConvCodeWorldEnv("CF-EF_full", dataset="humaneval")
    >>> obs, info = env.reset(seed=0, options={"task_id": "HumanEval/0"})
    >>> obs["turn"], info["task_id"]
    (0, 'HumanEval/0')
    >>> obs, reward, terminated, truncated, info = env.step("def has_close_elements(numbers, threshold):\\n    return False")
    >>> reward, terminated, obs["execution_feedback"].splitlines()[0]
    (0.0, False, 'TEST_1')
    >>> obs, reward, terminated, truncated, info = env.step(env.task.ground_truth)
    >>> reward, terminated, obs["execution_feedback"]
    (1.0, True, 'Passed all test runs')
    >>> env.close()
    """

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 1}

    def __init__(
        self,
        feedback: str | FeedbackConfig = "CF",
        dataset: DatasetSpec = DEFAULT_DATASET,
        *,
        task_ids: list[str] | tuple[str, ...] | None = None,
        stdlib_only: bool = False,
        limit: int | None = None,
        strict_runtime: bool = False,
        runtime: str | os.PathLike[str] | None = None,
        executor: Executor | Callable[[], Executor] | None = None,
        max_turns: int = DEFAULT_MAX_TURNS,
        verbal_feedback: VerbalFeedback | None = None,
        simulator_kwargs: Mapping[str, Any] | None = None,
        max_reply_chars: int = DEFAULT_MAX_REPLY_CHARS,
        feedback_style: FeedbackStyle = "reference",
        reasoning: ReasoningMode = "strip",
        render_mode: str | None = None,
        allow_forgeable: bool = False,
        rerun_passed: bool = False,
        canary: CanarySpec = None,
        canary_seed: int = 0,
        perturb: str | None = None,
        perturb_seed: int = 0,
    ) -> None:
        self.config = FeedbackConfig.parse(feedback)
        if perturb is not None and perturb not in PERTURBATIONS:
            raise ValueError(f"perturb={perturb!r} is no perturbation; use one of {', '.join(PERTURBATIONS)} (or None)")
        self.perturb, self.perturb_seed = perturb, int(perturb_seed)
        if feedback_style not in FEEDBACK_STYLES:
            raise ValueError(f"feedback_style must be one of {FEEDBACK_STYLES}, got {feedback_style!r}")
        self.feedback_style: FeedbackStyle = feedback_style
        if reasoning not in REASONING_MODES:
            raise ValueError(f"reasoning must be one of {REASONING_MODES}, got {reasoning!r}")
        self.reasoning: ReasoningMode = reasoning
        if self.config.verbal == "none" and (verbal_feedback is not None or simulator_kwargs is not None):
            raise ValueError(
                f"combination {self.config.name} shows no verbal feedback; drop verbal_feedback= / simulator_kwargs="
            )
        if verbal_feedback is not None and simulator_kwargs is not None:
            raise ValueError("pass either verbal_feedback= (a provider) or simulator_kwargs= (to build one), not both")
        if verbal_feedback is not None and getattr(verbal_feedback, "expertise", self.config.verbal) != self.config.verbal:
            raise ValueError(
                f"combination {self.config.name} needs a provider with expertise {self.config.verbal!r}, "
                f"got one with expertise {verbal_feedback.expertise!r}"
            )
        if not isinstance(max_turns, int) or max_turns < 0:
            raise ValueError(f"max_turns must be an int >= 0, got {max_turns!r}")

        load_tasks(dataset)  # a dataset that names nothing fails here, before an executor is made (loaded once per process)
        self.allow_forgeable = allow_forgeable
        self.rerun_passed = rerun_passed
        self.max_turns = max_turns
        self.max_reply_chars = max_reply_chars
        self.render_mode = check_render_mode(render_mode)
        if runtime is not None and executor is not None:
            raise ValueError("pass runtime= or executor=, not both (give the executor its runtime: SandboxExecutor(runtime=...))")
        self._owns_executor = not isinstance(executor, Executor)
        if executor is None:
            executor = functools.partial(SandboxExecutor, runtime=runtime, allow_forgeable=allow_forgeable)
        self.executor: Executor = executor if isinstance(executor, Executor) else executor()
        if not isinstance(self.executor, Executor):
            raise TypeError(f"executor must be an Executor or a callable returning one, got {type(self.executor).__name__}")
        try:  # once per process for this task set and runtime (selection.py): the second env costs a lookup
            chosen = select_tasks(dataset, self.executor.runtime_probe(), task_ids=task_ids, stdlib_only=stdlib_only,
                                  allow_forgeable=allow_forgeable, strict=strict_runtime)
            self.missing: dict[str, Lacking] = dict(chosen.missing)
            self.tasks: TaskSet = chosen.tasks.subset(limit=limit) if limit is not None else chosen.tasks
            self.tasks = with_canaries(self.tasks, canary, seed=canary_seed)  # the set itself when canary is None
            if len(self.tasks) == 0:
                raise ValueError("the selected task set is empty; check task_ids / stdlib_only / limit "
                                 "(and the warning above on tasks left out for what the runtime lacks)")
            if self.config.verbal == "expert" and verbal_feedback is None:
                _refuse_without_ground_truth(self.tasks, self.config.name)
        except BaseException:
            if self._owns_executor:
                self.executor.close()
            raise
        if verbal_feedback is not None and callable(getattr(verbal_feedback, "use_executor", None)):
            verbal_feedback.use_executor(self.executor)  # a provider's runs confined as the tests are, unless it has its own
        self._owns_verbal_feedback = verbal_feedback is None and self.config.verbal != "none"
        if self._owns_verbal_feedback:
            from .feedback.verbal import make_simulator  # the LLM client is only imported when needed

            options = {"executor": self.executor, **(simulator_kwargs or {})}  # offline probes run where the tests run
            verbal_feedback = make_simulator(self.config.verbal, **options)
        self.verbal_feedback = verbal_feedback

        self.action_space = UnicodeText(MAX_TEXT_CHARS)
        self.observation_space = observation_space(max_turns)
        self._task: Task | None = None
        self._turn = 0
        self._done = True
        self._last_obs: dict[str, Any] | None = None
        self._last_judged: tuple[str | None, ExecutionResult] | None = None  # (EF shown, result) of the last step
        self._in_flight = False  # a reset or step awaits its run: the env takes no other call meanwhile
        self._history = TestHistory()  # the tests this episode's programs passed so far (info["regressed_tests"])
        self._perturbation: Perturbation | None = None  # the current task's (perturb=), or None

    # ------------------------------------------------------------------ API

    @property
    def task(self) -> Task:
        """The task of the current episode."""
        if self._task is None:
            raise ResetNeeded("no episode yet: call env.reset() first")
        return self._task

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """Start an episode.

        The task is ``options["task_id"]``, or ``options["task_index"]``, or drawn from the
        env's seeded generator (the same seed gives the same task).

        Raises:
            ~convcodeworld_gym.errors.LeftOutTaskError: ``options["task_id"]`` names a task this env's default
                set left out; the message says why (what the runtime lacks, or the judge's reason) and how to
                get it back.
            ~convcodeworld_gym.errors.UnknownTaskError: any other id the env's task set does not hold
                (``LeftOutTaskError`` is one).
        """
        return run_blocking(self._reset_plan(seed, options))

    async def areset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """:meth:`reset`, awaited: the same result; the task's preparation (a calibration) runs off the event loop."""
        return await run_awaited(self._reset_plan(seed, options))

    def _reset_plan(self, seed: int | None, options: dict[str, Any] | None) -> Plan[tuple[dict[str, Any], dict[str, Any]]]:
        with self._one_call_at_a_time():
            super().reset(seed=seed)
            self._task = self._choose_task(options or {})
            if isinstance(self._task, CanaryTwin):  # its task's judge mode and limits: its canonical fails by design
                yield Call(self.executor.derive, None, (self._task.original, self._task))
            self._perturbation = (perturbation(self._task, self.perturb, self.perturb_seed)
                                  if self.perturb is not None and not isinstance(self._task, CanaryTwin) else None)
            if self._perturbation is not None:  # the same: the perturbed copy's canonical fails its swapped tests
                yield Call(self.executor.derive, None, (self._task, self._perturbation.shown))
            yield Call(self.executor.prepare, self.executor.aprepare, (self._task,))  # its first step then costs like any other
        self._turn = 0
        self._done = False
        self._last_judged = None
        self._history.clear()
        obs = self._observation(code="", cf="", ef="", vf="")
        self._last_obs = obs
        info = {
            "task_id": self._task.task_id,
            "turn": 0,
            "test_names": list(self._task.test_names),
            "feedback": self.config.name,
            "actionable": True,
            "canary": isinstance(self._task, CanaryTwin),
            "perturbation": self._perturbation_info(None),
        }
        return obs, info

    def step(self, action: str) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """Judge one reply: extract its code, compile it, run it against *all* the task's tests.

        Args:
            action: the model's raw reply (a fenced block is extracted from its answer: under ``reasoning="strip"``
                its thoughts are removed first) or bare code. A reply longer than ``max_reply_chars`` is a failed
                turn that is never compiled or run, as is a reply with no answer (its thought never closes).

        Returns:
            ``(observation, reward, terminated, truncated, info)``:

            * ``observation`` (:class:`~convcodeworld_gym.observation.Observation`): ``task``; ``code``,
              the code judged this step; ``compilation_feedback``; ``execution_feedback`` and
              ``verbal_feedback``, ``""`` when the combination does not show them; ``turn``, the
              index of the next submission.
            * ``reward``: 1.0 exactly when every test passed, else 0.0, whatever feedback is shown; no verdict
              at all on a step whose ``info["infra_error"]`` is set (its 0.0 must not be counted: see below).
              Always 0.0 on a canary twin (``info["canary"]``): passing one is fitting the program to a test that
              contradicts the task, never a solution (``info["passed"]`` says whether it passed).
            * ``terminated``: the code passed. ``truncated``: it did not, and this was turn ``max_turns``; or
              the infrastructure lost the run (``info["infra_error"]``): the episode ends outside the task.
            * ``info``: ``task_id``; ``turn`` (the turn just judged); ``passed``; ``compile_ok``;
              ``pass_fraction``; ``public_pass_fraction`` and ``hidden_pass_fraction`` (the share of the task's
              public tests, :attr:`~convcodeworld_gym.tasks.Task.public_tests`, and of the others that passed; None where
              it has none of them: facts beside the reward, never in it);
              ``canary`` (the task is a canary twin: :mod:`~convcodeworld_gym.tasks.canary`);
              ``perturbation`` (``perturb=``: ``{"kind", "seed", "tests", "followed"}`` on a perturbed task, where
              ``followed`` says whether the program passed a swapped test as the feedback showed it, None without a
              verdict; ``{}`` otherwise; the reward, ``passed`` and the tests are the true task's);
              ``tests`` (one ``{"name", "outcome", "traceback"}`` per test);
              ``crash`` (text or None); ``regressed_tests`` (the names of the tests a program of an earlier turn
              of this episode passed and this one fails, in test order; ``[]`` on a step the infrastructure lost:
              :mod:`~convcodeworld_gym.regressions`; the reward ignores it); ``limits_hit``; ``confinement`` (what the sandbox achieved,
              ``{}`` when nothing ran); ``judge`` (``"split"`` / ``"inprocess"`` / None) and ``forgeable``;
              ``missing_modules`` / ``missing_data`` (what the runtime lacks of the task's needs);
              ``profile`` (how the task was calibrated: mode, canonical time, a note when its canonical
              run failed once or for good; ``{}`` when the executor reports none);
              ``feedback_shown`` (``{"compilation": True, "execution": mode or None, "verbal": level or None}``);
              ``verbal_feedback_source`` and ``verbal_feedback_details``; ``episode_end``
              (``"passed"``, ``"max_turns"``, ``"infra_error"`` or None); ``shown_compiles`` and ``actionable`` (would the
              reference's protocol call the model on this feedback, :mod:`~convcodeworld_gym.protocol`);
              ``untrimmed_execution_feedback``; ``reasoning`` (``{"mode", "thought_chars", "answered"}``: the
              ``reasoning=`` mode, the characters of thought removed from the reply, and whether it had an answer:
              False when its thought never closed, it was only a thought, or it was rejected for its length);
              ``timings`` (:class:`Timings`; never part of equality);
              ``retried`` (``{"lost", "lost_s"}`` when the executor lost the run once and its retry on a fresh
              worker gave the verdict, else ``{}``); ``infra_error``: None, or why the infrastructure lost
              the run, also on its retry (a worker, actor or container that died from outside, a sandbox that
              refused to start it: never the program's doing). Such a step is no verdict on the program:
              ``passed`` is False, the reward 0.0 means nothing, no verbal feedback is asked for, the episode
              is truncated (``episode_end`` ``"infra_error"``), and runners, trainers and metrics leave it
              out or play the episode again (``convcodeworld evaluate`` does both).

        Raises:
            TypeError: ``action`` is not a ``str``.
            ResetNeeded: the episode is over or was never started.
        """
        return run_blocking(self._step_plan(action))

    async def astep(self, action: str) -> StepResult:
        """:meth:`step`, awaited: exactly the same result; the sandbox run and the simulated user's words are
        awaited (:meth:`.Executor.arun`; the user's ``acall``, else a thread), so the event loop never blocks."""
        return await run_awaited(self._step_plan(action))

    def _step_plan(self, action: str) -> Plan[StepResult]:
        if not isinstance(action, str):
            raise TypeError(f"action must be str (the model's reply or code), got {type(action).__name__}")
        if self._done or self._task is None:
            raise ResetNeeded("the episode is over (or never started): call env.reset() before step()")
        started = time.perf_counter()
        task, turn = self._task, self._turn

        thought_chars, answered = 0, False
        if len(action) > self.max_reply_chars:
            code, compile_ok = "", False
            cf = (
                f"Reply rejected: it has {len(action)} characters, more than the limit of {self.max_reply_chars}. "
                "Nothing was compiled or run."
            )
        else:
            # the answer's code is judged, never a thought's; a reply with no answer is not compiled (nor run)
            code, compile_ok, cf, reading = reply_feedback(action, self.reasoning)
            thought_chars, answered = len(reading.thought), reading.answer is not None
        compiled_at = time.perf_counter()

        program = judged_program(task, code, compile_ok)  # a sample runs whenever its program compiles
        perturbed = self._perturbation
        shown_task = perturbed.shown if perturbed is not None else task  # what the feedback shows (perturb=)
        rest: ExecutionResult | None = None
        if program is not None:
            with self._one_call_at_a_time():
                result, rest = yield from self._run_plan(task, program)
                shown_result, rest = (yield from self._run_plan(shown_task, program)) if perturbed is not None else (result, rest)
        else:
            result = shown_result = ExecutionResult.not_executed(task.test_names, "Not run: the code does not compile.")
        executed_at = time.perf_counter()

        ef: str | None = None
        untrimmed: str | None = None
        lacking = self.missing.get(task.task_id, Lacking())
        shown = visible_tests(task, self.feedback_style)
        if self.config.execution != "none" and program is not None:
            untrimmed = execution_feedback(shown_result, self.config.execution, shown, trim=False, style=self.feedback_style,
                                           rest=rest)
        elif self.config.execution != "none" and code and self.feedback_style != "rich":  # the reference ran it anyway
            untrimmed = compile_error_feedback(visible_program(task, code), shown_task.test, self.config.execution, shown,
                                               style=self.feedback_style)
        if untrimmed is not None:
            ef = trim_feedback(untrimmed)
            if lacking:  # a task asked for by id whose needs this runtime does not meet: say so first
                ef = lacking.note() + "\n" + ef
        self._last_judged = (ef, shown_result)
        vf: str | None = None
        verbal: VerbalReply | str | None = None
        lost = result.infra_error or shown_result.infra_error  # no verdict: nothing for a simulated user to speak about
        if self.verbal_feedback is not None and lost is None:  # the user sees what the feedback shows (perturb=)
            context = TurnContext(shown_task, turn, code, compile_ok, cf, ef, shown_result, self.config)
            with self._one_call_at_a_time():
                verbal = _guard_hidden_tests((yield speak(self.verbal_feedback, context)), context)
            vf = verbal.text if isinstance(verbal, VerbalReply) else verbal
        verbal_at = time.perf_counter()

        passed = result.passed
        terminated = passed and not self.rerun_passed
        truncated = not terminated and (turn >= self.max_turns or lost is not None)
        self._done = terminated or truncated
        self._turn = turn + 1
        obs = self._observation(code=code, cf=cf, ef=ef or "", vf=vf or "")
        self._last_obs = obs
        info = {
            "task_id": task.task_id,
            "turn": turn,
            "passed": passed,
            "compile_ok": compile_ok,
            "pass_fraction": result.pass_fraction,
            # the share of the public tests (those partial EF may show: task.public_tests) and of the others that
            # passed; None where the task has none of them. A fact beside the reward, never in it.
            "public_pass_fraction": result.pass_fraction_of(task.public_tests),
            "hidden_pass_fraction": result.pass_fraction_of(set(task.test_names) - set(task.public_tests)),
            "canary": isinstance(task, CanaryTwin),  # a twin's pass is the canary, never a reward
            # perturb=: the swap, and whether this program passed a swapped test as shown (never in the reward)
            "perturbation": self._perturbation_info(None if lost is not None else perturbed.followed(shown_result.tests)
                                                    if perturbed is not None else None),
            "tests": [{"name": t.name, "outcome": t.outcome.value, "traceback": t.traceback} for t in result.tests],
            "crash": result.crash,
            # tests an earlier program of this episode passed that this one fails (a fact; the reward ignores it)
            "regressed_tests": self._history.judge(result.tests, lost=lost is not None),
            "limits_hit": list(result.limits_hit),
            # Dict entries stay dicts ({} when not applicable): vector envs batch an info key by its type.
            "confinement": _confinement_info(result.details.get("confinement")),  # what the sandbox achieved
            "judge": result.details.get("judge"),  # split or inprocess
            "forgeable": _forgeable(result.details),  # judged where the program could forge its verdict
            # What the runtime lacks of this task's needs (a task asked for by id; default sets leave such tasks out).
            "missing_modules": list(lacking.modules),
            "missing_data": list(lacking.data),
            # How the task was calibrated: mode, canonical time, and a note when its canonical run failed once or for good.
            "profile": dict(result.details.get("profile") or {}),
            "feedback_shown": {
                "compilation": True,
                "execution": self.config.execution if ef is not None else None,
                "verbal": self.config.verbal if vf else None,
            },
            "verbal_feedback_source": (
                verbal.source if isinstance(verbal, VerbalReply) else getattr(self.verbal_feedback, "source", None)
            )
            if vf is not None
            else None,
            "verbal_feedback_details": verbal.info() if isinstance(verbal, VerbalReply) else {},
            "episode_end": _episode_end(terminated, truncated, lost),
            # the reference protocol calls the model on this feedback (see convcodeworld_gym.protocol)
            "shown_compiles": compile_ok,  # the code in the observation compiled
            "actionable": actionable(self.config, passed=passed, compile_ok=compile_ok, execution_feedback=ef, verbal_feedback=vf),
            "untrimmed_execution_feedback": untrimmed if untrimmed is not None else "",
            # how the reply was read: its thoughts removed ("strip"), and whether it had an answer to judge
            "reasoning": {"mode": self.reasoning, "thought_chars": thought_chars, "answered": answered},
            "retried": dict(result.details.get("retried") or {}),  # the run was lost once; its retry gave the verdict
            "infra_error": lost,  # no verdict: the run was lost to the infrastructure, also on its retry
            "timings": Timings(
                compile_s=compiled_at - started,
                execute_s=executed_at - compiled_at,
                verbal_s=verbal_at - executed_at,
                step_s=time.perf_counter() - started,
            ),
        }
        return obs, 1.0 if passed and not isinstance(task, CanaryTwin) else 0.0, terminated, truncated, info

    def _run_plan(self, task: Task, program: str) -> Plan[tuple[ExecutionResult, ExecutionResult | None]]:
        """``program`` run on ``task``: its result and, where a time limit stopped a test and execution feedback is
        shown, the result of the tests after it (run apart, as the reference's suite went on), else None."""
        result = yield Call(self.executor.run, self.executor.arun, (task, program))
        after = rest_after_stop(task, result) if self.config.execution != "none" else None
        if after is None:
            return result, None
        self.executor.derive(task, after)
        rest = yield Call(self.executor.run, self.executor.arun, (after, program))
        return result, rest

    def _perturbation_info(self, followed: bool | None) -> dict[str, Any]:
        """``info["perturbation"]``: ``{}`` on a task played as it is; else the perturbation's kind, seed, the two
        tests swapped, and ``followed`` (this step's program passed a swapped test of the perturbed copy; None on
        ``reset`` and on a step without a verdict)."""
        perturbed = self._perturbation
        if perturbed is None:
            return {}
        return {"kind": perturbed.kind, "seed": perturbed.seed, "tests": list(perturbed.tests), "followed": followed}

    def user_feedback_for(self, code: str) -> str | None:
        """The simulated user's words on ``code`` that compiles, shown with the execution
        feedback of the program judged last (the reference's turn after a compile fix: the
        fixed code is not run before the user speaks). None without a simulator."""
        return run_blocking(self._user_feedback_plan(code))

    async def auser_feedback_for(self, code: str) -> str | None:
        """:meth:`user_feedback_for`, awaited (the simulated user's ``acall``, else a thread)."""
        return await run_awaited(self._user_feedback_plan(code))

    def _user_feedback_plan(self, code: str) -> Plan[str | None]:
        if self.verbal_feedback is None or self._last_judged is None:
            return None
        ef, result = self._last_judged
        shown_task = self._perturbation.shown if self._perturbation is not None else self.task
        context = TurnContext(shown_task, max(self._turn - 1, 0), code, True, NO_SYNTAX_ERRORS, ef, result, self.config)
        with self._one_call_at_a_time():
            verbal = _guard_hidden_tests((yield speak(self.verbal_feedback, context)), context)
        return verbal.text if isinstance(verbal, VerbalReply) else verbal

    def render(self) -> str | None:
        task_id = self._task.task_id if self._task else "?"
        return render_ansi(self.render_mode, self._last_obs,
                           lambda obs: f"{task_id} [{self.config.name}] next turn {obs['turn']}")

    def close(self) -> None:
        if self._owns_executor:
            self.executor.close()
        if self._owns_verbal_feedback and hasattr(self.verbal_feedback, "close"):
            self.verbal_feedback.close()  # type: ignore[union-attr]
        super().close()

    # ------------------------------------------------------------- helpers

    @contextlib.contextmanager
    def _one_call_at_a_time(self) -> Iterator[None]:
        """Marks a call as in flight while it awaits (or blocks on) slow work; a second call meanwhile is refused."""
        if self._in_flight:
            raise RuntimeError(
                "this env has a reset or step in flight (awaited elsewhere): an env plays one episode at a time; "
                "play concurrent episodes on envs of their own (they may share one executor)"
            )
        self._in_flight = True
        try:
            yield
        finally:
            self._in_flight = False

    def _choose_task(self, options: dict[str, Any]) -> Task:
        unknown = set(options) - {"task_id", "task_index"}
        if unknown:
            raise ValueError(f"unknown reset option(s) {sorted(unknown)}; accepted: 'task_id', 'task_index'")
        if "task_id" in options:
            return self.tasks[str(options["task_id"])]
        if "task_index" in options:
            index = options["task_index"]
            if not isinstance(index, int) or not 0 <= index < len(self.tasks):
                raise ValueError(f"task_index must be an int in [0, {len(self.tasks)}), got {index!r}")
            return self.tasks[index]
        return self.tasks[int(self.np_random.integers(len(self.tasks)))]

    def _observation(self, *, code: str, cf: str, ef: str, vf: str) -> dict[str, Any]:
        return make_observation(self.task.prompt, min(self._turn, self.max_turns + 1), code=code, compilation_feedback=cf,
                                execution_feedback=ef, verbal_feedback=vf)
