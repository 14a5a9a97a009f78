"""The policy interface: what the evaluation runner asks of anything that writes code.

A :class:`Policy` is shared by every task and thread of a run and holds only settings. For
each episode it starts a :class:`PolicyEpisode`, which holds that episode's state (the
conversation so far, injected bugs, ...) and turns each observation into a reply.

Holds:
    PolicyReply    one reply: text, token usage, latency; the request's messages and sampled tokens when known
    SampledTokens  the token ids and logprobs a server sampled for a reply (when it returns them)
    PolicyEpisode  per-episode state: ``act(observation) -> PolicyReply``, awaited as ``aact``
    Policy         the factory of episodes, with its settings for the run metadata
    fenced         wrap code in a ```python block
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..tasks import Task

__all__ = ["PolicyReply", "SampledTokens", "PolicyEpisode", "Policy", "fenced"]


@dataclass(frozen=True)
class SampledTokens:
    """What a model sampled for one reply, token by token, as its server reported it (or as a trainer generated it).

    Attributes:
        token_ids: the sampled completion's token ids (vLLM: ``return_token_ids``), or None when not reported.
        logprobs: the log-probability of each sampled token, or None.
        tokens: the sampled tokens as text (the chat API's ``logprobs.content[].token``), or None.
        prompt_token_ids: the token ids of the prompt the model completed (vLLM: ``return_token_ids``), or None.
    """

    token_ids: tuple[int, ...] | None = None
    logprobs: tuple[float, ...] | None = None
    tokens: tuple[str, ...] | None = None
    prompt_token_ids: tuple[int, ...] | None = None


@dataclass(frozen=True)
class PolicyReply:
    """One reply of a policy.

    Attributes:
        text: the raw reply (the env extracts the code from it).
        usage: token counts (``prompt_tokens``, ``completion_tokens``, ...); empty for offline policies.
        latency_s: seconds the policy took (a measurement).
        messages: the chat messages the model was sent for this reply (``()`` for offline policies).
        sampled: the tokens the model sampled, when its server returned them; else None.
        reasoning: the reasoning the endpoint returned apart from the reply (``reasoning_content`` of vLLM's reasoning
            parser and compatible APIs, ``reasoning`` as some servers name it); None when it returned none. It is
            kept (logged) and never judged: the env judges ``text`` alone.
    """

    text: str
    usage: Mapping[str, float] = field(default_factory=dict)
    latency_s: float = 0.0
    messages: tuple[Mapping[str, str], ...] = ()
    sampled: SampledTokens | None = None
    reasoning: str | None = None


class PolicyEpisode(abc.ABC):
    """One episode of a policy. Not shared between threads, nor between concurrent awaits."""

    @abc.abstractmethod
    def act(self, observation: Mapping[str, Any]) -> PolicyReply:
        """The reply to an observation of the env (``reset``'s, then each ``step``'s)."""

    async def aact(self, observation: Mapping[str, Any]) -> PolicyReply:
        """:meth:`act`, awaited: the same reply. The default runs ``act`` in a thread (the event loop never waits
        on it); a policy with an async client overrides it (the OpenAI-compatible policy does)."""
        return await asyncio.to_thread(self.act, observation)

    def close(self) -> None:
        """The episode is over (the rollout driver calls it once, also when the episode failed). Default: nothing."""


class Policy(abc.ABC):
    """Writes code for tasks, one :class:`PolicyEpisode` per (combination, task).

    Contract: ``start`` may be called from several threads at once; the same
    ``(task, feedback, seed)`` and the same observations give the same replies for
    deterministic policies (every offline one).

    Attributes:
        name: short label written into every log row (``"synthetic(strength=0.5)"``, ``"gpt-4o"``).
        synthetic: True for the offline synthetic coder, whose numbers are no claim about any model.
    """

    name: str = "policy"
    synthetic: bool = False

    @abc.abstractmethod
    def start(self, task: Task, *, feedback: str, seed: int) -> PolicyEpisode:
        """A fresh episode for ``task`` under the combination ``feedback`` (id part, e.g. ``CF-EF_full``)."""

    def settings(self) -> dict[str, Any]:
        """Settings for the run metadata. Never holds secrets (API keys)."""
        return {"name": self.name, "synthetic": self.synthetic}

    def close(self) -> None:
        """Release clients. Safe to call more than once."""

    async def aclose(self) -> None:
        """Release what the running event loop holds (an async client's connections). Default: nothing."""


def fenced(code: str) -> str:
    """Wrap code in a ```python block, as a chat model would reply.

    >>> fenced("x = 1")
    '```python\\nx = 1\\n```'
    """
    return f"```python\n{code.rstrip()}\n```"
