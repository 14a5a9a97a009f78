"""Hostile programs against the sandbox: each must get reward 0, a truthful failure text, leave the
host untouched, and leave the executor working.

Most attacks are written so that a *weak* sandbox fails the test instead of the machine: the
program returns the right answer only when its attack succeeded, so a sandbox that lets the attack
through gives reward 1 and the assertion fails. Every bomb is bounded (a few hundred forks, a few
GB); ``kill(-1)`` runs only after a probe proved the program sits in its own PID namespace.
"""

from __future__ import annotations

import inspect
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

import pytest

from convcodeworld_gym import ConvCodeWorldEnv
from convcodeworld_gym.sandbox import Level, SandboxExecutor, SandboxSettings, TimePolicy
from convcodeworld_gym.tasks import Task
from convcodeworld_gym.testing.infra import WorkerKiller, marked

from hostile_programs import (ALWAYS_EQUAL, FORGE_CHANNEL, FORGE_REJECTED, FRAME_WALK, MOCKED, PATCH_UNITTEST, SQUARE,
                             assert_rejected, succeed_if, texts)

SETTINGS = SandboxSettings(tmpfs_mb=64, tmpfs_inodes=2000, address_space_mb=1024, file_size_mb=32, max_processes=64)


@pytest.fixture(scope="module")
def sandbox():
    with SandboxExecutor(workers=2, settings=SETTINGS, preload=(), time_policy=TimePolicy(floor_s=3.0, cap_s=10.0)) as ex:
        yield ex


def sandbox_uid_processes(ex: SandboxExecutor) -> list[str]:
    """Processes running under this executor's sandbox uids. Each worker keeps one spare run ready
    (its judge and its program process, waiting for a job): that is 2 per worker, never more."""
    uids = {str(w.confinement.get("uid")) for w in ex._workers if w.confinement}  # noqa: SLF001
    out = subprocess.run(["ps", "-eo", "uid=,stat=,pid=,args="], capture_output=True, text=True).stdout.splitlines()
    # zombies hold no resources; this machine's init may be slow to reap orphans
    return [line for line in out if line.split() and line.split()[0] in uids - {"0"} and not line.split()[1].startswith("Z")]


def test_confinement_level_is_reported_and_full_as_root(sandbox):
    result = sandbox.run(SQUARE, SQUARE.ground_truth)
    conf = result.details["confinement"]
    assert result.passed and conf["level"] in {lvl.value for lvl in Level}
    if os.geteuid() == 0:
        assert Level(conf["level"]).at_least("namespaces"), conf
        assert conf["uid"] != 0 and {"netns", "pidns", "readonly_root", "non_root_uid"} <= set(conf["features"])
        if conf["level"] == "full":
            assert {"seccomp", "landlock_fs"} <= set(conf["features"]) and not conf["missing"], conf
        else:  # a kernel without seccomp or Landlock: the report says which and why
            assert any(m.startswith(("seccomp", "landlock")) for m in conf["missing"]), conf
    assert conf["network"] == "none"
    assert result.details["judge"] == "split"


@pytest.mark.parametrize("level", ["namespaces", "full"])
def test_require_fails_closed_when_level_unreachable(level):
    from convcodeworld_gym.errors import ExecutorError

    with SandboxExecutor(workers=1, preload=(), require=level) as ex:
        reached = Level(ex.confinement.get("level", "process")) if os.geteuid() == 0 else Level.PROCESS
        if reached.at_least(level):
            assert ex.run(SQUARE, SQUARE.ground_truth).passed
        else:
            with pytest.raises(ExecutorError, match=f"below the required '{level}'"):
                ex.run(SQUARE, SQUARE.ground_truth)


def test_infinite_loop_times_out(sandbox):
    result = assert_rejected(sandbox, "def task_func(x):\n    while True:\n        pass\n", "TimeoutError")
    assert result.timed_out


def test_memory_bomb_is_bounded(sandbox):
    # 3 GB in 256 MB steps; RLIMIT_AS of this sandbox is 1 GB.
    assert_rejected(sandbox, succeed_if("keep = [bytearray(256 << 20) for _ in range(12)]\nok = True"), "MemoryError")


