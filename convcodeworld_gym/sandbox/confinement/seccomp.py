"""Runs in the warm worker and each run's child: a seccomp system-call filter, built as classic BPF with ``ctypes``
(nothing to install).

Why not libseccomp: its Python binding is not on PyPI as a wheel (it is built with the C library
from the distribution), and the filter needed here is small enough to state directly.

The filter (see :func:`build_filter`):

* kills the process on any system call from another ABI (i386 ``int 0x80`` on x86_64, x32 numbers);
* ``socket`` (a second filter, :func:`build_socket_filter`, stacked for runs without network): only
  ``AF_UNIX`` (``multiprocessing``, socket pairs); every other family (``AF_INET``, ``AF_INET6``,
  ``AF_PACKET``, ``AF_NETLINK``, ...) fails with ``EACCES``. Tasks whose tests serve on the run's own
  loopback (a TCP echo server, ...) run without it, still inside their empty network namespace;
* ``kill(-1, ...)`` fails with ``EPERM`` (signals to single processes and own groups stay; what
  they can reach is bounded by the run's PID namespace, the slot uid and Landlock's signal scope);
* ``clone`` with any namespace flag fails with ``EPERM``; ``clone3`` fails with ``ENOSYS`` (its flags
  sit in memory a filter cannot read; the C library then falls back to ``clone``);
* ``ioctl(fd, TIOCSTI)`` (typing into a terminal) fails with ``EPERM``;
* the calls in :data:`DENIED` (ptrace, mount, unshare, setns, keyctl, bpf, perf_event_open, kexec,
  module loading, reboot, swap, process_vm_*, io_uring, the new mount API, ...) fail with ``EPERM``;
* everything else is allowed.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import socket
import struct
from dataclasses import dataclass

from .confine import prctl

__all__ = ["Arch", "ARCHES", "DENIED", "build_filter", "build_socket_filter", "install", "current_arch"]

_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_RET_KILL_PROCESS, _RET_ERRNO, _RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
_LD_ABS_W, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_OFF_NR, _OFF_ARCH, _OFF_ARG0, _OFF_ARG1 = 0, 4, 16, 24  # struct seccomp_data; low 32 bits (little-endian)
_X32_SYSCALL_BIT = 0x40000000
_TIOCSTI = 0x5412
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
_CLONE_NAMESPACE_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

#: Calls no task needs and that widen the kernel surface or reach outside the sandbox.
DENIED: tuple[str, ...] = (
    "ptrace", "mount", "umount2", "unshare", "setns", "pivot_root", "chroot", "keyctl", "add_key", "request_key",
    "bpf", "perf_event_open", "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "reboot", "swapon", "swapoff", "process_vm_readv", "process_vm_writev", "acct", "settimeofday",
    "clock_settime", "clock_adjtime", "adjtimex", "syslog", "userfaultfd", "open_by_handle_at",
    "name_to_handle_at", "io_uring_setup", "io_uring_enter", "io_uring_register", "open_tree", "move_mount",
    "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "sethostname", "setdomainname", "quotactl",
    "vhangup", "pidfd_getfd", "kcmp", "lookup_dcookie",
)


@dataclass(frozen=True)
class Arch:
    """One architecture: its ``AUDIT_ARCH_*`` value and the numbers of the calls the filter names."""

    audit: int
    numbers: dict[str, int]
    x32_bit: bool = False  # x86_64: numbers with bit 30 set are the x32 ABI, refused


_COMMON_NEW = {"pidfd_getfd": 438, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
               "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
               "clone3": 435, "mount_setattr": 442}

ARCHES: dict[str, Arch] = {
    "x86_64": Arch(0xC000003E, {
        "socket": 41, "kill": 62, "clone": 56, "ioctl": 16, "ptrace": 101, "mount": 165, "umount2": 166,
        "unshare": 272, "setns": 308, "pivot_root": 155, "chroot": 161, "keyctl": 250, "add_key": 248,
        "request_key": 249, "bpf": 321, "perf_event_open": 298, "kexec_load": 246, "kexec_file_load": 320,
        "init_module": 175, "finit_module": 313, "delete_module": 176, "reboot": 169, "swapon": 167, "swapoff": 168,
        "process_vm_readv": 310, "process_vm_writev": 311, "acct": 163, "settimeofday": 164, "clock_settime": 227,
        "clock_adjtime": 305, "adjtimex": 159, "syslog": 103, "userfaultfd": 323, "open_by_handle_at": 304,
        "name_to_handle_at": 303, "sethostname": 170, "setdomainname": 171, "quotactl": 179, "vhangup": 153,
        "kcmp": 312, "lookup_dcookie": 212, **_COMMON_NEW}, x32_bit=True),
    "aarch64": Arch(0xC00000B7, {
        "socket": 198, "kill": 129, "clone": 220, "ioctl": 29, "ptrace": 117, "mount": 40, "umount2": 39,
        "unshare": 97, "setns": 268, "pivot_root": 41, "chroot": 51, "keyctl": 219, "add_key": 217,
        "request_key": 218, "bpf": 280, "perf_event_open": 241, "kexec_load": 104, "kexec_file_load": 294,
        "init_module": 105, "finit_module": 273, "delete_module": 106, "reboot": 142, "swapon": 224, "swapoff": 225,
        "process_vm_readv": 270, "process_vm_writev": 271, "acct": 89, "settimeofday": 170, "clock_settime": 112,
        "clock_adjtime": 266, "adjtimex": 171, "syslog": 116, "userfaultfd": 282, "open_by_handle_at": 265,
        "name_to_handle_at": 264, "sethostname": 161, "setdomainname": 162, "quotactl": 60, "vhangup": 58,
        "kcmp": 272, "lookup_dcookie": 18, **_COMMON_NEW}),
}


def current_arch() -> Arch | None:
    """The :class:`Arch` of this machine, or None when the filter does not know it (then seccomp is not available)."""
    return ARCHES.get(platform.machine())


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF)


def _errno(code: int) -> int:
    return _RET_ERRNO | code


def _arg_block(nr: int, offset: int, test: int, value: int, hit: int, miss: int) -> list[bytes]:
    """If the call is ``nr``: load the argument at ``offset``, return ``hit`` when ``test`` (JEQ or JSET) matches ``value``,
    else ``miss``. Leaves the call number in the accumulator for the next check when the call is not ``nr``."""
    return [_ins(_JEQ_K, nr, 0, 4), _ins(_LD_ABS_W, offset), _ins(test, value, 0, 1), _ins(_RET_K, hit), _ins(_RET_K, miss)]


def _prologue(arch: Arch) -> list[bytes]:
    """Kill calls from another ABI; leave the call number in the accumulator."""
    prog = [_ins(_LD_ABS_W, _OFF_ARCH), _ins(_JEQ_K, arch.audit, 1, 0), _ins(_RET_K, _RET_KILL_PROCESS),
            _ins(_LD_ABS_W, _OFF_NR)]
    if arch.x32_bit:
        prog += [_ins(_JGE_K, _X32_SYSCALL_BIT, 0, 1), _ins(_RET_K, _RET_KILL_PROCESS)]
    return prog


def build_filter(arch: Arch) -> bytes:
    """The base filter program (concatenated ``struct sock_filter``): everything in the module docstring but sockets."""
    n = arch.numbers
    prog = _prologue(arch)
    prog += _arg_block(n["kill"], _OFF_ARG0, _JEQ_K, 0xFFFFFFFF, _errno(errno.EPERM), _RET_ALLOW)
    prog += _arg_block(n["clone"], _OFF_ARG0, _JSET_K, _CLONE_NAMESPACE_FLAGS, _errno(errno.EPERM), _RET_ALLOW)
    prog += _arg_block(n["ioctl"], _OFF_ARG1, _JEQ_K, _TIOCSTI, _errno(errno.EPERM), _RET_ALLOW)
    prog += [_ins(_JEQ_K, n["clone3"], 0, 1), _ins(_RET_K, _errno(errno.ENOSYS))]
    for name in DENIED:
        prog += [_ins(_JEQ_K, n[name], 0, 1), _ins(_RET_K, _errno(errno.EPERM))]
    prog.append(_ins(_RET_K, _RET_ALLOW))
    return b"".join(prog)


def build_socket_filter(arch: Arch) -> bytes:
    """A filter stacked on the base one for runs without network: ``socket()`` of any family but ``AF_UNIX`` fails (EACCES)."""
    prog = _prologue(arch)
    prog += _arg_block(arch.numbers["socket"], _OFF_ARG0, _JEQ_K, socket.AF_UNIX, _RET_ALLOW, _errno(errno.EACCES))
    prog.append(_ins(_RET_K, _RET_ALLOW))
    return b"".join(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install(program: bytes) -> None:
    """Set ``no_new_privs`` and load ``program`` (from :func:`build_filter`) for the calling thread; irreversible.

    Call it before any other thread exists: children forked afterwards inherit the filter.

    Raises:
        OSError: the kernel refused (no seccomp support, bad program).
    """
    buf = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buf))
    prctl(_PR_SET_NO_NEW_PRIVS, 1)
    prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog))
