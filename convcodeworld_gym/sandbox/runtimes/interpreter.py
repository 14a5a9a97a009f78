"""Runs in every process (the runtime's interpreter too): the interpreter a run gets, as the run must see it: its
paths, its ``python`` commands and its environment.

A run sees the file system read-only, with a fresh private ``/tmp``. The interpreter that runs
the program (its prefix, its venv, every ``sys.path`` entry) may itself live under ``/tmp`` (a
venv made there, a clone under ``/tmp``): those paths are bound back, read-only, into each fresh
``/tmp`` (:func:`..confinement.confine.mount_tmpfs_keeping`), so that a module the worker has not imported
yet, and a ``python`` started by the program, are the same inside a run as outside. Standard
library only: a runtime interpreter without this project's dependencies imports it.

Holds:
    interpreter_paths  this interpreter's prefixes, executable dirs and import paths
    paths_beneath      which of some paths lie under a dir
    make_python_shims  the ``python``/``python3`` commands of a namespaced worker's runs
    shim_dir           where those shims are, when a worker made them
    SHIM_DIR           where a namespaced worker writes them
    PYTHON_COMMANDS    the commands a program may start the run's interpreter by
    child_env          the environment of a child: ``PATH`` and locale, nothing inherited
"""

from __future__ import annotations

import os
import site
import sys
from collections.abc import Iterable, Mapping

__all__ = ["interpreter_paths", "paths_beneath", "make_python_shims", "shim_dir", "PYTHON_COMMANDS", "SHIM_DIR",
           "child_env"]

#: The commands a program may start the run's interpreter by (BigCodeBench tasks call ``python``).
PYTHON_COMMANDS = ("python", "python3")
#: Where a namespaced worker writes the shims: its private /tmp, bound read-only into each run's.
SHIM_DIR = "/tmp/.ccw_python"


def shim_dir() -> str | None:
    """:data:`SHIM_DIR` when it is a dir that root owns and nobody else may write (the worker's), else None:
    the dir a run's ``PATH`` takes right after the interpreter's own (:func:`child_env`)."""
    try:
        info = os.lstat(SHIM_DIR)
    except OSError:
        return None
    import stat

    trusted = stat.S_ISDIR(info.st_mode) and info.st_uid == 0 and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    return SHIM_DIR if trusted else None


def interpreter_paths() -> list[str]:
    """This interpreter's prefixes, the dir of its executable (as named and resolved), its site-packages and
    every absolute ``sys.path`` entry (``.pth`` additions included) that exists, without ``/`` itself."""
    candidates = [sys.base_prefix, sys.prefix, os.path.dirname(sys.executable),
                  os.path.dirname(os.path.realpath(sys.executable)), *site.getsitepackages(), *sys.path]
    return sorted({os.path.normpath(p) for p in candidates if p and os.path.isabs(p) and os.path.exists(p)} - {"/"})


def paths_beneath(root: str, paths: Iterable[str]) -> tuple[str, ...]:
    """The real paths strictly beneath ``root`` among ``paths`` (those that exist), none beneath another.

    >>> paths_beneath("/usr", ["/usr/lib", "/usr/lib/../bin", "/usr", "/etc", "/no/such/dir"])
    ('/usr/bin', '/usr/lib')
    """
    root = os.path.realpath(root)
    found = sorted({real for real in (os.path.realpath(p) for p in paths if os.path.exists(p)) if real.startswith(root + "/")})
    kept: list[str] = []
    for path in found:  # sorted: a parent comes before what lies beneath it
        if not any(path.startswith(k + "/") for k in kept):
            kept.append(path)
    return tuple(kept)


def _starts_this_interpreter(command: str) -> bool:
    """Is ``command`` in the executable's own dir, and the same file as it (so it finds the same venv)?"""
    path = os.path.join(os.path.dirname(sys.executable), command)
    try:
        return os.path.samefile(path, sys.executable)
    except OSError:
        return False


def make_python_shims(directory: str) -> str | None:
    """Write ``python`` / ``python3`` scripts into ``directory`` that ``exec`` this interpreter, for each
    of those commands its executable's dir lacks; the dir to put first on ``PATH``, or None when none is needed.

    The executable's own dir is already first on a run's ``PATH`` (:func:`child_env`): a venv has
    both commands there, a system interpreter (``/usr/bin/python3``) often has no ``python``.
    """
    needed = [c for c in PYTHON_COMMANDS if not _starts_this_interpreter(c)]
    if not needed:
        return None
    os.makedirs(directory, mode=0o755, exist_ok=True)
    os.chmod(directory, 0o755)
    for command in needed:
        path = os.path.join(directory, command)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(f"#!/bin/sh\nexec {_sh_quote(sys.executable)} \"$@\"\n")
        os.chmod(path, 0o755)
    return directory


def _sh_quote(text: str) -> str:
    """``text`` as one POSIX shell word.

    >>> _sh_quote("/opt/my venv/bin/python")
    "'/opt/my venv/bin/python'"
    """
    return "'" + text.replace("'", "'\"'\"'") + "'"


_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
                "VECLIB_MAXIMUM_THREADS")


def child_env(workdir: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a child: nothing inherited but ``PATH`` (with this interpreter first, then the
    sandbox's ``python``/``python3`` shims where a worker made them, :func:`.interpreter.shim_dir`) and locale.

    No API keys or other secrets can reach the program, because nothing else is copied.
    """
    first = [os.path.dirname(sys.executable), *filter(None, [shim_dir()])]
    path = os.pathsep.join([*first, *[p for p in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep) if p not in first]])
    env = {
        "PATH": path,
        "HOME": workdir,
        "TMPDIR": workdir,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONIOENCODING": "utf-8",
        "MPLBACKEND": "Agg",
        **{var: "1" for var in _THREAD_VARS},
    }
    if extra:
        env.update(extra)
    return env
