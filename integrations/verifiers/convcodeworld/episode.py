"""What the verifiers environment needs of convcodeworld-gym, in one place: the gym env of one task (on the sandbox
executor the process's episodes share; its ``areset`` / ``astep`` are awaited, so no sandbox run blocks the event
loop), a lost run as a verifiers error, and the record of one step.

Holds:
    GYM_IDS          the 9 live ids a taskset may pick
    EpisodeSpec      what names one episode: id, task set, task, turns, feedback style, runtime
    make_env         the gym env of one task (blocking; call it in a thread from async code)
    InfraError       a run the sandbox lost twice, as verifiers' SandboxError (no reward is recorded)
    raise_if_lost    raise InfraError for a step that is no verdict
    step_record      what a rollout records of one step (JSON)
    canonical_passes whether the task's canonical solution passes here (``vf-validate``'s gold check)
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import verifiers.v1 as vf

import convcodeworld_gym  # noqa: F401 - registers the ids
from convcodeworld_gym.registration import LIVE_IDS
from convcodeworld_gym.tasks.canary import CANARY_SUFFIX
from convcodeworld_gym.training.shared import shared_executor, task_set

__all__ = ["GYM_IDS", "EpisodeSpec", "make_env", "step_record",
           "canonical_passes", "InfraError", "raise_if_lost"]

#: The ids a taskset may pick: ``ConvCodeWorld-<combination>-v0`` for the 9 feedback combinations.
GYM_IDS: tuple[str, ...] = LIVE_IDS


class InfraError(vf.SandboxError):
    """The sandbox lost a run, also on its retry (``info["infra_error"]``): no verdict on the program, so no reward.

    A verifiers :class:`~verifiers.v1.SandboxError`: raised from a rollout, it fails the trace (``ok`` False, stop
    condition ``infra_error``, no rewards scored) instead of recording a 0, and the episode is played again when
    ``--env.retries`` has a rule for it (the environment's default: once).
    """


@dataclass(frozen=True)
class EpisodeSpec:
    """What names one episode, all of it plain data (it rides on the verifiers task's wire data).

    Attributes:
        gym_id: one of :data:`GYM_IDS`: the feedback combination.
        dataset: the task set as ``gym.make`` takes it: ``"bigcodebench"``, ``"humaneval"`` or a task-file path.
        task_id: the task of the episode (``<task id>/canary``: its canary twin, reward always 0.0).
        max_turns: feedback turns after turn 0 (the env's ``max_turns``).
        feedback_style: ``"reference"`` or ``"rich"`` (the env's ``feedback_style``).
        runtime: the interpreter the sandbox runs programs with (the env's ``runtime``); None: the env's default.
        reasoning: how a reasoning model's reply is read (the env's ``reasoning``): ``"strip"`` (its thoughts removed,
            the answer's code judged) or ``"keep"`` (as the reference read replies).
    """

    gym_id: str
    dataset: str
    task_id: str
    max_turns: int
    feedback_style: str = "reference"
    runtime: str | None = None
    reasoning: str = "strip"


def make_env(spec: EpisodeSpec) -> gym.Env:
    """The gym env of ``spec``'s id on its one task, judged by the process's shared sandbox executor for
    ``spec.runtime`` (:func:`~convcodeworld_gym.training.shared.shared_executor`: its warm workers and result cache
    serve every rollout, and at most its ``workers`` programs run at once). ``gym.make`` returns the env itself, whose
    ``areset`` / ``astep`` are awaitable. Blocking (the first call loads the task set; each probes the runtime): call
    it through ``asyncio.to_thread`` from a coroutine. Close it after. A canary twin's id (``<task id>/canary``,
    :mod:`convcodeworld_gym.tasks.canary`) plays that task's twin."""
    task_id, twin = spec.task_id.removesuffix(CANARY_SUFFIX), spec.task_id.endswith(CANARY_SUFFIX)
    return gym.make(spec.gym_id, dataset=task_set(spec.dataset), task_ids=[task_id], max_turns=spec.max_turns,
                    feedback_style=spec.feedback_style, reasoning=spec.reasoning, executor=shared_executor(spec.runtime),
                    **({"canary": [task_id]} if twin else {}))


def raise_if_lost(task_id: str, info: dict[str, Any]) -> None:
    """:class:`InfraError` when the step of ``info`` is no verdict (``info["infra_error"]``), else nothing."""
    if info["infra_error"] is not None:
        raise InfraError(f"convcodeworld: the sandbox lost a run of {task_id} (turn {info['turn']}), also on its "
                         f"retry: {info['infra_error']}")


def step_record(reward: float, terminated: bool, truncated: bool, info: dict[str, Any]) -> dict[str, Any]:
    """What a rollout keeps of one step (JSON, on the trace): the turn, the env's reward and ending, and the
    verdict's summary; ``canary``: the task is a canary twin (its reward is 0.0; ``passed`` there is the canary).

    >>> step_record(1.0, True, False, {"turn": 1, "passed": True, "compile_ok": True, "pass_fraction": 1.0,
    ...             "episode_end": "passed", "infra_error": None, "retried": {}})["reward"]
    1.0
    """
    return {
        "turn": int(info["turn"]),
        "reward": float(reward),
        "terminated": bool(terminated),
        "truncated": bool(truncated),
        "passed": bool(info["passed"]),
        "compile_ok": bool(info["compile_ok"]),
        "pass_fraction": float(info["pass_fraction"]),
        "episode_end": info["episode_end"],
        "infra_error": info["infra_error"],
        "retried": dict(info["retried"]),
        "canary": bool(info.get("canary", False)),
    }


async def canonical_passes(spec: EpisodeSpec) -> bool:
    """Whether the task's canonical solution passes, judged as the episodes judge programs (same id, task set,
    sandbox and runtime): one reset and one step of the task's ground truth; its verdict (``info["passed"]``), not its
    reward, which is 0.0 on a canary twin whatever the program.

    Raises:
        InfraError: the sandbox lost the run, also on its retry: this machine gave no verdict.
    """
    env = await asyncio.to_thread(make_env, spec)
    try:
        await env.areset(options={"task_id": spec.task_id})
        _, _, _, _, info = await env.astep(env.unwrapped.task.solution_code)
    finally:
        await asyncio.to_thread(env.close)
    raise_if_lost(spec.task_id, info)
    return bool(info["passed"])
