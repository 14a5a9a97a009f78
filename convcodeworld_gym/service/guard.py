"""Runs in the episode server's process: what the server owes its callers at the wire, as ASGI middleware around
OpenEnv's app.

:class:`Guard` sits between the ASGI server (uvicorn) and the app, and for every connection:

* **A dropped client is cleaned up at once.** The guard reads each WebSocket's messages as they come, so it sees its
  client go away (its process killed, its connection closed; a network gone silent is found by uvicorn's pings within
  ``2 x 20`` s) also while the session's reset or step is in flight, and tells the session: a call awaited through
  :func:`unless_client_gone` is then cancelled (the session's sandbox run is killed, or dropped while still queued;
  its simulated user's request is abandoned) and ends with :class:`ClientGone`, and OpenEnv's own clean-up closes the
  session and its env.
* **A session is its connection** (:mod:`.binding`): requests that would make, close or join a session by id are
  refused, so every session counts against ``--max-sessions``, is closed when idle and frees its env once.
* **Bounded buffering.** A WebSocket client may have at most ``max_waiting_messages`` messages (and
  ``2 x max_request_bytes``) waiting while its session is busy (a client of OpenEnv's protocol sends one and waits for
  its answer); one that sends more is told so (``TOO_MANY_MESSAGES``) and closed (1008), its call in flight cancelled.
  HTTP bodies held at once, all requests together, stay under ``4 x max_request_bytes`` (past it: 503).
* **Oversized requests are refused with a message.** A WebSocket message or HTTP body over ``max_request_bytes`` is
  answered with an error that names the limit and its flag (``REQUEST_TOO_LARGE``, HTTP 413) and never reaches the
  app; the session goes on. (Messages over uvicorn's own ``ws_max_size``, set above it, close the connection
  with code 1009.)
* **Slow requests are dropped.** An HTTP body must arrive within ``request_timeout_s`` of its request's start (else
  408 and the connection is closed); headers are timed by :func:`~.protocol.timed_h11`.
* **Idle sessions are closed.** A session that sends nothing for ``idle_timeout_s`` while the server waits for it
  gets an error saying so (``IDLE_TIMEOUT``), and is closed (code 1008); time spent in its resets and steps never
  counts.
* **Error codes.** A reset or step refused for the caller's mistake is sent with the code the session chose
  (:func:`report_error_code`: OpenEnv's ``VALIDATION_ERROR``, ...) in place of the ``EXECUTION_ERROR`` OpenEnv gives
  every error of an env.
* **No secret leaves.** Every WebSocket message and HTTP body sent is masked (:class:`~.secrets.Secrets`).

Errors it sends have OpenEnv's shape: ``{"type": "error", "data": {"message": "ServerLimitError: ...",
"code": ..., "limit": ...}}``.

Memory: a WebSocket connection holds at most ``max_waiting_messages`` messages and ``2 x max_request_bytes`` in the
guard, plus what uvicorn holds (one message handed over, one frame arriving: ``2 x ws_max_size``); HTTP bodies, at most
``4 x max_request_bytes`` for all requests together.

Holds:
    Guard               the middleware
    error_frame         the text of an OpenEnv error message
    unless_client_gone  await a session's call, cancelled when its client goes away
    report_error_code   the session's word on the code of the error it is about to raise
    ClientGone          what such a call ends with
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .binding import refuse_attach, refuse_http_mcp, refuse_ws_message
from .secrets import Secrets

__all__ = ["Guard", "error_frame", "unless_client_gone", "report_error_code", "ClientGone"]

T = TypeVar("T")

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Message, Receive, Send], Awaitable[None]]

#: WebSocket close code of a session closed for idleness or for sending too much (policy violation).
POLICY_CLOSE_CODE = 1008
IDLE_CLOSE_CODE = POLICY_CLOSE_CODE
#: How many messages a WebSocket client may have waiting while its session is busy, by default.
MAX_WAITING_MESSAGES = 8
#: HTTP bodies held at once, all requests together, as a multiple of ``max_request_bytes``.
HTTP_BODY_BUDGET_FACTOR = 4
_ERROR_PREFIX = '{"type":"error"'


@dataclass
class _Connection:
    """What the guard and the session of one WebSocket connection tell each other: the client went away (``gone``);
    the code of the error the session raises next (``error_code``)."""

    gone: asyncio.Event = field(default_factory=asyncio.Event)
    error_code: str | None = None


#: The guard's word to the app of one WebSocket connection. The guard sets it in the context the app's task starts
#: with, so every call of that connection's session sees it.
_CONNECTION: contextvars.ContextVar[_Connection | None] = contextvars.ContextVar("ccw_connection", default=None)


class ClientGone(Exception):
    """The session's client went away while its call was in flight; the call was cancelled."""


