"""ConvCodeWorld through verifiers' classic API: ``load_environment(**kwargs)`` returning a ``vf.MultiTurnEnv``.

verifiers up to 0.3 has a classic API (``import verifiers as vf``: ``vf.Environment``, ``vf.MultiTurnEnv``,
``vf.Rubric``; in 0.3 it lives in ``verifiers.legacy``, which 0.4 removed), whose ``vf-eval ENV_ID -a '{...}'`` and
``vf.load_environment(ENV_ID, **env_args)`` import the module ``ENV_ID`` and call its ``load_environment(**env_args)``,
as trainers and environment hubs of that API do. With such a verifiers, ``convcodeworld.load_environment`` is
:func:`load_environment` here; it takes the same arguments as the v1 door's (:mod:`.loading`). Tested with verifiers
0.3.1's ``vf-eval``.

An example is one task of the set; a rollout is one episode of the chosen id, as in the v1 door. The chat variant: the
model's reply is stepped (the env extracts its program), and while the episode goes on, the feedback the id shows
comes back as the next user turn (the LLM policy's refinement prompt). The tool variant (``tools=True``): the model
submits each program by calling ``submit_program`` (the schema of TRL's tool door), and the env's feedback is the
tool's result (:func:`~convcodeworld_gym.training.tools.tool_answer`); a reply that calls no tool submits nothing and
ends the episode. The reward ``env_reward`` is the sum of the env's step rewards (1.0 when a program passed).

With ``canary`` (a share, or task ids) the dataset also holds canary twins (rows ``<task id>/canary``, after the
tasks; docs/canary.md), whose reward is always 0.0. The rubric's weight-0 functions ``canary`` (1.0 on a twin) and
``canary_passed`` (1.0 when a program passed a twin's tests) are metrics: verifiers records and averages them, and
they never enter the reward; the canary pass rate is ``sum(canary_passed) / sum(canary)`` (:mod:`.canary`).

A step whose run the sandbox lost, also on its retry, is no verdict: the rollout fails with ``vf.SandboxError`` (an
``InfraError``, which classic ``vf-eval`` retries: ``--max-retries``) instead of recording a 0.

Holds:
    load_environment        the classic environment for keyword arguments
    ConvCodeWorldClassicEnv the ``vf.MultiTurnEnv`` that plays the episodes
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import verifiers as vf  # the classic API (verifiers <= 0.3)

from convcodeworld_gym.combos import DEFAULT_MAX_TURNS
from convcodeworld_gym.policies.prompts import refinement_prompt
from convcodeworld_gym.training.shared import shared_executor
from convcodeworld_gym.training.tools import DEFAULT_ID, SUBMIT_PROGRAM_TOOL, tool_answer

from .canary import canary_metrics
from .episode import EpisodeSpec, make_env, step_record
from .loading import first_turn, load_task_set, taskset_settings
from .toolcalls import first_submission, tool_results

__all__ = ["load_environment", "ConvCodeWorldClassicEnv"]

#: Where a rollout keeps its episode in the state (``state["convcodeworld"]``, as the v1 door's trace info).
STATE_KEY = "convcodeworld"


def load_environment(*, feedback: str | None = None, gym_id: str | None = None, dataset: str = "bigcodebench",
                     limit: int | None = None, task_ids: list[str] | None = None, stdlib_only: bool = False,
                     max_turns: int = DEFAULT_MAX_TURNS, feedback_style: str = "reference", reasoning: str = "strip",
                     tools: bool = False, runtime: str | None = None, canary: float | Sequence[str] | None = None,
                     canary_seed: int = 0) -> ConvCodeWorldClassicEnv:
    """The classic environment: one example per task of ``dataset`` (the env's default selection, or ``task_ids``;
    then ``limit``), each played as one episode of the id ``feedback`` names (a combination or its gym id; default
    ``ConvCodeWorld-CF-EF_full-v0``) with at most ``max_turns`` feedback turns; ``tools``: the tool variant;
    ``reasoning``: how a reasoning model's reply is read (the env's ``reasoning=``: ``"strip"``, its thoughts removed
    before its code is judged, or ``"keep"``).
    ``canary`` / ``canary_seed``: canary twins added after the tasks, as the gym env's ``canary=`` /
    ``canary_seed=`` (a share in [0, 1) of the set played, or the ids of the tasks to twin); one example each.

    Raises:
        ValueError: ``feedback`` or ``gym_id`` names no combination; ``canary`` is a share outside [0, 1), asks for
            more twins than the tasks have, or names a task without one.
        DatasetUnavailable: the task set cannot be loaded here (one line, with the fix).
    """
    import datasets
    import gymnasium as gym

    chosen = taskset_settings(feedback=feedback, gym_id=gym_id).get("gym_id", DEFAULT_ID)
    tasks_of_set = load_task_set(dataset)
    env = gym.make(chosen, dataset=tasks_of_set, task_ids=task_ids, stdlib_only=stdlib_only, limit=limit,
                   max_turns=max_turns, executor=shared_executor(runtime), canary=canary, canary_seed=canary_seed)
    try:
        tasks = list(env.unwrapped.tasks)
    finally:
        env.close()
    rows = []
    for task in tasks:
        system, prompt = first_turn(task, tools)
        spec = {"gym_id": chosen, "dataset": dataset, "task_id": task.task_id, "max_turns": max_turns,
                "feedback_style": feedback_style, "runtime": runtime, "reasoning": reasoning}
        rows.append({"prompt": [{"role": "system", "content": system}, {"role": "user", "content": prompt}],
                     "answer": "", "task": task.task_id, "info": {"convcodeworld": json.dumps(spec)}})
    rows_set = datasets.Dataset.from_list(rows)
    return ConvCodeWorldClassicEnv(tools=tools, dataset=rows_set, eval_dataset=rows_set, rubric=_rubric())


def _steps(state: Any) -> list[dict[str, Any]]:
    return list((state.get(STATE_KEY) or {}).get("steps", []))


def _rubric() -> Any:
    """``env_reward`` (weight 1: the sum of the env's step rewards) and the metrics (weight 0) ``programs``,
    ``pass_fraction``, ``canary`` and ``canary_passed``, read from the steps the rollout recorded."""

    async def env_reward(state: Any) -> float:
        return float(sum(step["reward"] for step in _steps(state)))

    async def programs(state: Any) -> float:
        return float(len(_steps(state)))

    async def pass_fraction(state: Any) -> float:
        steps = _steps(state)
        return float(steps[-1]["pass_fraction"]) if steps else 0.0

    async def canary(state: Any) -> float:
        return _canary(state)["canary"]

    async def canary_passed(state: Any) -> float:
        return _canary(state)["canary_passed"]

    rubric = vf.Rubric(funcs=[env_reward], weights=[1.0])
    for metric in (programs, pass_fraction, canary, canary_passed):
        rubric.add_metric(metric)  # weight 0: recorded and averaged, never in the reward
    return rubric


def _canary(state: Any) -> dict[str, float]:
    """The canary metrics of the rollout in ``state`` (:func:`~convcodeworld.canary.canary_metrics`)."""
    return canary_metrics((state.get(STATE_KEY) or {}).get("task_id", ""), _steps(state))


class ConvCodeWorldClassicEnv(vf.MultiTurnEnv):
    """One episode per rollout on the gym env of the example's task (made at setup on the process's shared sandbox
    executor, closed at cleanup); see the module's docstring for the two variants.

    Args:
        tools: the tool variant (``submit_program``) instead of fenced programs in the replies.
        **kwargs: ``vf.MultiTurnEnv``'s (``dataset``, ``rubric``, ...). Its ``max_turns`` is left unbounded: the gym
            env ends the episode (after its ``max_turns`` feedback turns), and a bound here would stop the rollout
            before its last reply is judged (the classic loop judges a reply at the start of the next turn).
    """

    def __init__(self, *, tools: bool = False, **kwargs: Any) -> None:
        function = SUBMIT_PROGRAM_TOOL["function"]
        tool_defs = [{"name": function["name"], "description": function["description"],
                      "parameters": function["parameters"]}] if tools else None
        super().__init__(tool_defs=tool_defs, **{"max_turns": -1, **kwargs})
        self.tools = tools
        self._envs: dict[str, Any] = {}  # trajectory id -> the gym env of the rollout

    async def setup_state(self, state: Any) -> Any:
        spec = EpisodeSpec(**json.loads(state["info"]["convcodeworld"]))
        env = await asyncio.to_thread(make_env, spec)
        self._envs[state["trajectory_id"]] = env
        await env.areset(options={"task_id": spec.task_id})
        state[STATE_KEY] = {"gym_id": spec.gym_id, "dataset": spec.dataset, "task_id": spec.task_id,
                            "max_turns": spec.max_turns, "steps": []}
        return state

    async def env_response(self, messages: Any, state: Any, **kwargs: Any) -> Any:
        """Step the reply's program; the next user turn (chat) or tool results (tools), or nothing once the episode
        ended (``state["final_env_response"]``)."""
        reply = messages[-1]
        call = first_submission(getattr(reply, "tool_calls", None) or []) if self.tools else None
        if self.tools and call is None:
            state["final_env_response"] = []  # no tool call: nothing submitted
            return []
        program = call[1] if call else str(getattr(reply, "content", "") or "")
        episode = state[STATE_KEY]
        obs, reward, terminated, truncated, info = await self._envs[state["trajectory_id"]].astep(program)
        if info["infra_error"] is not None:
            raise vf.SandboxError(f"convcodeworld: the sandbox lost a run of {episode['task_id']} (turn {info['turn']}), "
                                  f"also on its retry: {info['infra_error']}")
        episode["steps"].append(step_record(reward, terminated, truncated, info))
        if terminated or truncated:
            state["final_env_response"] = []
            return []
        if call is None:
            return [vf.UserMessage(content=refinement_prompt(obs))]
        left = episode["max_turns"] + 1 - len(episode["steps"])
        return [vf.ToolMessage(**m) for m in tool_results(call, tool_answer(obs, info, terminated=False, left=left))]

    @vf.cleanup
    async def close_env(self, state: Any) -> None:
        """Close the rollout's gym env."""
        env = self._envs.pop(state.get("trajectory_id"), None)
        if env is not None:
            await asyncio.to_thread(env.close)
