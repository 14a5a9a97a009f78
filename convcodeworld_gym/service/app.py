"""The episode server: OpenEnv's routes over :class:`~.environment.ConvCodeWorldService`, behind the :class:`~.guard.Guard`.

:func:`build_app` gives the ASGI app: OpenEnv 0.10's ``HTTPEnvServer`` routes (``/ws`` sessions, ``/reset``,
``/step``, ``/state``, ``/schema``, ``/metadata``, ``/health``, ``/mcp``) in simulation mode, with at most
``max_sessions`` concurrent sessions (OpenEnv's ``max_concurrent_envs``; a session is a WebSocket connection, see
:mod:`.binding`); ``GET /sessions`` (how many sessions and episodes are open: what a caller checks after a client was
killed); ``GET /episodes`` (what the episodes played add up to, per id: the reward's mean, the canary pass rate beside
it, the share with a regression; :mod:`.tally`); an error of a reset or step over HTTP as JSON ``{"detail": "<kind>: <message>", "kind", "code"}`` with 400,
503 or 500; all of it behind the guard (dropped clients, sessions bound to their connections, buffering, request
size and time, idle sessions, error codes, secrets). :func:`serve` runs it with uvicorn on a socket of its own, on
127.0.0.1 unless told otherwise, with a time limit on request headers (:mod:`.protocol`), and on SIGTERM or SIGINT
shuts down gracefully (sessions closed, their runs killed), closes the backend (the executor's workers, their
cgroups and files) and only then lets the signal end the process.

Holds:
    build_app   the guarded ASGI app of a backend
    serve       run the server until SIGINT / SIGTERM, then close the backend; returns the signal
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import json
import logging
import socket
import sys
from collections.abc import Callable, Iterator
from typing import Any

from . import require_openenv

require_openenv()

import uvicorn  # noqa: E402
from fastapi import FastAPI, Request  # noqa: E402
from fastapi.responses import JSONResponse  # noqa: E402
from openenv.core.env_server.http_server import HTTPEnvServer  # noqa: E402

from .backend import Backend  # noqa: E402
from .environment import ConvCodeWorldService, Refused  # noqa: E402
from .guard import Guard  # noqa: E402
from .models import CodeAction, EpisodeState, FeedbackObservation  # noqa: E402
from .protocol import timed_h11  # noqa: E402
from .secrets import Secrets  # noqa: E402

__all__ = ["build_app", "serve"]

#: The OpenEnv HTTP API version the routes follow (``openenv validate``'s profile ``openenv-http/1.x``, as OpenEnv's
#: own apps declare it); the package's version is in ``/metadata``.
OPENENV_HTTP_VERSION = "1.0.0"
#: uvicorn's own WebSocket message limit, as a multiple of the server's: messages between the two get the guard's
#: clear refusal; larger ones close the connection (1009).
_WS_MAX_SIZE_FACTOR = 4


def build_app(backend: Backend, secrets: Secrets | None = None) -> Guard:
    """The server's ASGI app for ``backend``: OpenEnv's routes, ``/sessions``, behind the guard.

    Args:
        backend: what every session shares.
        secrets: masked in everything sent; default the simulated user's key from the environment
            (:meth:`~.secrets.Secrets.from_environment`).
    """
    secrets = Secrets.from_environment() if secrets is None else secrets
    server = HTTPEnvServer(
        functools.partial(ConvCodeWorldService, backend),
        CodeAction,
        FeedbackObservation,
        max_concurrent_envs=backend.limits.max_sessions,
        env_name="convcodeworld",
        state_cls=EpisodeState,
    )
    app = FastAPI(
        title="ConvCodeWorld episode server (OpenEnv)",
        version=OPENENV_HTTP_VERSION,
        description="ConvCodeWorld's live ids over OpenEnv's protocol: play episodes over the /ws WebSocket.",
    )
    server.register_routes(app, mode="simulation")

    @app.get("/sessions", tags=["Health"], summary="Open sessions and episodes")
    async def sessions() -> dict[str, int]:
        """OpenEnv's open sessions (``/ws`` connections), the server's limit, and the envs open on the backend."""
        return {"active_sessions": server.active_sessions, "max_sessions": server.max_concurrent_envs,
                "live_episodes": backend.live_episodes}

    @app.get("/episodes", tags=["Health"], summary="Episodes played: reward, canary pass rate, regressions, per id")
    async def episodes() -> dict[str, Any]:
        """The backend's :class:`~.tally.EpisodeTally`: per id and over all, the episodes that ended with a verdict,
        their mean reward, the share with a regression, the episodes lost, and the canary twins' pass rate (never
        part of the reward)."""
        return backend.tally.to_json()

    @app.exception_handler(Refused)
    async def refused(request: Request, exc: Refused) -> JSONResponse:
        return JSONResponse({"detail": str(exc), "kind": exc.kind, "code": exc.code}, status_code=exc.status)

    return Guard(app, max_request_bytes=backend.limits.max_request_bytes, idle_timeout_s=backend.limits.idle_timeout_s,
                 request_timeout_s=backend.limits.request_timeout_s, secrets=secrets)


class _Server(uvicorn.Server):
    """uvicorn's server, except that the SIGINT or SIGTERM it shuts down on is not raised again at the end of
    :meth:`run` (uvicorn does, and the process then dies of it before anything after ``run`` happens: the backend's
    close never ran, and the executor's cgroups and workers were left behind). ``stopped_by`` holds it instead."""

    stopped_by: int | None = None

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        with super().capture_signals():
            try:
                yield
            finally:
                if self._captured_signals:
                    self.stopped_by = self._captured_signals[0]
                self._captured_signals.clear()


def _loopback(host: str) -> bool:
    """
    >>> _loopback("127.0.0.1"), _loopback("localhost"), _loopback("0.0.0.0"), _loopback("::1")
    (True, True, False, True)
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(backend: Backend, *, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info",
          announce: Callable[[str], Any] = print) -> int | None:
    """Serve ``backend`` until SIGINT or SIGTERM, then close it; returns that signal (None: the server stopped
    otherwise). The caller lets the signal end the process then, as uvicorn would have (:func:`~.command.cmd_serve`).

    On the signal the server stops taking connections, closes every session (a step in flight is cancelled and its
    sandbox run killed), waits up to 5 s for the connections' tasks, and closes the backend (its executor's workers,
    their cgroups and files), also when the shutdown failed.

    Logs to stderr at ``log_level`` (uvicorn's requests, and each refused reset or step: the caller's errors at INFO,
    the server's at WARNING). Binds ``host:port`` (port 0: a free port), chooses the task set (the first env), masks the simulated user's key in
    every log record of the process, then calls ``announce`` with the base URL (``http://HOST:PORT``; by default it
    is printed as the first line of stdout, for scripts) and serves. A host other than a loopback address is
    reachable from the network, and the server has no authentication: anyone who reaches it runs programs in its
    sandbox, so bind one only behind a firewall or a proxy that authenticates (a warning says so).
    """
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    secrets = Secrets.from_environment()
    secrets.guard_logs()
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
        bound = sock.getsockname()[1]
        if not _loopback(host):
            print(f"WARNING: serving on {host}:{bound}, reachable from the network; the server has no authentication "
                  "(anyone who reaches it runs programs in its sandbox): keep it behind a firewall or an authenticating "
                  "proxy", file=sys.stderr)
        backend.release(backend.make_env())  # choose the task set now, not in the first session
        app = build_app(backend, secrets)
        config = uvicorn.Config(app, log_level=log_level, ws_max_size=_WS_MAX_SIZE_FACTOR * backend.limits.max_request_bytes,
                                http=timed_h11(backend.limits.request_timeout_s), ws="websockets-sansio",
                                lifespan="on", timeout_graceful_shutdown=5)
        shown = f"[{host}]" if family == socket.AF_INET6 else host
        announce(f"http://{shown}:{bound}")
        sys.stdout.flush()
        server = _Server(config)
        server.run(sockets=[sock])
        logging.getLogger(__name__).info("episodes played: %s", json.dumps(backend.tally.to_json()["all"]))
        return server.stopped_by
    finally:
        sock.close()
        backend.close()
        logging.getLogger(__name__).info("the backend is closed (executor, workers, cgroups)")
