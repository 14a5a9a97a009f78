"""The LLM-simulated user: an OpenAI-compatible chat model playing the novice or the expert.

Works with any server that speaks the OpenAI chat-completions API (OpenAI, vLLM, Ollama,
...), chosen by base URL. Every answer goes through the :class:`FeedbackCache`, so a
repeated episode costs nothing and reads back byte-identical. Transient failures (429,
5xx, timeouts, connection errors, malformed or empty bodies) are retried with exponential
backoff; after the last try a :class:`SimulatorError` names the endpoint and the status.
Feedback is never silently empty because the endpoint failed.

Expert replies pass the leak guard: when they quote a non-trivial ground-truth line, the
model is asked once to rewrite; if the rewrite still quotes one, those lines are redacted.

``await simulator.acall(context)`` gives exactly what ``simulator(context)`` gives: one code path
(:mod:`...aio`), its requests through an ``openai.AsyncOpenAI`` client of the running loop and its
cache reads and writes in a thread, so an env's ``astep`` never blocks the event loop on the user."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from ...aio import Call, Plan, run_awaited, run_blocking
from ...chat import AsyncClients, ChatFailure, Malformed, SyncClient, retry_plan
from ...errors import SimulatorError
from ...records import valid_text
from ..context import TurnContext, Usage, VerbalReply
from .cache import FeedbackCache, cache_key
from .leak import leaked_lines, redact
from .prompts import LEAK_RETRY_MESSAGE, build_messages, parse_reply
from .rules import Expertise, check_expertise, should_speak

__all__ = ["LLMSimulator", "DEFAULT_MODEL", "DEFAULT_MAX_TOKENS", "OPENAI_BASE_URL"]

DEFAULT_MODEL = "gpt-4o-2024-05-13"  # the version the paper used
#: The reference's reply limit for the simulator (its DSPy LM was built with ``max_tokens=2048``).
DEFAULT_MAX_TOKENS = 2048
OPENAI_BASE_URL = "https://api.openai.com/v1"
def _read(response: Any) -> tuple[str, Usage]:
    """The message text and token usage of a chat completion; :class:`Malformed` if it has no text."""
    try:
        content = response.choices[0].message.content
    except (AttributeError, TypeError, IndexError, KeyError) as exc:
        raise Malformed(f"the reply is not a chat completion ({exc})") from exc
    if not isinstance(content, str) or not content.strip():
        raise Malformed("the reply holds no message text")
    used = getattr(response, "usage", None)
    return valid_text(content), Usage(getattr(used, "prompt_tokens", 0) or 0, getattr(used, "completion_tokens", 0) or 0, 1)


class LLMSimulator:
    """A novice or expert user simulated by a chat model.

    Args:
        expertise: ``"novice"`` or ``"expert"``.
        model: chat model name (default: the paper's ``gpt-4o-2024-05-13``).
        cache: where answers are stored and looked up.
        base_url: the OpenAI-compatible endpoint (``None``: OpenAI's).
        api_key: the key sent to it; never logged, cached or given to a sandbox.
        temperature, max_tokens: sampling parameters (part of the cache key); the reference
            used temperature 0 and 2048 tokens; ``max_tokens=None`` sends no limit.
        seed: sent as the API's ``seed`` when not ``None`` (part of the cache key).
        retries: extra tries after a transient failure; ``backoff_s`` doubles each time (capped at 30 s).
        timeout_s: per-request timeout.

    ``__call__`` returns a :class:`VerbalReply` (or ``None`` when the user stays silent,
    see :func:`~.rules.should_speak`) and raises :class:`SimulatorError` when the endpoint fails.
    """

    def __init__(
        self,
        expertise: Expertise,
        *,
        model: str = DEFAULT_MODEL,
        cache: FeedbackCache,
        base_url: str | None = None,
        api_key: str | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = DEFAULT_MAX_TOKENS,
        seed: int | None = None,
        retries: int = 4,
        backoff_s: float = 1.0,
        timeout_s: float = 120.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.expertise = check_expertise(expertise)
        if not model:
            raise ValueError("model must be a non-empty chat model name, e.g. 'gpt-4o'")
        if retries < 0 or backoff_s < 0:
            raise ValueError(f"retries and backoff_s must be >= 0, got {retries!r} and {backoff_s!r}")
        self.model = model
        self.endpoint = base_url or OPENAI_BASE_URL
        self.cache = cache
        self.params: dict[str, Any] = {"temperature": float(temperature)}
        if max_tokens is not None:
            self.params["max_tokens"] = int(max_tokens)
        if seed is not None:
            self.params["seed"] = int(seed)
        self.retries, self.backoff_s, self.timeout_s, self._sleep = retries, backoff_s, timeout_s, sleep
        options: dict[str, Any] = {"base_url": self.endpoint, "api_key": api_key or "EMPTY", "max_retries": 0, "timeout": timeout_s}
        self._client = SyncClient(**options)  # made on first blocking use: an awaited user never loads its TLS store
        self._async_clients = AsyncClients(**options)
        self.source = f"llm:{model}"

    def __repr__(self) -> str:  # no key in any repr
        return f"LLMSimulator({self.expertise!r}, model={self.model!r}, endpoint={self.endpoint!r}, cache={str(self.cache.path)!r})"

    def __call__(self, context: TurnContext) -> VerbalReply | None:
        return run_blocking(self._reply_plan(context))

    async def acall(self, context: TurnContext) -> VerbalReply | None:
        """``self(context)``, awaited: the same reply (the async client; cache reads and writes in a thread)."""
        return await run_awaited(self._reply_plan(context))

    def _reply_plan(self, context: TurnContext) -> Plan[VerbalReply | None]:
        if not should_speak(self.expertise, context):
            return None
        started = time.perf_counter()
        messages = build_messages(self.expertise, context)
        reply, usage, cached = yield from self._complete(messages)
        text = parse_reply(reply, self.expertise)
        leak: dict[str, Any] = {}
        if self.expertise == "expert":
            leak = {"detected": False, "regenerated": False, "redacted_lines": 0}
            found = leaked_lines(text, context.task.canonical_solution, context.task.prompt)
            if found:
                leak.update(detected=True, regenerated=True)
                retry = [*messages, {"role": "assistant", "content": reply}, {"role": "user", "content": LEAK_RETRY_MESSAGE}]
                reply, more, more_cached = yield from self._complete(retry)
                usage, cached = usage + more, cached and more_cached
                text = parse_reply(reply, self.expertise)
                found = leaked_lines(text, context.task.canonical_solution, context.task.prompt)
                if found:
                    text = redact(text, found)
                    leak["redacted_lines"] = len(found)
        return VerbalReply(
            text=text, source=self.source, cached=cached, usage=usage, leak=leak, latency_s=time.perf_counter() - started
        )

    def close(self) -> None:
        """Close the HTTP client and the cache."""
        self._client.close()
        self.cache.close()

    async def aclose(self) -> None:
        """Close the running loop's async client (:meth:`close` closes the rest)."""
        await self._async_clients.aclose()

    # ------------------------------------------------------------ internals

    def _complete(self, messages: list[dict[str, str]]) -> Plan[tuple[str, Usage, bool]]:
        """The answer to ``messages``: from the cache, else from the API (then stored)."""
        key = cache_key(self.model, messages, self.params)
        hit = yield Call(self.cache.get, None, (key,))  # sqlite: awaited in a thread
        if hit is not None:
            return hit[0], Usage(), True
        content, usage = yield from self._request(messages)
        yield Call(self.cache.put, None, (key, self.model, content, usage.prompt_tokens, usage.completion_tokens))
        return content, usage, False

    def _request(self, messages: list[dict[str, str]]) -> Plan[tuple[str, Usage]]:
        """One answer from the API, retrying transient failures with exponential backoff (see :mod:`...chat`)."""

        def send() -> tuple[str, Usage]:
            return _read(self._client.get().chat.completions.create(model=self.model, messages=messages, **self.params))  # type: ignore[arg-type]

        async def asend() -> tuple[str, Usage]:
            return _read(await self._async_clients.arun(lambda client: client.chat.completions.create(model=self.model, messages=messages, **self.params)))  # type: ignore[arg-type]

        try:
            return (yield from retry_plan(Call(send, asend), lambda seconds: Call(self._sleep, asyncio.sleep, (seconds,)),
                                          retries=self.retries, backoff_s=self.backoff_s, cap_s=30.0, timeout_s=self.timeout_s))
        except ChatFailure as failure:
            raise self._error(failure) from failure.cause

    def _error(self, failure: ChatFailure) -> SimulatorError:
        status, tries = failure.status, failure.attempts
        what = f"HTTP {status}" if status is not None else type(failure.cause).__name__
        detail = str(failure.cause).splitlines()[0][:300] if str(failure.cause) else ""
        hint = (
            "check the model name, the key and the base URL"
            if status in (400, 401, 403, 404)
            else "the server is down, overloaded or too slow; retry later, raise timeout_s/retries, or use backend='offline'"
        )
        return SimulatorError(
            f"verbal-feedback simulator {self.model!r} at {self.endpoint} failed after {tries} tr{'y' if tries == 1 else 'ies'}: "
            f"{what}: {detail} ({hint})",
            endpoint=self.endpoint,
            status=status,
        )