def test_fork_bomb_is_bounded_and_leaves_no_process(sandbox):
    bomb = """
import time
pids = []
for _ in range(300):
    pid = os.fork()
    if pid == 0:
        time.sleep(20)
        os._exit(0)
    pids.append(pid)
ok = True
"""
    assert_rejected(sandbox, succeed_if(bomb), "Resource temporarily unavailable", "BlockingIOError")
    time.sleep(0.5)
    assert len(sandbox_uid_processes(sandbox)) <= 2 * len(sandbox._workers), sandbox_uid_processes(sandbox)  # noqa: SLF001


def test_kill_parent_and_kill_all_in_pid_namespace(sandbox):
    host_pidns = os.readlink("/proc/self/ns/pid")
    probe = succeed_if(f"ok = os.readlink('/proc/self/ns/pid') != {host_pidns!r} and os.getpid() < 10")
    if not sandbox.run(SQUARE, probe).passed:
        pytest.skip("LOUD SKIP: the program does not run in its own PID namespace; kill(-1) would hit the host")
    killer = "import os, signal\ndef task_func(x):\n    os.kill(os.getppid(), signal.SIGKILL)\n    os.kill(-1, signal.SIGKILL)\n    return -1\n"
    assert_rejected(sandbox, killer, "AssertionError", "killed by signal SIGKILL", "No such process", "Operation not permitted")
    assert_rejected(sandbox, killer, "AssertionError", "killed by signal SIGKILL", "No such process", "Operation not permitted",
                    task=MOCKED)
    assert os.getpid() > 0 and sandbox.run(SQUARE, SQUARE.ground_truth).passed


def test_writes_and_deletes_outside_the_work_dir_fail(sandbox, tmp_path_factory):
    victim_dir = f"/var/tmp/ccw_victim_{uuid.uuid4().hex}"
    os.makedirs(victim_dir)
    try:
        with open(f"{victim_dir}/keep.txt", "w") as fh:
            fh.write("x")
        marker = f"/etc/ccw_pwned_{uuid.uuid4().hex}"
        write = f"with open({marker!r}, 'w') as fh:\n    fh.write('pwned')\nok = True"
        assert_rejected(sandbox, succeed_if(write), "Read-only file system", "Permission denied")
        # /var/tmp is not even in the run's view (confinement/view.py: only the system's dirs and the runtime's are)
        delete = f"import shutil\nshutil.rmtree({victim_dir!r})\nok = True"
        assert_rejected(sandbox, succeed_if(delete), "Read-only file system", "Permission denied", "No such file or directory")
        assert os.path.exists(f"{victim_dir}/keep.txt") and not os.path.exists(marker)
    finally:
        subprocess.run(["rm", "-rf", victim_dir], check=False)


def proc_scan(text: str, entry: str, found: str = "False") -> str:
    """An attack that looks for ``text`` in ``/proc/*/ENTRY`` of every process it can see (``found`` starts it)."""
    return f"""
found = {found}
for pid in os.listdir('/proc'):
    try:
        found = found or {text!r}.encode() in open(f'/proc/{{pid}}/{entry}', 'rb').read()
    except OSError:
        pass
ok = found
"""


def assert_unseen_from_a_run(sandbox, argv: list[str], env: dict | None, attack: str) -> None:
    """Hold a host process (``argv``) while ``attack`` runs in the sandbox: the attack must fail."""
    holder = subprocess.Popen(argv, env=env)
    try:
        assert_rejected(sandbox, succeed_if(attack), "attack blocked")
    finally:
        holder.kill()
        holder.wait()


def test_secrets_unreachable_from_env_and_proc(sandbox, monkeypatch):
    secret = f"sk-ccw-{uuid.uuid4().hex}"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    attack = proc_scan(secret, "environ", found=f"os.environ.get('OPENAI_API_KEY') == {secret!r}")
    assert_unseen_from_a_run(sandbox, ["sleep", "30"], {"OPENAI_API_KEY": secret}, attack)


