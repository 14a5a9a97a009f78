"""One session of the episode server: OpenEnv's ``Environment`` over a ConvCodeWorld env, awaited.

OpenEnv makes one :class:`ConvCodeWorldService` per WebSocket session (and one per stateless HTTP request) and
awaits its ``reset_async`` / ``step_async`` on the server's one event loop. Those await the env's ``areset`` /
``astep`` (its sandbox run in the shared executor's pool, its simulated user through its async client), so no
session ever waits on another.

``reset`` takes, besides OpenEnv's ``seed`` and ``episode_id``: ``env_id`` (an id or a combination the server plays;
default: the server's id), and ``task_id`` or ``task_index`` (default: a task drawn with ``seed``). Anything else is
refused, by name: a client chooses the episode, never the server's executor, endpoint or key. ``step`` takes a
:class:`~.models.CodeAction`. An episode ends when its program passes, after its last turn, when the infrastructure
lost its run (``metadata["info"]["infra_error"]``, reward ``None``) or when it runs past ``max_episode_s``; a step
after that is refused until the next ``reset``. The env judges the action's ``reply`` alone (its thoughts removed
under the server's ``--reasoning``); a thought sent apart (``reasoning``) is never judged, and comes back in the
step's ``metadata["reasoning"]``. Each episode that ends with a verdict (or that the infrastructure
lost) is counted in the backend's tally (:mod:`.tally`: reward, canary pass rate, regressions; ``GET /episodes``).

An error reaches the client as ``"<kind>: <message>"`` (``"UnknownTaskError: ..."``, ``"ResetNeeded: ..."``,
``"ServerLimitError: ..."``), written for the caller (:mod:`.public`: its mistake and what it can change; of the
server's failures, only what happened to the call and a reference into the server's log): over the WebSocket with
OpenEnv's ``VALIDATION_ERROR`` for the caller's mistakes (``EPISODE_TIMEOUT`` for the episode's time) and
``EXECUTION_ERROR`` for the server's, over HTTP as a 400 (the caller's) or a 503 / 500 (the server's) with that
``detail``, ``kind`` and ``code``. Paths of the server's machine in what a caller is shown (a traceback into the
runtime's standard library) are masked (:class:`~.public.Redactor`). A reset or step whose client went away meanwhile
is cancelled (:func:`~.guard.unless_client_gone`; its sandbox run is killed); the session is then closed by OpenEnv,
and its env given back, once. A closed session makes no env again.

Holds:
    ConvCodeWorldService  the session
    Refused               the error a reset or step ends with, as the caller is told it (:mod:`.public`)
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable
from typing import Any, TypeVar

from . import require_openenv

require_openenv()

from openenv.core.env_server.interfaces import Environment  # noqa: E402
from openenv.core.env_server.types import EnvironmentMetadata  # noqa: E402

from .. import __version__  # noqa: E402
from ..aio import run_sync  # noqa: E402
from ..env import ConvCodeWorldEnv  # noqa: E402
from ..errors import ResetNeeded, ServerLimitError  # noqa: E402
from ..feedback.shown import shown_info  # noqa: E402
from .backend import Backend  # noqa: E402
from .guard import ClientGone, report_error_code, unless_client_gone  # noqa: E402
from .models import CodeAction, EpisodeState, FeedbackObservation, info_to_json  # noqa: E402
from .public import Refused, ServerFault, refusal  # noqa: E402

__all__ = ["ConvCodeWorldService", "Refused"]

RESET_ARGUMENTS = ("seed", "episode_id", "env_id", "task_id", "task_index")
T = TypeVar("T")


class ConvCodeWorldService(Environment[CodeAction, FeedbackObservation, EpisodeState]):
    """One session: at most one episode at a time, on an env the :class:`~.backend.Backend` makes for the id its
    ``reset`` names (kept while the id stays the same) and takes back when the session closes.

    Args:
        backend: what the server's sessions share (executor, task set, ids, limits).
    """

    SUPPORTS_CONCURRENT_SESSIONS = True  # each session its own env; all share the backend's executor, which queues fairly

    def __init__(self, backend: Backend) -> None:
        super().__init__()
        self.backend = backend
        self._env: ConvCodeWorldEnv | None = None
        self._state = EpisodeState(env_id=backend.default_id, done=True)
        self._deadline: float | None = None
        self._regressed = False  # a turn of this episode broke a test an earlier turn passed
        self._closed = False

    # ------------------------------------------------------------------ reset

    async def reset_async(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> FeedbackObservation:
        """Start an episode (see the module for the arguments); the observation of turn 0."""
        try:
            return await self._reset(seed, episode_id, kwargs)
        except Exception as exc:
            raise self._refused("reset", exc) from exc

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> FeedbackObservation:
        """:meth:`reset_async` from blocking code (OpenEnv awaits ``reset_async`` itself)."""
        return run_sync(self.reset_async(seed=seed, episode_id=episode_id, **kwargs))

    async def _reset(self, seed: int | None, episode_id: str | None, kwargs: dict[str, Any]) -> FeedbackObservation:
        unknown = sorted(set(kwargs) - set(RESET_ARGUMENTS))
        if unknown:
            raise ValueError(f"unknown reset argument(s) {unknown}; reset takes {', '.join(RESET_ARGUMENTS)}")
        if "task_id" in kwargs and "task_index" in kwargs:
            raise ValueError("pass task_id or task_index, not both")
        full = self.backend.env_id_of(kwargs.get("env_id"))
        if self._env is None or self._state.env_id != full:
            await asyncio.to_thread(self._release)
            self._check_open()
            env = await asyncio.to_thread(self.backend.make_env, full)
            if self._closed:  # closed while the env was being made: it is given back at once
                await asyncio.to_thread(self.backend.release, env)
                self._check_open()
            self._env = env
        self._state = EpisodeState(env_id=full, done=True)  # until the reset below has happened
        options = {key: kwargs[key] for key in ("task_id", "task_index") if key in kwargs}
        obs, info = await unless_client_gone(self._env.areset(seed=seed, options=options))
        limit = self.backend.limits.max_episode_s
        self._deadline = None if limit is None else time.monotonic() + limit
        self._regressed = False
        self._state = EpisodeState(episode_id=episode_id or uuid.uuid4().hex, step_count=0, env_id=full,
                                   task_id=info["task_id"], turn=obs["turn"], done=False)
        return self._observation(obs, None, False, False, info)

    # ------------------------------------------------------------------- step

    async def step_async(self, action: CodeAction, timeout_s: float | None = None, **kwargs: Any) -> FeedbackObservation:
        """Judge one reply of the episode; the feedback the id shows, the reward, ``done``."""
        try:
            return await self._step(action)
        except Exception as exc:
            raise self._refused("step", exc) from exc

    def step(self, action: CodeAction, timeout_s: float | None = None, **kwargs: Any) -> FeedbackObservation:
        """:meth:`step_async` from blocking code (OpenEnv awaits ``step_async`` itself)."""
        return run_sync(self.step_async(action))

    async def _step(self, action: CodeAction) -> FeedbackObservation:
        if not isinstance(action, CodeAction):
            raise TypeError(f"a step takes a CodeAction ({{'reply': ...}}), got {type(action).__name__}")
        if self._env is None or self._state.task_id is None:
            raise ResetNeeded(
                "no episode in this session: send reset first. (Over HTTP, /step cannot continue an episode: OpenEnv's "
                "HTTP routes make a fresh env per request; play episodes over the /ws WebSocket, e.g. with "
                "convcodeworld_gym.service.ConvCodeWorldClient.)")
        if self._state.done:
            raise ResetNeeded(f"the episode of {self._state.task_id} is over: send reset to play another")
        remaining = None if self._deadline is None else self._deadline - time.monotonic()
        try:
            if remaining is not None and remaining <= 0:
                raise asyncio.TimeoutError
            obs, reward, terminated, truncated, info = await asyncio.wait_for(
                unless_client_gone(_judged(self._env.astep(action.reply))), remaining)
        except asyncio.TimeoutError:
            self._state.done = True
            raise ServerLimitError(
                f"the episode of {self._state.task_id} ran past this server's limit of {self.backend.limits.max_episode_s:g} s "
                "from its reset (convcodeworld serve --max-episode-s); it is over (a step still running was cancelled): "
                "send reset to play another", "max_episode_s") from None
        done = bool(terminated or truncated)
        self._state.step_count += 1
        self._state.turn, self._state.done = obs["turn"], done
        lost = info.get("infra_error") is not None  # no verdict: the reward is None, never a 0
        self._regressed = self._regressed or bool(info.get("regressed_tests"))
        if done:  # a lost run ends the episode too (truncated)
            self.backend.tally.record(self._state.env_id, reward=None if lost else float(reward),
                                      canary=bool(info.get("canary")), passed=bool(info.get("passed")),
                                      regressed=self._regressed)
        observation = self._observation(obs, None if lost else float(reward), bool(terminated), bool(truncated), info)
        if action.reasoning is not None:  # kept with the step, never judged: the env saw the reply alone
            observation.metadata["reasoning"] = action.reasoning
        return observation

    # ------------------------------------------------------------------ state

    @property
    def state(self) -> EpisodeState:
        """The session's id, task, turn and whether its episode is over."""
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        """The server's name, version and what it plays (ids, task set, turns); nothing else of its configuration."""
        described = self.backend.describe()
        tasks = described["tasks"]
        played = f"{tasks['name']} ({tasks['count']} tasks)" if tasks else "the server's task set"
        return EnvironmentMetadata(
            name="convcodeworld",
            description=(
                "ConvCodeWorld (ICLR 2025): multi-turn code generation with compilation, execution and verbal feedback, "
                f"judged by a confined sandbox. Ids: {', '.join(described['ids'])} (default {described['default_id']}); "
                f"tasks: {played}; {described['max_turns']} feedback turns. Play episodes over the /ws WebSocket: "
                "reset(env_id=..., task_id=... or task_index=..., seed=...), then step({'reply': <the model's reply or "
                "code>}) until done."
            ),
            version=__version__,
        )

    # ------------------------------------------------------------------ close

    def close(self) -> None:
        """Give the session's env back to the backend (its simulated user closed; the shared executor kept); the
        session makes no env after this."""
        self._closed = True
        self._release()

    def _check_open(self) -> None:
        if self._closed:
            raise ClientGone("the session was closed while its reset was in flight")

    def _refused(self, call: str, exc: Exception) -> Refused:
        """``exc`` as the caller is told it; the guard sends it with its code."""
        refused = refusal(call, exc, self.backend.redactor)
        report_error_code(refused.code)
        return refused

    def _release(self) -> None:
        env, self._env = self._env, None
        if env is not None:
            self.backend.release(env)

    # --------------------------------------------------------------- helpers

    def _observation(self, obs: dict[str, Any], reward: float | None, terminated: bool, truncated: bool,
                     info: dict[str, Any]) -> FeedbackObservation:
        """The wire observation of ``obs`` and ``info``, the machine's paths masked in the feedback and the info;
        of the info, under the backend's ``info="shown"``, only what the step's feedback could show."""
        redactor = self.backend.redactor
        if self.backend.info == "shown" and self._env is not None:
            info = shown_info(info, self._env.unwrapped.task.public_tests)
        shown = {key: redactor.text(value) if key in _FEEDBACK_FIELDS else value for key, value in obs.items()}
        return FeedbackObservation(
            **shown, task_id=str(info["task_id"]), env_id=self._state.env_id, done=terminated or truncated, reward=reward,
            metadata={"terminated": terminated, "truncated": truncated, "info": redactor.data(info_to_json(info))},
        )


#: The observation's fields the server writes (the task's text and the caller's own code are shown as they are).
_FEEDBACK_FIELDS = ("compilation_feedback", "execution_feedback", "verbal_feedback")


async def _judged(awaitable: Awaitable[T]) -> T:
    """Await an env's step: what it raises (other than a cancel or ResetNeeded) is the server's failure, never the
    caller's mistake, whatever its type (:class:`~.public.ServerFault`)."""
    try:
        return await awaitable
    except ResetNeeded:
        raise
    except Exception as exc:
        raise ServerFault(exc) from exc
