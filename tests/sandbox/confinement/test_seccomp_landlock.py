"""The seccomp filter and the Landlock domain on their own: each check runs in a forked child of
the test process, which enters the layer and reports what the kernel answered (errno per call).

Every check is harmless when the layer is absent: signal 0, a user namespace, a socket to a port
this test owns. Skipped (loudly) where the kernel lacks the layer or the architecture is unknown.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
from collections.abc import Callable

import pytest

from convcodeworld_gym.sandbox.confinement import landlock, seccomp
from convcodeworld_gym.sandbox.confinement.hardening import Hardening
from convcodeworld_gym.sandbox.runtimes.packages import network_policy
from convcodeworld_gym.tasks import Task

LIBC = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER = 0x10000000


def in_child(setup: Callable[[], None], checks: dict[str, Callable[[], object]]) -> dict[str, str]:
    """Fork; the child runs ``setup`` then each check; returns check name -> "ok" or the errno name it got."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        out: dict[str, str] = {}
        try:
            os.close(read_fd)
            setup()
            for name, check in checks.items():
                try:
                    check()
                    out[name] = "ok"
                except OSError as exc:
                    out[name] = errno.errorcode.get(exc.errno or 0, str(exc))
        except BaseException as exc:  # noqa: BLE001
            out["setup"] = f"{type(exc).__name__}: {exc}"
        os.write(write_fd, json.dumps(out).encode())
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd) as fh:
        data = fh.read()
    os.waitpid(pid, 0)
    return json.loads(data)


def libc_call(result: int) -> None:
    """Raise the OSError a failed libc call left in errno."""
    if result == -1:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def need_seccomp() -> seccomp.Arch:
    arch = seccomp.current_arch()
    if arch is None:
        pytest.skip(f"LOUD SKIP: no seccomp filter for {os.uname().machine}")
    return arch


def need_landlock(version: int = 1) -> int:
    abi = landlock.abi()
    if abi < version:
        pytest.skip(f"LOUD SKIP: Landlock ABI {abi} < {version} in this kernel")
    return abi


def test_seccomp_filter_refuses_the_dangerous_calls_and_keeps_the_rest():
    arch = need_seccomp()

    def setup() -> None:
        seccomp.install(seccomp.build_filter(arch))
        seccomp.install(seccomp.build_socket_filter(arch))

    def fork_and_reap() -> None:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)

    got = in_child(setup, {
        "inet": lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close(),
        "inet6": lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).close(),
        "netlink": lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW).close(),
        "unix_pair": lambda: [s.close() for s in socket.socketpair()],
        "kill_all": lambda: os.kill(-1, 0),
        "kill_self": lambda: os.kill(os.getpid(), 0),
        "unshare_user": lambda: libc_call(LIBC.unshare(CLONE_NEWUSER)),
        "ptrace_traceme": lambda: libc_call(LIBC.ptrace(0, 0, 0, 0)),
        "mount": lambda: libc_call(LIBC.mount(b"none", b"/mnt", b"tmpfs", 0, None)),
        "fork": fork_and_reap,
        "subprocess": lambda: subprocess.run(["true"], check=True),
    })
    assert "setup" not in got, got
    assert got == {"inet": "EACCES", "inet6": "EACCES", "netlink": "EACCES", "unix_pair": "ok", "kill_all": "EPERM",
                   "kill_self": "ok", "unshare_user": "EPERM", "ptrace_traceme": "EPERM", "mount": "EPERM",
                   "fork": "ok", "subprocess": "ok"}, got