async def unless_client_gone(awaitable: Awaitable[T]) -> T:
    """Await ``awaitable``; if the client of this WebSocket connection goes away first (the guard says so), cancel it
    and raise :class:`ClientGone`. Outside a guarded connection (HTTP, tests), simply await it."""
    connection = _CONNECTION.get()
    if connection is None:
        return await awaitable
    gone = connection.gone
    work = asyncio.ensure_future(awaitable)
    if gone.is_set():
        work.cancel()
    else:
        watch = asyncio.ensure_future(gone.wait())
        try:
            await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
            if not work.done():
                work.cancel()
    try:
        return await work
    except asyncio.CancelledError:
        if gone.is_set() and not _cancelling():
            raise ClientGone("the client went away while the call was in flight; it was cancelled") from None
        raise


def report_error_code(code: str) -> None:
    """Have the guard send the error the session raises next (OpenEnv sends it as ``EXECUTION_ERROR``) with ``code``
    instead. Outside a guarded WebSocket connection (HTTP, tests) it does nothing."""
    connection = _CONNECTION.get()
    if connection is not None:
        connection.error_code = code


def _cancelling() -> bool:
    """Is the current task itself being cancelled (so a CancelledError is its own, not the work's)?"""
    task = asyncio.current_task()
    return bool(task is not None and getattr(task, "cancelling", lambda: 0)())  # Task.cancelling: Python >= 3.11


def error_frame(message: str, code: str, **extra: Any) -> str:
    """The text of an OpenEnv error message (what ``EnvClient`` raises as ``Server error: ...``).

    >>> error_frame("ServerLimitError: too big", "REQUEST_TOO_LARGE", limit="max_request_bytes")
    '{"type": "error", "data": {"message": "ServerLimitError: too big", "code": "REQUEST_TOO_LARGE", "limit": "max_request_bytes"}}'
    """
    return json.dumps({"type": "error", "data": {"message": message, "code": code, **extra}})


def _with_code(text: str, code: str) -> str:
    """OpenEnv's error frame ``text`` with its ``EXECUTION_ERROR`` code replaced by ``code`` (else as it is).

    >>> _with_code('{"type":"error","data":{"message":"ValueError: x","code":"EXECUTION_ERROR"}}', "VALIDATION_ERROR")
    '{"type": "error", "data": {"message": "ValueError: x", "code": "VALIDATION_ERROR"}}'
    """
    try:
        frame = json.loads(text)
    except ValueError:
        return text
    data = frame.get("data") if isinstance(frame, dict) else None
    if not isinstance(data, dict) or data.get("code") != "EXECUTION_ERROR":
        return text
    data["code"] = code
    return json.dumps(frame)


