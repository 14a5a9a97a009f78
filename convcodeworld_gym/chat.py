"""One chat-completions request with retries: the single retry loop behind every LLM call.

Both the LLM policy (:mod:`.policies.llm`) and the LLM-simulated user
(:mod:`.feedback.verbal.llm`) send their requests through :func:`retry_plan`, blocking
(:func:`request_with_retries`, the ``openai.OpenAI`` client) or awaited (:func:`arequest_with_retries`,
an ``openai.AsyncOpenAI`` client of the running loop, :class:`AsyncClients`); each turns a
:class:`ChatFailure` into its own error type and message.

A failure is *transient* (retried with exponential backoff) when the request times out,
cannot connect, gets an HTTP status in :data:`RETRYABLE_STATUS` or any 5xx, or gets an
answer that ``send`` rejects as :class:`Malformed` (or a body that is not JSON). Any other
HTTP error (400, 401, 403, 404, ...) fails at once: retrying cannot fix a bad key or model."""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import openai

from .aio import Call, Plan, network_loop, run_awaited, run_blocking

__all__ = ["RETRYABLE_STATUS", "Malformed", "ChatFailure", "retry_plan", "request_with_retries", "arequest_with_retries",
           "AsyncClients", "SyncClient", "error_message", "endpoint_problem"]

#: Retried with exponential backoff (as is every 5xx); any other HTTP error fails at once.
RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})

T = TypeVar("T")


class Malformed(Exception):
    """The server answered 200 with a body that holds no usable message (retried)."""


class ChatFailure(Exception):
    """A chat request failed for good.

    Attributes:
        status: the last HTTP status, or ``None`` (timeout, no connection, malformed answer).
        problem: one line saying what went wrong (never the API key).
        attempts: how many requests were sent.
        retried_out: True when every try failed transiently; False for an HTTP error that is
            not retried (the first such answer ends the loop).
        cause: the last exception.
    """

    def __init__(self, status: int | None, problem: str, attempts: int, retried_out: bool, cause: BaseException) -> None:
        super().__init__(problem)
        self.status, self.problem, self.attempts, self.retried_out, self.cause = status, problem, attempts, retried_out, cause


