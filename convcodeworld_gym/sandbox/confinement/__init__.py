"""Runs in the warm worker and each run's child: the Linux confinement layers, one module each.

Each is a thin, checked wrapper over system calls (through ``ctypes``) that imports only the standard
library: the worker boots with nothing else (:func:`~convcodeworld_gym.sandbox.host.launch.worker_boot`). The
worker (:mod:`convcodeworld_gym.sandbox.worker.main`) and each run's spare
(:mod:`convcodeworld_gym.sandbox.worker.spare`) compose them; nothing here runs or judges a program.

Holds:
    confine    namespaces, mounts, uid drop, rlimits; ``Level``, ``Confinement`` (what was achieved),
               ``SandboxSettings`` (the sizes and rlimits asked for)
    seccomp    the classic-BPF system-call filters (x86_64, aarch64)
    view       what of the file system a run may read: the allow-list, and the task data masked inside it
    landlock   the Landlock domain: what a run may read, write, connect to and signal
    hardening  which of seccomp and Landlock this machine enforces, and a run's way of applying them
    memory     keeping a warm worker cheap to fork (gc freeze, huge pages)
    cgroup     the worker's memory cgroup: how many processes the OOM killer ended in it
    slot_cgroup  each slot's own cgroup: its runs' CPU and process bound, and ending all their processes at once
    sweep      ending what a run left under its uid where no PID namespace per run does (level ``uid``)

Signalling our own children (:mod:`convcodeworld_gym.sandbox.children`) stays beside the executors: the
unconfined :class:`~convcodeworld_gym.sandbox.backends.local.LocalExecutor` uses it too, and it confines nothing.
"""

__all__ = ["confine", "view", "seccomp", "landlock", "hardening", "memory", "cgroup", "slot_cgroup", "sweep"]
