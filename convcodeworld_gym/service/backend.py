"""What every session of one episode server shares: the ids it serves, the task set, one executor, the limits.

A server (:mod:`.app`) has one :class:`Backend`. Each session (:class:`~.environment.ConvCodeWorldService`) asks it
for an env of the id its ``reset`` names (:meth:`Backend.make_env`) and gives the env back when the session ends
(:meth:`Backend.release`). Every env it makes runs its programs on the backend's one executor (a
:class:`~convcodeworld_gym.sandbox.SandboxExecutor`, a ``DockerExecutor`` or a ``RayExecutor``: its pool queues
the runs of all sessions fairly, first come first served) and plays the backend's one task set, chosen once (the
tasks the executor's runtime can serve, as ``gym.make`` chooses them), so that a session starts in milliseconds.
The backend also holds the server's :class:`~.tally.EpisodeTally`: what the episodes played add up to (the reward,
the canary pass rate beside it, regressions), which ``GET /episodes`` returns. No secret is held here: the simulated
user reads its key from the environment when an env builds it.

Holds:
    Backend        the shared executor, task set, ids and limits; makes and releases the sessions' envs
    ServerLimits   sessions, request size, episode time, idle time and request time, each with its ``convcodeworld serve`` flag
    INFO_SCOPES    what of a step's info a client may get: ``"shown"`` (what the feedback could show) or ``"full"``
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from ..combos import FeedbackConfig
from ..env import ConvCodeWorldEnv
from ..errors import ServerLimitError
from ..extract import REASONING_MODES
from ..registration import LIVE_IDS, env_id
from ..sandbox import Executor
from ..tasks import DatasetSpec, TaskSet
from ..tasks.canary import CanarySpec
from .public import Redactor, machine_paths
from .tally import EpisodeTally

__all__ = ["Backend", "ServerLimits", "INFO_SCOPES"]

#: What of a step's info a client gets: only what the feedback could show, or all of it (:class:`Backend`'s ``info``).
INFO_SCOPES = ("shown", "full")


@dataclass(frozen=True)
class ServerLimits:
    """What a server allows one caller; each limit's breach is refused with a message that names the limit, its
    value and its flag (:class:`~convcodeworld_gym.errors.ServerLimitError`).

    Attributes:
        max_sessions: sessions at once (``--max-sessions``): WebSocket connections to ``/ws`` or ``/mcp``, the only
            way a session is made (:mod:`.binding`); one more is refused (OpenEnv's ``CAPACITY_REACHED``) until one
            ends. It also bounds the episodes open (:meth:`Backend.make_env`): a session's, and the one an HTTP
            ``/reset`` opens for its request, so a flood of HTTP resets is refused (503) past it.
        max_request_bytes: the largest request: a WebSocket message or an HTTP body (``--max-request-bytes``).
        max_episode_s: seconds from an episode's ``reset`` to its end (``--max-episode-s``); a step still running
            then is cancelled, and the episode is over (a new ``reset`` starts another). ``None``: no limit.
        idle_timeout_s: seconds a session may send nothing while the server waits for it (``--idle-timeout-s``);
            then the server closes it. Time spent in a reset or step never counts. ``None``: no limit.
        request_timeout_s: seconds a client may take to send a request's headers (a WebSocket's upgrade request
            too) and an HTTP request's body (``--request-timeout-s``); then the connection is closed.

    >>> ServerLimits(max_sessions=0)
    Traceback (most recent call last):
    ...
    ValueError: ServerLimits.max_sessions must be >= 1, got 0
    """

    max_sessions: int = 256
    max_request_bytes: int = 4 * 2**20
    max_episode_s: float | None = 3600.0
    idle_timeout_s: float | None = 600.0
    request_timeout_s: float = 10.0

    def __post_init__(self) -> None:
        for name in ("max_sessions", "max_request_bytes"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"ServerLimits.{name} must be >= 1, got {getattr(self, name)!r}")
        for name in ("max_episode_s", "idle_timeout_s"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"ServerLimits.{name} must be > 0 or None (no limit), got {value!r}")
        if not self.request_timeout_s > 0:
            raise ValueError(f"ServerLimits.request_timeout_s must be > 0, got {self.request_timeout_s!r}")


class Backend:
    """The executor, task set, ids and limits every session of a server shares.

    Args:
        default_id: the id a ``reset`` without ``env_id`` plays (an id or a combination, ``"CF-EF_full"``).
        dataset, stdlib_only, limit: the task set (as for ``gym.make``), chosen once for all sessions.
        executor: runs every session's programs. Shared by all the envs; closed by :meth:`close` when
            ``owns_executor``.
        ids: the ids the server plays (default: the 9 live ids).
        max_turns: feedback turns after turn 0 of every episode.
        feedback_style: the envs' execution feedback text (``"reference"`` or ``"rich"``).
        reasoning: how the envs read a reasoning model's reply (``"strip"``: its thoughts removed before the code is
            judged; ``"keep"``: as the reference did; the env's ``reasoning=``).
        simulator_kwargs: how SNF / SEF envs build their simulated user (``backend``, ``model``, ``base_url``);
            its key comes from the environment, never from here.
        limits: the limits of every session.
        canary, canary_seed: canary twins mixed into the task set (``convcodeworld serve --canary``; as for
            ``gym.make``: :func:`~convcodeworld_gym.tasks.canary.with_canaries`). A twin's reward is always 0.0; its
            episodes are marked (``metadata["info"]["canary"]``) and :attr:`tally` reports their pass rate.
        info: what of a step's ``info`` a client gets in ``metadata["info"]`` (``convcodeworld serve --info``):
            ``"shown"`` (default) keeps only what the step's execution feedback covers (no traceback, outcome,
            count or time of a test it does not cover: :func:`~convcodeworld_gym.feedback.shown.shown_info`),
            for a client that may be, or may feed, the policy; ``"full"`` sends it all, for a client the operator
            trusts with the hidden tests (an evaluation harness of their own).

    Envs are made in a thread of the caller's choosing (``make_env`` blocks: the first one chooses the task set,
    which may ask the runtime what it lacks). ``live_episodes`` counts the envs made and not yet released; an env
    is released once, however often :meth:`release` is called for it.
    """

    def __init__(
        self,
        default_id: str,
        *,
        dataset: DatasetSpec,
        executor: Executor,
        owns_executor: bool = True,
        stdlib_only: bool = False,
        limit: int | None = None,
        ids: Sequence[str] = LIVE_IDS,
        max_turns: int = 10,
        feedback_style: str = "reference",
        reasoning: str = "strip",
        simulator_kwargs: Mapping[str, Any] | None = None,
        limits: ServerLimits = ServerLimits(),
        canary: CanarySpec = None,
        canary_seed: int = 0,
        info: str = "shown",
    ) -> None:
        self.ids: tuple[str, ...] = tuple(ids)
        unknown = [i for i in self.ids if i not in LIVE_IDS]
        if unknown:
            raise ValueError(f"a server plays live ids only ({', '.join(LIVE_IDS)}); not {unknown}")
        self.default_id = self.env_id_of(default_id)
        self.executor, self.owns_executor = executor, owns_executor
        self.dataset, self.stdlib_only, self.limit = dataset, stdlib_only, limit
        self.max_turns, self.feedback_style = max_turns, feedback_style
        if reasoning not in REASONING_MODES:
            raise ValueError(f"reasoning must be one of {REASONING_MODES}, got {reasoning!r}")
        self.reasoning = reasoning
        self.simulator_kwargs = dict(simulator_kwargs or {})
        self.limits = limits
        self.canary, self.canary_seed = canary, canary_seed
        if info not in INFO_SCOPES:
            raise ValueError(f"info must be one of {INFO_SCOPES} (convcodeworld serve --info), got {info!r}")
        self.info = info
        self.tally = EpisodeTally()
        self._tasks: TaskSet | None = None
        self._lock = threading.Lock()
        self._live: set[int] = set()  # id() of each env made and not yet released

    def env_id_of(self, name: str | None) -> str:
        """The served id ``name`` names (an id or a combination; None: the default id).

        Raises:
            ValueError: ``name`` names no id this server plays; the message lists them.
        """
        if name is None:
            return self.default_id
        if not isinstance(name, str):
            raise ValueError(f"env_id must be a string, got {type(name).__name__}")
        try:
            full = name if name in gym.registry else env_id(name)
        except ValueError:
            full = name
        if full not in self.ids:
            raise ValueError(f"env_id {name!r} is not played here; this server plays: {', '.join(self.ids)}")
        return full

    def make_env(self, name: str | None = None) -> ConvCodeWorldEnv:
        """A fresh env of ``name`` (see :meth:`env_id_of`) on the shared executor and task set; blocks. Give it
        back with :meth:`release`."""
        full = self.env_id_of(name)
        kwargs: dict[str, Any] = {"executor": self.executor, "max_turns": self.max_turns, "feedback_style": self.feedback_style,
                                  "reasoning": self.reasoning}
        if FeedbackConfig.parse(gym.registry[full].kwargs["feedback"]).verbal != "none":  # SNF / SEF
            kwargs["simulator_kwargs"] = dict(self.simulator_kwargs)
        with self._lock:
            self._check_capacity()
            if self._tasks is None:  # the first env chooses the task set the runtime can serve; later ones reuse it
                env = gym.make(full, dataset=self.dataset, stdlib_only=self.stdlib_only, limit=self.limit,
                               canary=self.canary, canary_seed=self.canary_seed, **kwargs)
                self._tasks = env.unwrapped.tasks
            else:
                env = gym.make(full, dataset=self._tasks, **kwargs)
            self._live.add(id(env))
        return env  # type: ignore[return-value]

    def _check_capacity(self) -> None:
        """Refuse one env more than ``limits.max_sessions`` (under the lock): a WebSocket session holds at most one,
        and an HTTP ``/reset`` one for its request (OpenEnv's stateless routes), so the flag bounds both together."""
        cap = self.limits.max_sessions
        if len(self._live) >= cap:
            raise ServerLimitError(
                f"this server has {len(self._live)}/{cap} episodes open (WebSocket sessions and HTTP /reset requests "
                "together; convcodeworld serve --max-sessions): try again when one ends, or play over the /ws "
                "WebSocket", "max_sessions")

    def release(self, env: gym.Env) -> None:
        """Close an env :meth:`make_env` made (its own simulated user; never the shared executor); once: an env
        released already, or not made here, is left alone."""
        with self._lock:
            if id(env) not in self._live:
                return
            self._live.discard(id(env))
        env.close()

    @property
    def live_episodes(self) -> int:
        """Envs made and not yet released (one per session that has reset)."""
        return len(self._live)

    @functools.cached_property
    def redactor(self) -> Redactor:
        """Masks this machine's paths in what callers are shown (:class:`~.public.Redactor`)."""
        return Redactor(machine_paths(self.executor))

    @property
    def tasks(self) -> TaskSet | None:
        """The task set every session plays, once the first env has chosen it."""
        return self._tasks

    def describe(self) -> dict[str, Any]:
        """What a caller may know of the server: ids, task set, turns, limits (never a key or an endpoint)."""
        tasks = self._tasks
        return {
            "ids": list(self.ids),
            "default_id": self.default_id,
            "tasks": None if tasks is None else {"name": tasks.name, "count": len(tasks)},
            "max_turns": self.max_turns,
            "feedback_style": self.feedback_style,
            "reasoning": self.reasoning,
            "canary": _describe_canary(self.canary, self.canary_seed),
            "limits": {
                "max_sessions": self.limits.max_sessions,
                "max_request_bytes": self.limits.max_request_bytes,
                "max_episode_s": self.limits.max_episode_s,
                "idle_timeout_s": self.limits.idle_timeout_s,
                "request_timeout_s": self.limits.request_timeout_s,
            },
        }

    def close(self) -> None:
        """Close the executor if the backend owns it. Envs still live are the sessions' to release."""
        if self.owns_executor:
            self.executor.close()


def _describe_canary(canary: CanarySpec, seed: int) -> dict[str, Any] | None:
    """The canary twins a server mixes in, as a caller may know them: the share and seed, or how many tasks are named."""
    if canary is None or isinstance(canary, (int, float)) and canary == 0:
        return None
    if isinstance(canary, (int, float)):
        return {"share": float(canary), "seed": seed}
    return {"tasks": len(canary)}
