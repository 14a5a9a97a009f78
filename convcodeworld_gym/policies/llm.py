"""The OpenAI-compatible LLM policy: any chat-completions endpoint (OpenAI, vLLM, Ollama, ...).

Every request can be sent blocking (``act``, the ``openai.OpenAI`` client) or awaited (``aact``, an
``openai.AsyncOpenAI`` client of the running loop): one code path (:mod:`..aio`), the same retries.

Holds:
    OpenAIPolicy   chat model as a policy; prompts from :mod:`.prompts`
    user_prompt    this turn's user message for an observation
    sampled_tokens the sampled token ids and logprobs of a reply, as its server reported them
    separate_reasoning  the reasoning an endpoint returned apart from a reply (``reasoning_content``, ``reasoning``)
    REASONING_FIELDS    the names of those fields
    LLMError       an endpoint failed for good (after retries, or at once on a client error)
    LLMContextOverflow  the endpoint rejected the prompt as longer than the model's context
    RETRYABLE_STATUS  HTTP statuses retried with backoff (from :mod:`..chat`, the one retry loop)
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
from collections.abc import Mapping
from typing import Any

from ..aio import Call, Plan, run_awaited, run_blocking
from ..chat import RETRYABLE_STATUS, AsyncClients, ChatFailure, SyncClient, endpoint_problem, retry_plan
from ..errors import ContextOverflow, ConvCodeWorldError
from ..records import valid_text
from ..tasks import Task
from .base import Policy, PolicyEpisode, PolicyReply, SampledTokens
from .prompts import SYSTEM_PROMPT, initial_prompt, refinement_prompt

__all__ = ["OpenAIPolicy", "LLMError", "LLMContextOverflow", "RETRYABLE_STATUS", "user_prompt", "sampled_tokens",
           "separate_reasoning", "REASONING_FIELDS"]

#: The message fields an endpoint returns a reasoning model's thought in, apart from its reply: vLLM's reasoning
#: parser and the APIs compatible with it (DeepSeek, SGLang, ...) say ``reasoning_content``; some servers (Ollama,
#: OpenRouter, vLLM's newer releases) say ``reasoning``.
REASONING_FIELDS = ("reasoning_content", "reasoning")

_log = logging.getLogger(__name__)

# How OpenAI ("context_length_exceeded"), vLLM ("maximum context length is ...") and others word it.
_OVERFLOW = re.compile(r"context[ _]length|maximum context|context window|too many tokens|prompt is too long", re.IGNORECASE)


class LLMError(ConvCodeWorldError):
    """A chat-completions call failed for good. The message names the endpoint, the model and
    the HTTP status (never the API key)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class LLMContextOverflow(LLMError, ContextOverflow):
    """The endpoint answered HTTP 400 because the prompt does not fit the model's context."""


def user_prompt(observation: Mapping[str, Any]) -> str:
    """This turn's user message: the task at turn 0, else the previous code and its feedback."""
    first = not observation.get("code") and int(observation.get("turn", 0)) == 0
    return initial_prompt(str(observation["task"])) if first else refinement_prompt(observation)


class _ChatEpisode(PolicyEpisode):
    def __init__(self, policy: OpenAIPolicy) -> None:
        self._policy = policy
        self._messages: list[dict[str, str]] = [{"role": "system", "content": SYSTEM_PROMPT}]

    def act(self, observation: Mapping[str, Any]) -> PolicyReply:
        return run_blocking(self._plan(observation))

    async def aact(self, observation: Mapping[str, Any]) -> PolicyReply:
        return await run_awaited(self._plan(observation))

    def _plan(self, observation: Mapping[str, Any]) -> Plan[PolicyReply]:
        user = {"role": "user", "content": user_prompt(observation)}
        messages = [*self._messages, user] if self._policy.history else [self._messages[0], user]
        reply: PolicyReply = yield self._policy.completion(messages)
        if self._policy.history:  # only a call that was answered joins the conversation
            self._messages += [user, {"role": "assistant", "content": reply.text}]
        return reply


