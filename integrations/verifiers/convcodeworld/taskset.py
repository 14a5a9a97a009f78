"""The ConvCodeWorld taskset: one verifiers task per task of the chosen set, on one of the 9 ids.

A task's prompt is what the project's LLM policy asks at turn 0 (BigCodeBench's instruct prompt, under
:data:`~convcodeworld_gym.policies.prompts.SYSTEM_PROMPT`); in the tool variant (``tools``) it is the task under
:data:`~convcodeworld_gym.training.tools.TOOL_SYSTEM_PROMPT`, with the ``submit_program`` tool, as TRL's tool door
asks it. Its data names the episode (:class:`EpisodeSpec`'s
fields), so a trace alone says which id, task set and task it played. The reward is the env's, recorded by
:class:`~convcodeworld.env.ConvCodeWorldLoop` as it steps the episode; ``Task.validate`` runs the canonical solution
in this machine's sandbox (``vf-validate``'s gold check).

With ``canary`` (``--env.taskset.canary SHARE``) the set also holds canary twins (ids ``<task id>/canary``, added
after the tasks; docs/canary.md): a twin's reward is always 0.0, and every rollout records the metrics ``canary``
(1.0 on a twin) and ``canary_passed`` (1.0 when a program passed a twin's tests), never part of the reward: the
canary pass rate of a batch is ``sum(canary_passed) / sum(canary)`` (:mod:`convcodeworld.canary`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

import gymnasium as gym
import verifiers.v1 as vf
from pydantic import Field, field_validator

from convcodeworld_gym.combos import DEFAULT_MAX_TURNS
from convcodeworld_gym.training.shared import shared_executor
from convcodeworld_gym.training.tools import DEFAULT_ID, SUBMIT_PROGRAM_TOOL

from .canary import canary_metrics, is_twin
from .episode import GYM_IDS, EpisodeSpec, canonical_passes
from .loading import DatasetUnavailable, first_turn, load_task_set

__all__ = ["ConvCodeWorldConfig", "ConvCodeWorldTaskConfig", "ConvCodeWorldData", "ConvCodeWorldTask",
           "ConvCodeWorldTaskset", "episode_steps", "TRACE_INFO_KEY"]

#: Where a rollout keeps its episode on the trace: ``trace.info["convcodeworld"]`` (see :func:`episode_steps`).
TRACE_INFO_KEY = "convcodeworld"

GymId = Literal[GYM_IDS]  # type: ignore[valid-type] - the 9 ids, checked by pydantic


class ConvCodeWorldTaskConfig(vf.TaskConfig):
    """Machine knobs each task reads (``--env.taskset.task.*``; ``--taskset.task.*`` for ``vf-validate``)."""

    runtime: str | None = None
    """The interpreter the sandbox runs programs with: a Python executable, a venv dir, or ``bigcodebench`` once
    ``convcodeworld runtime install bigcodebench`` has built it. None: the env's default (see docs/sandbox.md)."""


