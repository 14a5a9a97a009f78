"""Loading the environment by a function call: ``load_environment(**kwargs)``, and the errors a load can meet.

verifiers (0.4.0) finds the environment by its taskset id (``vf-eval convcodeworld``: the v1 path). Code that loads
environments by calling the module's ``load_environment(**kwargs)`` (the classic entry: environment hubs, trainers
that take an environment object, a script of one's own) gets the same environment from this function: the v1
``vf.Env`` that ``vf-eval`` builds from ``--env.taskset.*``, the keyword arguments being those flags' names.

Importing this module imports no verifiers API: the classic door (:mod:`.classic`) shares it.

Holds:
    load_environment    the v1 environment for keyword arguments (the taskset's config fields), checked at load
    taskset_settings    those keyword arguments checked, ``feedback`` turned into ``gym_id``
    first_turn          an episode's system prompt and opening user message, in either variant
    load_task_set       a task set by name or path, loaded once per process; DatasetUnavailable when it cannot be
    DatasetUnavailable  a task set that cannot be loaded here, said in one line with the fix
"""

from __future__ import annotations

import argparse
from typing import Any

from convcodeworld_gym.errors import DatasetError
from convcodeworld_gym.policies.prompts import SYSTEM_PROMPT, initial_prompt
from convcodeworld_gym.registration import env_id
from convcodeworld_gym.tasks import Task, TaskSet
from convcodeworld_gym.tasks.files import BIGCODEBENCH_ENV
from convcodeworld_gym.training.flags import feedback_name
from convcodeworld_gym.training.shared import task_set
from convcodeworld_gym.training.tools import TOOL_SYSTEM_PROMPT

__all__ = ["load_environment", "taskset_settings", "first_turn", "load_task_set", "DatasetUnavailable", "TASKSET_ID"]

#: The taskset id verifiers loads this environment by.
TASKSET_ID = "convcodeworld"

#: The keyword arguments :func:`load_environment` takes (``--env.taskset.<name>`` in vf-eval, dashes for
#: underscores), besides ``feedback``.
TASKSET_KWARGS = ("gym_id", "dataset", "limit", "task_ids", "stdlib_only", "max_turns", "feedback_style", "reasoning",
                  "tools", "runtime", "canary", "canary_seed")


class DatasetUnavailable(ValueError):
    """The task set cannot be loaded on this machine (BigCodeBench offline with no local copy, a missing file, ...).
    The message is one line: the task set, why, and the fix (``$CONVCODEWORLD_BIGCODEBENCH_PATH``, or
    ``dataset="humaneval"``, which needs no network)."""


def load_task_set(dataset: str) -> TaskSet:
    """The task set ``dataset`` names (``bigcodebench``, ``humaneval`` or a task-file path), loaded once per process.

    Raises:
        DatasetUnavailable: it cannot be loaded here; one line naming ``dataset``, why and the fix (for BigCodeBench:
            ``$CONVCODEWORLD_BIGCODEBENCH_PATH``, or ``dataset='humaneval'``, which needs no network).
    """
    try:
        return task_set(dataset)
    except DatasetError as exc:
        why = " ".join(str(exc).split())  # one line
        hint = " (in vf-eval: --env.taskset.dataset humaneval)" if BIGCODEBENCH_ENV in why else ""
        raise DatasetUnavailable(f"convcodeworld: the task set {dataset!r} cannot be loaded: {why}{hint}") from None