class OpenAIPolicy(Policy):
    """A chat model behind an OpenAI-compatible endpoint.

    Args:
        model: model name as the endpoint knows it.
        base_url: endpoint root (``http://localhost:8000/v1`` for vLLM,
            ``http://localhost:11434/v1`` for Ollama); ``None`` = OpenAI (or ``$OPENAI_BASE_URL``).
        api_key: the key; default ``$OPENAI_API_KEY``, else ``"EMPTY"`` (local servers ignore it).
            It is never written to logs, metadata or error messages.
        temperature, max_tokens: sampling settings sent with every request (the paper: 0 and 2048).
        n: choices per request; the first is played, all count in the token usage.
        history: send the whole conversation (every earlier prompt and reply) instead of
            only the task, the previous code and this turn's feedback (the reference's way).
        max_retries, backoff_s, timeout_s: a request that times out, cannot connect, or gets
            a status in :data:`RETRYABLE_STATUS` or any 5xx is retried up to ``max_retries`` times,
            waiting ``backoff_s * 2**k`` seconds (at most 60); then :class:`LLMError`.
        logprobs: ask for the log-probability of every sampled token (the chat API's ``logprobs``); replies
            carry them in ``PolicyReply.sampled``.
        return_token_ids: ask a vLLM server for the sampled token ids and the prompt's (``return_token_ids``,
            a vLLM extension other servers may refuse); replies carry them in ``PolicyReply.sampled``, so that a
            trainer trains on exactly what was sampled.

    A reasoning model's thought that the endpoint returns apart from the reply (``reasoning_content``, or
    ``reasoning``: :data:`REASONING_FIELDS`) is kept in ``PolicyReply.reasoning``, never in ``PolicyReply.text``: the
    env judges the reply alone, and the rollout driver logs the reasoning beside it. A conversation with ``history``
    carries the replies without it (as vLLM asks of its reasoning models).

    Every reply carries the messages sent (``PolicyReply.messages``). ``await episode.aact(obs)`` sends the same
    request through an ``openai.AsyncOpenAI`` client of the running event loop; ``await policy.aclose()`` closes it.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = 2048,
        n: int = 1,
        history: bool = False,
        max_retries: int = 5,
        backoff_s: float = 1.0,
        timeout_s: float = 120.0,
        logprobs: bool = False,
        return_token_ids: bool = False,
    ) -> None:
        import openai

        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        self.name = model
        self.model = model
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.n = n
        self.history = history
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.timeout_s = timeout_s
        self.logprobs = logprobs
        self.return_token_ids = return_token_ids
        client_options: dict[str, Any] = {
            "base_url": self.base_url,
            "api_key": api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY",
            "max_retries": 0,
            "timeout": timeout_s,
        }
        self._client = SyncClient(**client_options)  # made on first blocking use
        self._async_clients = AsyncClients(**client_options)

    def start(self, task: Task, *, feedback: str, seed: int) -> PolicyEpisode:
        return _ChatEpisode(self)

    def check_endpoint(self, timeout_s: float = 10.0) -> None:
        """Ask the endpoint once, quickly, whether it can serve (:func:`~..chat.endpoint_problem`): a run calls it
        first, so that a server that is down, hung or refusing the key fails in seconds, not after every retry.

        Raises:
            LLMError: it cannot (names the endpoint, the model and why).
        """
        problem = endpoint_problem(self._client.get(), timeout_s)
        if problem is not None:
            raise LLMError(f"LLM endpoint {self.base_url} (model {self.model!r}): {problem}")

    def settings(self) -> dict[str, Any]:
        return {
            **super().settings(),
            "model": self.model,
            "base_url": self.base_url,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "n": self.n,
            "history": self.history,
            "max_retries": self.max_retries,
            "timeout_s": self.timeout_s,
            **({"logprobs": True} if self.logprobs else {}),
            **({"return_token_ids": True} if self.return_token_ids else {}),
        }

    def turn_messages(self, observation: Mapping[str, Any]) -> list[dict[str, str]]:
        """The messages of one turn without history: the system prompt and :func:`user_prompt`."""
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user_prompt(observation)}]

    def completion(self, messages: list[dict[str, str]]) -> Call[PolicyReply]:
        """:meth:`complete` of ``messages`` as a :class:`~..aio.Call` (blocking, or awaited as :meth:`acomplete`)."""
        return Call(self.complete, self.acomplete, (messages,))

    def complete(self, messages: list[dict[str, str]]) -> PolicyReply:
        """One chat completion with retries; the first choice's text, the usage, the messages sent and the sampled
        tokens where the server returned them."""
        return run_blocking(self._complete_plan(messages))

    async def acomplete(self, messages: list[dict[str, str]]) -> PolicyReply:
        """:meth:`complete`, awaited (the async client of the running loop): the same request, the same reply."""
        return await run_awaited(self._complete_plan(messages))

    def _complete_plan(self, messages: list[dict[str, str]]) -> Plan[PolicyReply]:
        messages = _valid_messages(messages)
        response, latency = yield from self._request_plan(messages, self.n, None)
        usage = response.usage
        counts = (
            {k: float(getattr(usage, k) or 0) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
            if usage is not None
            else {}
        )
        choice = response.choices[0]
        return PolicyReply(valid_text(choice.message.content or ""), counts, latency, tuple(dict(m) for m in messages),
                           sampled_tokens(response, choice), _valid_or_none(separate_reasoning(choice.message)))

    def sample(self, messages: list[dict[str, str]], n: int, seed: int | None = None) -> list[str]:
        """The texts of all choices of one request for ``n`` samples (``seed`` sent when given).

        An endpoint may return fewer than ``n`` choices; the caller decides what to do then.
        """
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        response, _ = run_blocking(self._request_plan(_valid_messages(messages), n, seed))
        return [valid_text(choice.message.content or "") for choice in response.choices]

    async def aclose(self) -> None:
        """Close the running loop's async client (the blocking client stays: :meth:`close`)."""
        await self._async_clients.aclose()

    def _request_plan(self, messages: list[dict[str, str]], n: int, seed: int | None) -> Plan[tuple[Any, float]]:
        """One chat-completions request with retries: (response with >= 1 choice, seconds taken)."""
        started = time.perf_counter()
        where = f"LLM endpoint {self.base_url} (model {self.model!r})"
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": self.temperature}
        if self.max_tokens is not None:
            kwargs["max_tokens"] = self.max_tokens
        if n != 1:
            kwargs["n"] = n
        if seed is not None:
            kwargs["seed"] = seed
        if self.logprobs:
            kwargs["logprobs"] = True
        if self.return_token_ids:
            kwargs["extra_body"] = {"return_token_ids": True}

        def checked(response: Any) -> Any:
            if not response.choices:
                raise LLMError(f"{where} returned no choices", 200)
            return response

        def send() -> Any:
            return checked(self._client.get().chat.completions.create(**kwargs))

        async def asend() -> Any:
            return checked(await self._async_clients.arun(lambda client: client.chat.completions.create(**kwargs)))

        try:
            response = yield from retry_plan(Call(send, asend), lambda seconds: Call(time.sleep, asyncio.sleep, (seconds,)),
                                             retries=self.max_retries, backoff_s=self.backoff_s, cap_s=60.0,
                                             timeout_s=self.timeout_s, on_retry=lambda line: _log.warning("%s: %s", where, line))
        except ChatFailure as failure:
            if failure.status == 400 and _OVERFLOW.search(failure.problem):
                raise LLMContextOverflow(f"{where} answered HTTP 400: {failure.problem}", 400) from None
            if not failure.retried_out:
                raise LLMError(f"{where} answered HTTP {failure.status}: {failure.problem}. {_hint(failure.status or 0)}",
                               failure.status) from None
            detail = f"HTTP {failure.status}: {failure.problem}" if failure.status is not None else failure.problem
            raise LLMError(f"{where} failed after {failure.attempts} attempt(s): {detail}", failure.status) from None
        return response, time.perf_counter() - started

    def close(self) -> None:
        self._client.close()


