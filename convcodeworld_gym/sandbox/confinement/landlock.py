"""Runs in the warm worker and each run's child: Landlock, through raw system calls (``ctypes``; nothing to install).

A Landlock domain, once the calling process enters it, limits it and every process it forks:

* **files**: read and execute only beneath the paths of :func:`read_paths` (the interpreter, its
  libraries, the sandbox's code, ``/usr``, ``/etc``, ``/proc``, ...: the allow-list of :mod:`.view`); write,
  create, remove, rename only beneath the run's private ``/tmp`` (its work dir is in there) and ``/dev/shm``,
  plus writing ``/dev/null`` and friends. Everything else (``/home``, ``/root``, ``/opt``, ``/var``, ``/srv``,
  other checkouts, ...) is invisible, whatever the mount layer would allow; task data inside the allow-list
  is masked by the mount layer (:func:`.confine.mask_dirs`), which Landlock cannot do (it grants whole dirs);
* **network** (ABI >= 4, a nested domain for runs without network): no TCP bind or connect at all;
* **scopes** (ABI >= 6): no signal to a process outside the domain, no connection to an abstract
  unix socket outside it.

The system-call numbers (444-446) are the same on x86_64 and aarch64.

Holds:
    abi            the Landlock ABI version of the running kernel (0: none)
    read_paths     the paths the program may read and execute beneath
    write_paths    the paths the program may write beneath
    restrict       build the domain and enter it (irreversible); returns the feature names achieved
    restrict_network  enter a nested domain without TCP bind/connect (runs without network)
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable

from ..runtimes.interpreter import interpreter_paths
from .confine import SANDBOX_ROOT, syscall
from .view import SYSTEM_READ, run_readable

__all__ = ["abi", "read_paths", "write_paths", "restrict", "restrict_network"]

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2

_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_ABI1 = (1 << 13) - 1  # EXECUTE ... MAKE_SYM
_REFER, _TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6

_DEVICE_WRITE = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty")


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def abi() -> int:
    """The Landlock ABI version of the running kernel; 0 when Landlock is absent or disabled."""
    try:
        return syscall(_CREATE_RULESET, 0, 0, _CREATE_RULESET_VERSION)
    except OSError:
        return 0


def read_paths(extra: Iterable[str] = ()) -> list[str]:
    """System dirs (:data:`.view.SYSTEM_READ`) plus what :func:`.view.run_readable` grants of the interpreter's
    prefixes, its ``site-packages`` and ``extra`` (those that exist).

    ``/`` itself is never granted (a worker started with ``python -m`` in ``/`` has it on ``sys.path``):
    granting it would grant everything.
    """
    candidates = [*SYSTEM_READ, *run_readable([*interpreter_paths(), *extra])]
    return sorted({os.path.normpath(p) for p in candidates if os.path.isabs(p) and os.path.exists(p)} - {"/"})


def write_paths() -> list[str]:
    """The run's private tmpfs (its work dir is in it) and ``/dev/shm``, those that exist."""
    return [p for p in (SANDBOX_ROOT, "/dev/shm") if os.path.isdir(p)]


def _fs_rights(version: int) -> int:
    rights = _FS_ABI1
    if version >= 2:
        rights |= _REFER
    if version >= 3:
        rights |= _TRUNCATE
    return rights


def _add_path(ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # vanished or unreachable: nothing beneath it is granted
    try:
        if not os.path.isdir(path):  # a file takes only file rights
            access &= _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE
        attr = _PathBeneath(access, fd)
        syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.addressof(attr), 0)
    finally:
        os.close(fd)


def restrict_network(version: int) -> None:
    """Enter a further (nested) Landlock domain that allows no TCP bind or connect at all (ABI >= 4).

    Raises:
        OSError: the ABI has no network rules, or a call failed.
    """
    if version < 4:
        raise OSError(f"Landlock ABI {version} has no network rules (needs 4)")
    attr = _RulesetAttr(handled_access_net=_NET_BIND_TCP | _NET_CONNECT_TCP)
    ruleset = syscall(_CREATE_RULESET, ctypes.addressof(attr), 16, 0)
    try:
        syscall(_RESTRICT_SELF, ruleset, 0)
    finally:
        os.close(ruleset)


def restrict(readable: Iterable[str], writable: Iterable[str], version: int | None = None) -> tuple[str, ...]:
    """Enter a Landlock domain: read/execute beneath ``readable``, everything beneath ``writable``, scoped signals.

    Needs ``no_new_privs`` set (or CAP_SYS_ADMIN). Irreversible; inherited by children. Returns the
    feature names achieved (``landlock_fs``, ``landlock_scope``). TCP is closed separately, per run
    (:func:`restrict_network`).

    Raises:
        OSError: Landlock is absent (ABI 0) or a call failed.
    """
    version = abi() if version is None else version
    if version < 1:
        raise OSError("Landlock is not available in this kernel")
    fs_all = _fs_rights(version)
    features = ["landlock_fs"]
    attr = _RulesetAttr(handled_access_fs=fs_all)
    size = 8
    if version >= 6:
        attr.scoped = _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL
        size = 24
        features.append("landlock_scope")
    ruleset = syscall(_CREATE_RULESET, ctypes.addressof(attr), size, 0)
    try:
        read = _EXECUTE | _READ_FILE | _READ_DIR
        for path in readable:
            _add_path(ruleset, path, read)
        for path in writable:
            _add_path(ruleset, path, fs_all)
        for path in _DEVICE_WRITE:
            _add_path(ruleset, path, read | _WRITE_FILE | (_TRUNCATE if version >= 3 else 0))
        syscall(_RESTRICT_SELF, ruleset, 0)
    finally:
        os.close(ruleset)
    return tuple(features)