def error_message(exc: BaseException) -> str:
    """The server's own message of an HTTP error (``{"error": {"message": ...}}``), else the exception's text."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return str(getattr(exc, "message", exc))


def endpoint_problem(client: openai.OpenAI, timeout_s: float = 10.0) -> str | None:
    """Why ``client``'s endpoint cannot serve requests, asked once, quickly (``GET /models``, ``timeout_s``, no
    retries): it refuses connections, does not answer, or refuses the key; None when it answers (a server without
    that route, or any other answer, is no problem here: the requests themselves will say).

    >>> endpoint_problem(openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="EMPTY"), 2.0)[:14]
    'cannot connect'
    """
    try:
        client.with_options(timeout=timeout_s, max_retries=0).models.list()
    except openai.APITimeoutError:
        return (f"no answer within {timeout_s:g} s (it accepts connections but does not answer); is the server "
                "overloaded, still loading its model, or hung?")
    except openai.APIConnectionError as exc:
        return f"cannot connect ({exc.__cause__ or exc}); is the server running at that URL (--base-url)?"
    except openai.AuthenticationError as exc:
        return f"HTTP 401: {error_message(exc)}. Check the API key (--api-key or $OPENAI_API_KEY)."
    except (openai.APIStatusError, ValueError):
        return None
    return None


def _retryable(status: int) -> bool:
    return status in RETRYABLE_STATUS or status >= 500


def request_with_retries(
    send: Callable[[], T],
    *,
    retries: int,
    backoff_s: float,
    cap_s: float,
    timeout_s: float,
    sleep: Callable[[float], Any] = time.sleep,
) -> T:
    """``send()`` until it returns, retrying transient failures; :class:`ChatFailure` when it gives up
    (:func:`retry_plan`, blocking).

    Waits ``min(cap_s, backoff_s * 2**k)`` seconds before retry ``k + 1`` (k = 0, 1, ...), so at
    most ``retries + 1`` requests are sent. Exceptions other than the OpenAI client's, a
    :class:`Malformed` answer and ``ValueError`` (a body that is not JSON) pass through untouched.

    >>> calls = []
    >>> def send():
    ...     calls.append(1)
    ...     if len(calls) < 3:
    ...         raise Malformed("empty reply")
    ...     return "ok"
    >>> request_with_retries(send, retries=4, backoff_s=0, cap_s=0, timeout_s=1), len(calls)
    ('ok', 3)
    >>> try:
    ...     request_with_retries(lambda: (_ for _ in ()).throw(Malformed("empty reply")), retries=1, backoff_s=0, cap_s=0, timeout_s=1)
    ... except ChatFailure as failure:
    ...     print(failure.attempts, failure.retried_out, failure.problem)
    2 True empty reply
    """
    return run_blocking(retry_plan(Call(send), lambda seconds: Call(sleep, None, (seconds,)), retries=retries,
                                   backoff_s=backoff_s, cap_s=cap_s, timeout_s=timeout_s))


async def arequest_with_retries(
    send: Callable[[], Awaitable[T]],
    *,
    retries: int,
    backoff_s: float,
    cap_s: float,
    timeout_s: float,
) -> T:
    """:func:`request_with_retries` with ``send`` awaited (an ``openai.AsyncOpenAI`` request) and ``asyncio.sleep``
    between the tries: the same retries, the same :class:`ChatFailure`.

    >>> async def send():
    ...     raise Malformed("empty reply")
    >>> try:
    ...     asyncio.run(arequest_with_retries(send, retries=1, backoff_s=0, cap_s=0, timeout_s=1))
    ... except ChatFailure as failure:
    ...     print(failure.attempts, failure.retried_out, failure.problem)
    2 True empty reply
    """
    return await run_awaited(retry_plan(Call(_awaited_only, send), lambda seconds: Call(time.sleep, asyncio.sleep, (seconds,)),
                                        retries=retries, backoff_s=backoff_s, cap_s=cap_s, timeout_s=timeout_s))


def _awaited_only() -> Any:
    raise TypeError("this request has an async client only: await it (run_awaited)")


def retry_plan(
    send: Call[T],
    pause: Callable[[float], Call[Any]],
    *,
    retries: int,
    backoff_s: float,
    cap_s: float,
    timeout_s: float,
    on_retry: Callable[[str], Any] | None = None,
) -> Plan[T]:
    """The retry loop as a plan (:mod:`.aio`): ``send`` until it returns, ``pause(seconds)`` before retry ``k + 1``
    (``min(cap_s, backoff_s * 2**k)``); :class:`ChatFailure` when it gives up. What is transient and what passes
    through untouched: see :func:`request_with_retries`. ``on_retry`` is told each retry, before its pause, in one
    line (what failed, which try of how many, the pause), so that a failing endpoint is never silent."""
    problem, status = "", None  # what the last try failed with
    for attempt in range(retries + 1):
        if attempt:
            wait = min(cap_s, backoff_s * 2 ** (attempt - 1))
            if on_retry is not None:
                said = f"HTTP {status}: {problem}" if status is not None else problem
                on_retry(f"{said} (try {attempt} of {retries + 1}); trying again in {wait:g} s")
            yield pause(wait)
        status = None
        try:
            return (yield send)
        except openai.APIStatusError as exc:
            status, problem, last = exc.status_code, error_message(exc), exc
            if not _retryable(status):
                raise ChatFailure(status, problem, attempt + 1, False, exc) from None
        except openai.APITimeoutError as exc:
            problem, last = f"no answer within {timeout_s:g} s", exc
        except openai.APIConnectionError as exc:
            problem, last = f"cannot connect ({exc.__cause__ or exc}); is the server running at that URL?", exc
        except (Malformed, ValueError) as exc:
            problem, last = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__, exc
    raise ChatFailure(status, problem, retries + 1, True, last)


class SyncClient:
    """One ``openai.OpenAI`` client with the given options, made on first use (thread-safe): making one loads the TLS
    certificate store (25 ms here, 0.3-0.7 s on a busy machine), which an env that is only ever awaited, or a batch of
    64 envs made at once, should not pay for each. :meth:`close` closes it if it was made; a later :meth:`get` makes
    another.

    >>> client = SyncClient(base_url="http://127.0.0.1:9/v1", api_key="EMPTY", max_retries=0)
    >>> client.made, client.get() is client.get(), client.made
    (False, True, True)
    >>> client.close(); client.made
    False
    """

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._client: openai.OpenAI | None = None
        self._lock = threading.Lock()

    @property
    def made(self) -> bool:
        """Whether the client exists now."""
        return self._client is not None

    def get(self) -> openai.OpenAI:
        """The client, made here on the first call."""
        client = self._client
        if client is None:
            with self._lock:
                if self._client is None:
                    self._client = openai.OpenAI(**self._options)
                client = self._client
        return client

    def close(self) -> None:
        """Close the client (its connections) if it was made."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()