def _valid_messages(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """``messages`` with every text valid Unicode (:func:`~..records.valid_text`): a reply that carried a lone surrogate,
    shown again in a later prompt, must not make the request's JSON body unsendable."""
    return [{**m, "content": valid_text(m["content"])} if isinstance(m.get("content"), str) else m for m in messages]


def sampled_tokens(response: Any, choice: Any) -> SampledTokens | None:
    """The sampled tokens of ``choice`` as the server reported them: ``logprobs.content`` (tokens and their
    logprobs; tokens spelled ``token_id:N``, vLLM's ``return_tokens_as_token_ids``, give the ids too) and vLLM's
    ``token_ids`` / ``prompt_token_ids`` (``return_token_ids``); None when it reported none of them."""
    content = getattr(getattr(choice, "logprobs", None), "content", None) or None
    tokens = tuple(str(entry.token) for entry in content) if content else None
    logprobs = tuple(float(entry.logprob) for entry in content) if content else None
    ids = getattr(choice, "token_ids", None)
    if ids is None and tokens and all(t.startswith("token_id:") for t in tokens):
        ids = [int(t.split(":", 1)[1]) for t in tokens]
    prompt_ids = getattr(response, "prompt_token_ids", None)
    if tokens is None and ids is None and prompt_ids is None:
        return None
    return SampledTokens(token_ids=tuple(int(i) for i in ids) if ids is not None else None, logprobs=logprobs,
                         tokens=tokens, prompt_token_ids=tuple(int(i) for i in prompt_ids) if prompt_ids is not None else None)


def _valid_or_none(text: str | None) -> str | None:
    return None if text is None else valid_text(text)


def separate_reasoning(message: Any) -> str | None:
    """The reasoning ``message`` (a chat completion's message, as the ``openai`` client parsed it) carries apart from
    its content, under one of :data:`REASONING_FIELDS` (the first that holds text); None when it carries none.

    >>> from openai.types.chat import ChatCompletionMessage
    >>> separate_reasoning(ChatCompletionMessage.model_validate(
    ...     {"role": "assistant", "content": "x = 1", "reasoning_content": "Let me think."}))
    'Let me think.'
    >>> separate_reasoning(ChatCompletionMessage(role="assistant", content="x = 1")) is None
    True
    """
    extra = getattr(message, "model_extra", None) or {}
    for name in REASONING_FIELDS:
        value = extra.get(name, getattr(message, name, None))
        if isinstance(value, str) and value:
            return value
    return None


def _hint(status: int) -> str:
    return {
        401: "Check the API key (--api-key or $OPENAI_API_KEY).",
        403: "The key may not have access to this model.",
        404: "Check the model name (--model) and the base URL (--base-url, usually ending in /v1).",
        400: "The endpoint rejected the request; check --max-tokens, --n and the model name.",
    }.get(status, "")
