"""One chat-completions request with retries: the single retry loop behind every LLM call.

Both the LLM policy (:mod:`.policies.llm`) and the LLM-simulated user
(:mod:`.feedback.verbal.llm`) send their requests through :func:`request_with_retries`;
each turns a :class:`ChatFailure` into its own error type and message.

A failure is *transient* (retried with exponential backoff) when the request times out,
cannot connect, gets an HTTP status in :data:`RETRYABLE_STATUS` or any 5xx, or gets an
answer that ``send`` rejects as :class:`Malformed` (or a body that is not JSON). Any other
HTTP error (400, 401, 403, 404, ...) fails at once: retrying cannot fix a bad key or model."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import openai

__all__ = ["RETRYABLE_STATUS", "Malformed", "ChatFailure", "request_with_retries", "error_message"]

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
    """``send()`` until it returns, retrying transient failures; :class:`ChatFailure` when it gives up.

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
    for attempt in range(retries + 1):
        if attempt:
            sleep(min(cap_s, backoff_s * 2 ** (attempt - 1)))
        status: int | None = None
        try:
            return send()
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
