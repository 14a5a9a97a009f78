"""Docker executor: the sandbox runner inside long-lived, locked-down containers.

One container per worker slot is started once and reused; each execution is a
``docker exec`` of the runner in a fresh work dir on the container's tmpfs, and after it
every process of the sandbox user is killed and the work dir removed. Containers run with
network ``none``, a memory limit (no swap), a pids limit, a read-only root file system, all
capabilities dropped, ``no-new-privileges`` and a non-root user. The parent owns the clock,
exactly as in the local executor.

Holds:
    DockerExecutor     the backend (``pip install 'convcodeworld-gym[docker]'``)
    DockerUnavailable  no Docker engine reachable, or the image is missing
    RUNNER_IN_CONTAINER  where the runner script is mounted inside a container
    CONTAINER_CONFINEMENT  what a container confines (``details["confinement"]`` of its results)

The seam with the runner protocol (see :func:`_runner_argv` and the imports marked SEAM):
the container runs ``python -s /ccw/_runner.py`` with the JSON job on stdin and the
event channel on fd 3 (``$CCW_RESULT_FD=3``), which the wrapper shell points at the exec's
stdout; the events are parsed and assembled by the local executor's own functions.
"""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import select
import socket
import struct
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from ..errors import ExecutorError
from ..tasks import TEST_CLASS, Task
from .clock import SuiteClock
from .executor import Executor, Limits
from .result import ExecutionResult

# SEAM with the local runner (convcodeworld_gym/sandbox/local.py, _runner.py): the runner
# file, its event decoding and assembly, the module name and the child's environment.
from .local import _RUNNER, MODULE_NAME, _decode, assemble, child_env  # noqa: E402

__all__ = ["DockerExecutor", "DockerUnavailable", "RUNNER_IN_CONTAINER", "SANDBOX_USER", "CONTAINER_CONFINEMENT"]

RUNNER_IN_CONTAINER = "/ccw/_runner.py"
#: tmpfs mount point; not a directory of the image, so Docker does not copy its permissions up.
WORK_ROOT = "/ccw-work"
RUN_DIR = WORK_ROOT + "/run"
#: nobody:nogroup, present in every Debian-based image.
SANDBOX_USER = "65534:65534"
_CONTAINER_PATH = "/usr/local/bin:/usr/bin:/bin"
#: ``details["confinement"]`` of every Docker result: the same keys as the local sandbox's.
CONTAINER_CONFINEMENT: dict[str, Any] = {
    "level": "container",
    "uid": 65534,
    "features": ["network_none", "memory_limit", "pids_limit", "readonly_root", "tmpfs_workdir", "cap_drop_all",
                 "no_new_privileges", "non_root_user"],
    "missing": ["split judge: the tests run in the program's process, whose verdict it can forge"],
}
# PID 1 of every slot: reaps orphans (so zombies never eat the pids limit), exits on TERM.
_KEEPER = (
    "import os, signal, time\n"
    "signal.signal(signal.SIGTERM, lambda *a: os._exit(0))\n"
    "while True:\n"
    "    try:\n"
    "        os.waitpid(-1, 0)\n"
    "    except ChildProcessError:\n"
    "        time.sleep(0.2)\n"
)
# Kill every process of the sandbox user but PID 1 and this shell, then empty the work dir.
_CLEANUP = f"kill -9 -1 2>/dev/null; rm -rf /dev/shm/* 2>/dev/null; cd /; chmod -R u+rwx {RUN_DIR} 2>/dev/null; rm -rf {RUN_DIR}; test ! -e {RUN_DIR} || exit 112"
#: Exit statuses of the wrapper meaning the slot could not be prepared or cleaned: replace it.
_SLOT_BROKEN = (111, 112)
#: After the suite reported its end, how long the wrapper may take to clean up before a forced cleanup.
_CLEANUP_GRACE_S = 5.0
_POLL_S = 0.25


class DockerUnavailable(ExecutorError):
    """No Docker engine answers, the ``docker`` package is missing, or the image is not there."""