def _json_response(status: int, payload: dict[str, Any]) -> tuple[Message, Message]:
    body = json.dumps(payload).encode()
    return ({"type": "http.response.start", "status": status,
             "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]},
            {"type": "http.response.body", "body": body})


class Guard:
    """ASGI middleware: cancels the calls of dropped WebSocket clients, binds sessions to their connections, bounds
    what a connection may have waiting, refuses oversized and slow requests, closes idle sessions, gives caller
    errors their codes, masks secrets in everything sent (see the module).

    Args:
        app: the ASGI app (OpenEnv's FastAPI app).
        max_request_bytes: the largest WebSocket message or HTTP body let through.
        idle_timeout_s: seconds a WebSocket session may stay silent while the app waits for it; None: no limit.
        secrets: what to mask in everything sent.
        request_timeout_s: seconds an HTTP request's body may take to arrive; None: no limit.
        max_waiting_messages: messages a WebSocket client may have waiting while its session is busy.
    """

    def __init__(self, app: App, *, max_request_bytes: int, idle_timeout_s: float | None, secrets: Secrets,
                 request_timeout_s: float | None = None, max_waiting_messages: int = MAX_WAITING_MESSAGES) -> None:
        self.app = app
        self.max_request_bytes = max_request_bytes
        self.idle_timeout_s = idle_timeout_s
        self.request_timeout_s = request_timeout_s
        self.secrets = secrets
        self.max_waiting_messages = max_waiting_messages
        self.max_waiting_bytes = 2 * max_request_bytes
        self.http_body_budget = HTTP_BODY_BUDGET_FACTOR * max_request_bytes
        self._http_body_bytes = 0  # held now by all HTTP requests (the event loop's thread only)

    async def __call__(self, scope: Message, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await self._websocket(scope, receive, self._masked(send))
        elif scope["type"] == "http":
            await self._http(scope, receive, self._masked(send))
        else:  # lifespan
            await self.app(scope, receive, send)

    # ------------------------------------------------------------------ sending

    def _masked(self, send: Send) -> Send:
        if not self.secrets.values:
            return send

        async def masked(message: Message) -> None:
            kind = message["type"]
            if kind == "websocket.send" and message.get("text") is not None:
                message = {**message, "text": self.secrets.mask_text(message["text"])}
            elif kind == "websocket.send" and message.get("bytes"):
                message = {**message, "bytes": self.secrets.mask_bytes(message["bytes"])}
            elif kind == "http.response.body" and message.get("body"):
                message = {**message, "body": self.secrets.mask_bytes(message["body"])}  # same length: Content-Length holds
            await send(message)

        return masked

    def _too_large(self, size: int) -> str:
        return (f"ServerLimitError: the request has {size} bytes, over this server's limit of {self.max_request_bytes} "
                "bytes (convcodeworld serve --max-request-bytes); it was not read: send a smaller one")

    # --------------------------------------------------------------------- HTTP

    async def _http(self, scope: Message, receive: Receive, send: Send) -> None:
        """Read the whole body first (requests here are small JSON), within the request timeout and the body budget;
        over the size limit, 413 without calling the app. ``POST /mcp`` naming a session is answered here."""
        body = bytearray()
        first: list[Message] = []
        deadline = None if self.request_timeout_s is None else time.monotonic() + self.request_timeout_s
        try:
            while True:
                try:
                    message = await self._receive_by(receive, deadline)
                except asyncio.TimeoutError:
                    await self._refuse_http(send, 408, f"ServerLimitError: the request's body did not arrive within "
                                            f"{self.request_timeout_s:g} s (convcodeworld serve --request-timeout-s); "
                                            "send it at once", "request_timeout_s", close=True)
                    return
                if message["type"] != "http.request":  # the client went away before sending it all
                    first.append(message)
                    break
                chunk = message.get("body", b"")
                body += chunk
                self._http_body_bytes += len(chunk)
                if len(body) > self.max_request_bytes:
                    await self._refuse_http(send, 413, self._too_large(len(body)) + " (or more)", "max_request_bytes")
                    return
                if self._http_body_bytes > self.http_body_budget:
                    await self._refuse_http(send, 503, "ServerLimitError: the server holds as many request bodies as it "
                                            "takes at once; send the request again in a moment", "http_body_budget")
                    return
                if not message.get("more_body", False):
                    break
            if scope["method"] == "POST" and scope["path"] == "/mcp" and not first:
                refusal = refuse_http_mcp(bytes(body))
                if refusal is not None:
                    for part in _json_response(200, refusal):
                        await send(part)
                    return
            first.insert(0, {"type": "http.request", "body": bytes(body), "more_body": False})

            async def replay() -> Message:
                return first.pop(0) if first else await receive()

            await self.app(scope, replay, send)
        finally:
            self._http_body_bytes -= len(body)

    @staticmethod
    async def _receive_by(receive: Receive, deadline: float | None) -> Message:
        if deadline is None:
            return await receive()
        return await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))

    @staticmethod
    async def _refuse_http(send: Send, status: int, detail: str, limit: str, close: bool = False) -> None:
        start, body = _json_response(status, {"detail": detail, "limit": limit, "kind": "ServerLimitError"})
        if close:
            start["headers"].append((b"connection", b"close"))
        await send(start)
        await send(body)

    # ---------------------------------------------------------------- WebSocket

    async def _websocket(self, scope: Message, receive: Receive, send: Send) -> None:
        refused = refuse_attach(scope)
        if refused is not None:
            await self._refuse_websocket(receive, send, refused)
            return
        inbox: asyncio.Queue[tuple[Message, int]] = asyncio.Queue()  # messages and their sizes
        connection = _Connection()
        gone = connection.gone  # the client disconnected, or the guard cut it off
        closed = [False]  # the guard closed the socket itself
        accepted = [False]
        waiting = [0, 0]  # messages and bytes in the inbox
        path = scope.get("path", "")

        async def guarded_send(message: Message) -> None:
            if closed[0]:
                return  # the guard closed it (idle, too many messages): the app's own close comes too late
            if message["type"] == "websocket.accept":
                accepted[0] = True
            elif connection.error_code is not None and message["type"] == "websocket.send" \
                    and (message.get("text") or "").startswith(_ERROR_PREFIX):
                message = {**message, "text": _with_code(message["text"], connection.error_code)}
                connection.error_code = None
            await send(message)

        async def close_with(text: str) -> None:
            """Send ``text`` and close the connection (policy violation); to the app, the client has gone."""
            with contextlib.suppress(Exception):
                await guarded_send({"type": "websocket.send", "text": text})
                await guarded_send({"type": "websocket.close", "code": POLICY_CLOSE_CODE})
            closed[0] = True
            inbox.put_nowait(({"type": "websocket.disconnect", "code": POLICY_CLOSE_CODE}, 0))
            gone.set()

        async def pump() -> None:
            """Read the client's messages as they come: oversized ones answered here, session methods refused, a
            disconnect noticed at once, a client with too many messages waiting cut off."""
            while True:
                try:
                    message = await receive()
                except Exception:  # noqa: BLE001 - the connection is unusable: to the app, the client has gone
                    message = {"type": "websocket.disconnect", "code": 1011}
                size = 0
                if message["type"] == "websocket.receive":
                    size = _size(message)
                    if size > self.max_request_bytes:
                        await guarded_send({"type": "websocket.send", "text": error_frame(
                            self._too_large(size), "REQUEST_TOO_LARGE", limit="max_request_bytes")})
                        continue
                    text = message.get("text")
                    reply = refuse_ws_message(path, text) if text is not None else None
                    if reply is not None:
                        await guarded_send({"type": "websocket.send", "text": reply})
                        continue
                    if waiting[0] >= self.max_waiting_messages or waiting[1] + size > self.max_waiting_bytes:
                        await close_with(error_frame(
                            f"ServerLimitError: the client sent a message while {waiting[0]} of its messages "
                            f"({waiting[1]} bytes) were still waiting for its session; this server holds at most "
                            f"{self.max_waiting_messages} ({self.max_waiting_bytes} bytes) per connection. Wait for "
                            "each answer before sending the next request; the connection is closed",
                            "TOO_MANY_MESSAGES", limit="max_waiting_messages"))
                        return
                    waiting[0] += 1
                    waiting[1] += size
                inbox.put_nowait((message, size))
                if message["type"] == "websocket.disconnect":
                    gone.set()
                    return

        async def next_message() -> Message:
            message, size = await inbox.get()
            if message["type"] == "websocket.receive":
                waiting[0] -= 1
                waiting[1] -= size
            return message

        async def guarded_receive() -> Message:
            """The client's next message, as the app waits for it (idle time counts only here); once the guard has
            closed the connection, its disconnect (messages still waiting are dropped)."""
            if closed[0]:
                return {"type": "websocket.disconnect", "code": POLICY_CLOSE_CODE}
            if self.idle_timeout_s is None or not accepted[0]:
                return await next_message()
            try:
                return await asyncio.wait_for(next_message(), self.idle_timeout_s)
            except asyncio.TimeoutError:
                await close_with(error_frame(
                    f"ServerLimitError: the session sent nothing for {self.idle_timeout_s:g} s, this server's "
                    "limit (convcodeworld serve --idle-timeout-s); it is closed: open a new one to play on",
                    "IDLE_TIMEOUT", limit="idle_timeout_s"))
                return {"type": "websocket.disconnect", "code": IDLE_CLOSE_CODE}

        pumping = asyncio.ensure_future(pump())
        token = _CONNECTION.set(connection)  # the app's task starts with it: its session's calls see the client go
        try:
            app = asyncio.ensure_future(self.app(scope, guarded_receive, guarded_send))
        finally:
            _CONNECTION.reset(token)
        try:
            await app
        finally:
            pumping.cancel()
            await asyncio.gather(pumping, return_exceptions=True)
            if not app.done():  # the guard itself was cancelled (the server is stopping)
                app.cancel()
                await asyncio.gather(app, return_exceptions=True)

    @staticmethod
    async def _refuse_websocket(receive: Receive, send: Send, text: str) -> None:
        """Accept the connection, send ``text`` and close it (the app never sees it)."""
        message = await receive()
        if message["type"] != "websocket.connect":
            return
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "text": text})
        await send({"type": "websocket.close", "code": POLICY_CLOSE_CODE})


def _size(message: Message) -> int:
    """Bytes of a WebSocket message (text as UTF-8)."""
    if message.get("text") is not None:
        text: str = message["text"]
        return len(text) if text.isascii() else len(text.encode("utf-8"))
    return len(message.get("bytes") or b"")