class ConvCodeWorldConfig(vf.TasksetConfig):
    """Which episodes the taskset holds (``--env.taskset.*``): the id, the task set and how much of it."""

    gym_id: GymId = DEFAULT_ID
    """The feedback combination, as one of the 9 live ids (``ConvCodeWorld-CF-v0`` ... ``ConvCodeWorld-CF-EF_full-SEF-v0``)."""
    dataset: str = "bigcodebench"
    """``bigcodebench`` (``$CONVCODEWORLD_BIGCODEBENCH_PATH`` or the hub), ``humaneval``, or a task-file path."""
    limit: int | None = Field(None, ge=1)
    """At most this many tasks (the first ones of the set, as the env's ``limit=``)."""
    task_ids: list[str] | None = None
    """These tasks, by id, instead of the default set (the env's ``task_ids=``)."""
    stdlib_only: bool = False
    """Only tasks whose solution and tests need the standard library alone."""
    max_turns: int = Field(DEFAULT_MAX_TURNS, ge=0)
    """Feedback turns after turn 0 (the paper: 10, so at most 11 programs)."""
    feedback_style: Literal["reference", "rich"] = "reference"
    """The execution feedback's text: the one the paper's models saw, or the richer one (see the README)."""
    reasoning: Literal["strip", "keep"] = "strip"
    """How a reasoning model's reply is read: ``strip`` removes its ``<think>...</think>`` thoughts and judges the
    answer's code (a thought that never closes leaves no answer); ``keep`` reads the reply as it is, as the reference
    did. A thought the endpoint returns apart (``reasoning_content``) is never judged either way: the trace keeps it on
    the assistant message, and the reply stepped is its content."""
    tools: bool = False
    """The tool variant: the model submits each program by calling the ``submit_program`` tool, and the env's
    feedback comes back as the tool's result (else: a fenced program per reply, feedback as the next user turn)."""
    canary: float | list[str] | None = None
    """Canary twins mixed in beside the tasks (docs/canary.md): a share in [0, 1) of the set played (the twins of the
    tasks ``canary_seed`` draws), or the ids of the tasks to twin; added after the tasks (after ``limit``). A twin's
    reward is always 0.0; its pass is the metric ``canary_passed``. None: no twins."""
    canary_seed: int = 0
    """Which tasks a ``canary`` share twins: the same seed draws the same twins everywhere."""
    task: ConvCodeWorldTaskConfig = ConvCodeWorldTaskConfig()

    @field_validator("canary")
    @classmethod
    def _canary_share(cls, value: float | list[str] | None) -> float | list[str] | None:
        """A share must lie in [0, 1) (the gym env's ``canary=``); ids are checked when the tasks load."""
        if isinstance(value, float) and not 0.0 <= value < 1.0:
            raise ValueError(f"canary must be a share in [0, 1) or a list of task ids, got {value!r}")
        return value


class ConvCodeWorldData(vf.TaskData):
    """One episode's wire data: the prompt (turn 0's user message) and what names the episode."""

    task_id: str
    gym_id: str
    dataset: str
    max_turns: int
    feedback_style: str = "reference"
    reasoning: str = "strip"
    tools: list[dict[str, Any]] | None = None
    """The tool variant's tools (the ``submit_program`` schema), sent with each model request; None: chat variant."""


def episode_steps(trace: vf.Trace) -> list[dict[str, Any]]:
    """The steps a rollout recorded on ``trace`` (:func:`~convcodeworld.episode.step_record` each, in turn order);
    empty when the model submitted no program."""
    return list(trace.info.get(TRACE_INFO_KEY, {}).get("steps", []))