def test_host_processes_are_invisible_in_proc(sandbox):
    marker = f"ccw-marker-{uuid.uuid4().hex}"  # command lines are readable by every uid: only a run's own /proc hides them
    argv = [sys.executable, "-c", "import time; time.sleep(30)", marker]
    assert_unseen_from_a_run(sandbox, argv, None, proc_scan(marker, "cmdline"))


def test_socket_to_localhost_fails(sandbox):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        attack = f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=2)\nok = True"
        assert_rejected(sandbox, succeed_if(attack), "Permission denied", "Network is unreachable", "Connection refused",
                        "timed out")
    finally:
        server.close()


def need_full(ex: SandboxExecutor, feature: str) -> None:
    """Skip (loudly) unless the executor reached this hardening feature; a machine that should have it fails elsewhere."""
    conf = ex.confinement
    if feature not in conf.get("features", []):
        pytest.skip(f"LOUD SKIP: no {feature} here (level {conf.get('level')}; missing: {conf.get('missing')})")


@pytest.mark.parametrize("family", ["AF_INET", "AF_INET6", "AF_PACKET", "AF_NETLINK"])
def test_seccomp_refuses_ip_and_raw_sockets_even_on_the_runs_own_loopback(sandbox, family):
    need_full(sandbox, "seccomp")
    # Without the filter each of these works inside the run's network namespace (a server on its own loopback).
    attack = {
        "AF_INET": "import socket\nsrv = socket.create_server(('127.0.0.1', 0))\n"
                   "socket.create_connection(srv.getsockname(), timeout=2).close()\nok = True",
        "AF_INET6": "import socket\nsocket.socket(socket.AF_INET6, socket.SOCK_DGRAM).close()\nok = True",
        "AF_PACKET": "import socket\nsocket.socket(socket.AF_PACKET, socket.SOCK_DGRAM).close()\nok = True",
        "AF_NETLINK": "import socket\nsocket.socket(socket.AF_NETLINK, socket.SOCK_RAW).close()\nok = True",
    }[family]
    result = assert_rejected(sandbox, succeed_if(attack), "PermissionError: [Errno 13] Permission denied")
    assert result.details["confinement"]["network"] == "none"


SOCKET_TESTS = """import socket, threading, unittest
class TestCases(unittest.TestCase):
    def test_echo(self):
        srv = socket.create_server(('127.0.0.1', 0))
        def serve():
            conn, _ = srv.accept()
            conn.sendall(conn.recv(16))
            conn.close()
        threading.Thread(target=serve).start()
        self.assertEqual(task_func(srv.getsockname()[1]), b'hi')
"""
ECHO = Task("hostile/echo", "Echo.", "import socket\ndef task_func(port):\n", "task_func",
            "    with socket.create_connection(('127.0.0.1', port), timeout=5) as s:\n        s.sendall(b'hi')\n"
            "        return s.recv(16)\n", SOCKET_TESTS)


def test_a_task_whose_tests_serve_on_loopback_keeps_ip_sockets_but_no_outside_network(sandbox):
    result = sandbox.run(ECHO, ECHO.ground_truth)
    assert result.passed and result.details["confinement"]["network"] == "loopback", texts(result)
    outside = ECHO.ground_truth.replace("'127.0.0.1'", "'192.0.2.1'")  # TEST-NET-1: unreachable in any case
    assert not sandbox.run(ECHO, outside).passed


def test_kill_of_every_process_is_refused_by_seccomp(sandbox):
    need_full(sandbox, "seccomp")
    # signal 0 only asks whether the call is allowed: harmless even where a weak sandbox lets it through
    assert_rejected(sandbox, succeed_if("import signal\nos.kill(-1, 0)\nok = True"), "Operation not permitted")


