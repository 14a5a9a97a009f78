"""The ConvCodeWorld environment for verifiers: one rollout is one episode of the chosen id.

The coder (the model under evaluation or training) answers the task's prompt; each reply is stepped in the gym env
(the program is compiled and run against all the task's tests in the sandbox); while the episode goes on, the
feedback the id shows comes back as the next user turn, in the project's refinement prompt (the text
``OpenAIPolicy`` sends: the task, the previous code, and the compilation, execution and verbal feedback shown).
The episode ends when a program passes, after ``max_turns`` feedback turns, or when the coder's own limits end the
exchange.

In the tool variant (the taskset's ``tools``) the coder submits each program by calling the ``submit_program`` tool
(its ``code`` argument is the program, stepped as it is), and the env's feedback is the tool's result, in the words
TRL's tool door answers (:func:`~convcodeworld_gym.training.tools.tool_answer`). A reply that calls no tool submits
nothing and ends the episode (reward 0.0 unless an earlier program passed); a reply with several calls has its first
``submit_program`` call judged, the others answered that one program is judged a turn.
"""

from __future__ import annotations

import asyncio

import verifiers.v1 as vf

from convcodeworld_gym.policies.prompts import refinement_prompt
from convcodeworld_gym.training.tools import tool_answer

from .episode import make_env, raise_if_lost, step_record
from .toolcalls import first_submission, tool_results
from .taskset import TRACE_INFO_KEY, ConvCodeWorldTask

__all__ = ["ConvCodeWorldLoop", "ConvCodeWorldLoopConfig", "submitted_program"]

def submitted_program(segment: vf.Segment) -> tuple[str, str, list[str]] | None:
    """The program a tool-variant reply submits (:func:`~convcodeworld.toolcalls.first_submission` of the tool calls
    of the segment's last assistant message); None when it submits none."""
    replies = [m for m in segment.messages if isinstance(m, vf.AssistantMessage)]
    return first_submission((replies[-1].tool_calls or []) if replies else [])


class ConvCodeWorldLoopConfig(vf.EnvConfig):
    """The environment's config (``--env.*``): the one seat, ``coder``, and the episode retries."""

    coder: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())
    """The model that writes the programs (``--env.coder.*``). Its harness defaults to this package's in-process
    :class:`~convcodeworld.harness.ChatHarness`, which runs nothing in the runtime, hence the local runtime."""
    retries: vf.RetryConfig = vf.RetryConfig(rules=[vf.RetryRule(type="InfraError", max_retries=1)])
    """An episode whose sandbox run was lost (also on the sandbox's own retry) is played again once, as
    ``convcodeworld evaluate`` does; lost again, it stays a failed episode with no reward."""


class ConvCodeWorldLoop(vf.Env[ConvCodeWorldLoopConfig]):
    """``run`` plays one episode: model turn, ``await env.astep(reply)`` (the sandbox run and the simulated user are
    awaited, never run on the event loop), feedback turn, until the episode ends.

    Recorded on the coder's trace: ``trace.info["convcodeworld"]`` holds the id, the task and one
    :func:`~convcodeworld.episode.step_record` per step (the env's reward among them), from which the task scores
    ``env_reward`` (the sum of the env's rewards) and its metrics. A step the sandbox lost, also on its retry
    (``info["infra_error"]``), is no verdict: the rollout fails with :class:`~convcodeworld.episode.InfraError`
    (trace not ok, no reward recorded, never a 0) and the episode is played again per ``retries``.
    """

    async def run(self, task: ConvCodeWorldTask, agents: vf.Agents) -> None:
        spec = task.spec
        env = await asyncio.to_thread(make_env, spec)
        try:
            obs, _ = await env.areset(options={"task_id": spec.task_id})
            async with agents.coder.interaction(task) as interaction:
                episode = {"gym_id": spec.gym_id, "dataset": spec.dataset, "task_id": spec.task_id, "steps": []}
                interaction.trace.info[TRACE_INFO_KEY] = episode
                segment = await interaction.turn()
                while not segment.terminated:
                    call = submitted_program(segment) if task.data.tools else None
                    if task.data.tools and call is None:
                        break  # no tool call: nothing submitted
                    obs, reward, terminated, truncated, info = await env.astep(call[1] if call else segment.last_reply)
                    raise_if_lost(spec.task_id, info)
                    episode["steps"].append(step_record(reward, terminated, truncated, info))
                    if terminated or truncated:
                        break
                    if call is None:
                        segment = await interaction.turn(refinement_prompt(obs))
                    else:
                        left = spec.max_turns + 1 - len(episode["steps"])
                        segment = await interaction.turn(tool_results(call, tool_answer(obs, info, terminated=False,
                                                                                          left=left)))
        finally:
            await asyncio.to_thread(env.close)

