"""Runs in the host: start long-lived child processes (the workers) from one long-lived thread.

A sandbox worker asks the kernel to kill it when its parent dies (``PR_SET_PDEATHSIG``), so
that no worker outlives a crashed trainer. The kernel's "parent" is the *thread* that started
the child: a worker started from a short-lived thread (one of a thread pool's, a vector env's
step thread) would be killed when that thread ends, in the middle of another thread's run. So
every worker is started by :func:`spawn`, which runs ``subprocess.Popen`` on a daemon thread that
lives as long as the process (and is made afresh in a forked child, where it does not exist).

Holds:
    spawn   ``subprocess.Popen(*args, **kwargs)``, run on the spawner thread
"""

from __future__ import annotations

import subprocess
import threading
from concurrent.futures import Future
from queue import SimpleQueue
from typing import Any

__all__ = ["spawn"]

_jobs: SimpleQueue[tuple[tuple[Any, ...], dict[str, Any], Future[subprocess.Popen[bytes]]]] = SimpleQueue()
_thread: threading.Thread | None = None
_lock = threading.Lock()


def _serve() -> None:
    while True:
        args, kwargs, done = _jobs.get()
        try:
            done.set_result(subprocess.Popen(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            done.set_exception(exc)


def spawn(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(*args, **kwargs)`` started from the spawner thread; exceptions are re-raised here.

    >>> proc = spawn(["true"])
    >>> proc.wait()
    0
    """
    global _thread  # noqa: PLW0603 - one spawner thread per process
    with _lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_serve, name="ccw-sandbox-spawner", daemon=True)
            _thread.start()
    done: Future[subprocess.Popen[bytes]] = Future()
    _jobs.put((args, kwargs, done))
    return done.result()
