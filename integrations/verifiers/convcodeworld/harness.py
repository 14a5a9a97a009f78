"""The coder's harness: one chat completion per segment, sent from this process to the rollout's interception.

verifiers' own chat harnesses (``null``, ``bash``) run a PEP 723 script that ``uv`` provisions in the runtime,
which needs ``uv`` and a package index at run time. A ConvCodeWorld turn needs no box, so this harness asks the
model in-process, as verifiers' ``Harness.launch`` contract allows: every model call goes through the interception
``endpoint`` with the rollout's ``secret`` (so the trace records it, with the run's model and sampling) and a
synthetic success result is returned. It runs offline wherever the model's endpoint answers. A task whose data
carries ``tools`` (the tool variant: the ``submit_program`` schema) sends them with each request; the tool's answers
come back as the env's next turn.
"""

from __future__ import annotations

import openai
import verifiers.v1 as vf
from verifiers.v1.dialects.chat import message_to_wire

__all__ = ["ChatHarness", "ChatHarnessConfig"]


class ChatHarnessConfig(vf.HarnessConfig):
    """Knobs of :class:`ChatHarness` (``--env.coder.harness.*``)."""

    request_timeout_s: float = 600.0
    """Seconds one chat completion may take before it fails (the interception's own retries come first)."""


class ChatHarness(vf.Harness[ChatHarnessConfig]):
    """A segment is one chat completion on the conversation so far (the task's system prompt, its prompt, then each
    reply and feedback turn, or tool call and tool answer): nothing run in the runtime. Later segments are the default
    ``resume``: the conversation is replayed with the new turn appended.
    """

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(
        self,
        ctx: vf.ModelContext,
        trace: vf.Trace,
        runtime: vf.Runtime,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: vf.TaskData,
    ) -> vf.ProgramResult:
        """Send one chat completion for ``data``'s conversation to ``endpoint`` (the interception records it on
        ``trace``), with ``data.tools`` when the task has any; return exit code 0. A failed call raises (the rollout
        records the error)."""
        system_prompt, prompt = self.resolve_prompt(data)
        messages: list[dict] = [{"role": "system", "content": system_prompt}] if system_prompt else []
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        elif prompt is not None:
            messages += [message_to_wire(message) for message in prompt]
        tools = getattr(data, "tools", None)
        async with openai.AsyncOpenAI(base_url=endpoint, api_key=secret, max_retries=0,
                                      timeout=self.config.request_timeout_s) as client:
            if tools:
                await client.chat.completions.create(model=ctx.model, messages=messages, tools=tools)
            else:
                await client.chat.completions.create(model=ctx.model, messages=messages)
        return vf.ProgramResult(exit_code=0, stdout="", stderr="")