def taskset_settings(*, feedback: str | None = None, **kwargs: Any) -> dict[str, Any]:
    """The taskset's settings of :func:`load_environment`'s keyword arguments, checked: ``feedback`` (or ``gym_id``)
    as a gym id under ``gym_id``, the others as given.

    >>> taskset_settings(feedback="CF-EF_partial", dataset="humaneval")
    {'dataset': 'humaneval', 'gym_id': 'ConvCodeWorld-CF-EF_partial-v0'}

    Raises:
        TypeError: a keyword this environment does not take (the message lists those it does).
        ValueError: ``feedback`` or ``gym_id`` names no combination, or the two name different ones.
    """
    unknown = sorted(set(kwargs) - set(TASKSET_KWARGS))
    if unknown:
        raise TypeError(f"convcodeworld.load_environment() got unknown keyword(s) {', '.join(unknown)}; it takes "
                        f"feedback, {', '.join(TASKSET_KWARGS)}")
    settings = dict(kwargs)
    named = {_combination(value) for value in (feedback, settings.pop("gym_id", None)) if value is not None}
    if len(named) > 1:
        raise ValueError(f"convcodeworld.load_environment(): feedback= and gym_id= name different combinations "
                         f"({', '.join(sorted(named))}); give one")
    if named:
        settings["gym_id"] = env_id(named.pop())
    return settings


def first_turn(task: Task, tools: bool) -> tuple[str, str]:
    """The system prompt and first user message of ``task``'s episode: the LLM policy's (its system prompt, the
    turn-0 prompt) in the chat variant; TRL's tool door's (:data:`~convcodeworld_gym.training.tools.TOOL_SYSTEM_PROMPT`,
    the task's instruction) in the tool variant."""
    return (TOOL_SYSTEM_PROMPT, task.prompt.strip()) if tools else (SYSTEM_PROMPT, initial_prompt(task.prompt))


def load_environment(*, feedback: str | None = None, **kwargs: Any) -> Any:
    """The ConvCodeWorld environment for these settings: the v1 ``vf.Env`` that ``vf-eval convcodeworld`` runs with
    the same ``--env.taskset.*`` values (verifiers 0.4). The task set is loaded here, so a load that cannot work fails
    now, in one line. (With verifiers' classic API, verifiers <= 0.3, ``convcodeworld.load_environment`` is
    :func:`convcodeworld.classic.load_environment` instead, which takes the same arguments.)

    Args:
        feedback: the feedback combination (``"CF-EF_full-SNF"``) or its gym id, as the training programs'
            ``--feedback`` takes it; the same as ``gym_id=``. Default: ``ConvCodeWorld-CF-EF_full-v0``.
        **kwargs: the taskset's settings: ``gym_id``, ``dataset`` (``"bigcodebench"``, the default; ``"humaneval"``;
            a task-file path), ``limit``, ``task_ids``, ``stdlib_only``, ``max_turns``, ``feedback_style``,
            ``reasoning`` (``"strip"``, the default: a reasoning model's thoughts are removed before its code is
            judged; ``"keep"``: the reply as it is), ``tools``
            (the tool variant: the model calls ``submit_program`` and gets the feedback as the tool's result),
            ``runtime`` (the interpreter programs run with), and ``canary`` / ``canary_seed``: canary twins mixed in
            beside the tasks, as the gym env's ``canary=`` / ``canary_seed=`` (a share in [0, 1) of the set played,
            or the ids of the tasks to twin; added after the tasks, after ``limit``); their rollouts record the
            metrics ``canary`` and ``canary_passed`` (:mod:`convcodeworld.canary`) and a reward of 0.0.

    Raises:
        TypeError: a keyword this environment does not take (the message lists those it does).
        ValueError: ``feedback`` (or ``gym_id``) names no combination, or a setting fails the taskset's validation.
        DatasetUnavailable: the task set cannot be loaded here (one line, with the fix).
    """
    import verifiers.v1 as vf

    taskset: dict[str, Any] = {"id": TASKSET_ID, **taskset_settings(feedback=feedback, **kwargs)}
    runtime = taskset.pop("runtime", None)
    if runtime is not None:
        taskset["task"] = {"runtime": runtime}
    config = vf.resolve_env_config({"taskset": taskset})
    load_task_set(config.taskset.dataset)  # fail here, in one line, rather than at the first rollout
    return vf.load_environment(config)


def _combination(value: str) -> str:
    """``value`` (a combination or its gym id) as the combination's id part; a ValueError naming both forms else."""
    try:
        return feedback_name(value)
    except argparse.ArgumentTypeError as exc:  # a command line's error; here a ValueError
        raise ValueError(f"convcodeworld.load_environment(): {exc}") from None
