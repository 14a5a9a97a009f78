"""Runs in the host: runtime interpreters, the Python that runs the tasks' programs, apart from the one that runs the
env.

The env's own dependencies (``datasets``, ``pyarrow``, ``gymnasium``, ...) and a task set's pinned
libraries (BigCodeBench's ``numpy==1.24.3``, ``tensorflow-cpu``, ...) cannot share one interpreter.
So the sandbox runs programs with a *runtime* interpreter of its own, usually a venv that holds the
task set's libraries and nothing of this project: the worker's code is put on its path read-only
and imports only the standard library there (:func:`..host.launch.worker_boot`).

Which interpreter, in order: ``runtime=`` (a Python executable, a venv dir, or the name of an
installed runtime such as ``"bigcodebench"``), else ``$CONVCODEWORLD_RUNTIME_PYTHON``, else the
BigCodeBench runtime when it is installed, else this interpreter.

Installed runtimes live in ``$CONVCODEWORLD_RUNTIMES``, by default
``~/.cache/convcodeworld-gym/runtimes`` (``$XDG_CACHE_HOME`` is honoured), one venv per name:
``convcodeworld runtime install bigcodebench`` builds ``<that dir>/bigcodebench`` from
``envs/bigcodebench/requirements.txt``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ...errors import ExecutorError

__all__ = ["RUNTIME_PYTHON_ENV", "RUNTIMES_DIR_ENV", "KNOWN_RUNTIMES", "runtimes_dir", "runtime_python",
           "resolve_runtime", "install_runtime", "RuntimeNotInstalled", "MARKER_FILE"]

RUNTIME_PYTHON_ENV = "CONVCODEWORLD_RUNTIME_PYTHON"
RUNTIMES_DIR_ENV = "CONVCODEWORLD_RUNTIMES"
#: Written into a runtime's venv once its install has finished (an interrupted install is not used).
MARKER_FILE = "convcodeworld-runtime.json"
_REPO_ROOT = Path(__file__).resolve().parents[3]
#: Runtime name -> its requirements file (in a clone or an editable install, beside the package).
KNOWN_RUNTIMES: dict[str, Path] = {"bigcodebench": _REPO_ROOT / "envs" / "bigcodebench" / "requirements.txt"}
#: NLTK data the BigCodeBench tasks read (downloaded into the runtime when the network allows).
NLTK_DOWNLOADS = ("punkt", "stopwords", "words", "wordnet", "omw-1.4", "averaged_perceptron_tagger", "vader_lexicon")


class RuntimeNotInstalled(ExecutorError):
    """A named runtime (``runtime="bigcodebench"``) is not installed; the message gives the command that installs it."""


def runtimes_dir() -> Path:
    """Where installed runtimes live: ``$CONVCODEWORLD_RUNTIMES``, else ``~/.cache/convcodeworld-gym/runtimes``."""
    if os.environ.get(RUNTIMES_DIR_ENV):
        return Path(os.environ[RUNTIMES_DIR_ENV]).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "convcodeworld-gym" / "runtimes"


def runtime_python(venv: str | os.PathLike[str]) -> Path:
    """The interpreter of the venv (or Python prefix) ``venv``."""
    return Path(venv) / "bin" / "python"


def _installed(name: str) -> Path | None:
    venv = runtimes_dir() / name
    python = runtime_python(venv)
    return python if (venv / MARKER_FILE).is_file() and python.exists() else None


def _interpreter(value: str, what: str) -> str:
    """``value`` as an interpreter path: a venv dir gives its ``bin/python``; raises ExecutorError if there is none."""
    path = Path(value).expanduser()
    if path.is_dir():
        path = runtime_python(path)
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise ExecutorError(f"{what} {value!r} is not a Python interpreter or a venv dir with bin/python; "
                            f"pass the path of a python executable, a venv dir, or one of {sorted(KNOWN_RUNTIMES)}")
    return str(path.absolute())


def resolve_runtime(runtime: str | os.PathLike[str] | None = None) -> str | None:
    """The runtime interpreter's path, or None for this interpreter (see the module docstring for the order).

    Raises:
        RuntimeNotInstalled: ``runtime`` names a known runtime that is not installed.
        ExecutorError: ``runtime`` (or ``$CONVCODEWORLD_RUNTIME_PYTHON``) is no interpreter.
    """
    if runtime is not None:
        value = os.fspath(runtime)
        if value in KNOWN_RUNTIMES:
            found = _installed(value)
            if found is None:
                raise RuntimeNotInstalled(f"the {value} runtime is not installed in {runtimes_dir() / value}; "
                                          f"install it with `convcodeworld runtime install {value}`")
            return str(found)
        return _interpreter(value, "runtime")
    if os.environ.get(RUNTIME_PYTHON_ENV):
        return _interpreter(os.environ[RUNTIME_PYTHON_ENV], f"${RUNTIME_PYTHON_ENV}")
    found = _installed("bigcodebench")
    return str(found) if found is not None else None


def install_runtime(name: str, *, target: str | os.PathLike[str] | None = None, python: str | None = None,
                    requirements: str | os.PathLike[str] | None = None, nltk_data: bool = True,
                    log: Callable[[str], None] = print) -> Path:
    """Build the runtime ``name`` in its own venv (default: ``runtimes_dir()/name``); its interpreter's path.

    The venv is made by ``python`` (default: this interpreter's base), the requirements are installed
    with its pip, then NLTK data is downloaded into ``<venv>/nltk_data`` (skipped, with a note, when the
    network does not allow it: tasks needing it are then left out with a warning). The venv is used only
    once its marker file is written, at the end.

    Raises:
        ExecutorError: an unknown name, a missing requirements file, or a failed step (naming it).
    """
    if name not in KNOWN_RUNTIMES and requirements is None:
        raise ExecutorError(f"unknown runtime {name!r}; known: {sorted(KNOWN_RUNTIMES)} (or pass requirements=)")
    reqs = Path(requirements) if requirements is not None else KNOWN_RUNTIMES[name]
    if not reqs.is_file():
        raise ExecutorError(f"the requirements file {reqs} does not exist (it ships with the repository: run from a "
                            "clone, or pass --requirements PATH)")
    venv = Path(target).expanduser().absolute() if target is not None else runtimes_dir() / name
    started = time.monotonic()
    (venv / MARKER_FILE).unlink(missing_ok=True)
    _step([python or getattr(sys, "_base_executable", sys.executable), "-m", "venv", str(venv)], "create the venv", log)
    interpreter = runtime_python(venv)
    _step([str(interpreter), "-m", "pip", "install", "-r", str(reqs)], f"install {reqs}", log)
    fetched: list[str] = []
    if nltk_data and _step([str(interpreter), "-c", "import nltk"], "check nltk", log, required=False):
        for resource in NLTK_DOWNLOADS:
            download = (f"import nltk; nltk.download({resource!r}, download_dir={str(venv / 'nltk_data')!r}, "
                        "quiet=True, raise_on_error=True)")
            if _step([str(interpreter), "-c", download], f"download NLTK data {resource!r}", log, required=False,
                     timeout=120):
                fetched.append(resource)
        if len(fetched) < len(NLTK_DOWNLOADS):
            log("note: some NLTK data could not be downloaded (offline?); tasks that need it are left out with a warning")
    marker = {"name": name, "requirements": str(reqs), "python": str(interpreter), "nltk_data": fetched,
              "seconds": round(time.monotonic() - started, 1)}
    (venv / MARKER_FILE).write_text(json.dumps(marker, indent=2) + "\n")
    log(f"runtime {name!r} ready: {interpreter} ({marker['seconds']} s)")
    return interpreter


def _step(command: list[str], what: str, log: Callable[[str], None], *, required: bool = True,
          timeout: float | None = None) -> bool:
    """Run one install step; True when it succeeded. A required step shows its output as it goes and raises
    ExecutorError when it fails; an optional one is quiet and only logs a note."""
    log(f"$ {' '.join(command)}")
    try:
        done = subprocess.run(command, timeout=timeout, text=True, **(
            {} if required else {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT}))
        ok, tail = done.returncode == 0, (done.stdout or "")[-2000:]
    except (OSError, subprocess.TimeoutExpired) as exc:
        ok, tail = False, str(exc)
    if not ok and required:
        raise ExecutorError(f"could not {what} (see the output above) {tail}".strip())
    if not ok:
        log(f"note: could not {what}: {tail.strip().splitlines()[-1] if tail.strip() else 'failed'}")
    return ok
