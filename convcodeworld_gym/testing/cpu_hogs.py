"""Programs that take all the CPU and processes a run can get: what the per-slot CPU bound is tested and measured with.

Each is a whole program whose ``task_func`` (any arguments) never returns: the run ends at its time limit. Run as
the program of any task whose tests call ``task_func``, they are the neighbours the sandbox's slot cgroup
(:mod:`convcodeworld_gym.sandbox.confinement.slot_cgroup`) holds to their own share of the machine:

* ``fork_bomb``: every process forks for as long as the kernel lets it, then spins (``pids.max`` / ``RLIMIT_NPROC``
  processes, all busy);
* ``busy_threads``: 16 threads hashing a MiB at a time (``hashlib`` lets go of the GIL, so they keep 16 CPUs busy
  where there are that many);
* ``busy_processes``: 16 forked processes spinning in Python.

Holds:
    CPU_HOGS   name -> program
"""

from __future__ import annotations

__all__ = ["CPU_HOGS"]

CPU_HOGS: dict[str, str] = {
    "fork_bomb": """import os
def task_func(*args, **kwargs):
    while True:
        try:
            os.fork()
        except OSError:
            pass
""",
    "busy_threads": """import hashlib, threading
def _burn():
    data = b"x" * (1 << 20)
    while True:
        hashlib.sha256(data).digest()
def task_func(*args, **kwargs):
    for _ in range(15):
        threading.Thread(target=_burn, daemon=True).start()
    _burn()
""",
    "busy_processes": """import os
def task_func(*args, **kwargs):
    for _ in range(15):
        if os.fork() == 0:
            break
    while True:
        pass
""",
}
