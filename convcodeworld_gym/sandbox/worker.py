"""A warm sandbox worker: a long-lived process that forks one confined child per execution.

Started by :class:`~convcodeworld_gym.sandbox.pool.SandboxExecutor` as ``python -s -c BOOT CONFIG_JSON``
(:func:`.launch.worker_boot`: the runtime interpreter, this package's sandbox code only, the standard
library only; ``CONFIG_JSON``: a :class:`~.messages.WorkerConfig`) with a scrubbed environment. At start
it confines itself as far as it can (see :mod:`.confinement.confine`), imports the heavy libraries it was told
to preload, and answers :class:`~.messages.Ready`. Then, per job (a :class:`~.messages.Job`, one line on
stdin), it:

1. imports the job's own libraries into itself, so the next run of that task set is warm;
2. hands the job to a *spare*: a child forked before the job came, straight into a new PID
   namespace (:class:`.confinement.confine.RunNamespaces`: it is pid 1 there). It opened its own mount
   namespace (fresh tmpfs ``/tmp``) and its own network (loopback only) and IPC namespaces, became the slot's non-root uid with rlimits in a fresh work
   dir, closed every inherited descriptor, and waits for its job. In ``split`` mode it is the
   judge and has forked the program's process; in ``inprocess`` mode it runs program and tests
   itself;
3. reads the child's events under the time and output limits and answers one line, a
   :class:`~.messages.RunReply` (where the worker has a memory cgroup to itself, with the processes the
   OOM killer ended, :mod:`.confinement.cgroup`;
   ``stages``: seconds of the spare's fork and confinement, the worker's imports for this job, the
   hand-off until the first test event, the tests, and the teardown of the worker's previous run);
4. then, off the critical path, kills the run's whole PID namespace (by its pid 1, the worker's
   own unreaped child), reaps it, and makes the next spare (again after any new import, so
   spares start warm). At level ``uid`` (no PID namespace per run, e.g. in a container) it
   first sweeps the slot's uid (:mod:`.confinement.sweep`).

The worker is trusted: it never runs the program's code in its own process.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import resource
import select
import shutil
import signal
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import NoReturn

from . import reap, rng_fingerprint
from ._runner import emit, run_suite
from .confinement import cgroup, confine, landlock, memory, seccomp, sweep
from .confinement.confine import Confinement, Level, SandboxSettings
from .executor import Limits
from .interpreter import SHIM_DIR, interpreter_paths, make_python_shims
from .judge import Channel, JudgeFacts, connect_program, judge_source, serve_program
from .judge_policy import Mode
from .local import child_env, collect_events, describe_exit, new_token
from .messages import Crash, Done, End, Event, Job, Ready, Reply, RunReply, Violation, WorkerConfig, WorkerFailed

__all__ = ["main", "run_child", "establish", "Hardening"]


@dataclass(frozen=True)
class Hardening:
    """The layers the confined child adds to itself: seccomp and Landlock, in two steps.

    Both run in the spare before its job (off the critical path): :meth:`apply` always,
    :meth:`close_network` for spares made for runs without network (every task but those whose
    tests serve on the run's own loopback, see :func:`.runtime.network_policy`); a job whose
    network differs from its spare's gets a fresh spare.

    Attributes:
        seccomp_filter: the base filter (:func:`.confinement.seccomp.build_filter`), or None when not available.
        socket_filter: the filter leaving only AF_UNIX sockets (:func:`.confinement.seccomp.build_socket_filter`), or None.
        landlock_read: paths the program may read beneath, or None when Landlock is not available.
        landlock_abi: the kernel's Landlock ABI version.
    """

    seccomp_filter: bytes | None = None
    socket_filter: bytes | None = None
    landlock_read: tuple[str, ...] | None = None
    landlock_abi: int = 0

    def apply(self) -> None:
        """Enter the Landlock domain, then load the base filter (both inherited by every later child); irreversible.

        Raises OSError when a layer fails: the caller must not run the job.
        """
        if self.landlock_read is not None:
            confine.prctl(_PR_SET_NO_NEW_PRIVS, 1)
            landlock.restrict(self.landlock_read, landlock.write_paths(), self.landlock_abi)
        if self.seccomp_filter is not None:
            seccomp.install(self.seccomp_filter)

    def close_network(self) -> None:
        """No sockets but AF_UNIX (seccomp) and no TCP bind/connect (Landlock ABI >= 4); irreversible. Raises OSError."""
        if self.socket_filter is not None:
            seccomp.install(self.socket_filter)
        if self.landlock_read is not None and self.landlock_abi >= 4:
            landlock.restrict_network(self.landlock_abi)


_PR_SET_NO_NEW_PRIVS = 38


def _refused(action: Callable[[], object]) -> bool:
    try:
        action()
    except PermissionError:
        return True
    return False


def _probe(layer: Hardening, refused: Callable[[], object]) -> str | None:
    """Apply ``layer`` in a forked child and check that ``refused`` now raises PermissionError; None if so, else why not."""
    pid = os.fork()
    if pid == 0:
        try:
            layer.apply()
            layer.close_network()
            os._exit(0 if _refused(refused) else 2)
        except BaseException:  # noqa: BLE001
            os._exit(1)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return None if code == 0 else ("it could not be applied" if code == 1 else "it did not hold in a probe")


def _inet_socket() -> None:
    import socket

    socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()


def _harden(readable: list[str]) -> tuple[Hardening, list[str], list[str]]:
    """Which of seccomp and Landlock this machine enforces: the hardening to apply, its features, what is missing."""
    missing: list[str] = []
    arch = seccomp.current_arch()
    base = seccomp.build_filter(arch) if arch is not None else None
    sockets = seccomp.build_socket_filter(arch) if arch is not None else None
    if arch is None:
        missing.append(f"seccomp: no filter for this architecture ({os.uname().machine})")
    elif (why := _probe(Hardening(seccomp_filter=base, socket_filter=sockets), _inet_socket)) is not None:
        missing.append(f"seccomp: {why}")
        base = sockets = None
    version = landlock.abi()
    read = tuple(landlock.read_paths(readable))
    if version < 1:
        missing.append("landlock: not available in this kernel")
        read = None
    elif (why := _probe(Hardening(landlock_read=read, landlock_abi=version), lambda: os.listdir("/"))) is not None:
        missing.append(f"landlock: {why}")
        read = None
    hardening = Hardening(base, sockets, read, version)
    features = ["seccomp"] if base is not None else []
    if read is not None:
        features += ["landlock_fs"] + (["landlock_net"] if version >= 4 else []) + (["landlock_scope"] if version >= 6 else [])
        if version < 4:
            missing.append(f"landlock network rules: ABI {version} < 4")
    return hardening, features, missing


def establish(settings: SandboxSettings, uid: int, readable: list[str]
              ) -> tuple[Confinement, Hardening, confine.RunNamespaces | None]:
    """Confine this worker as far as the machine allows.

    Returns what was achieved, what each child adds to itself, and (at level ``namespaces`` and up)
    the way each run's child is forked into its own PID namespace.
    """
    missing: list[str] = []
    features: list[str] = ["process_group", "scrubbed_env", "closed_fds", "private_workdir", "output_cap"]
    if os.geteuid() != 0:
        uid = os.getuid()
        missing.append("uid: the executor does not run as root, so it cannot switch to a sandbox uid")
        return Confinement(Level.PROCESS, uid, tuple(features), tuple(missing)), Hardening(), None
    level = Level.UID
    features += ["non_root_uid", "rlimits", "not_dumpable"]
    spawn: confine.RunNamespaces | None = None
    try:
        features += confine.enter_worker_namespaces(settings, readable)
        spawn = confine.RunNamespaces()
        _probe_pid_namespace(spawn, readable)
        level = Level.NAMESPACES
        features += ["pidns", "run_netns", "run_ipcns"]
    except OSError as exc:
        missing.append(f"namespaces: {exc}")
        if spawn is not None:
            spawn.close()
            spawn = None
    hardening, hardened, lacking = _harden(readable)
    features += hardened
    missing += lacking
    if level is Level.NAMESPACES and hardening.seccomp_filter is not None and hardening.landlock_read is not None:
        level = Level.FULL
    return Confinement(level, uid, tuple(features), tuple(missing)), hardening, spawn


def _probe_pid_namespace(spawn: confine.RunNamespaces, readable: list[str]) -> None:
    """Raise OSError unless a run's child can be forked as each run's is (new PID namespace, then its own mounts)."""
    pid = spawn.fork()
    if pid == 0:
        try:
            confine.enter_run_mounts(SandboxSettings(tmpfs_mb=1, tmpfs_inodes=100), readable)
            confine.enter_run_network_and_ipc()
            os._exit(0 if os.getpid() == 1 else 2)
        except BaseException:  # noqa: BLE001
            os._exit(1)
    if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0:
        raise OSError("a run's child could not get its own PID, mount, network and IPC namespaces")


def _import_quietly(names: Iterable[str]) -> None:
    """Import ``names`` into the worker (failures are left to the run to report), :func:`warm_up` them, and
    :func:`.confinement.memory.settle` the worker so that forking it stays cheap."""
    for name in names:
        if name not in sys.modules:
            _import_one(name)
    warm_up()
    memory.settle()


_warmed: set[str] = set()


def warm_up() -> None:
    """Run our own small pandas and matplotlib workload once in the worker (never task code).

    Libraries set up much on first use (pandas' formatters and testing helpers, matplotlib's
    figure, font and Agg machinery); done here, every forked run inherits it instead of redoing it.
    It draws no random numbers and leaves no figure open: the state a run starts from is unchanged. It
    also checks the random generators' layouts for the split judge's fingerprints (:mod:`.rng_fingerprint`),
    which loads ``numpy.random`` where numpy is loaded (numpy 2 imports it on first use: each run's judge and
    program paid for that import, about 17 ms each, in the numpy worker group). Two more modules that
    libraries import only on first use, and that many tasks reach, are loaded the same way: ``numpy.testing``
    (numpy 1.x; 13 ms, in 49 BigCodeBench tasks' tests) and pandas' matplotlib plotting
    (``DataFrame.plot``/``hist``: 7-10 ms of imports and set-up, in 65 of the 337 pandas and mocked tasks).
    """
    rng_fingerprint.prepare()
    if "numpy" in sys.modules and "numpy.testing" not in _warmed:
        _warmed.add("numpy.testing")
        _import_one("numpy.testing")
    if "pandas" in sys.modules and "pandas" not in _warmed:
        _warmed.add("pandas")
        try:
            pd = sys.modules["pandas"]
            series = pd.Series({"a": 1, "b": 2})
            pd.testing.assert_series_equal(series, series.copy())
            frame = pd.DataFrame({"x": range(6), "y": list("aabbcc")})
            pd.testing.assert_frame_equal(frame.groupby("y").sum(), frame.groupby("y").sum())
            repr(frame), frame.describe(), pd.to_datetime(["2024-01-01"])
        except Exception:  # noqa: BLE001 - a warm-up is an optimisation only
            pass
    if "matplotlib.pyplot" in sys.modules and "matplotlib" not in _warmed:
        _warmed.add("matplotlib")
        try:
            plt = sys.modules["matplotlib.pyplot"]
            fig, ax = plt.subplots()
            ax.hist([0.1, 0.5, 0.5, 0.9])
            ax.plot([0, 1], [1, 0], label="l")
            ax.set_title("t")
            ax.set_xlabel("x")
            ax.legend()
            fig.canvas.draw()
            plt.close("all")
        except Exception:  # noqa: BLE001
            pass
    if {"pandas", "matplotlib.pyplot"} <= sys.modules.keys() and "pandas.plotting" not in _warmed:
        _warmed.add("pandas.plotting")
        try:
            pd, plt = sys.modules["pandas"], sys.modules["matplotlib.pyplot"]
            pd.Series([1.0, 2.0]).plot()
            pd.DataFrame({"x": [1.0, 2.0]}).hist()
            plt.close("all")
        except Exception:  # noqa: BLE001
            pass


def _import_one(name: str) -> None:
    """Import ``name`` into the worker; a failure is left to the run that needs the module to report."""
    try:
        importlib.import_module(name)
    except BaseException:  # noqa: BLE001
        pass


def run_child(job_fd: int, confinement: Confinement, hardening: Hardening, network: str, mode: Mode,
              settings: SandboxSettings, workdir: str, result_fd: int, token: str, ready_fd: int = -1) -> None:
    """In the forked child: confine, wait for the job on ``job_fd``, run it, stream events to ``result_fd``
    (each line sealed with the run's ``token``: a line the program writes there fails the run).

    Before it waits, it writes to ``ready_fd`` (and closes it) the ``time.monotonic()`` at which it was
    confined and at which its split program process was forked (for the per-stage timings; no program
    has run yet, so the worker can trust them).

    The child is made (and confined: uid, rlimits, Landlock, seccomp) before its job exists, so a run's
    critical path holds no confinement setup. Made for ``split`` mode, it has also forked the program's
    process ahead; a job in the other mode than expected costs one fork on the critical path (split)
    or the end of that process (in-process). If a layer the worker reported cannot be applied, the run
    fails with that reason and the job never runs. Never returns.
    """
    try:
        os.setsid()
    except OSError:
        pass  # already a group leader (pid 1 of a new namespace)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    confine.close_fds_except([result_fd, job_fd, ready_fd])
    try:
        if confinement.level.at_least(Level.NAMESPACES):
            confine.mount_run_proc()
    except OSError as exc:
        _refuse(result_fd, f"the sandbox could not confine this run ({exc}); it was not run.", token)
    if confinement.level.at_least(Level.UID):
        confine.drop_to(confinement.uid, settings)
    os.chdir(workdir)
    os.environ.clear()
    os.environ.update(child_env(workdir))
    sys.path[:] = [p for p in sys.path if p not in ("", ".")]
    try:
        hardening.apply()
        if network == "none":
            hardening.close_network()
    except OSError as exc:
        _refuse(result_fd, f"the sandbox could not confine this run ({exc}); it was not run.", token)
    program_process = None
    confined = time.monotonic()
    if mode is Mode.SPLIT:
        try:
            program_process = _fork_program_process(workdir, (result_fd, job_fd, ready_fd))
        except OSError:
            pass  # e.g. the pids limit, until the last run's processes are reaped: forked with the job instead
    if ready_fd >= 0:
        try:
            os.write(ready_fd, struct.pack("dd", confined, time.monotonic()))
        except OSError:
            pass
        os.close(ready_fd)
    with os.fdopen(job_fd, "rb") as fh:
        data = fh.read()
    if not data:
        os._exit(0)  # a spare that was discarded
    job = Job.from_wire(data)
    cpu = int(Limits(**job.limits).suite_timeout_s + 5)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    module, test_class, entry = job.module, job.test_class, job.entry_point
    if job.network != network:  # the worker matches spares to jobs; never run with more network
        _refuse(result_fd, f"this run was prepared with network {network!r}; not run.", token)
    if job.mode == Mode.SPLIT.value:
        pid, channel = program_process or _fork_program_process(workdir, (result_fd,))
        source = judge_source(job.program, job.prelude, job.test)
        facts = JudgeFacts.from_data(job.facts) if job.facts is not None else None
        connection = connect_program(channel, pid, job.program, module, entry, source, facts)
        if connection.crash is not None:
            emit(result_fd, Crash(connection.crash), token)
            os._exit(0)
        run_suite(result_fd, source, module, test_class, connection.provided, token=token, code=connection.code,
                  stats=connection.stats)
    else:
        if program_process is not None:
            pid, channel = program_process
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            channel.close()
        sys.path.insert(0, workdir)
        run_suite(result_fd, job.program + "\n" + job.test, module, test_class, token=token, tests=job.test)
    os._exit(0)


_FORK_ATTEMPTS = 50


def _fork_program_process(workdir: str, close: tuple[int, ...]) -> tuple[int, Channel]:
    """Fork the split judge's program process (closing ``close`` in it): it waits for the program on its
    channel and serves calls to it. Returns its pid and the judge's end of the channel."""
    to_prog_r, to_prog_w = os.pipe()
    to_judge_r, to_judge_w = os.pipe()
    for attempt in range(_FORK_ATTEMPTS):
        try:
            pid = os.fork()
            break
        except BlockingIOError:  # EAGAIN: the pids limit, while a previous run's processes are being reaped
            if attempt == _FORK_ATTEMPTS - 1:
                for fd in (to_prog_r, to_prog_w, to_judge_r, to_judge_w):
                    os.close(fd)
                raise
            time.sleep(0.02)
    if pid == 0:
        for fd in (*close, to_prog_w, to_judge_r):
            os.close(fd)
        sys.path.insert(0, workdir)
        try:
            serve_program(Channel(to_prog_r, to_judge_w), private_paths=(workdir,))
        except Exception:  # noqa: BLE001 - the judge closed the channel (a discarded spare) or sent nothing usable
            pass
        os._exit(0)
    os.close(to_prog_r)
    os.close(to_judge_w)
    return pid, Channel(to_judge_r, to_prog_w)


def _refuse(result_fd: int, why: str, token: str) -> NoReturn:
    """In the child: report that the job is not run (a SandboxError crash the run comes back with), and exit."""
    emit(result_fd, Crash(f"SandboxError: {why}"), token)
    os._exit(0)


def _prepare_workdir(workdir: str, confinement: Confinement) -> None:
    os.chmod(workdir, 0o700)  # before the chown: once the uid owns it, only CAP_FOWNER could chmod it
    if confinement.level.at_least(Level.UID):
        os.chown(workdir, confinement.uid, confinement.uid)


@dataclass
class _Spare:
    """A confined child made ahead of its job: it waits on ``job_w`` and streams events to ``result_r``.

    ``child`` is the worker's own child (the run's pid 1 when namespaced) and is signalled only
    while unreaped (see :mod:`.reap`); ``status`` holds its wait status once reaped. ``token`` seals the
    child's event lines (:func:`.local.new_token`)."""

    child: int
    job_w: int
    result_r: int
    workdir: str
    namespaced: bool
    network: str
    token: str
    status: int | None = None
    ready_r: int = -1  # the child's confinement times (:func:`run_child`)
    started: float = 0.0  # monotonic time before the fork
    forked: float = 0.0  # ... and after it, in the worker

    def stages(self) -> dict[str, float]:
        """Fork (in the worker) and confinement (in the child, until it waits for its job; ``program_fork_s``:
        the split judge's program process) times, in seconds; read once the child reported them."""
        times = {"fork_s": self.forked - self.started}
        if self.ready_r >= 0:
            try:
                data = os.read(self.ready_r, 16) if select.select([self.ready_r], [], [], 0)[0] else b""
            except OSError:
                data = b""
            os.close(self.ready_r)
            self.ready_r = -1
            if len(data) == 16:
                confined, program = struct.unpack("dd", data)
                times |= {"confine_s": confined - self.forked, "program_fork_s": program - confined}
        return times

    def exited(self) -> bool:
        """Has the child ended? If so, kill what is left of its group and reap it (once)."""
        if self.status is None and reap.has_exited(self.child):
            self.reap()
        return self.status is not None

    def reap(self) -> int:
        """Kill the child's group (its whole PID namespace when namespaced), reap the child; its wait status."""
        if self.status is None:
            reap.kill_group(self.child)
            self.status = os.waitpid(self.child, 0)[1]
        return self.status


def _make_spare(confinement: Confinement, hardening: Hardening, spawn: confine.RunNamespaces | None,
                settings: SandboxSettings, readable: tuple[str, ...], counter: int, network: str, mode: Mode) -> _Spare:
    """Fork the next run's confined child (it prepares itself and waits for its job). Raises OSError,
    leaving nothing behind, when the fork or the new PID namespace is refused. ``readable``: what runs must
    see (those of its paths under ``/tmp`` are bound into the run's fresh ``/tmp``)."""
    namespaced = spawn is not None
    # Namespaced: the dir is made by the child inside the run's own fresh /tmp, which vanishes with the run.
    workdir = os.path.join(confine.SANDBOX_ROOT, f"ccw_run{counter}") if namespaced else tempfile.mkdtemp(prefix="ccw_")
    if not namespaced:
        _prepare_workdir(workdir, confinement)
    read_fd, write_fd = os.pipe()
    job_r, job_w = os.pipe()
    ready_r, ready_w = os.pipe()
    token = new_token()
    started = time.monotonic()
    try:
        child = spawn.fork() if spawn is not None else os.fork()
    except OSError:
        for fd in (read_fd, write_fd, job_r, job_w, ready_r, ready_w):
            os.close(fd)
        if not namespaced:
            shutil.rmtree(workdir, ignore_errors=True)
        raise
    if child == 0:  # nothing raised here may reach the worker's loop: the child reports and exits
        try:
            os.close(read_fd)
            os.close(job_w)
            os.close(ready_r)
            confine.set_parent_death_signal()  # a worker that died before this leaves job_w closed: the child exits
            if namespaced:
                confine.enter_run_mounts(settings, readable)
                confine.enter_run_network_and_ipc()
                os.makedirs(workdir)
                _prepare_workdir(workdir, confinement)
            run_child(job_r, confinement, hardening, network, mode, settings, workdir, write_fd, token, ready_w)
        except BaseException as exc:  # noqa: BLE001
            _refuse(write_fd, f"the sandbox could not prepare this run ({type(exc).__name__}: {exc}); it was not run.", token)
    forked = time.monotonic()
    for fd in (write_fd, job_r, ready_w):
        os.close(fd)
    return _Spare(child, job_w, read_fd, workdir, namespaced, network, token, ready_r=ready_r, started=started,
                  forked=forked)


def _finish(spare: _Spare) -> None:
    """Kill what is left of a run (its whole PID namespace dies with its pid 1), reap it, remove its dir."""
    for fd in (spare.job_w, spare.result_r, spare.ready_r):
        try:
            os.close(fd)
        except OSError:
            pass
    spare.reap()
    if not spare.namespaced:
        shutil.rmtree(spare.workdir, ignore_errors=True)


_SIGKILLED = describe_exit(-signal.SIGKILL)
_OOM_NOTE = " by the kernel's out-of-memory killer (the run outgrew its container's memory limit)"


def _run_on(spare: _Spare, job: Job, oom: cgroup.OomCounter | None) -> RunReply:
    """Hand ``job`` to the spare's child and collect its events under the job's limits.

    With ``oom`` (the worker's own memory cgroup), processes the kernel's OOM killer ended during the
    run are counted in the reply (``oom_kills``) and named in the run's "killed by SIGKILL" texts."""
    oom_before = oom.count() if oom is not None else -1
    reply = _collect(spare, job)
    killed = oom.count() - oom_before if oom is not None and oom_before >= 0 else 0
    if killed > 0:
        reply = replace(reply, oom_kills=killed, exit_desc=_oom_noted(reply.exit_desc),
                        events=tuple(_oom_noted_event(event) for event in reply.events))
    return reply


def _oom_noted(text: str) -> str:
    return text.replace(_SIGKILLED, _SIGKILLED + _OOM_NOTE)


def _oom_noted_event(event: Event) -> Event:
    return replace(event, tb=_oom_noted(event.tb)) if isinstance(event, (End, Crash, Violation)) else event


def _collect(spare: _Spare, job: Job) -> RunReply:
    """Hand ``job`` to the spare's child and collect its events under the job's limits."""
    limits = Limits(**job.limits)
    started = time.monotonic()
    data = job.to_wire()
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(spare.job_w, view[: 1 << 16]):]
    except OSError:
        pass  # the child is gone: its exit status tells
    os.close(spare.job_w)
    spare.job_w = -1
    marks: dict[str, float] = {}
    events, stop_reason = collect_events(spare.result_r, limits, spare.exited, spare.token, marks=marks)
    ended = time.monotonic()
    stages = spare.stages() | {"handoff_s": marks.get("first", ended) - started, "tests_s": ended - marks.get("first", ended)}
    if events and isinstance(events[-1], Done):
        stages |= _judge_stats(events[-1].stats)
    if stop_reason is None and events and isinstance(events[-1], (Done, Crash)):
        # The suite reported its end: the exit status tells nothing more, and tearing the run's PID
        # namespace down (processes as big as the warm worker) is left to _finish, after the reply.
        return RunReply(tuple(events), None, "ended", ended - started, stages)
    exit_desc = describe_exit(os.waitstatus_to_exitcode(spare.reap()))
    return RunReply(tuple(events), stop_reason, exit_desc, time.monotonic() - started, stages)


def _judge_stats(text: str) -> dict[str, float]:
    """The split judge's round trips from its ``done`` event (timings only; what is not a plain number is dropped)."""
    try:
        stats = json.loads(text) if text else {}
    except ValueError:
        return {}
    return {k: float(stats[k]) for k in ("round_trips", "round_trip_s")
            if isinstance(stats, dict) and type(stats.get(k)) in (int, float) and 0 <= stats[k] < 1e9}


def _not_started(exc: OSError) -> RunReply:
    """The reply for a job whose run could not be started: a failed run that says why (the worker stays)."""
    why = f"SandboxError: the sandbox could not start this run ({type(exc).__name__}: {exc}); it was not run."
    return RunReply((Crash(why),), None, "was not started", 0.0)


def main() -> None:
    config = WorkerConfig.from_wire(sys.argv[1])
    settings = SandboxSettings(**config.settings)
    confine.set_parent_death_signal()
    # The protocol uses private copies of stdin/stdout; fds 0-2 become /dev/null so no stray print corrupts it.
    inp = os.fdopen(os.dup(0), "rb")
    out = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    os.environ.update(child_env(confine.SANDBOX_ROOT))
    os.environ["MPLCONFIGDIR"] = os.path.join(confine.SANDBOX_ROOT, ".mpl")
    readable = [*config.readable, *interpreter_paths()]  # this interpreter's, wherever it lives (/tmp too)
    confinement, hardening, spawn = establish(settings, config.uid, readable)
    if spawn is not None and (shims := make_python_shims(SHIM_DIR)):
        readable.append(shims)  # in the worker's private /tmp, bound read-only into each run's (PATH: child_env)
    oom = cgroup.find_oom_counter() if config.own_cgroup else None
    _import_quietly(config.preload)
    out.write(Ready(confinement.as_dict()).to_wire() + b"\n")
    out.flush()
    make_spare = functools.partial(_make_spare, confinement, hardening, spawn, settings, tuple(readable))
    counter = 0
    attempted: set[str] = set(config.preload)
    spare: _Spare | None = None
    teardown_s = 0.0
    # What the next spare is made for: the last job's network and judge mode (runs of a task set tend to repeat them).
    network, mode = "none", Mode.SPLIT
    for line in inp:
        counter += 1
        used: _Spare | None = None
        reply: Reply
        try:
            job = Job.from_wire(line)
            wanted = set(job.preload)
            network, mode = job.network, Mode(job.mode)
            imported = time.monotonic()
            if not wanted <= attempted:  # import first, then fork: the child starts warm
                _import_quietly(sorted(wanted - attempted))
                attempted |= wanted
                if spare is not None:
                    _finish(spare)
                    spare = None
            if spare is not None and spare.network != network:
                _finish(spare)
                spare = None
            used, spare = spare, None
            if used is None:
                try:
                    used = make_spare(counter, network, mode)
                except OSError as exc:  # the fork or the namespace refused (e.g. at the pids limit): not run
                    reply = _not_started(exc)
            imported = time.monotonic() - imported
            if used is not None:
                reply = _run_on(used, job, oom)
                reply = replace(reply, stages={**reply.stages, "import_s": imported, "previous_teardown_s": teardown_s})
        except Exception as exc:  # noqa: BLE001 - the worker itself failed: say so, stay alive; a started run ends below
            reply = WorkerFailed(f"{type(exc).__name__}: {exc}")
        out.write(reply.to_wire() + b"\n")
        out.flush()
        # Off the critical path: clean up this run and make the next run's confined child.
        if used is not None:
            teardown_s = time.monotonic()
            _finish(used)
            if confinement.level is Level.UID:  # no PID namespace per run: end what the run left under its uid
                sweep.sweep_uid(confinement.uid, (confine.SANDBOX_ROOT, "/dev/shm"))
            teardown_s = time.monotonic() - teardown_s  # reported with the next run (this one's reply is sent)
        counter += 1
        try:
            spare = make_spare(counter, network, mode)
        except OSError:
            spare = None  # tried again with the next job, which fails with the reason if it fails again

if __name__ == "__main__":
    main()