def _runner_argv(python: str) -> list[str]:
    """SEAM: the command that runs one job in a container (job JSON on stdin, events on stdout).

    The runner gets fd 3 pointed at the exec's stdout for the event channel, its own stdout
    and stderr go to ``/dev/null``. When it ends, the same shell kills every leftover
    process of the sandbox user and removes the work dir (exit status 111/112 if it cannot),
    so a normal run needs one ``exec`` only.
    """
    script = (
        f"mkdir -m 700 {RUN_DIR} && cd {RUN_DIR} || exit 111; "
        f'(exec 3>&1 1>/dev/null 2>&1; exec "$0" -s {RUNNER_IN_CONTAINER}); status=$?; '
        f"{_CLEANUP}; exit $status"
    )
    return ["/bin/sh", "-c", script, python]


class DockerExecutor(Executor):
    """Runs each program inside one of ``slots`` long-lived containers of ``image``.

    Args:
        image: an image with ``/bin/sh``, coreutils and a Python that can run the tasks'
            tests (for BigCodeBench, build ``envs/bigcodebench/Dockerfile``).
        limits: time and size limits (the same as the local executor's).
        slots: containers, i.e. executions that can run at once (default: the CPU count).
        python: the interpreter inside the container.
        memory: memory limit of one container (swap disabled), Docker syntax (``"2g"``).
        pids: the most processes and threads one container may hold.
        cpus: CPUs one container may use.
        tmpfs_size: size of the tmpfs work dir.
        volumes: extra read-only bind mounts ``{host_path: container_path}`` (e.g. a Python).
        environment: extra variables for the program (never secrets: they reach untrusted code).
        base_url: the engine (default: ``$DOCKER_HOST`` or the local socket).

    Contract: the program under test can never make ``run`` raise; a container it leaves
    unusable is replaced. ``run`` raises :class:`ExecutorError` only when the engine fails
    (a container cannot be started or exec'd); construction raises :class:`DockerUnavailable`
    when the engine or image is missing. ``close()`` removes every container. An instance
    belongs to the process that created it: for ``AsyncVectorEnv`` pass a factory.
    """

    def __init__(
        self,
        image: str,
        *,
        limits: Limits | None = None,
        slots: int | None = None,
        python: str = "python3",
        memory: str = "2g",
        pids: int = 256,
        cpus: float = 1.0,
        tmpfs_size: str = "1g",
        volumes: Mapping[str, str] | None = None,
        environment: Mapping[str, str] | None = None,
        base_url: str | None = None,
    ) -> None:
        self.limits = limits or Limits()
        self.image = image
        self.python = python
        self.slots = slots or self.default_concurrency()
        if self.slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots}")
        self._container_kwargs = self._container_config(memory, pids, cpus, tmpfs_size, volumes or {})
        self._environment = dict(environment or {})
        self._client = _connect(base_url)
        try:
            self._client.images.get(image)
        except Exception as exc:  # docker.errors.ImageNotFound / APIError
            raise DockerUnavailable(
                f"Docker image {image!r} is not available on the engine ({exc}); build it first, e.g. "
                "`docker build -t convcodeworld-bigcodebench envs/bigcodebench`"
            ) from exc
        self._label = f"ccw-{uuid.uuid4().hex[:12]}"
        self._free: queue.LifoQueue[Any] = queue.LifoQueue()
        self._all: list[Any] = []
        self._lock = threading.Lock()
        self._closed = False
        self._pid = os.getpid()

    # ------------------------------------------------------------------ API

    def run(self, task: Task, program: str) -> ExecutionResult:
        if len(program) > self.limits.max_code_chars:
            return ExecutionResult.not_executed(
                task.test_names, f"Not run: the program has {len(program)} characters, over the limit of {self.limits.max_code_chars}."
            )
        if self._closed:
            raise ExecutorError("this DockerExecutor is closed; create a new one")
        if os.getpid() != self._pid:
            raise ExecutorError(
                "this DockerExecutor was created in another process (e.g. copied into an AsyncVectorEnv "
                "worker); its containers cannot be shared between processes. Pass a factory instead: "
                "executor=functools.partial(DockerExecutor, image, slots=1)"
            )
        started = time.monotonic()
        container = self._acquire()
        healthy = False
        try:  # whatever happens, the slot goes back (or is replaced): capacity never leaks
            events, stop_reason, exit_desc, healthy = self._execute(container, task, program)
            if not healthy:
                healthy = self._cleanup(container)
        finally:
            self._release(container, healthy)
        result = assemble(task.test_names, events, stop_reason, exit_desc, self.limits)
        details = {"backend": "docker", "confinement": dict(CONTAINER_CONFINEMENT), "image": self.image}
        return dataclasses.replace(result, wall_time_s=time.monotonic() - started, details=details)

    def default_concurrency(self) -> int:
        return getattr(self, "slots", None) or super().default_concurrency()

    def close(self) -> None:
        """Remove every container of this executor. Idempotent."""
        if os.getpid() != self._pid:  # a forked copy owns nothing
            return
        with self._lock:
            self._closed = True
            containers, self._all = self._all, []
        for container in containers:
            _remove(container)

    def __del__(self) -> None:  # best effort; call close()
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass

    # ------------------------------------------------------------- helpers

    def _container_config(self, memory: str, pids: int, cpus: float, tmpfs_size: str, volumes: Mapping[str, str]) -> dict:
        binds = {str(_RUNNER): {"bind": RUNNER_IN_CONTAINER, "mode": "ro"}}
        binds.update({host: {"bind": inside, "mode": "ro"} for host, inside in volumes.items()})
        return {
            "command": [self.python, "-c", _KEEPER],
            "user": SANDBOX_USER,
            "network_mode": "none",
            "mem_limit": memory,
            "memswap_limit": memory,
            "pids_limit": pids,
            "nano_cpus": int(cpus * 1e9),
            "read_only": True,
            "tmpfs": {WORK_ROOT: f"rw,nosuid,nodev,size={tmpfs_size},mode=1777"},
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "volumes": binds,
            "environment": {"PATH": _CONTAINER_PATH},
            "working_dir": "/",  # not WORK_ROOT: Docker would create it 0755 and copy that up onto the tmpfs
            "detach": True,
            "auto_remove": False,
        }

    def _acquire(self) -> Any:
        try:
            return self._free.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            if len(self._all) < self.slots:
                try:
                    container = self._client.containers.run(self.image, labels={"convcodeworld": self._label}, **self._container_kwargs)
                except Exception as exc:  # docker.errors.APIError, ...
                    raise ExecutorError(f"could not start a container of {self.image!r}: {exc}") from exc
                self._all.append(container)
                return container
        return self._free.get()

    def _release(self, container: Any, healthy: bool) -> None:
        if healthy:
            self._free.put(container)
            return
        with self._lock:  # a container that cannot be cleaned is replaced by a fresh one later
            if container in self._all:
                self._all.remove(container)
        _remove(container)

    def _exec_env(self) -> dict[str, str]:
        env = child_env(RUN_DIR, {"PATH": _CONTAINER_PATH, "CCW_RESULT_FD": "3"})
        env.update(self._environment)
        return env

    def _execute(self, container: Any, task: Task, program: str) -> tuple[list[dict], str | None, str, bool]:
        """Run one job; returns (events, stop reason, exit description, slot already clean)."""
        job = json.dumps({"program": program, "test": task.test, "test_class": TEST_CLASS, "module": MODULE_NAME})
        api = self._client.api
        try:
            exec_id = api.exec_create(
                container.id, _runner_argv(self.python), stdin=True, stdout=True, stderr=False,
                user=SANDBOX_USER, environment=self._exec_env(), workdir="/",
            )["Id"]
            sock = api.exec_start(exec_id, socket=True)
        except Exception as exc:  # the engine, not the program: this container passed its last cleanup
            raise ExecutorError(f"could not start an execution in a container of {self.image!r}: {exc}") from exc
        raw: socket.socket = getattr(sock, "_sock", sock)
        try:
            try:
                raw.sendall(job.encode("utf-8", "surrogatepass"))
                raw.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            events, stop_reason, ended = self._collect(raw)
        finally:
            raw.close()
        if not ended:  # still running (a limit was hit) or still cleaning up: forced cleanup
            return events, stop_reason, "did not finish", False
        try:
            exit_code = api.exec_inspect(exec_id).get("ExitCode")
        except Exception:  # noqa: BLE001
            exit_code = None
        return events, stop_reason, _describe(exit_code), exit_code is not None and exit_code not in _SLOT_BROKEN

    def _collect(self, raw: socket.socket) -> tuple[list[dict], str | None, bool]:
        """Read the exec's multiplexed stdout: (events, stop reason, whether the exec ended).

        After the suite reports its end, reading goes on (for at most a grace period) until
        the wrapper has cleaned up and closed the stream.
        """
        clock = SuiteClock(self.limits)
        grace_deadline: float | None = None
        events: list[dict] = []
        frames = _FrameReader()
        while True:
            now = time.monotonic()
            deadline, reason = (grace_deadline, "") if grace_deadline is not None else clock.deadline()
            if now >= deadline:
                return events, (reason or None), False
            ready, _, _ = select.select([raw], [], [], min(deadline - now, _POLL_S))
            if not ready:
                continue
            try:
                chunk = raw.recv(1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                return events, None, True
            if grace_deadline is not None:
                continue  # anything after the end is not the runner's
            for line in frames.feed(chunk):
                event = _decode(line)
                if event is None:
                    continue
                events.append(event)
                if clock.observe(event):
                    grace_deadline = time.monotonic() + _CLEANUP_GRACE_S
                    break

    def _cleanup(self, container: Any) -> bool:
        """Kill the sandbox user's processes and remove the work dir; False if the slot is unusable."""
        try:
            result = container.exec_run(["/bin/sh", "-c", _CLEANUP], user=SANDBOX_USER, environment={"PATH": _CONTAINER_PATH})
            return result.exit_code == 0
        except Exception:  # noqa: BLE001
            return False


class _FrameReader:
    """Splits Docker's multiplexed stream (8-byte headers) into stdout lines."""

    def __init__(self) -> None:
        self._buffer = b""
        self._stdout = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        self._buffer += chunk
        while len(self._buffer) >= 8:
            stream, size = self._buffer[0], struct.unpack(">I", self._buffer[4:8])[0]
            if len(self._buffer) < 8 + size:
                break
            if stream == 1:
                self._stdout += self._buffer[8 : 8 + size]
            self._buffer = self._buffer[8 + size :]
        *lines, self._stdout = self._stdout.split(b"\n")
        return lines


def _connect(base_url: str | None) -> Any:
    try:
        import docker
    except ImportError as exc:
        raise DockerUnavailable("the Docker backend needs the docker package: pip install 'convcodeworld-gym[docker]'") from exc
    try:
        client = docker.DockerClient(base_url=base_url, version="auto") if base_url else docker.from_env(version="auto")
        client.ping()
    except Exception as exc:
        where = base_url or "$DOCKER_HOST or unix:///var/run/docker.sock"
        raise DockerUnavailable(
            f"no Docker engine reachable at {where} ({exc}); start dockerd (as root: "
            "`dockerd --iptables=false --bridge=none &`, see .ci/start-dockerd) or pass base_url="
        ) from exc
    return client


def _remove(container: Any) -> None:
    try:
        container.remove(force=True)
    except Exception:  # noqa: BLE001 - already gone
        pass


def _describe(exit_code: int | None) -> str:
    if exit_code is None:
        return "ended without an exit status"
    if exit_code == 111:
        return "could not create its work dir"
    if exit_code >= 128:
        return f"was killed by signal {exit_code - 128} (exit status {exit_code}; 137 is the memory limit or a kill)"
    return f"exited with code {exit_code}"