def test_landlock_limits_files_signals_and_tcp(tmp_path):
    abi = need_landlock()
    work, outside = tmp_path / "work", tmp_path / "outside"  # same file system: only Landlock tells them apart
    work.mkdir()
    outside.mkdir()
    (outside / "secret").write_text("s")
    neighbour = subprocess.Popen(["sleep", "30"])  # outside the domain
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]

    def setup() -> None:
        ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
        landlock.restrict(landlock.read_paths(), [str(work)], abi)
        if abi >= 4:
            landlock.restrict_network(abi)

    try:
        got = in_child(setup, {
            "write_work": lambda: (work / "f").write_text("x"),
            "rename_in_work": lambda: os.rename(work / "f", work / "g"),
            "write_outside": lambda: (outside / "f").write_text("x"),
            "read_outside": lambda: (outside / "secret").read_text(),
            "list_root": lambda: os.listdir("/"),
            "read_etc": lambda: open("/etc/hostname").close() if os.path.exists("/etc/hostname") else None,
            "run_python": lambda: subprocess.run([sys.executable, "-c", "pass"], check=True),
            "devnull": lambda: open(os.devnull, "w").write("x"),
            "signal_neighbour": lambda: os.kill(neighbour.pid, 0),
            "tcp_connect": lambda: socket.create_connection(("127.0.0.1", port), timeout=2).close(),
        })
    finally:
        neighbour.kill()
        neighbour.wait()
        server.close()
    assert "setup" not in got, got
    expected = {"write_work": "ok", "rename_in_work": "ok", "write_outside": "EACCES", "read_outside": "EACCES",
                "list_root": "EACCES", "read_etc": "ok", "run_python": "ok", "devnull": "ok",
                "signal_neighbour": "EPERM" if abi >= 6 else "ok", "tcp_connect": "EACCES" if abi >= 4 else "ok"}
    assert got == expected, got
    assert not (outside / "f").exists()


def test_read_paths_never_grant_the_root():
    assert "/" not in landlock.read_paths(["/", "/usr"])
    assert "/usr" in landlock.read_paths(["/"])


def test_filter_programs_are_whole_instructions_and_check_the_architecture():
    arch = need_seccomp()
    for program in (seccomp.build_filter(arch), seccomp.build_socket_filter(arch)):
        assert len(program) % 8 == 0 and len(program) // 8 < 4096
        # first instruction loads the arch field (offset 4); the second compares it with this arch
        _code, _jt, _jf, k = struct.unpack("=HBBI", program[8:16])
        assert program[:8] == struct.pack("=HBBI", 0x20, 0, 0, 4) and k == arch.audit


def test_a_seccomp_filter_from_another_architecture_kills_the_process():
    arch = need_seccomp()
    other = next(a for a in seccomp.ARCHES.values() if a.audit != arch.audit)
    pid = os.fork()
    if pid == 0:
        try:
            seccomp.install(seccomp.build_filter(other))
            os.getpid()
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGSYS, status


def test_network_policy_reads_only_the_tasks_own_text():
    tests = "import unittest\nclass TestCases(unittest.TestCase):\n    def test_a(self):\n        task_func()\n"
    plain = Task("p/plain", "", "import os\ndef task_func():\n", "task_func", "    return 1\n", tests)
    served = Task("p/served", "", "import os\ndef task_func():\n", "task_func", "    return 1\n", "import socket\n" + tests)
    uses = Task("p/uses", "", "import os\ndef task_func():\n", "task_func", "    import urllib.request\n    return 1\n", tests)
    assert (network_policy(plain), network_policy(served), network_policy(uses)) == ("none", "loopback", "loopback")


def test_a_layer_that_cannot_be_applied_raises_so_the_run_is_refused():
    need_seccomp()
    got = in_child(lambda: None, {"empty_filter": lambda: Hardening(seccomp_filter=b"").apply(),
                                  "bad_landlock": lambda: Hardening(landlock_read=("/usr",), landlock_abi=0).apply()})
    assert got["empty_filter"] == "EINVAL" and got["bad_landlock"] != "ok", got


_HEADERS = {  # the kernel's own numbering, as installed by the C library's headers (Debian: linux-libc-dev)
    "x86_64": "/usr/include/x86_64-linux-gnu/asm/unistd_64.h",
    "aarch64": "/usr/include/asm-generic/unistd.h",  # aarch64 uses the generic table
}


@pytest.mark.parametrize("arch", sorted(_HEADERS))
def test_system_call_numbers_match_the_kernel_headers(arch):
    """Every number the filter names is the kernel's (a wrong one would let a call through or block another)."""
    path = _HEADERS[arch]
    if not os.path.exists(path):
        pytest.skip(f"{path} is not installed (Debian: apt-get install linux-libc-dev)")
    with open(path) as fh:
        kernel = {m.group(1): int(m.group(2)) for m in re.finditer(r"#define __NR(?:3264)?_(\w+)\s+(\d+)\b", fh.read())}
    numbers = seccomp.ARCHES[arch].numbers
    assert {name: (number, kernel.get(name)) for name, number in numbers.items() if kernel.get(name) != number} == {}
