"""Runs in the zygote and the run's child it forks: a run's confined child, made ahead of its job, what it does and how
it is forked.

A *spare* is forked by the zygote (:mod:`.zygote`), a process that has never held a job, so nothing of an
earlier run (its hidden tests, a calibration's canonical solution) is in the spare's memory or in the
program process it forks. The spare confines itself, then waits for its one job (:func:`run_child`), copying
ahead meanwhile, where the worker asks for it, the pages runs write first (:class:`..confinement.memory.Prefault`).

Holds:
    run_child    in the spare: confine, fork the split program's process, wait for the job, run it
    SpareMaker   forks spares with what the worker established
    SpareFacts   a spare, as its maker describes it to the worker
"""

from __future__ import annotations

import os
import resource
import select
import shutil
import signal
import struct
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import NoReturn

from ..confinement import confine, memory
from ..confinement.confine import Confinement, Level, SandboxSettings
from ..confinement.hardening import Hardening
from ..confinement.slot_cgroup import SlotCgroup
from ..limits import Limits
from ..messages import Crash, Job, Mode
from ..run.events import new_token
from ..run.judge import Channel, JudgeFacts, connect_program, judge_source, serve_program
from ..run.runner import emit, run_suite
from ..runtimes.interpreter import child_env

__all__ = ["run_child", "SpareMaker", "SpareFacts"]


def run_child(job_fd: int, confinement: Confinement, hardening: Hardening, network: str, mode: Mode,
              settings: SandboxSettings, workdir: str, result_fd: int, token: str, ready_fd: int = -1,
              prefault: memory.Prefault = memory.Prefault()) -> None:
    """In the forked child: confine, wait for the job on ``job_fd``, run it, stream events to ``result_fd``
    (each line sealed with the run's ``token``: a line the program writes there fails the run).

    Before it waits, it writes to ``ready_fd`` (and closes it) the ``time.monotonic()`` at which it was
    confined and at which its split program process was forked (for the per-stage timings; no program
    has run yet, so the worker can trust them).

    The child is made (and confined: uid, rlimits, Landlock, seccomp) before its job exists, so a run's
    critical path holds no confinement setup. Made for ``split`` mode, it has also forked the program's
    process ahead, so that process's memory never holds the job (the hidden tests); a split job that finds
    no such process (its fork failed, or the spare was made for ``inprocess``: the worker remakes spares
    whose mode differs) is refused, never forked for then: a split spare whose program process cannot be made
    refuses before it is ready. An in-process job ends that process. If a layer the worker reported cannot be
    applied, the spare refuses with that reason, before it is ready, and the job never runs. Never returns.

    Everything a spare refuses before it is ready (it has not read its job, so none of the program's code ran)
    the worker reports as the sandbox's loss of the run, not the program's failure (:attr:`.zygote.Spare.was_ready`).

    With a ``prefault`` plan (the zygote's pages, :class:`..confinement.memory.Prefault`), the child and its
    program process drop to the lowest priority once it is ready and copy their shared pages until the job
    comes; the worker gives them their priority back before it writes the job (so no job runs low).
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
            program_process = _fork_program_process(workdir, (result_fd, job_fd, ready_fd), prefault)
        except OSError as exc:  # e.g. the pids limit, still reached after the retries: refused before it is ready
            _refuse(result_fd, f"the program's process could not be made before its job ({exc}); not run.", token)
    if prefault.chunks:  # before ready: once ready, the worker may raise this process group back at any moment
        if program_process is not None:
            memory.lowest_priority(program_process[0])
        memory.lowest_priority()
    if ready_fd >= 0:
        try:
            os.write(ready_fd, struct.pack("dd", confined, time.monotonic()))
        except OSError:
            pass
        os.close(ready_fd)
    # A split spare also watches its program process: one that ended before the job (killed while it waited) would
    # fail the job, so the spare ends first, and the worker, which sees it gone, makes another for the job.
    watched = (job_fd,) if program_process is None else (job_fd, program_process[1].read_fd)
    prefaulted_mb = prefault.while_idle(*watched) / (1 << 20)
    if not _job_came_first(job_fd, watched):
        os._exit(0)
    with os.fdopen(job_fd, "rb") as fh:
        data = fh.read()
    read_at = time.monotonic()
    if not data:
        os._exit(0)  # a spare that was discarded
    job = Job.from_wire(data)
    cpu = int(Limits(**job.limits).suite_timeout_s + 5)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    module, test_class, entry = job.module, job.test_class, job.entry_point
    if job.network != network:  # the worker matches spares to jobs; never run with more network
        _refuse(result_fd, f"this run was prepared with network {network!r}; not run.", token)
    if job.mode == Mode.SPLIT.value:
        if program_process is None:  # forked now, it would hold the job (the hidden tests) in its memory
            _refuse(result_fd, "the program's process could not be made before its job (the pids limit?); not run.",
                    token)
        pid, channel = program_process
        source = judge_source(job.program, job.prelude, job.test)
        facts = JudgeFacts.from_data(job.facts) if job.facts is not None else None
        connection = connect_program(channel, pid, job.program, module, entry, source, facts)
        connected_at = time.monotonic()
        if connection.crash is not None:
            emit(result_fd, Crash(connection.crash), token)
            os._exit(0)

        def stats() -> dict[str, float]:
            return {**(connection.stats() if connection.stats is not None else {}), **(connection.times or {}),
                    "read_at": read_at, "connected_at": connected_at, "prefaulted_mb": prefaulted_mb}

        run_suite(result_fd, source, module, test_class, connection.provided, token=token, code=connection.code,
                  stats=stats, refusals=connection.refusals, first=job.first)
    else:
        if program_process is not None:
            pid, channel = program_process
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            channel.close()
        sys.path.insert(0, workdir)
        run_suite(result_fd, job.program + "\n" + job.test, module, test_class, token=token, tests=job.test,
                  stats=lambda: {"read_at": read_at, "prefaulted_mb": prefaulted_mb}, first=job.first)
    os._exit(0)


def _job_came_first(job_fd: int, watched: tuple[int, ...]) -> bool:
    """Block until one of ``watched`` is readable or hung up: True if ``job_fd`` is among them (the job, or the
    worker's end, has come), False if only another is (the program process's channel: that process ended)."""
    waiting = select.poll()
    for fd in watched:
        waiting.register(fd, select.POLLIN | select.POLLHUP)
    return job_fd in {fd for fd, _ in waiting.poll()}


_FORK_ATTEMPTS = 50


def _fork_program_process(workdir: str, close: tuple[int, ...], prefault: memory.Prefault) -> tuple[int, Channel]:
    """Fork the split judge's program process (closing ``close`` in it): it copies its ``prefault`` pages until
    the program comes on its channel, then serves calls to it. Returns its pid and the judge's end of the channel."""
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
        prefault.while_idle(to_prog_r)
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


