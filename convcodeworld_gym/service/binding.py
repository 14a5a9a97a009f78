"""Runs in the episode server's process: requests that would name a session, refused (a session is its connection).

A session of this server is its WebSocket connection (``/ws``, or the ``/mcp`` WebSocket): OpenEnv makes it when the
connection opens, and closes it and frees its env when the connection ends, so it counts against ``--max-sessions``,
is closed when idle (:class:`~.guard.Guard`) and frees its env once. OpenEnv 0.10 also lets a request name a session by
its id: ``openenv/session/create`` and ``openenv/session/close`` (over HTTP ``POST /mcp``, or in a WebSocket's ``mcp``
message), ``params.session_id`` of an HTTP ``/mcp`` call, and ``/ws?session_id=...`` (a WebSocket attached to a
session made elsewhere). Through those a session made over HTTP held its slot for ever (nothing watches it for
idleness), and a WebSocket's own session could be closed from another connection while it played on (its slot freed,
``--max-sessions`` bypassed, its next env never released). None of them is offered: each is answered in OpenEnv's
protocol (JSON-RPC's ``-32601`` *method not found* and ``-32602`` *invalid params*; over ``/ws``, the error code
``SESSION_ERROR``), with what to do instead. ``tools/list`` and ``tools/call`` without a session id still reach
OpenEnv (``openenv validate`` reads ``tools/list``).

Holds:
    refuse_http_mcp     the JSON-RPC error answering an HTTP ``/mcp`` body that names a session, or None
    refuse_ws_message   the reply to a WebSocket message that manages sessions, or None
    refuse_attach       the error frame answering ``/ws?session_id=...``, or None
    METHOD_NOT_FOUND    JSON-RPC's code for a method not offered
    INVALID_PARAMS      JSON-RPC's code for a parameter not accepted
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs

__all__ = ["refuse_http_mcp", "refuse_ws_message", "refuse_attach", "METHOD_NOT_FOUND", "INVALID_PARAMS"]

METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
_SESSION_METHODS = "openenv/session/"
NO_SESSION_METHODS = ("this server makes one session per WebSocket connection and no other: open /ws (or the /mcp "
                      "WebSocket) to get one, and close that connection to end it; openenv/session/create and "
                      "openenv/session/close are not offered")
NO_SESSION_IDS = ("session ids are not accepted: a session is bound to the WebSocket connection that made it; send the "
                  "request over that connection (or leave session_id out for a call without a session)")


def _rpc_error(request: Mapping[str, Any], code: int, message: str) -> dict[str, Any]:
    """A JSON-RPC 2.0 error response to ``request`` (its id kept where it has one)."""
    request_id = request.get("id")
    if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
        request_id = None
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message, "data": None}}


def _refusal(request: Mapping[str, Any], *, session_id_refused: bool) -> dict[str, Any] | None:
    method, params = request.get("method"), request.get("params")
    if isinstance(method, str) and method.startswith(_SESSION_METHODS):
        return _rpc_error(request, METHOD_NOT_FOUND, NO_SESSION_METHODS)
    if session_id_refused and isinstance(params, Mapping) and "session_id" in params:
        return _rpc_error(request, INVALID_PARAMS, NO_SESSION_IDS)
    return None


def refuse_http_mcp(body: bytes) -> dict[str, Any] | None:
    """The JSON-RPC error that answers the HTTP ``POST /mcp`` request ``body``, or None to let OpenEnv answer it (it
    names no session; a body that is no JSON object is OpenEnv's to refuse).

    >>> refuse_http_mcp(b'{"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create", "params": {}}')["error"]["code"]
    -32601
    >>> refuse_http_mcp(b'{"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"session_id": "s"}}')["error"]["code"]
    -32602
    >>> refuse_http_mcp(b'{"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}}') is None
    True
    """
    try:
        request = json.loads(body)
    except ValueError:
        return None
    return _refusal(request, session_id_refused=True) if isinstance(request, dict) else None


def _may_name_a_session_method(text: str) -> bool:
    """False only where no string in the JSON ``text`` can read ``openenv/session/...``: letters and ``/`` can be
    written otherwise in JSON only as ``\\uXXXX`` or ``\\/``. Spares the parse of every step's message."""
    return _SESSION_METHODS in text or "\\u" in text or "\\/" in text


def refuse_ws_message(path: str, text: str) -> str | None:
    """The reply to the WebSocket message ``text`` on ``path`` when it calls a session method (a JSON-RPC request on
    the ``/mcp`` WebSocket; an ``mcp`` message on ``/ws``), or None to let OpenEnv have it. A session id in other
    calls is harmless there: OpenEnv uses the connection's own session.

    >>> refuse_ws_message("/ws", '{"type": "step", "data": {"reply": "x"}}') is None
    True
    >>> json.loads(refuse_ws_message("/ws", '{"type": "mcp", "data": {"jsonrpc": "2.0", "id": 4, '
    ...     '"method": "openenv\\\\/session\\\\/close", "params": {"session_id": "s"}}}'))["data"]["error"]["code"]
    -32601
    """
    if not _may_name_a_session_method(text):
        return None
    try:
        message = json.loads(text)
    except ValueError:
        return None
    if not isinstance(message, dict):
        return None
    if path == "/mcp":
        refusal = _refusal(message, session_id_refused=False)
        return None if refusal is None else json.dumps(refusal)
    if message.get("type") == "mcp" and isinstance(message.get("data"), dict):
        refusal = _refusal(message["data"], session_id_refused=False)
        return None if refusal is None else json.dumps({"type": "mcp", "data": refusal})
    return None


def refuse_attach(scope: Mapping[str, Any]) -> str | None:
    """The error frame that answers a ``/ws`` connection asking to join a session by id (``?session_id=...``), or
    None for one that makes its own.

    >>> json.loads(refuse_attach({"path": "/ws", "query_string": b"session_id=abc"}))["data"]["code"]
    'SESSION_ERROR'
    >>> refuse_attach({"path": "/ws", "query_string": b""}) is None
    True
    """
    if scope.get("path") != "/ws" or "session_id" not in parse_qs(scope.get("query_string", b"").decode("latin-1")):
        return None
    return json.dumps({"type": "error", "data": {"message": f"SessionError: {NO_SESSION_IDS}", "code": "SESSION_ERROR"}})
