"""The episode server's wire types: OpenEnv's Action, Observation and State for ConvCodeWorld.

* :class:`CodeAction`: the model's reply (a fenced block is extracted, as ``env.step`` does, from its answer: a
  ``<think>`` thought is removed first under the server's ``--reasoning strip``) or bare code; its one required field
  is ``reply``, so a consumer that sends the model's raw text for a one-field action (verifiers' ``openenv`` taskset)
  sends it. ``reasoning`` (or ``reasoning_content``, as an endpoint names it) carries a thought the endpoint returned
  apart from the reply: never judged, it comes back in the step's ``metadata["reasoning"]``.
* :class:`FeedbackObservation`: the env's observation (the task, the code judged, the compilation, execution and
  verbal feedback shown, the turn), ``done`` and ``reward``; ``metadata`` carries ``terminated``, ``truncated`` and
  ``info`` (the step's ``info`` as JSON, :func:`info_to_json`). The reward of a step the infrastructure lost
  (``info["infra_error"]``) is ``None``: no verdict, never a 0.
* :class:`EpisodeState`: the id, the task, the turn (OpenEnv's ``episode_id`` and ``step_count`` too).

Holds:
    CodeAction           the action
    FeedbackObservation  the observation
    EpisodeState         the state
    info_to_json         a step's info as JSON data (dataclasses as dicts, tuples as lists)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from . import require_openenv

require_openenv()

from openenv.core.env_server.types import Action, Observation, State  # noqa: E402
from pydantic import AliasChoices, Field  # noqa: E402

__all__ = ["CodeAction", "FeedbackObservation", "EpisodeState", "info_to_json"]


class CodeAction(Action):
    """One turn's submission: the model's raw reply (its first fenced block is the program) or bare code."""

    reply: str = Field(description="the model's reply (the first ```python block of its answer is the program) or bare code")
    reasoning: str | None = Field(
        default=None, validation_alias=AliasChoices("reasoning", "reasoning_content"),
        description="the thought an endpoint returned apart from the reply (reasoning_content): never judged, sent back "
                    "in the step's metadata['reasoning']")


class FeedbackObservation(Observation):
    """What the env shows after ``reset`` or a step (the fields of ``ConvCodeWorldEnv``'s observation), with
    ``done``, ``reward`` (``None`` at reset and on a step whose run the infrastructure lost) and ``metadata``
    (``terminated``, ``truncated``, ``info``; and ``reasoning``, the thought the step's action carried apart from its
    reply, when it carried one)."""

    task: str = Field(default="", description="the task's instruction")
    code: str = Field(default="", description="the code judged this step ('' at reset)")
    compilation_feedback: str = Field(default="", description="compilation feedback ('' when none)")
    execution_feedback: str = Field(default="", description="execution feedback ('' when the id shows none)")
    verbal_feedback: str = Field(default="", description="the simulated user's words ('' when none)")
    turn: int = Field(default=0, ge=0, description="index of the next submission")
    task_id: str = Field(default="", description="the task of the episode")
    env_id: str = Field(default="", description="the id played")


class EpisodeState(State):
    """Where a session is: ``env_id``, ``task_id`` (None before the first reset), ``turn`` (the next submission),
    ``done``, with OpenEnv's ``episode_id`` and ``step_count``."""

    env_id: str = Field(default="", description="the id of the session's episode")
    task_id: str | None = Field(default=None, description="the task of the episode (None before reset)")
    turn: int = Field(default=0, ge=0, description="index of the next submission")
    done: bool = Field(default=False, description="the episode is over (reset to play another)")


def info_to_json(info: Mapping[str, Any]) -> dict[str, Any]:
    """A step's ``info`` as JSON data: dataclasses (``timings``) as dicts, tuples as lists, anything else that JSON
    has no type for as its ``str``.

    >>> from convcodeworld_gym.env import Timings
    >>> info_to_json({"timings": Timings(step_s=0.5), "limits_hit": ("time",), "n": 1})
    {'timings': {'compile_s': 0.0, 'execute_s': 0.0, 'verbal_s': 0.0, 'step_s': 0.5}, 'limits_hit': ['time'], 'n': 1}
    """
    return _json(info)  # type: ignore[no-any-return]


def _json(value: Any) -> Any:
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _json(dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {str(key): _json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_json(item) for item in value]
    return str(value)