class ConvCodeWorldTask(vf.Task[ConvCodeWorldData, vf.State, ConvCodeWorldTaskConfig]):
    """One task of the set. Scoring reads the episode the environment played on the trace:

    * reward ``env_reward``: the sum of the env's step rewards, i.e. 1.0 when a program passed every test within
      the turns, else 0.0 (also when no program was submitted);
    * metrics ``programs`` (programs judged) and ``pass_fraction`` (the last program's passed tests / all);
    * metrics ``canary`` (1.0 when the task is a canary twin) and ``canary_passed`` (1.0 when a program passed a
      twin's tests): the canary, beside the reward and never in it (a twin's ``env_reward`` is always 0.0).

    A rollout whose run the sandbox lost is failed instead (:class:`~convcodeworld.episode.InfraError`), so none
    of these is recorded for it.
    """

    @property
    def spec(self) -> EpisodeSpec:
        """The episode this task names, on this machine's runtime (``config.runtime``)."""
        data = self.data
        return EpisodeSpec(data.gym_id, data.dataset, data.task_id, data.max_turns, data.feedback_style,
                           self.config.runtime, data.reasoning)

    @property
    def key(self) -> str:
        """The id, the task set and the task: a task's identity across runs, whatever its position."""
        return f"{self.data.gym_id}:{self.data.dataset}:{self.data.task_id}"

    @vf.reward(weight=1.0)
    async def env_reward(self, trace: vf.Trace) -> float:
        """The episode's return: the sum of the env's rewards of the steps recorded on ``trace``."""
        return float(sum(step["reward"] for step in episode_steps(trace)))

    @vf.metric
    async def programs(self, trace: vf.Trace) -> float:
        """How many programs the env judged."""
        return float(len(episode_steps(trace)))

    @vf.metric
    async def pass_fraction(self, trace: vf.Trace) -> float:
        """The last judged program's share of passed tests (0.0 without a program)."""
        steps = episode_steps(trace)
        return steps[-1]["pass_fraction"] if steps else 0.0

    @vf.metric
    async def canary(self, trace: vf.Trace) -> float:
        """1.0 when the task is a canary twin, else 0.0 (the denominator of the canary pass rate)."""
        return canary_metrics(self.data.task_id, episode_steps(trace))["canary"]

    @vf.metric
    async def canary_passed(self, trace: vf.Trace) -> float:
        """1.0 when the task is a canary twin and a program passed its tests (the canary), else 0.0."""
        return canary_metrics(self.data.task_id, episode_steps(trace))["canary_passed"]

    async def validate(self, runtime: vf.Runtime) -> bool | None:
        """Whether the task's canonical solution does what the task expects in this machine's sandbox and runtime:
        passes a task, fails a canary twin (as the twin's list verified). ``runtime``, the verifiers box, is not
        used: programs run in convcodeworld-gym's own sandbox on this host. Raises
        :class:`~convcodeworld.episode.InfraError` when the sandbox lost the run: no verdict."""
        return await canonical_passes(self.spec) != is_twin(self.data.task_id)


class ConvCodeWorldTaskset(vf.Taskset[ConvCodeWorldTask, ConvCodeWorldConfig]):
    """The tasks of ``config.dataset`` the env of ``config.gym_id`` plays: the same default set as ``gym.make``
    (tasks this runtime cannot run, or only an in-process judge can judge, are left out, with a logged warning),
    or ``config.task_ids``; then ``config.limit``; then the canary twins of ``config.canary`` (the gym env's
    ``canary=`` and ``canary_seed=``), after the tasks.

    A task set that cannot be loaded (BigCodeBench offline, with no ``$CONVCODEWORLD_BIGCODEBENCH_PATH``) ends the
    verifiers CLI that loads it with one line (``SystemExit``, as verifiers' CLIs end on a config error) naming the
    dataset, the variable and ``dataset humaneval``; :func:`~convcodeworld.loading.load_environment` raises
    :class:`~convcodeworld.loading.DatasetUnavailable` with the same line before any of this runs."""

    def load(self) -> Iterator[ConvCodeWorldTask]:
        config = self.config
        try:
            tasks_of_set = load_task_set(config.dataset)
        except DatasetUnavailable as exc:
            raise SystemExit(str(exc)) from None
        env = gym.make(config.gym_id, dataset=tasks_of_set, task_ids=config.task_ids, stdlib_only=config.stdlib_only,
                       limit=config.limit, max_turns=config.max_turns, executor=shared_executor(config.task.runtime),
                       canary=config.canary, canary_seed=config.canary_seed)
        try:
            tasks = list(env.unwrapped.tasks)
        finally:
            env.close()
        for task in tasks:
            yield ConvCodeWorldTask(
                ConvCodeWorldData(
                    id=task.task_id,
                    name=task.task_id,
                    prompt=first_turn(task, config.tools)[1],
                    system_prompt=first_turn(task, config.tools)[0],
                    task_id=task.task_id,
                    gym_id=config.gym_id,
                    dataset=config.dataset,
                    max_turns=config.max_turns,
                    feedback_style=config.feedback_style,
                    reasoning=config.reasoning,
                    tools=[SUBMIT_PROGRAM_TOOL] if config.tools else None,
                ),
                config.task,
            )

