"""A Gymnasium env whose episodes play on an episode server: this package's own loops against a remote env.

:class:`RemoteEnv` has the local env's API (``reset``/``step`` and their awaited twins ``areset``/``astep``, the same
observation keys, ``info`` as the server sends it) over one :class:`~.client.ConvCodeWorldClient` session, so the
rollout driver (:func:`~convcodeworld_gym.rollouts.iter_rollouts`, ``protocol="always"``) and any loop of your own play
against a server as they play in-process: the trainer on one machine, the sandbox on others. It holds no task data;
give it the task set (``tasks=``) when a policy needs the task records (the rollout driver does).

Differences from the local env: ``info`` is what crossed as JSON (lists for tuples; ``timings`` rebuilt as
:class:`~convcodeworld_gym.env.Timings`, the server's), and a server started with ``--info shown`` (its default)
sends of it only what the step's feedback covers (:func:`~convcodeworld_gym.feedback.shown.shown_info`: under partial
or no EF no hidden test's entry, count or time); the reward of a step the infrastructure lost is 0.0 with
``info["infra_error"]`` set, as locally; and it does not offer ``user_feedback_for`` (the reference protocol's
compile-fix turns), so play it with ``protocol="always"``.

Holds:
    RemoteEnv    the env
    RemoteEnvs   ``make_env`` for the rollout driver: a RemoteEnv per call, all of their sessions ended by ``aclose``
"""

from __future__ import annotations

import asyncio
from typing import Any

import gymnasium as gym

from . import require_openenv

require_openenv()

from ..combos import DEFAULT_MAX_TURNS, FeedbackConfig  # noqa: E402
from ..env import Timings  # noqa: E402
from ..observation import OBSERVATION_KEYS, observation_space  # noqa: E402
from ..registration import env_id as full_id  # noqa: E402
from ..spaces import MAX_TEXT_CHARS, UnicodeText  # noqa: E402
from ..tasks import Task, TaskSet  # noqa: E402
from .client import ConvCodeWorldClient  # noqa: E402
from .models import CodeAction, FeedbackObservation  # noqa: E402

__all__ = ["RemoteEnv", "RemoteEnvs"]

StepResult = tuple[dict[str, Any], float, bool, bool, dict[str, Any]]


