"""Runs in the warm worker and each run's child: the layers a run's child adds to itself, seccomp and Landlock, and the
probe of what this machine enforces.

Holds:
    Hardening   the filters and Landlock paths a child applies to itself (:meth:`~Hardening.apply`, then
                :meth:`~Hardening.close_network` for runs without network)
    harden      which of those layers this machine enforces, each checked in a forked probe
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from . import confine, landlock, seccomp

__all__ = ["Hardening", "harden"]


@dataclass(frozen=True)
class Hardening:
    """The layers the confined child adds to itself: seccomp and Landlock, in two steps.

    Both run in the spare before its job (off the critical path): :meth:`apply` always,
    :meth:`close_network` for spares made for runs without network (every task but those whose
    tests serve on the run's own loopback, see :func:`..runtimes.packages.network_policy`); a job whose
    network differs from its spare's gets a fresh spare.

    Attributes:
        seccomp_filter: the base filter (:func:`.seccomp.build_filter`), or None when not available.
        socket_filter: the filter leaving only AF_UNIX sockets (:func:`.seccomp.build_socket_filter`), or None.
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


def harden(readable: list[str]) -> tuple[Hardening, list[str], list[str]]:
    """Which of seccomp and Landlock this machine enforces (``readable``: what runs must read), each probed in a
    forked child: the hardening to apply, the features it adds, and what is missing and why."""
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
