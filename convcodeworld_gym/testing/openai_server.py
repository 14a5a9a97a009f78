"""A real HTTP server on 127.0.0.1 that speaks the OpenAI chat-completions API and scripts its replies.

Tests drive the real ``openai`` client against it: requests go over a real socket, and
the server can answer with text, HTTP errors (429, 500, ...), slow replies or malformed
bodies, in a scripted order or from a function of the request.

>>> import openai
>>> with ScriptedOpenAIServer(["hello", Reply(status=429), "again"]) as server:
...     client = openai.OpenAI(base_url=server.base_url, api_key="test-key", max_retries=0)
...     first = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
...     try:
...         client.chat.completions.create(model="m", messages=[])
...     except openai.RateLimitError:
...         pass
...     third = client.chat.completions.create(model="m", messages=[])
>>> first.choices[0].message.content, third.choices[0].message.content, len(server.requests)
('hello', 'again', 3)
>>> server.requests[0]["body"]["messages"][0]["content"]
'hi'

A reply can carry a reasoning model's thought apart from its content, as vLLM's reasoning parser returns it
(``Reply(content, reasoning="...")``: the message's ``reasoning_content``, or ``reasoning`` with
``reasoning_field="reasoning"``), and a content of None (a thought that ran out of tokens):

>>> with ScriptedOpenAIServer([Reply("x = 1", reasoning="Let me think.")]) as server:
...     client = openai.OpenAI(base_url=server.base_url, api_key="test-key", max_retries=0)
...     message = client.chat.completions.create(model="m", messages=[]).choices[0].message
>>> message.content, message.model_extra["reasoning_content"]
('x = 1', 'Let me think.')

Asked for ``logprobs`` it answers each choice's tokens with their logprobs, and asked for ``return_token_ids`` (vLLM's
extension) the token ids of each choice and of the prompt, from a fake tokenizer (:func:`fake_tokens`: 4 characters
a token, ids from a hash), so that clients of servers that return sampled tokens can be tested."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Union

__all__ = ["Reply", "ScriptedOpenAIServer", "Script", "fake_tokens", "fake_token_id", "fake_logprob"]


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    Attributes:
        content: the assistant message (for every choice when ``n > 1`` unless ``choices`` is set); None sends a
            null content (a reasoning model whose thought ran out of tokens, as vLLM returns it).
        choices: distinct contents for ``n`` choices.
        status: HTTP status; non-200 statuses send an OpenAI-style error body.
        delay_s: seconds to wait before answering (to provoke client timeouts).
        raw_body: bytes sent as-is with status ``status`` (malformed bodies).
        reasoning: a reasoning model's thought, sent apart from the content in every choice's message, under
            ``reasoning_field`` (vLLM's reasoning parser: ``reasoning_content``; some servers: ``reasoning``); None:
            no such field.
    """

    content: str | None = ""
    choices: tuple[str, ...] | None = None
    status: int = 200
    delay_s: float = 0.0
    raw_body: bytes | None = None
    reasoning: str | None = None
    reasoning_field: str = "reasoning_content"


Script = Union[Iterable[Union[str, Reply]], Callable[[dict[str, Any]], Union[str, Reply]]]


class _Server(ThreadingHTTPServer):
    """The standard library's threading server with a listen backlog for many clients at once: its default of 5
    refuses (resets) connections when 16 or more clients connect together, as a rollout driver's episodes in flight
    do."""

    request_queue_size = 1024
    daemon_threads = True


