"""ConvCodeWorld as a service: an OpenEnv-compatible episode server, its typed client, and a gym env over it.

``convcodeworld serve [ID]`` serves the live ids over OpenEnv's protocol (OpenEnv 0.10): ``/ws`` holds one session
per WebSocket, in which ``reset`` (its arguments choose the id and the task) and ``step`` (the model's reply) play
episodes; ``/reset``, ``/step``, ``/state``, ``/schema``, ``/metadata``, ``/health`` and ``/mcp`` are OpenEnv's HTTP
routes (``/reset`` and ``/step`` are stateless there: a fresh env per request). Every session's env is awaited
(``areset`` / ``astep``) on one event loop and all of them share one sandbox executor, so no session waits on
another. See docs/scale.md, *Episodes over the network*.

Everything here but :mod:`.backend`, :mod:`.guard`, :mod:`.binding`, :mod:`.public`, :mod:`.protocol` (which imports
uvicorn when called), :mod:`.secrets` and :mod:`.command` needs the ``openenv``
extra (``pip install 'convcodeworld-gym[openenv]'``); the core install never imports it. A missing extra is a
:class:`~convcodeworld_gym.errors.DependencyNotInstalled` that says so (:func:`require_openenv`), also for the names
below, which load their module on first use.

Holds:
    require_openenv        import check: the installed openenv, or DependencyNotInstalled with the install line
    OPENENV_INSTALL        the install command of the extra
    ConvCodeWorldClient    the typed client (:mod:`.client`)
    RemoteEnv              a Gymnasium env whose episodes play on a server (:mod:`.remote`)
    CodeAction             the action: the model's reply or code (:mod:`.models`)
    FeedbackObservation    the observation: the feedback fields, turn, done, reward (:mod:`.models`)
    EpisodeState           the state: env id, task id, turn (:mod:`.models`)
    Backend                what every session of a server shares: the executor, the task set, the limits (:mod:`.backend`)
    ServerLimits           sessions, request size, episode time, idle time, request time (:mod:`.backend`)
    build_app              the server's ASGI app (:mod:`.app`)
    serve                  run the server until it is stopped (:mod:`.app`)
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from ..errors import DependencyNotInstalled

__all__ = [
    "require_openenv",
    "OPENENV_INSTALL",
    "ConvCodeWorldClient",
    "RemoteEnv",
    "CodeAction",
    "FeedbackObservation",
    "EpisodeState",
    "Backend",
    "ServerLimits",
    "build_app",
    "serve",
]

#: How to install what the server and its client need (the project's ``openenv`` extra).
OPENENV_INSTALL = "pip install 'convcodeworld-gym[openenv]'"

_LAZY = {
    "ConvCodeWorldClient": "client",
    "RemoteEnv": "remote",
    "CodeAction": "models",
    "FeedbackObservation": "models",
    "EpisodeState": "models",
    "Backend": "backend",
    "ServerLimits": "backend",
    "build_app": "app",
    "serve": "app",
}


def require_openenv() -> ModuleType:
    """The installed ``openenv`` package, or :class:`~convcodeworld_gym.errors.DependencyNotInstalled` naming the
    install command. The modules of this package that need OpenEnv call it before they import from it."""
    try:
        return importlib.import_module("openenv")
    except ImportError as exc:
        raise DependencyNotInstalled(
            f"the episode server and its client need OpenEnv, which is not installed ({exc}): {OPENENV_INSTALL} "
            "(the core install leaves it out: it pulls in FastAPI, uvicorn and gradio)"
        ) from exc


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    globals()[name] = value
    return value
