"""A warm sandbox worker: a long-lived process that forks one confined child per execution.

Started by :class:`~convcodeworld_gym.sandbox.pool.SandboxExecutor` as
``python -s -m convcodeworld_gym.sandbox.worker CONFIG_JSON`` with a scrubbed environment. At start
it confines itself as far as it can (see :mod:`.confine`), imports the heavy libraries it was told
to preload, and answers ``{"ready": confinement}``. Then, per job (one JSON line on stdin), it:

1. imports the job's own libraries into itself, so the next run of that task set is warm;
2. forks a helper that opens a new PID namespace and forks the child (pid 1 there);
3. the child becomes the slot's non-root uid with rlimits, enters a fresh work dir in the private
   tmpfs, closes every inherited descriptor and runs the job: in ``split`` mode it is the judge and
   forks the program's process; in ``inprocess`` mode it runs program and tests itself;
4. the worker reads the child's events under the time and output limits, kills the whole PID
   namespace at the end, removes the work dir and answers one JSON line.

The worker is trusted: it never runs the program's code in its own process.

Holds:
    main        the worker's loop
    run_child   what the confined child does (judge or in-process)
    establish   confine the worker itself as far as the machine allows
    judge_source  the judge's test module, aligned line for line with the in-process one
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from typing import Any

from . import confine
from ._runner import emit, run_suite
from .confine import Confinement, Level, SandboxSettings
from .executor import Limits
from .judge import Channel, Mode, ProgramProxy, safe_loads, serve_program
from .local import child_env, collect_events

__all__ = ["main", "run_child", "establish", "judge_source"]


def establish(settings: SandboxSettings, uid: int, readable: list[str]) -> Confinement:
    """Confine this worker as far as the machine allows; returns what was achieved."""
    missing: list[str] = []
    features: list[str] = ["process_group", "scrubbed_env", "closed_fds", "private_workdir", "output_cap"]
    if os.geteuid() != 0:
        uid = os.getuid()
        missing.append("uid: the executor does not run as root, so it cannot switch to a sandbox uid")
        return Confinement(Level.PROCESS, uid, tuple(features), tuple(missing))
    level = Level.UID
    features += ["non_root_uid", "rlimits", "not_dumpable"]
    try:
        features += confine.enter_worker_namespaces(settings, readable)
        _probe_pid_namespace()
        level = Level.NAMESPACES
        features.append("pidns")
    except OSError as exc:
        missing.append(f"namespaces: {exc}")
    missing += ["seccomp: not implemented", "landlock: not implemented"]
    return Confinement(level, uid, tuple(features), tuple(missing))


def _probe_pid_namespace() -> None:
    """Raise OSError unless a forked child can open the per-run namespaces (each run's helper does exactly that)."""
    pid = os.fork()
    if pid == 0:
        try:
            confine.enter_run_namespaces(SandboxSettings(tmpfs_mb=1, tmpfs_inodes=100))
            os._exit(0)
        except BaseException:  # noqa: BLE001
            os._exit(1)
    if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0:
        raise OSError("unshare(CLONE_NEWPID) failed")


def _import_quietly(names: list[str]) -> None:
    for name in names:
        if name in sys.modules:
            continue
        try:
            importlib.import_module(name)
        except BaseException:  # noqa: BLE001 - a library that fails to import is reported by the run itself
            pass


def run_child(job: dict[str, Any], confinement: Confinement, settings: SandboxSettings, workdir: str, result_fd: int) -> None:
    """In the forked child: confine, then run the job and stream events to ``result_fd``. Never returns."""
    try:
        os.setsid()
    except OSError:
        pass  # already a group leader (pid 1 of a new namespace)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    confine.close_fds_except([result_fd])
    if confinement.level.at_least(Level.UID):
        confine.drop_to(confinement.uid, settings, cpu_seconds=job["limits"]["suite_timeout_s"] + 5)
    os.chdir(workdir)
    os.environ.clear()
    os.environ.update(child_env(workdir))
    sys.path[:] = [p for p in sys.path if p not in ("", ".")]
    module, test_class, entry = job["module"], job["test_class"], job["entry_point"]
    if job["mode"] == Mode.SPLIT.value:
        to_prog_r, to_prog_w = os.pipe()
        to_judge_r, to_judge_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the program's process
            os.close(result_fd)
            os.close(to_prog_w)
            os.close(to_judge_r)
            sys.path.insert(0, workdir)
            serve_program(Channel(to_prog_r, to_judge_w), job["program"], module, entry)
            os._exit(0)
        os.close(to_prog_r)
        os.close(to_judge_w)
        channel = Channel(to_judge_r, to_prog_w)
        try:
            first = safe_loads(channel.recv())
        except Exception as exc:  # noqa: BLE001
            first = ("crash", f"The program process ended before it was ready ({exc}).")
        if first[0] == "crash":
            emit(result_fd, {"e": "crash", "tb": str(first[1])})
            os._exit(0)
        run_suite(result_fd, judge_source(job["program"], job["prelude"], job["test"]), module, test_class,
                  {entry: ProgramProxy(channel, entry, pid)})
    else:
        sys.path.insert(0, workdir)
        run_suite(result_fd, job["program"] + "\n" + job["test"], module, test_class)
    os._exit(0)


def judge_source(program: str, prelude: str, test: str) -> str:
    r"""The judge's module: the task's imports, then the tests at the same line numbers as in ``program + "\n" + test``.

    >>> judge_source("import os\ndef f():\n    return 1\n", "import os\n", "T").splitlines()
    ['import os', '', '', '', 'T']
    """
    prelude = prelude if prelude.endswith("\n") or not prelude else prelude + "\n"
    offset = (program + "\n").count("\n")
    return prelude + "\n" * max(1, offset - prelude.count("\n")) + test


def _prepare_workdir(workdir: str, confinement: Confinement) -> None:
    if confinement.level.at_least(Level.UID):
        os.chown(workdir, confinement.uid, confinement.uid)
    os.chmod(workdir, 0o700)


def _run_job(job: dict[str, Any], confinement: Confinement, settings: SandboxSettings, counter: int) -> dict[str, Any]:
    _import_quietly(job.get("preload", []))
    limits = Limits(**job["limits"])
    namespaced = confinement.level is Level.NAMESPACES
    # Namespaced: the dir is made by the helper inside the run's own fresh /tmp, which vanishes with the run.
    workdir = os.path.join(confine.SANDBOX_ROOT, f"ccw_run{counter}") if namespaced else tempfile.mkdtemp(prefix="ccw_")
    read_fd, write_fd = os.pipe()
    pid_r, pid_w = os.pipe()
    started = time.monotonic()
    helper = os.fork()
    if helper == 0:
        try:
            os.close(read_fd)
            os.close(pid_r)
            if namespaced:
                confine.enter_run_namespaces(settings)
                os.makedirs(workdir)
            _prepare_workdir(workdir, confinement)
            child = os.fork()
            if child == 0:
                os.close(pid_w)
                run_child(job, confinement, settings, workdir, write_fd)
            os.close(write_fd)
            os.write(pid_w, str(child).encode())
            os.close(pid_w)
            confine.set_parent_death_signal()
            _, status = os.waitpid(child, 0)
            os._exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))
        except BaseException:  # noqa: BLE001
            os._exit(125)
    os.close(write_fd)
    os.close(pid_w)
    child_pid = int(os.read(pid_r, 32) or b"0")
    os.close(pid_r)
    status: list[int] = []

    def exited() -> bool:
        if not status:
            pid, st = os.waitpid(helper, os.WNOHANG)
            if pid:
                status.append(st)
        return bool(status)

    try:
        events, stop_reason = collect_events(read_fd, limits, exited)
    finally:
        os.close(read_fd)
        for target in (child_pid,):
            if target > 0:
                for kill in (lambda p: os.killpg(p, signal.SIGKILL), lambda p: os.kill(p, signal.SIGKILL)):
                    try:
                        kill(target)
                    except OSError:
                        pass
        if not status:
            status.append(os.waitpid(helper, 0)[1])
        if not namespaced:
            shutil.rmtree(workdir, ignore_errors=True)
    code = os.waitstatus_to_exitcode(status[0])
    if code > 128:
        try:
            exit_desc = f"was killed by signal {signal.Signals(code - 128).name}"
        except ValueError:
            exit_desc = f"was killed by signal {code - 128}"
    else:
        exit_desc = f"exited with code {code}"
    return {"events": events, "stop_reason": stop_reason, "exit_desc": exit_desc, "run_s": time.monotonic() - started}


def main() -> None:
    config = json.loads(sys.argv[1])
    settings = SandboxSettings(**config["settings"])
    confine.set_parent_death_signal()
    # The protocol uses private copies of stdin/stdout; fds 0-2 become /dev/null so no stray print corrupts it.
    inp = os.fdopen(os.dup(0), "rb")
    out = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    os.environ.update(child_env(confine.SANDBOX_ROOT))
    os.environ["MPLCONFIGDIR"] = os.path.join(confine.SANDBOX_ROOT, ".mpl")
    confinement = establish(settings, config["uid"], config["readable"])
    _import_quietly(config.get("preload", []))
    out.write((json.dumps({"ready": confinement.as_dict()}) + "\n").encode())
    out.flush()
    counter = 0
    for line in inp:
        counter += 1
        try:
            reply = _run_job(json.loads(line), confinement, settings, counter)
        except Exception as exc:  # noqa: BLE001 - the worker itself failed: say so, stay alive
            reply = {"worker_error": f"{type(exc).__name__}: {exc}"}
        out.write((json.dumps(reply) + "\n").encode("utf-8", "surrogatepass"))
        out.flush()


if __name__ == "__main__":
    main()
