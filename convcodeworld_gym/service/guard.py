"""What the episode server owes its callers at the wire, as ASGI middleware around OpenEnv's app.

:class:`Guard` sits between the ASGI server (uvicorn) and the app, and for every connection:

* **A dropped client is cleaned up at once.** The guard reads each WebSocket's messages as they come, so it sees its
  client go away (its process killed, its connection closed; a network gone silent is found by uvicorn's pings within
  ``2 x 20`` s) also while the session's reset or step is in flight, and tells the session: a call awaited through
  :func:`unless_client_gone` is then cancelled (the session's sandbox runs still queued are dropped, its simulated
  user's request is abandoned) and ends with :class:`ClientGone`, and OpenEnv's own clean-up closes the session and
  its env. (A run already inside the sandbox ends within its time limit and is torn down by the sandbox as every run
  is; its verdict goes nowhere.) Without the guard the call runs to its end first, holding its session and its place
  in the executor's queue.
* **Oversized requests are refused with a message.** A WebSocket message or HTTP body over ``max_request_bytes`` is
  answered with an error that names the limit and its flag (``REQUEST_TOO_LARGE``, HTTP 413) and never reaches the
  app; the session goes on. (Messages over uvicorn's own ``ws_max_size``, set well above, close the connection
  with code 1009.)
* **Idle sessions are closed.** A session that sends nothing for ``idle_timeout_s`` while the server waits for it
  gets an error saying so (``IDLE_TIMEOUT``), and is closed (code 1008); time spent in its resets and steps never
  counts.
* **No secret leaves.** Every WebSocket message and HTTP body sent is masked (:class:`~.secrets.Secrets`).

Errors it sends have OpenEnv's shape: ``{"type": "error", "data": {"message": "ServerLimitError: ...",
"code": ..., "limit": ...}}``.

Holds:
    Guard               the middleware
    error_frame         the text of an OpenEnv error message
    unless_client_gone  await a session's call, cancelled when its client goes away
    ClientGone          what such a call ends with
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, TypeVar

from .secrets import Secrets

__all__ = ["Guard", "error_frame", "unless_client_gone", "ClientGone"]

T = TypeVar("T")

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Message, Receive, Send], Awaitable[None]]

#: WebSocket close code of a session closed for idleness (policy violation).
IDLE_CLOSE_CODE = 1008
#: The guard's word to the app of one WebSocket connection: set when its client has gone away. The guard sets it in
#: the context the app's task starts with, so every call of that connection's session sees it.
_CLIENT_GONE: contextvars.ContextVar[asyncio.Event | None] = contextvars.ContextVar("ccw_client_gone", default=None)


class ClientGone(Exception):
    """The session's client went away while its call was in flight; the call was cancelled."""


async def unless_client_gone(awaitable: Awaitable[T]) -> T:
    """Await ``awaitable``; if the client of this WebSocket connection goes away first (the guard says so), cancel it
    and raise :class:`ClientGone`. Outside a guarded connection (HTTP, tests), simply await it."""
    gone = _CLIENT_GONE.get()
    if gone is None:
        return await awaitable
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


