"""The reference's turn protocol: on which turns the model is called, and with what.

The reference (convcodeworld's ``pot.py``, ``forward``) does not call the model on a turn
that gives it nothing to act on: it carries the previous code over, unchanged, and executes
it again. Per turn, after the previous program was judged:

* solved: nothing more (the env ends the episode);
* the code compiles and no shown feedback speaks (CF only; CF SNF, the novice silent;
  EF(partial) showing "Passed all test runs" without an expert): no call, code carried over;
* the expert (SEF) speaks on every failing program, so each such turn is a call;
* the code does not compile (and the user is no novice, who speaks instead): up to 3
  calls inside the turn that show the compilation feedback only; once a reply compiles
  (before the third), the turn goes on with it: one more call when the previous program's
  execution feedback showed a failure or the expert speaks on the fixed code;
* a call the model rejects as too long for its context is retried with the execution
  feedback trimmed shorter (:func:`act_with_retrim`).

The env says per turn whether it gives the model something to act on
(``info["actionable"]``, computed by :func:`actionable`). :class:`ReferenceProtocol` plays
the protocol around any policy: each of its steps is one model call; ``areset`` / ``astep``
do the same awaited (one code path, :mod:`.aio`).

Holds:
    PROTOCOLS           ``("reference", "always")``: the protocols ``convcodeworld evaluate`` plays
    MAX_COMPILE_FIXES   compile-fix calls in one turn (3)
    actionable          does a judged turn give the model something to act on
    reference_turn      one turn as a generator: yields what the model answers, returns the env's action
    ReferenceProtocol   gym wrapper: each step is one model call; carried turns are played inside
    act_with_retrim     one model call, retried with shorter execution feedback on a context overflow
    retrim_plan         the same as a plan (:mod:`.aio`), for a model call that is awaited
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from typing import Any

import gymnasium as gym

from .aio import Call, Plan, method_call, run_awaited, run_blocking
from .combos import FeedbackConfig
from .errors import ContextOverflow, ResetNeeded
from .extract import Code, ReasoningMode
from .feedback.compilation import reply_feedback
from .feedback.execution import retrim_windows, shows_failure, trim_feedback
from .observation import make_observation

__all__ = [
    "PROTOCOLS",
    "MAX_COMPILE_FIXES",
    "actionable",
    "reference_turn",
    "ReferenceProtocol",
    "act_with_retrim",
    "retrim_plan",
]

PROTOCOLS: tuple[str, ...] = ("reference", "always")
MAX_COMPILE_FIXES = 3

Observation = Mapping[str, Any]
#: A turn of the protocol: yields each observation the model must answer (and receives the reply text), or
#: a :class:`~.aio.Call` for the user's words (and receives them); returns the action the env judges for the turn.
TurnPlay = Generator[Any, Any, str]


def actionable(config: FeedbackConfig, *, passed: bool, compile_ok: bool, execution_feedback: str | None, verbal_feedback: str | None) -> bool:
    """Whether a judged turn gives the model something to act on, as the reference decides.

    Args:
        execution_feedback: the EF text shown, None when none is shown.
        verbal_feedback: the user's words shown ("" or None when silent).

    >>> cf = FeedbackConfig.parse("CF")
    >>> actionable(cf, passed=False, compile_ok=True, execution_feedback=None, verbal_feedback=None)
    False
    >>> actionable(cf, passed=False, compile_ok=False, execution_feedback=None, verbal_feedback=None)
    True
    >>> actionable(FeedbackConfig.parse("CF-EF_partial"), passed=False, compile_ok=True,
    ...            execution_feedback="Passed all test runs", verbal_feedback=None)
    False
    >>> actionable(FeedbackConfig.parse("CF-EF_partial-SEF"), passed=False, compile_ok=True,
    ...            execution_feedback="Passed all test runs", verbal_feedback="")
    True
    """
    if passed:
        return False
    return not compile_ok or shows_failure(execution_feedback) or config.verbal == "expert" or bool(verbal_feedback)


def _shown_ef(observation: Observation, info: Mapping[str, Any]) -> str | None:
    shown = (info.get("feedback_shown") or {}).get("execution")
    return str(observation.get("execution_feedback") or "") if shown else None


def reference_turn(
    observation: Observation,
    info: Mapping[str, Any],
    config: FeedbackConfig,
    user_feedback: Callable[[str], Call[str | None]],
    reasoning: ReasoningMode = "strip",
) -> TurnPlay:
    """One turn of the reference protocol after the env showed ``observation`` and ``info``.

    Yields each observation the model must answer and receives its reply; returns the action
    the env judges as the turn's program: the last reply, or the previous code carried over
    (no call at all) when ``info["actionable"]`` is False. ``info["shown_compiles"]`` says
    whether the observation's code compiled (live: the model's; static: the reference's).

    Args:
        user_feedback: the :class:`~.aio.Call` that gets the user's words on a fixed program that compiles,
            shown with the previous program's execution feedback (the env's ``user_feedback_for``); asked
            only for the expert after a compile fix. The turn yields that call and receives the words.
        reasoning: how a compile fix's reply is read (the env's ``reasoning``): its answer's code is compiled,
            never a thought's, and a reply with no answer does not compile.
    """
    if not info.get("actionable", True):
        return Code(str(observation["code"]))  # carried over: code, never a reply to extract from
    if info.get("shown_compiles", True) or config.verbal == "novice":
        return (yield dict(observation))
    # compile fixes: the model sees the compilation feedback alone
    task, turn = str(observation["task"]), int(observation["turn"])
    prompt = make_observation(task, turn, code=str(observation["code"]), compilation_feedback=str(observation["compilation_feedback"]))
    for attempt in range(1, MAX_COMPILE_FIXES + 1):
        reply = yield prompt
        code, compiles, cf, _ = reply_feedback(reply, reasoning)
        if compiles or attempt == MAX_COMPILE_FIXES:
            break
        prompt = make_observation(task, turn, code=code, compilation_feedback=cf)
    if not compiles or attempt == MAX_COMPILE_FIXES:
        return reply
    # the turn goes on with the fixed code and the failed program's execution feedback
    stale_ef = _shown_ef(observation, info)
    follow_up = make_observation(task, turn, code=code, execution_feedback=stale_ef or "")
    if config.verbal == "expert":
        follow_up["verbal_feedback"] = (yield user_feedback(code)) or ""
    elif not shows_failure(stale_ef):
        return reply
    return (yield follow_up)


class ReferenceProtocol(gym.Wrapper[dict[str, Any], str, dict[str, Any], str]):
    """Plays the reference's turn protocol around any policy: each ``step`` is one model call.

    The observation returned is what the model answers next: the env's observation, or,
    inside a turn, the compilation feedback on a reply that does not compile, then the
    turn's follow-up (see the module's docstring). Turns with nothing to act on are played
    inside the wrapper, carrying the previous code over, so the policy is never asked.

    ``info["turns"]`` lists the env turns a step (or ``reset``) played, each
    ``{"action", "obs", "reward", "terminated", "truncated", "info", "model_calls"}``
    (``model_calls``: the steps that led to it, 0 for a carried turn); it is empty while a
    turn is still open. The reward is the sum over those turns. Should the episode end
    inside ``reset`` (a ConvCodeBench task whose reference passed at once), ``reset``'s
    info has ``episode_over=True`` and ``step`` raises :class:`ResetNeeded`.

    >>> import gymnasium as gym, convcodeworld_gym
    >>> env = ReferenceProtocol(gym.make("ConvCodeWorld-CF-v0", dataset="humaneval", max_turns=3))
    >>> obs, info = env.reset(options={"task_id": "HumanEval/2"})
    >>> obs, reward, terminated, truncated, info = env.step("def truncate_number(number):\\n    return 1.0")
    >>> # it compiles and CF says nothing more: turns 1..3 carry it over, no call
    >>> truncated, [t["info"]["turn"] for t in info["turns"]], [t["model_calls"] for t in info["turns"]]
    (True, [0, 1, 2, 3], [1, 0, 0, 0])
    >>> env.close()
    """

    def __init__(self, env: gym.Env[dict[str, Any], str]) -> None:
        super().__init__(env)
        config = getattr(env.unwrapped, "config", None)
        if not isinstance(config, FeedbackConfig):
            raise TypeError(f"ReferenceProtocol needs a convcodeworld-gym env (with a feedback config), got {type(env.unwrapped).__name__}")
        self.config = config
        self._play: TurnPlay | None = None
        self._calls = 0
        self._last: tuple[dict[str, Any], dict[str, Any]] | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        return run_blocking(self._reset_plan(seed, options))

    async def areset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """:meth:`reset`, awaited (the env's ``areset`` and ``astep``): the same result."""
        return await run_awaited(self._reset_plan(seed, options))

    def step(self, action: str) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        return run_blocking(self._step_plan(action))

    async def astep(self, action: str) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """:meth:`step`, awaited (the env's ``astep``, the user's words awaited): the same result."""
        return await run_awaited(self._step_plan(action))

    # ------------------------------------------------------------- helpers

    def _reset_plan(self, seed: int | None, options: dict[str, Any] | None) -> Plan[tuple[dict[str, Any], dict[str, Any]]]:
        obs, info = yield method_call(self.env, "reset", seed=seed, options=options)
        self._calls = 0
        obs, _, done, info = yield from self._advance(obs, info, [])
        if done:
            info = {**info, "episode_over": True}
        return obs, info

    def _step_plan(self, action: str) -> Plan[tuple[dict[str, Any], float, bool, bool, dict[str, Any]]]:
        if self._play is None or self._last is None:
            raise ResetNeeded("the episode is over (or never started): call reset() before step()")
        self._calls += 1
        asks, value = yield from self._continue(self._play, action)
        if not asks:
            self._play = None
            return (yield from self._judge(value if isinstance(value, str) else str(value)))  # a Code stays one
        return value, 0.0, False, False, {**self._last[1], "turns": []}

    def _continue(self, play: TurnPlay, value: str | None) -> Plan[tuple[bool, Any]]:
        """Send ``value`` into the turn (None: start it) and fetch the user's words it asks for, until it asks the
        model: ``(True, prompt)``; or until it ends: ``(False, the action the env judges)``."""
        try:
            item = play.send(value)
            while isinstance(item, Call):
                try:
                    words = yield item
                except BaseException as exc:  # noqa: BLE001 - the turn sees the failure where it asked
                    item = play.throw(exc)
                else:
                    item = play.send(words)
        except StopIteration as stop:
            return False, stop.value
        return True, item

    def _judge(self, action: str) -> Plan[tuple[dict[str, Any], float, bool, bool, dict[str, Any]]]:
        turns: list[dict[str, Any]] = []
        obs, reward, terminated, truncated, info = yield method_call(self.env, "step", action)
        turns.append(self._turn(action, obs, reward, terminated, truncated, info, self._calls))
        self._calls = 0
        if terminated or truncated:
            self._last = None
            return obs, float(reward), terminated, truncated, {**info, "turns": turns}
        obs, _, _, info = yield from self._advance(obs, info, turns)
        last = turns[-1]
        return obs, sum(t["reward"] for t in turns), last["terminated"], last["truncated"], info

    def _advance(self, obs: dict[str, Any], info: dict[str, Any], turns: list[dict[str, Any]]) -> Plan[tuple[dict[str, Any], float, bool, dict[str, Any]]]:
        """Play carried turns until one needs the model (its first prompt is returned) or the episode ends."""
        while True:
            play = reference_turn(obs, info, self.config, self._user_feedback,
                                  getattr(self.env.unwrapped, "reasoning", "strip"))
            asks, value = yield from self._continue(play, None)
            if not asks:  # nothing to act on: the code is carried over
                action = value if isinstance(value, str) else str(value)
                obs, reward, terminated, truncated, info = yield method_call(self.env, "step", action)
                turns.append(self._turn(action, obs, reward, terminated, truncated, info, 0))
                if terminated or truncated:
                    self._play, self._last = None, None
                    return obs, float(reward), True, {**info, "turns": turns}
                continue
            self._play, self._last = play, (obs, info)
            return value, 0.0, False, {**info, "turns": turns}

    def _user_feedback(self, code: str) -> Call[str | None]:
        if getattr(self.env.unwrapped, "user_feedback_for", None) is None:
            return Call(_silent, None, (code,))
        return method_call(self.env.unwrapped, "user_feedback_for", code)

    @staticmethod
    def _turn(action: str, obs: dict[str, Any], reward: float, terminated: bool, truncated: bool, info: dict[str, Any], calls: int) -> dict[str, Any]:
        return {"action": action, "obs": obs, "reward": float(reward), "terminated": terminated, "truncated": truncated,
                "info": info, "model_calls": calls}


def _silent(code: str) -> None:
    """No user to speak: an env without ``user_feedback_for``."""
    del code


def act_with_retrim(act: Callable[[Observation], Any], observation: Observation, untrimmed_ef: str | None = None) -> Any:
    """``act(observation)``; when the model's context overflows (:class:`ContextOverflow`),
    ask again with the execution feedback trimmed shorter, as the reference does: its usual
    front and back windows first (trimming forced), then the larger one shrunk by 1000
    characters at a time. Raises the last overflow when even an empty window overflows or
    the observation shows no execution feedback.

    Args:
        untrimmed_ef: the execution feedback before the env's trimming (``info["untrimmed_execution_feedback"]``);
            default: the observation's.
    """
    return run_blocking(retrim_plan(lambda shown: Call(act, None, (shown,)), observation, untrimmed_ef))


def retrim_plan(act: Callable[[Observation], Call[Any]], observation: Observation, untrimmed_ef: str | None = None) -> Plan[Any]:
    """:func:`act_with_retrim` as a plan (:mod:`.aio`): ``act(observation)`` is the :class:`~.aio.Call` of one model
    call on ``observation`` (blocking or awaited), asked again with shorter execution feedback on an overflow."""
    try:
        return (yield act(observation))
    except ContextOverflow:
        shown = str(observation.get("execution_feedback") or "")
        if not shown:
            raise
        source = untrimmed_ef or shown
        error: ContextOverflow | None = None
        for front, rear in retrim_windows():
            trimmed = trim_feedback(source, threshold=0, front_chars=front, rear_chars=rear)
            try:
                return (yield act({**observation, "execution_feedback": trimmed}))
            except ContextOverflow as exc:
                error = exc
        assert error is not None
        raise error