@dataclass(frozen=True)
class SpareFacts:
    """A spare as the zygote that forked it describes it to the worker (its descriptors travel beside it).

    ``child`` is the zygote's child (the run's pid 1 when ``namespaced``), signalled and reaped by the
    zygote only (:mod:`..children`); ``token`` seals its event lines (:func:`..run.events.new_token`); ``started``
    and ``forked``: ``time.monotonic()`` around the fork (one clock for every process of the machine);
    ``lowered``: it goes to the lowest priority once ready, to prefault (the worker raises it back before its job).
    """

    child: int
    workdir: str
    namespaced: bool
    network: str
    mode: str
    token: str
    started: float
    forked: float
    lowered: bool = False

    def to_data(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_data(cls, data: dict[str, object]) -> SpareFacts:
        return cls(**data)  # type: ignore[arg-type]


@dataclass(frozen=True)
class SpareMaker:
    """Forks each run's confined child: what the worker established, bound once (see :func:`run_child`).

    ``readable``: what runs must see (those of its paths under ``/tmp`` are bound into each run's fresh
    ``/tmp``); ``spawn``: the PID namespace per run, or None below level ``namespaces``; ``cgroup``: the slot's
    cgroup (:mod:`..confinement.slot_cgroup`), which each spare joins first thing after its fork, or None.
    """

    confinement: Confinement
    hardening: Hardening
    spawn: confine.RunNamespaces | None
    settings: SandboxSettings
    readable: tuple[str, ...]
    cgroup: SlotCgroup | None = None

    def make(self, counter: int, network: str, mode: Mode, prefault: memory.Prefault = memory.Prefault()
             ) -> tuple[SpareFacts, tuple[int, int, int]]:
        """Fork the next run's confined child (it prepares itself and waits for its job, copying ``prefault``'s
        pages meanwhile): its facts and the descriptors ``(job_w, result_r, ready_r)``, which the caller owns.
        Raises OSError, leaving nothing behind, when the fork or the new PID namespace is refused."""
        namespaced = self.spawn is not None
        # Namespaced: the dir is made by the child inside the run's own fresh /tmp, which vanishes with the run.
        workdir = (os.path.join(confine.SANDBOX_ROOT, f"ccw_run{counter}") if namespaced
                   else tempfile.mkdtemp(prefix="ccw_"))
        if not namespaced:
            _prepare_workdir(workdir, self.confinement)
        read_fd, write_fd = os.pipe()
        job_r, job_w = os.pipe()
        ready_r, ready_w = os.pipe()
        token = new_token()
        started = time.monotonic()
        try:
            child = self.spawn.fork() if self.spawn is not None else os.fork()
        except OSError:
            for fd in (read_fd, write_fd, job_r, job_w, ready_r, ready_w):
                os.close(fd)
            if not namespaced:
                shutil.rmtree(workdir, ignore_errors=True)
            raise
        if child == 0:  # nothing raised here may reach the caller's loop: the child reports and exits
            try:
                if self.cgroup is not None:  # before anything of the run: its CPU and processes are bound from here on
                    self.cgroup.join()
                for fd in (read_fd, job_w, ready_r):
                    os.close(fd)
                confine.set_parent_death_signal()  # a parent that died before this leaves job_w closed: it exits
                if namespaced:
                    confine.enter_run_mounts(self.settings, self.readable)
                    confine.enter_run_network_and_ipc()
                    os.makedirs(workdir)
                    _prepare_workdir(workdir, self.confinement)
                run_child(job_r, self.confinement, self.hardening, network, mode, self.settings, workdir, write_fd,
                          token, ready_w, prefault)
            except BaseException as exc:  # noqa: BLE001
                _refuse(write_fd, f"the sandbox could not prepare this run ({type(exc).__name__}: {exc}); "
                        "it was not run.", token)
        forked = time.monotonic()
        for fd in (write_fd, job_r, ready_w):
            os.close(fd)
        facts = SpareFacts(child, workdir, namespaced, network, mode.value, token, started, forked, bool(prefault.chunks))
        return facts, (job_w, read_fd, ready_r)
