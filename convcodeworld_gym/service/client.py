"""The typed client of the episode server: OpenEnv's ``EnvClient`` with ConvCodeWorld's action, observation and state.

One client is one WebSocket session, so one episode at a time; open as many clients as episodes in flight (the
server takes ``--max-sessions``, 256 by default). Like every OpenEnv client it is async (``await client.reset(...)``)
and, from blocking code, sync (``client.reset(...)`` without a running loop, or ``client.sync()``).

>>> # with a server running (convcodeworld serve --dataset humaneval):
>>> # async with ConvCodeWorldClient(base_url="http://127.0.0.1:8000") as env:
>>> #     result = await env.reset(env_id="CF-EF_full", task_id="HumanEval/0")
>>> #     result = await env.step("def has_close_elements(numbers, threshold):\\n    return False")
>>> #     result.reward, result.done, result.observation.execution_feedback

A refused request raises :class:`~convcodeworld_gym.errors.ServerError` (``kind``: the server's error, e.g.
``"UnknownTaskError"``, ``"ResetNeeded"``, ``"ServerLimitError"``; ``code``: OpenEnv's code), not OpenEnv's bare
``RuntimeError``.

Holds:
    ConvCodeWorldClient  the client
    server_error         OpenEnv's ``RuntimeError("Server error: ...")`` as a ServerError
"""

from __future__ import annotations

import re
from typing import Any

from . import require_openenv

require_openenv()

from openenv.core.client_types import StepResult  # noqa: E402
from openenv.core.env_client import EnvClient  # noqa: E402

from ..errors import ServerError  # noqa: E402
from .models import CodeAction, EpisodeState, FeedbackObservation  # noqa: E402

__all__ = ["ConvCodeWorldClient", "server_error"]

_OPENENV_ERROR = re.compile(r"^Server error: (?P<message>.*) \(code: (?P<code>[A-Z_]+)\)$", re.S)
_KIND = re.compile(r"^(?P<kind>[A-Z][A-Za-z0-9_]*): ")
#: The kind of OpenEnv's own refusals, which carry no kind in their message.
_KIND_OF_CODE = {"CAPACITY_REACHED": "ServerLimitError", "VALIDATION_ERROR": "ValidationError",
                 "INVALID_JSON": "ValidationError", "UNKNOWN_TYPE": "ValidationError"}


def server_error(exc: RuntimeError) -> ServerError | RuntimeError:
    """The :class:`~convcodeworld_gym.errors.ServerError` that OpenEnv's ``RuntimeError("Server error: <message>
    (code: <code>)")`` stands for; any other RuntimeError as it is.

    >>> err = server_error(RuntimeError("Server error: UnknownTaskError: no task 'X' (code: EXECUTION_ERROR)"))
    >>> err.kind, err.code, str(err)
    ('UnknownTaskError', 'EXECUTION_ERROR', "UnknownTaskError: no task 'X'")
    >>> err = server_error(RuntimeError("Server error: Server at capacity: 2/2 sessions active. Cannot accept new connections. (code: CAPACITY_REACHED)"))
    >>> err.kind, str(err).endswith("(convcodeworld serve --max-sessions)")
    ('ServerLimitError', True)
    """
    found = _OPENENV_ERROR.match(str(exc))
    if found is None:
        return exc
    message, code = found["message"], found["code"]
    named = _KIND.match(message)
    kind = named["kind"] if named else _KIND_OF_CODE.get(code, "ServerError")
    if code == "CAPACITY_REACHED":
        message += " (convcodeworld serve --max-sessions)"
    return ServerError(message, kind, code)


class ConvCodeWorldClient(EnvClient[CodeAction, FeedbackObservation, EpisodeState]):
    """A session on a ConvCodeWorld episode server (``convcodeworld serve``), typed.

    * ``reset(env_id=None, task_id=None, task_index=None, seed=None, episode_id=None)`` starts an episode: ``env_id``
      is an id or a combination the server plays (default: the server's), the task by id or index (default: drawn
      with ``seed``). The result's ``observation`` is a :class:`~.models.FeedbackObservation` (turn 0).
    * ``step(action)`` submits the model's reply (a :class:`~.models.CodeAction` or a ``str``): ``reward`` (1.0 when
      every test passed, 0.0 when not, None when the infrastructure lost the run), ``done``, and the observation with
      the feedback the id shows; ``observation.metadata`` holds ``terminated``, ``truncated`` and the step's ``info``.
    * ``state()``: the :class:`~.models.EpisodeState` (id, task, turn, done).

    The default ``message_timeout_s`` is 600 s: a step waits for its sandbox run (121 s at most by default) and, on
    SNF / SEF ids, for the simulated user.
    """

    def __init__(self, base_url: str | None = None, message_timeout_s: float = 600.0, **kwargs: Any) -> None:
        super().__init__(base_url=base_url, message_timeout_s=message_timeout_s, **kwargs)

    def _step_payload(self, action: CodeAction | str) -> dict[str, Any]:
        if isinstance(action, str):
            action = CodeAction(reply=action)
        if not isinstance(action, CodeAction):
            raise TypeError(f"step takes a CodeAction or the reply as a str, got {type(action).__name__}")
        return action.model_dump(exclude_defaults=True) | {"reply": action.reply}

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[FeedbackObservation]:
        observation = FeedbackObservation(**{**payload.get("observation", {}), "done": payload.get("done", False),
                                             "reward": payload.get("reward")})
        return StepResult(observation=observation, reward=payload.get("reward"), done=bool(payload.get("done", False)),
                          metadata=payload.get("metadata"))

    def _parse_state(self, payload: dict[str, Any]) -> EpisodeState:
        return EpisodeState(**payload)

    async def _send_and_receive(self, message: dict[str, Any]) -> dict[str, Any]:
        try:
            return await super()._send_and_receive(message)
        except RuntimeError as exc:
            error = server_error(exc)
            if error is exc:
                raise
            raise error from None
