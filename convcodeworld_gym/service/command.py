"""``convcodeworld serve``: its arguments, and the backend and server they make. OpenEnv is imported only when the
server starts, so the command line (and ``--help``) works without the extra and says how to install it.

Holds:
    add_serve   the ``serve`` subcommand's parser
    cmd_serve   run it: build the executor and the backend, serve until stopped
"""

from __future__ import annotations

import argparse
import signal

from ..extract import REASONING_MODES
from ..feedback.execution import FEEDBACK_STYLES
from ..registration import LIVE_IDS
from ..sandbox import Executor, Limits, SandboxExecutor
from ..tasks import BIGCODEBENCH_ENV, DEFAULT_DATASET
from ..training.flags import add_canary_arguments
from .backend import INFO_SCOPES, Backend, ServerLimits

__all__ = ["add_serve", "cmd_serve"]

_DEFAULTS = ServerLimits()


def add_serve(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``serve`` to the command line's subparsers."""
    serve = sub.add_parser(
        "serve", help="serve the live ids over OpenEnv's protocol (needs the openenv extra)",
        description="An OpenEnv-compatible episode server (OpenEnv 0.10) over the 9 live ids: sessions over the /ws "
        "WebSocket (reset chooses env_id and task_id, step takes {'reply': ...}), at most --max-sessions at once, "
        "all sharing one sandbox executor. Prints its base URL on the first line of stdout. Needs "
        "pip install 'convcodeworld-gym[openenv]'.")
    serve.add_argument("id", nargs="?", default="CF-EF_full",
                       help=f"the id a reset without env_id plays (an id or a combination; default CF-EF_full); all of "
                       f"{', '.join(LIVE_IDS)} are served")
    net = serve.add_argument_group("network")
    net.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; the server has no "
                     "authentication: bind another address only behind a firewall or an authenticating proxy)")
    net.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: a free one, printed)")
    net.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"))
    data = serve.add_argument_group("episodes")
    data.add_argument("--dataset", default=DEFAULT_DATASET,
                      help=f"humaneval, bigcodebench, livecodebench, taco, taco-verified, codecontests, apps (options after ?: livecodebench?version=release_v5) or a task file (default bigcodebench, from ${BIGCODEBENCH_ENV} or the hub)")
    data.add_argument("--stdlib-only", action="store_true", help="only tasks needing nothing but the standard library")
    data.add_argument("--limit", type=int, default=None, help="first N tasks only")
    data.add_argument("--max-turns", type=int, default=10, help="feedback turns after turn 0 (default 10)")
    data.add_argument("--feedback-style", choices=FEEDBACK_STYLES, default="reference",
                      help="execution feedback text: reference (the text the paper's models saw), corrected or rich "
                      "(as for evaluate)")
    data.add_argument("--reasoning", choices=REASONING_MODES, default="strip",
                      help="how a reasoning model's reply is read: strip (default: its <think> thoughts removed before "
                      "the code is judged; a thought that never closes has no answer) or keep (as the reference read it)")
    data.add_argument("--simulator", choices=("auto", "offline", "llm"), default="auto",
                      help="the SNF / SEF ids' simulated user (its key only from $CONVCODEWORLD_SIMULATOR_API_KEY or "
                      "$OPENAI_API_KEY, never from a request)")
    add_canary_arguments(data)  # --canary SHARE, --canary-seed N: twins in the task set, their rate at GET /episodes
    data.add_argument("--simulator-model", default=None)
    data.add_argument("--simulator-base-url", default=None)
    data.add_argument("--info", choices=INFO_SCOPES, default="shown",
                      help="what of each step's info a client gets in metadata.info: 'shown' (default) only what the "
                      "step's execution feedback covers (no traceback, outcome, count or time of a hidden test), for "
                      "clients that may be or feed the policy; 'full' everything, hidden tests included, for a trusted "
                      "harness")
    run = serve.add_argument_group("sandbox (one executor for all sessions)")
    run.add_argument("--workers", type=int, default=None, help="sandbox worker slots (default: one per core)")
    run.add_argument("--runtime", default=None, help="the interpreter that runs the programs (as for evaluate)")
    run.add_argument("--docker", metavar="IMAGE", default=None, help="run the programs in containers of IMAGE (DockerExecutor)")
    run.add_argument("--docker-python", default="python3", help="the interpreter in --docker's image")
    run.add_argument("--ray", metavar="ADDRESS", default=None, help="run the programs on a Ray cluster (as for evaluate)")
    lim = serve.add_argument_group("limits")
    lim.add_argument("--max-sessions", type=int, default=_DEFAULTS.max_sessions,
                     help=f"concurrent sessions (default {_DEFAULTS.max_sessions})")
    lim.add_argument("--max-request-bytes", type=int, default=_DEFAULTS.max_request_bytes,
                     help=f"the largest WebSocket message or HTTP body (default {_DEFAULTS.max_request_bytes})")
    lim.add_argument("--max-episode-s", type=float, default=_DEFAULTS.max_episode_s,
                     help=f"seconds from a reset to the episode's end (default {_DEFAULTS.max_episode_s:g}; 0: none)")
    lim.add_argument("--idle-timeout-s", type=float, default=_DEFAULTS.idle_timeout_s,
                     help=f"seconds a session may send nothing (default {_DEFAULTS.idle_timeout_s:g}; 0: none)")
    lim.add_argument("--request-timeout-s", type=float, default=_DEFAULTS.request_timeout_s,
                     help=f"seconds a client may take to send a request's headers or an HTTP body (default "
                     f"{_DEFAULTS.request_timeout_s:g}); then its connection is closed")
    serve.set_defaults(func=cmd_serve)
    return serve