class Guard:
    """ASGI middleware: cancels the calls of dropped WebSocket clients, refuses oversized requests, closes idle
    sessions, masks secrets in everything sent (see the module).

    Args:
        app: the ASGI app (OpenEnv's FastAPI app).
        max_request_bytes: the largest WebSocket message or HTTP body let through.
        idle_timeout_s: seconds a WebSocket session may stay silent while the app waits for it; None: no limit.
        secrets: what to mask in everything sent.
    """

    def __init__(self, app: App, *, max_request_bytes: int, idle_timeout_s: float | None, secrets: Secrets) -> None:
        self.app = app
        self.max_request_bytes = max_request_bytes
        self.idle_timeout_s = idle_timeout_s
        self.secrets = secrets

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
                "bytes (convcodeworld serve --max-request-bytes); it was not read")

    # --------------------------------------------------------------------- HTTP

    async def _http(self, scope: Message, receive: Receive, send: Send) -> None:
        """Read the whole body first (requests here are small JSON): over the limit, 413 without calling the app."""
        body = bytearray()
        first: list[Message] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away before sending it all
                first.append(message)
                break
            body += message.get("body", b"")
            if len(body) > self.max_request_bytes:
                payload = json.dumps({"detail": self._too_large(len(body)) + " (or more)", "limit": "max_request_bytes"}).encode()
                await send({"type": "http.response.start", "status": 413,
                            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]})
                await send({"type": "http.response.body", "body": payload})
                return
            if not message.get("more_body", False):
                break
        first.insert(0, {"type": "http.request", "body": bytes(body), "more_body": False})

        async def replay() -> Message:
            return first.pop(0) if first else await receive()

        await self.app(scope, replay, send)

    # ---------------------------------------------------------------- WebSocket

    async def _websocket(self, scope: Message, receive: Receive, send: Send) -> None:
        inbox: asyncio.Queue[Message] = asyncio.Queue()
        gone = asyncio.Event()  # the client disconnected
        closed = [False]  # the guard closed the socket itself
        accepted = [False]

        async def guarded_send(message: Message) -> None:
            if closed[0]:
                return  # the guard closed it (idle): the app's own close comes too late
            if message["type"] == "websocket.accept":
                accepted[0] = True
            await send(message)

        async def pump() -> None:
            """Read the client's messages as they come: oversized ones answered here, a disconnect noticed at once."""
            while True:
                try:
                    message = await receive()
                except Exception:  # noqa: BLE001 - the connection is unusable: to the app, the client has gone
                    message = {"type": "websocket.disconnect", "code": 1011}
                if message["type"] == "websocket.receive":
                    size = _size(message)
                    if size > self.max_request_bytes:
                        await guarded_send({"type": "websocket.send", "text": error_frame(
                            self._too_large(size), "REQUEST_TOO_LARGE", limit="max_request_bytes")})
                        continue
                inbox.put_nowait(message)
                if message["type"] == "websocket.disconnect":
                    gone.set()
                    return

        async def guarded_receive() -> Message:
            """The client's next message, as the app waits for it (idle time counts only here)."""
            if self.idle_timeout_s is None or not accepted[0]:
                return await inbox.get()
            try:
                return await asyncio.wait_for(inbox.get(), self.idle_timeout_s)
            except asyncio.TimeoutError:
                with contextlib.suppress(Exception):
                    await guarded_send({"type": "websocket.send", "text": error_frame(
                        f"ServerLimitError: the session sent nothing for {self.idle_timeout_s:g} s, this server's "
                        "limit (convcodeworld serve --idle-timeout-s); it is closed", "IDLE_TIMEOUT", limit="idle_timeout_s")})
                    await guarded_send({"type": "websocket.close", "code": IDLE_CLOSE_CODE, "reason": "idle timeout"})
                closed[0] = True
                return {"type": "websocket.disconnect", "code": IDLE_CLOSE_CODE}

        pumping = asyncio.ensure_future(pump())
        token = _CLIENT_GONE.set(gone)  # the app's task starts with it: its session's calls see the client go
        try:
            app = asyncio.ensure_future(self.app(scope, guarded_receive, guarded_send))
        finally:
            _CLIENT_GONE.reset(token)
        try:
            await app
        finally:
            pumping.cancel()
            await asyncio.gather(pumping, return_exceptions=True)
            if not app.done():  # the guard itself was cancelled (the server is stopping)
                app.cancel()
                await asyncio.gather(app, return_exceptions=True)


def _size(message: Message) -> int:
    """Bytes of a WebSocket message (text as UTF-8)."""
    if message.get("text") is not None:
        text: str = message["text"]
        return len(text) if text.isascii() else len(text.encode("utf-8"))
    return len(message.get("bytes") or b"")