class ScriptedOpenAIServer:
    """An OpenAI-compatible server on ``127.0.0.1`` (a free port) whose answers are scripted. It serves hundreds of
    clients at once (a thread per connection, a listen backlog of 1024).

    Args:
        script: a sequence of replies consumed one per request, or a function of the
            request body returning the reply.
        fallback: the reply once a sequence is used up (default: HTTP 500 "script exhausted").

    Attributes:
        requests: every request received: ``{"path", "headers" (lower-case names), "body"}`` in arrival order.
    """

    def __init__(self, script: Script = (), fallback: str | Reply | None = None) -> None:
        self._fn: Callable[[dict[str, Any]], str | Reply] | None = script if callable(script) else None
        self._queue: list[str | Reply] = [] if callable(script) else list(script)
        self._fallback = fallback
        self._lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------ lifecycle
    def start(self) -> ScriptedOpenAIServer:
        handler = _make_handler(self)
        self._httpd = _Server(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="scripted-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> ScriptedOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``, for ``openai.OpenAI(base_url=...)``."""
        if self._httpd is None:
            raise RuntimeError("server not started: use it as a context manager or call start()")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        """The bodies of chat-completion requests received so far."""
        return [r["body"] for r in self.requests if r["path"].endswith("/chat/completions")]

    def add(self, *replies: str | Reply) -> None:
        """Append replies to the script."""
        with self._lock:
            self._queue.extend(replies)

    # ------------------------------------------------------------- answers
    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self._fn is not None:
                reply = self._fn(body)
            elif self._queue:
                reply = self._queue.pop(0)
            elif self._fallback is not None:
                reply = self._fallback
            else:
                reply = Reply(status=500, content="script exhausted")
        return Reply(content=reply) if isinstance(reply, str) else reply


def fake_tokens(text: str) -> list[str]:
    """The scripted server's tokenization: 4 characters a token.

    >>> fake_tokens("def f():")
    ['def ', 'f():']
    """
    return [text[i:i + 4] for i in range(0, len(text), 4)]


def fake_token_id(token: str) -> int:
    """The id of a fake token (a hash of its text, under 2**24)."""
    return int.from_bytes(hashlib.blake2b(token.encode("utf-8", "surrogatepass"), digest_size=3).digest(), "big")


def fake_logprob(token: str) -> float:
    """The logprob the scripted server reports for a fake token (in (-1, 0])."""
    return -(fake_token_id(token) % 1000) / 1000


def _choice(index: int, content: str | None, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reply.reasoning is not None:
        message[reply.reasoning_field] = reply.reasoning
    choice: dict[str, Any] = {"index": index, "message": message, "finish_reason": "stop", "logprobs": None}
    tokens = fake_tokens((reply.reasoning or "") + (content or ""))
    if body.get("logprobs"):
        choice["logprobs"] = {"content": [{"token": t, "logprob": fake_logprob(t), "bytes": list(t.encode()), "top_logprobs": []}
                                          for t in tokens]}
    if body.get("return_token_ids"):
        choice["token_ids"] = [fake_token_id(t) for t in tokens]
    return choice


def _completion_body(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    n = int(body.get("n") or 1)
    contents = list(reply.choices) if reply.choices is not None else [reply.content] * n
    prompt_chars = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
    completion_tokens = sum(max(1, len((reply.reasoning or "") + (c or "")) // 4) for c in contents)
    prompt_tokens = max(1, prompt_chars // 4)
    answer: dict[str, Any] = {
        "id": f"chatcmpl-scripted-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "scripted"),
        "choices": [_choice(i, c, body, reply) for i, c in enumerate(contents)],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens},
    }
    if body.get("return_token_ids"):  # vLLM: the prompt's ids at the top level
        prompt = "".join(str(m.get("content", "")) for m in body.get("messages", []))
        answer["prompt_token_ids"] = [fake_token_id(t) for t in fake_tokens(prompt)]
    return answer


def _error_body(status: int, message: str) -> dict[str, Any]:
    kind = {429: "rate_limit_exceeded", 401: "invalid_api_key", 400: "invalid_request_error"}.get(status, "server_error")
    return {"error": {"message": message or f"scripted HTTP {status}", "type": kind, "param": None, "code": kind}}


def _make_handler(server: ScriptedOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            pass

        def _send(self, status: int, payload: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:  # noqa: N802
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, json.dumps({"object": "list", "data": [{"id": "scripted", "object": "model"}]}).encode())
            else:
                self._send(404, json.dumps(_error_body(404, f"no route {self.path}")).encode())

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {"_unparsable": raw.decode("utf-8", "replace")}
            with server._lock:
                server.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, json.dumps(_error_body(404, f"no route {self.path}")).encode())
                return
            reply = server._next_reply(body)
            if reply.delay_s:
                time.sleep(reply.delay_s)
            try:
                if reply.raw_body is not None:
                    self._send(reply.status, reply.raw_body)
                elif reply.status != 200:
                    self._send(reply.status, json.dumps(_error_body(reply.status, reply.content)).encode())
                else:
                    self._send(200, json.dumps(_completion_body(body, reply)).encode())
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout): nothing to answer

    return Handler