def _executor(args: argparse.Namespace) -> Executor:
    chosen = [flag for flag, value in (("--docker", args.docker), ("--ray", args.ray), ("--runtime", args.runtime)) if value]
    if len(chosen) > 1:
        raise ValueError(f"choose one of --docker, --ray and --runtime, not {' and '.join(chosen)}")
    if args.ray is not None:
        from ..sandbox.backends.ray import make_ray_executor

        return make_ray_executor(args.ray, Limits())
    if args.docker is not None:
        from ..sandbox.backends.docker import DockerExecutor

        return DockerExecutor(args.docker, python=args.docker_python, slots=args.workers)
    return SandboxExecutor(workers=args.workers, runtime=args.runtime)


def cmd_serve(args: argparse.Namespace) -> int:
    """Build the limits, the executor and the backend of ``args``; serve until SIGINT / SIGTERM, close the backend,
    then end the process by that signal (its default action: what ``docker stop`` and systemd expect)."""
    from . import require_openenv

    require_openenv()  # before anything starts: say how to install it
    from .app import serve

    limits = ServerLimits(max_sessions=args.max_sessions, max_request_bytes=args.max_request_bytes,
                          max_episode_s=args.max_episode_s or None, idle_timeout_s=args.idle_timeout_s or None,
                          request_timeout_s=args.request_timeout_s)
    simulator = {"backend": args.simulator, "model": args.simulator_model, "base_url": args.simulator_base_url}
    executor = _executor(args)
    try:
        backend = Backend(args.id, dataset=args.dataset, stdlib_only=args.stdlib_only, limit=args.limit,
                          executor=executor, max_turns=args.max_turns, feedback_style=args.feedback_style,
                          reasoning=args.reasoning,
                          simulator_kwargs={k: v for k, v in simulator.items() if v is not None}, limits=limits,
                          canary=args.canary or None, canary_seed=args.canary_seed, info=args.info)
    except BaseException:
        executor.close()
        raise
    stopped_by = serve(backend, host=args.host, port=args.port, log_level=args.log_level)
    if stopped_by is not None:
        signal.signal(stopped_by, signal.SIG_DFL)
        signal.raise_signal(stopped_by)
    return 0