def test_signals_to_a_process_outside_the_run_fail(sandbox):
    outsider = subprocess.Popen(["sleep", "30"])
    try:
        attack = f"import signal\nos.kill({outsider.pid}, 0)\nok = True"  # signal 0: harmless if it got through
        assert_rejected(sandbox, succeed_if(attack), "No such process", "Operation not permitted")
        assert outsider.poll() is None
    finally:
        outsider.kill()
        outsider.wait()


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGALRM", "SIGUSR1"])
def test_signals_to_every_process_the_program_sees_leave_the_judge_untouched(sandbox, sig):
    # A judge that took one of these (KeyboardInterrupt, a default handler, an alarm) could stop its suite early
    # and count the tests it never ran as none failed. Every test must still be judged on the wrong value.
    signaller = (f"import os, signal\ndef task_func(x):\n    for pid in os.listdir('/proc'):\n"
                 f"        if pid.isdigit() and int(pid) != os.getpid():\n"
                 f"            try:\n                os.kill(int(pid), signal.{sig})\n"
                 f"            except OSError:\n                pass\n    return -1\n")
    result = assert_rejected(sandbox, signaller, "AssertionError: -1 != 4")
    assert [t.outcome.value for t in result.tests] == ["failed", "failed"], texts(result)


@pytest.mark.parametrize("call", ["unshare", "ptrace", "mount"])
def test_namespace_tracing_and_mount_calls_are_refused(sandbox, call):
    need_full(sandbox, "seccomp")
    # Each succeeds for an unprivileged process without the filter (a new user namespace, PTRACE_TRACEME,
    # a tmpfs in a user namespace of its own); each fails with EPERM under it.
    attack = {
        "unshare": "ok = libc.unshare(0x10000000) == 0",
        "ptrace": "ok = libc.ptrace(0, 0, 0, 0) == 0",
        "mount": "ok = libc.unshare(0x10000000 | 0x00020000) == 0 and libc.mount(b'none', b'/tmp', b'tmpfs', 0, None) == 0",
    }[call]
    program = succeed_if(f"import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n{attack}\n"
                         "if not ok:\n    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))")
    assert_rejected(sandbox, program, "Operation not permitted")


def test_landlock_refuses_writes_where_the_mounts_would_allow_them():
    if os.geteuid() != 0:
        pytest.skip("LOUD SKIP: needs root (mounts a world-writable tmpfs the sandbox can see)")
    # In /dev, a system dir every run sees (a tmpfs under /var/tmp would be hidden whole: confinement/view.py)
    target = f"/dev/ccw_landlock_{uuid.uuid4().hex}"
    os.makedirs(target)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=1777", "tmpfs", target]).returncode == 0
    try:
        if not mounted:
            pytest.skip("LOUD SKIP: could not mount a tmpfs")
        # a fresh executor: its workers' mount namespaces copy this world-writable, read-write mount
        with SandboxExecutor(workers=1, settings=SETTINGS, preload=()) as ex:
            need_full(ex, "landlock_fs")
            attack = f"with open('{target}/pwned', 'w') as fh:\n    fh.write('x')\nok = True"
            assert_rejected(ex, succeed_if(attack), "Permission denied", task=SQUARE)
            assert not os.path.exists(f"{target}/pwned")
            legit = succeed_if("open('here.txt', 'w').write('x')\nopen('/tmp/t.txt', 'w').write('y')\n"
                               "ok = open('here.txt').read() == 'x'")
            assert ex.run(SQUARE, legit).passed
    finally:
        if mounted:
            subprocess.run(["umount", target], check=False)
        os.rmdir(target)


LEGIT = """
import multiprocessing, subprocess, threading
with open('script.py', 'w') as fh:
    fh.write('print(6 * 7)')
out = subprocess.run([sys.executable, 'script.py'], capture_output=True, text=True, check=True).stdout
shell = subprocess.run('echo hi > shell.txt && cat shell.txt', shell=True, capture_output=True, text=True).stdout
box = []
t = threading.Thread(target=lambda: box.append(1))
t.start(); t.join()
a, b = multiprocessing.Pipe()
a.send('m')
ok = out.strip() == '42' and shell.strip() == 'hi' and box == [1] and b.recv() == 'm' and os.listdir('/usr')
"""


def test_legitimate_work_keeps_working_under_full_confinement(sandbox):
    result = sandbox.run(SQUARE, succeed_if(LEGIT))
    assert result.passed, texts(result)


