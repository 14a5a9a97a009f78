"""The episode server (``convcodeworld serve``) in a process of its own, for tests and benchmarks.

:class:`EpisodeServer` starts ``python -m convcodeworld_gym.cli serve ... --port 0`` with this interpreter (or
another one: a venv that has the ``openenv`` extra), reads the base URL the server prints on its first line of
stdout, and stops it with SIGTERM (then SIGKILL) at the end. Its stderr (the server's logs) is kept in a file, and
:meth:`EpisodeServer.descendants` lists the processes under it (its sandbox workers and their runs). Nothing here
imports OpenEnv.

Holds:
    EpisodeServer   the server subprocess: ``base_url``, ``pid``, ``logs()``, ``descendants()``, ``sessions()``,
                    ``stop_with(signal)``
    slot_cgroups    the sandbox slot cgroups that hold any of some processes now (what a stopped server left)
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["EpisodeServer", "slot_cgroups"]


class EpisodeServer:
    """``convcodeworld serve`` in a subprocess; ``base_url`` once started (a context manager).

    Args:
        args: the command's arguments after ``serve`` (the id, ``--dataset``, limits, ...); ``--port 0`` is added.
        python: the interpreter to run it with (default this one).
        env: the process's environment (default this one's).
        start_timeout_s: how long the server may take to print its URL (it chooses the task set first).
    """

    def __init__(self, args: Sequence[str] = (), *, python: str | None = None, env: Mapping[str, str] | None = None,
                 start_timeout_s: float = 180.0) -> None:
        self.command = [python or sys.executable, "-m", "convcodeworld_gym.cli", "serve", *args, "--port", "0"]
        self.env = dict(os.environ if env is None else env)
        self.start_timeout_s = start_timeout_s
        self._proc: subprocess.Popen[str] | None = None
        self._log = tempfile.NamedTemporaryFile(prefix="ccw-serve-", suffix=".log", delete=False)
        self._final_logs: str | None = None
        self.base_url = ""

    def __enter__(self) -> EpisodeServer:
        self._proc = subprocess.Popen(self.command, stdout=subprocess.PIPE, stderr=self._log, text=True, env=self.env,
                                      start_new_session=True)
        assert self._proc.stdout is not None
        line = _readline(self._proc.stdout, self.start_timeout_s)
        if not line.startswith("http://"):
            self.__exit__()
            raise RuntimeError(f"the episode server did not start ({' '.join(self.command)}): {line!r}\n{self.logs()[-4000:]}")
        self.base_url = line
        return self

    @property
    def pid(self) -> int:
        """The server process's id."""
        if self._proc is None:
            raise RuntimeError("the episode server is not running: use it as a context manager")
        return self._proc.pid

    def logs(self) -> str:
        """Everything the server wrote to stderr so far (its log; all of it once the server has stopped)."""
        if self._final_logs is not None:
            return self._final_logs
        return Path(self._log.name).read_text(errors="replace")

    def sessions(self) -> dict[str, Any]:
        """``GET /sessions``: ``active_sessions``, ``max_sessions``, ``live_episodes``."""
        with urllib.request.urlopen(f"{self.base_url}/sessions", timeout=10) as response:
            return json.loads(response.read())  # type: ignore[no-any-return]

    def stop_with(self, signum: int, timeout_s: float = 60.0) -> int:
        """Send ``signum`` to the server (SIGTERM, SIGINT) and wait for it to end; its exit status (``-signum`` when the
        signal ended it). Raises ``subprocess.TimeoutExpired`` when it is still running after ``timeout_s``."""
        if self._proc is None:
            raise RuntimeError("the episode server is not running: use it as a context manager")
        self._proc.send_signal(signum)
        return self._proc.wait(timeout=timeout_s)

    def descendants(self) -> list[int]:
        """The pids of every process under the server (its sandbox workers, their zygotes and runs)."""
        parents: dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as fh:
                        parents[int(entry)] = int(fh.read().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
        found, frontier = [], [self.pid]
        while frontier:
            parent = frontier.pop()
            children = [pid for pid, ppid in parents.items() if ppid == parent]
            found += children
            frontier += children
        return sorted(found)

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.send_signal(signal.SIGTERM)
                try:
                    self._proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(self._proc.pid, signal.SIGKILL)
                    self._proc.wait()
            if self._proc.stdout is not None:
                self._proc.stdout.close()
            self._proc = None
        if self._final_logs is None:
            self._log.close()
            self._final_logs = Path(self._log.name).read_text(errors="replace")
            os.unlink(self._log.name)


def _readline(stream: Any, timeout_s: float) -> str:
    """The first line of ``stream`` (a pipe), or "" after ``timeout_s``."""
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        if not selector.select(timeout_s):
            return ""
    return str(stream.readline()).strip()


def slot_cgroups(pids: list[int]) -> set[str]:
    """The dirs of the sandbox slot cgroups (``ccw-sandbox-*``) that hold any of ``pids`` now."""
    root = "/sys/fs/cgroup"
    mounts = os.listdir(root) if os.path.isdir(root) else []
    found = set()
    for pid in pids:
        try:
            lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            _, controllers, path = line.split(":", 2)
            if "ccw-sandbox" not in path:
                continue
            names = set(controllers.split(",")) - {""}
            bases = [root, f"{root}/unified"] if not names else [f"{root}/{m}" for m in mounts if names & set(m.split(","))]
            found |= {f"{base}{path}" for base in bases if os.path.isdir(f"{base}{path}")}
    return found