class AsyncClients:
    """One ``openai.AsyncOpenAI`` client per event loop, made on first use with the given options: an async client's
    connections belong to the loop that opened them, so a client made under one ``asyncio.run`` must not serve
    another. Use from the loop's own thread.

    Making a client loads the TLS certificate store (0.3-0.7 s on a busy machine): :meth:`aget` makes it in a thread,
    so the first request of a loop does not hold the loop meanwhile; :meth:`get` makes it where it is called.

    :meth:`arun` sends a request from the process's network loop (:func:`~convcodeworld_gym.aio.network_loop`, a
    thread of its own) with that loop's client: the ``openai`` client spends several milliseconds of CPU on each
    request (the body's transform, the request, the reply's parsing), which with tens of episodes in flight held the
    caller's loop for hundreds of milliseconds in one turn. The LLM policy and the LLM user send every awaited request
    so.

    >>> import asyncio
    >>> clients = AsyncClients(base_url="http://127.0.0.1:9/v1", api_key="EMPTY", max_retries=0)
    >>> async def same_client_three_times():
    ...     first = await clients.aget()
    ...     return first is await clients.aget() is clients.get()
    >>> asyncio.run(same_client_three_times())
    True
    """

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, openai.AsyncOpenAI] = weakref.WeakKeyDictionary()
        self._making: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Future[openai.AsyncOpenAI]] = (
            weakref.WeakKeyDictionary())

    def get(self) -> openai.AsyncOpenAI:
        """The client of the running event loop, made here (on the loop) if it has none yet: prefer :meth:`aget`."""
        loop = asyncio.get_running_loop()
        client = self._by_loop.get(loop)
        if client is None:
            client = self._by_loop[loop] = openai.AsyncOpenAI(**self._options)
        return client

    async def aget(self) -> openai.AsyncOpenAI:
        """The client of the running event loop; the first call of a loop makes it in a thread (callers that come
        meanwhile wait for that one client), so the loop is never held while it is made."""
        loop = asyncio.get_running_loop()
        client = self._by_loop.get(loop)
        if client is not None:
            return client
        making = self._making.get(loop)
        if making is None:
            making = self._making[loop] = asyncio.ensure_future(asyncio.to_thread(openai.AsyncOpenAI, **self._options))
        try:
            made = await asyncio.shield(making)  # a caller cancelled meanwhile does not cancel the others' client
        finally:
            if making.done() and self._making.get(loop) is making:
                del self._making[loop]  # made (or failed: the next call tries again)
        return self._by_loop.setdefault(loop, made)

    async def arun(self, request: Callable[[openai.AsyncOpenAI], Awaitable[T]]) -> T:
        """``await request(client)`` on the network loop, with its client (made there by :meth:`aget`): the caller's
        loop only waits for the answer. An exception of the request is raised here."""

        async def there() -> T:
            return await request(await self.aget())

        return await network_loop().run(there())

    async def aclose(self) -> None:
        """Close the running loop's client and the network loop's (their connections); later requests make new ones."""
        client = self._by_loop.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()
        network = network_loop()
        if network.started and asyncio.get_running_loop() is not network.loop():
            await network.run(self._aclose_here())

    async def _aclose_here(self) -> None:
        client = self._by_loop.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()