def test_many_files_and_big_files_hit_the_disk_limits(sandbox):
    many = "for i in range(5000):\n    open(f'f{i}', 'w').close()\nok = True"
    assert_rejected(sandbox, succeed_if(many), "No space left on device")
    big = "with open('big', 'wb') as fh:\n    for _ in range(300):\n        fh.write(b'x' * (1 << 20))\nok = True"
    assert_rejected(sandbox, succeed_if(big), "File too large", "No space left on device", "SIGXFSZ")


def test_huge_stdout_and_huge_failure_text_are_capped(sandbox):
    assert_rejected(sandbox, "def task_func(x):\n    print('x' * (64 << 20))\n    return -1\n", "AssertionError")
    result = assert_rejected(sandbox, "def task_func(x):\n    raise ValueError('y' * (40 << 20))\n", "OutputLimitExceeded", "characters cut")
    assert len(texts(result)) < 200_000


def test_deep_recursion_fails_truthfully(sandbox):
    program = "import sys\nsys.setrecursionlimit(10**7)\ndef f(n):\n    return f(n + 1) + 1\ndef task_func(x):\n    return f(0)\n"
    # Python 3.11 keeps pure-Python frames on the heap: this ends in MemoryError, a crash, or the time limit.
    assert_rejected(sandbox, program, "SIGSEGV", "RecursionError", "MemoryError", "TimeoutError")


# Deeper than the parser or the syntax tree's construction goes: the host's own parses of the program (its imports
# choose the worker group, the static check) must not raise on them, in either judge.
TOO_DEEP = {"unary": "-" * 5000 + "1", "calls": "f" + "()" * 10000, "not": "not " * 10000 + "1"}


@pytest.mark.parametrize("shape", sorted(TOO_DEEP))
@pytest.mark.parametrize("judge", ["split", "inprocess"])
def test_a_program_nested_too_deep_to_parse_fails_and_never_raises(sandbox, inprocess_sandbox, shape, judge):
    program = f"def task_func(x):\n    return {TOO_DEEP[shape]}\n"
    result = assert_rejected(sandbox if judge == "split" else inprocess_sandbox, program, "RecursionError", "MemoryError")
    assert result.details["judge"] == judge


@pytest.mark.parametrize("exit_code", ["sys.exit(0)", "os._exit(0)"])
@pytest.mark.parametrize("where", ["module", "call"])
def test_exit_calls_do_not_pass(sandbox, exit_code, where):
    if where == "module":
        program = f"import os, sys\n{exit_code}\ndef task_func(x):\n    return x * x\n"
    else:
        program = f"import os, sys\ndef task_func(x):\n    {exit_code}\n"
    assert_rejected(sandbox, program, "SystemExit", "exited with code 0", "before reporting", "closed the channel")


@pytest.mark.parametrize("program", [PATCH_UNITTEST, FRAME_WALK, FORGE_CHANNEL, ALWAYS_EQUAL],
                         ids=["patch_unittest", "frame_walk", "forge_channel", "always_equal"])
def test_forging_a_pass_fails_in_split_mode(sandbox, program):
    result = assert_rejected(sandbox, program, *FORGE_REJECTED)
    assert result.details["judge"] == "split"


@pytest.fixture(scope="module")
def inprocess_sandbox():
    with SandboxExecutor(workers=1, settings=SETTINGS, preload=(), judge="inprocess",
                         time_policy=TimePolicy(floor_s=3.0, cap_s=10.0)) as ex:
        yield ex


@pytest.mark.parametrize("program", [PATCH_UNITTEST, FRAME_WALK, FORGE_CHANNEL],
                         ids=["patch_unittest", "frame_walk", "forge_channel"])
def test_forging_in_process_mode_is_refused(inprocess_sandbox, program):
    result = assert_rejected(inprocess_sandbox, program, "JudgeRefused", "AssertionError", "ProtocolViolation", task=MOCKED)
    assert result.details["judge"] == "inprocess"