class RemoteEnv(gym.Env[dict[str, Any], str]):
    """ConvCodeWorld on an episode server, as a Gymnasium env (one session; one episode at a time).

    Args:
        base_url: the server (``http://host:port``).
        env_id: the id to play (an id or a combination, ``"CF-EF_full"``); every ``reset`` plays it.
        tasks: the task set the server plays, for ``env.task`` (policies need the record); optional.
        max_turns: the server's feedback turns (for the observation space only).
        message_timeout_s: how long a reset or step may take.

    Use it either blocking (``reset``/``step``) or awaited (``areset``/``astep``), not both: its client runs in one
    mode. ``close()`` (or ``await aclose()``) ends the session.
    """

    metadata = {"render_modes": []}

    def __init__(self, base_url: str, env_id: str, *, tasks: TaskSet | None = None, max_turns: int = DEFAULT_MAX_TURNS,
                 message_timeout_s: float = 600.0) -> None:
        self.env_id = env_id if env_id in gym.registry else full_id(env_id)
        self.config = FeedbackConfig.parse(gym.registry[self.env_id].kwargs["feedback"])
        self._tasks = tasks
        self.client = ConvCodeWorldClient(base_url=base_url, message_timeout_s=message_timeout_s)
        self.action_space = UnicodeText(MAX_TEXT_CHARS)
        self.observation_space = observation_space(max_turns)
        self._task_id: str | None = None
        self._closing: asyncio.Future[None] | None = None

    @property
    def tasks(self) -> TaskSet:
        """The task set given as ``tasks=``."""
        if self._tasks is None:
            raise ValueError("RemoteEnv(tasks=...) is needed for the task records: the server sends the task's "
                             "instruction (obs['task']) and id (info['task_id']), not the record")
        return self._tasks

    @property
    def task(self) -> Task:
        """The record of the current episode's task (needs ``tasks=``)."""
        if self._task_id is None:
            raise ValueError("no episode yet: reset first")
        return self.tasks[self._task_id]

    # ------------------------------------------------------------------ blocking

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """Start an episode on the server (``options``: ``task_id`` or ``task_index``)."""
        return self._reset_result(self.client.reset(**self._reset_arguments(seed, options)))

    def step(self, action: str) -> StepResult:
        """Submit one reply; ``(observation, reward, terminated, truncated, info)`` as the local env gives them."""
        return self._step_result(self.client.step(CodeAction(reply=action)))

    def close(self) -> None:
        """End the session (from blocking code; inside a running loop it is scheduled on that loop)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self.client.close()
            return
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close_awaited())

    # ------------------------------------------------------------------ awaited

    async def areset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """:meth:`reset`, awaited."""
        return self._reset_result(await self.client.reset(**self._reset_arguments(seed, options)))

    async def astep(self, action: str) -> StepResult:
        """:meth:`step`, awaited."""
        return self._step_result(await self.client.step(CodeAction(reply=action)))

    async def aclose(self) -> None:
        """End the session, awaited (also one that :meth:`close` scheduled)."""
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close_awaited())
        await self._closing

    async def _close_awaited(self) -> None:
        await self.client.close()

    # ------------------------------------------------------------------ helpers

    def _reset_arguments(self, seed: int | None, options: dict[str, Any] | None) -> dict[str, Any]:
        options = dict(options or {})
        unknown = set(options) - {"task_id", "task_index"}
        if unknown:
            raise ValueError(f"unknown reset option(s) {sorted(unknown)}; accepted: 'task_id', 'task_index'")
        return {"env_id": self.env_id, **({"seed": seed} if seed is not None else {}), **options}

    def _reset_result(self, result: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        observation: FeedbackObservation = result.observation
        info = dict(observation.metadata.get("info") or {})
        self._task_id = observation.task_id
        return _obs(observation), info

    def _step_result(self, result: Any) -> StepResult:
        observation: FeedbackObservation = result.observation
        meta = observation.metadata
        reward = 0.0 if result.reward is None else float(result.reward)  # a lost run: 0.0 with info["infra_error"]
        info = dict(meta.get("info") or {})
        if isinstance(info.get("timings"), dict):
            info["timings"] = Timings(**info["timings"])
        return _obs(observation), reward, bool(meta.get("terminated")), bool(meta.get("truncated")), info


def _obs(observation: FeedbackObservation) -> dict[str, Any]:
    return {key: getattr(observation, key) for key in OBSERVATION_KEYS}


class RemoteEnvs:
    """``make_env`` for :func:`~convcodeworld_gym.rollouts.iter_rollouts` against a server: each call makes a
    :class:`RemoteEnv` (one session; the driver keeps one per episode in flight), and :meth:`aclose` ends every
    session it made (the driver closes its envs from inside the loop, where a session's close can only be scheduled).

    >>> # make_env = RemoteEnvs("http://127.0.0.1:8000", "CF-EF_full", tasks=load_tasks("humaneval"))
    >>> # async for t in iter_rollouts(jobs, make_env, policy, concurrency=256, protocol="always"): ...
    >>> # await make_env.aclose()
    """

    def __init__(self, base_url: str, env_id: str, **kwargs: Any) -> None:
        self.base_url, self.env_id, self.kwargs = base_url, env_id, kwargs
        self.made: list[RemoteEnv] = []

    def __call__(self) -> RemoteEnv:
        env = RemoteEnv(self.base_url, self.env_id, **self.kwargs)
        self.made.append(env)
        return env

    async def aclose(self) -> None:
        """End the session of every env made."""
        await asyncio.gather(*(env.aclose() for env in self.made), return_exceptions=True)
        self.made = []