def test_the_in_process_check_fails_closed_on_a_program_too_deep_to_parse_where_it_is_called():
    """The host's static check parses from wherever the executor was called: a forging program with a
    200-deep expression parses in the run's fresh process but not from a caller 950 frames deep, where the
    check would see nothing in it and let its forged pass stand."""
    from convcodeworld_gym.sandbox.host.judge_policy import flagged_constructs
    from convcodeworld_gym.sandbox.messages import Mode

    program = PATCH_UNITTEST + "PADDING = " + "-" * 200 + "1\n"
    assert flagged_constructs(Mode.INPROCESS, program, SQUARE.ground_truth)  # from a shallow stack: parsed

    def deep(frames: int) -> tuple[str, ...]:
        return deep(frames - 1) if frames else flagged_constructs(Mode.INPROCESS, program, SQUARE.ground_truth)

    flagged = deep(950 - len(inspect.stack(0)))
    assert flagged and all("nested too deep" in c for c in flagged), flagged


@pytest.mark.parametrize("program", [PATCH_UNITTEST, FRAME_WALK, FORGE_CHANNEL, ALWAYS_EQUAL],
                         ids=["patch_unittest", "frame_walk", "forge_channel", "always_equal"])
def test_forging_a_mocked_task_fails_in_split_mode(sandbox, program):
    result = assert_rejected(sandbox, program, *FORGE_REJECTED, task=MOCKED)
    assert result.details["judge"] == "split"


def test_worker_killed_mid_run_and_on_its_retry_ends_cleanly_with_no_verdict_and_next_run_works():
    # Before issue 34 a worker killed mid-run failed the run ("killed by signal SIGKILL"): the program's 0 for the
    # machine's doing. Now the run is retried on a fresh worker; both killed, it comes back at once with no verdict
    # (infra_error), and nothing of either run is left behind.
    with SandboxExecutor(workers=1, preload=(), settings=SETTINGS, calibrate=False, cache=False) as ex:
        assert ex.run(SQUARE, SQUARE.ground_truth).passed
        out: list = []
        program = marked("import time\ndef task_func(x):\n    time.sleep(60)\n", sleep_s=0.0)
        with WorkerKiller(times=2) as killer:
            runner = threading.Thread(target=lambda: out.append(ex.run(SQUARE, program)))
            runner.start()
            runner.join(timeout=30)
        assert not runner.is_alive(), "the run hung after its worker was killed"
        assert len(killer.killed) == 2
        result = out[0]
        assert not result.passed and "killed by signal SIGKILL" in (result.infra_error or ""), texts(result)
        assert ex.run(SQUARE, SQUARE.ground_truth).passed and ex.replaced_workers == 2
        time.sleep(0.5)
        assert len(sandbox_uid_processes(ex)) <= 2, sandbox_uid_processes(ex)


def test_env_survives_hostile_turns(sandbox):
    env = ConvCodeWorldEnv("CF-EF_full", dataset=[SQUARE], executor=sandbox)
    env.reset(options={"task_id": SQUARE.task_id})
    for program in (FORGE_CHANNEL, "import os\nos.kill(os.getppid(), 9)\ndef task_func(x):\n    return 0\n"):
        _, reward, terminated, _, info = env.step(program)
        assert (reward, terminated) == (0.0, False) and info["tests"]
    _, reward, terminated, _, _ = env.step(SQUARE.ground_truth)
    assert (reward, terminated) == (1.0, True)


#: The sandbox's own modules by the bare names a program could find if the runner left a dir of the package on
#: ``sys.path`` (run as a script, it starts with its own dir, ``run/``, there, and puts the sandbox's dir, where
#: ``messages.py`` lies, there for one import).
OWN_MODULES = ("messages", "limits", "children", "result", "runner", "events", "judge", "codec", "standin", "mirror",
               "shared", "pool", "main", "zygote", "spare", "local", "_probe")
FIND_OWN = f"""import importlib.util
specs = [importlib.util.find_spec(name) for name in {OWN_MODULES!r}]
ok = any(spec is not None and 'convcodeworld_gym' in (spec.origin or '') for spec in specs)"""


@pytest.mark.parametrize("backend", ["sandbox", "local"])
def test_a_program_cannot_find_the_sandboxs_own_modules_by_a_bare_name(backend, sandbox, local_executor):
    ex = sandbox if backend == "sandbox" else local_executor
    assert_rejected(ex, succeed_if(FIND_OWN), "attack blocked")
