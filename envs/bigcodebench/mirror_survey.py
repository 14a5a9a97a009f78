"""Survey: what the library objects of BigCodeBench's canonical solutions pickle into.

The split judge rebuilds the library objects a program returns (matplotlib figures, fitted models ...) from
their pickle, under the policy of :mod:`convcodeworld_gym.sandbox.run.mirror_allowed` (which classes and functions a
pickle may name). This tool measures what that policy meets: it runs each task's canonical solution with its
tests in one process (as the reference does, no sandbox: canonical solutions only), and for every value that
``task_func`` returns and every open matplotlib figure after each call, prints, as JSON lines, the classes that
would not cross as data; for each of a mirrored library, whether the judge's own ``Mirrors.load`` rebuilds it (or
why not) and the globals its pickle names. Other classes cross as stand-ins, whose class the judge never grants.

Run it with the runtime's interpreter, from the repository root:

    /path/to/runtime/bin/python envs/bigcodebench/mirror_survey.py BigCodeBench.jsonl.gz > survey.jsonl

Each task runs in a subprocess of its own (a crash or hang costs only that task: 120 s at most). The canonical
solutions and their tests run **unconfined**: they write where they like (one creates ``/non/existent/path``, which
then fails BigCodeBench/288 and 350 in every later run on that machine). Run it as an unprivileged user or in a
throwaway container; as root it refuses unless ``--allow-root`` is given.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import pickle
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

_PACKAGE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "convcodeworld_gym")
_package = type(sys)("convcodeworld_gym")  # the sandbox alone, as a worker boots it (no gymnasium in a runtime)
_package.__path__ = [_PACKAGE_DIR]
sys.modules["convcodeworld_gym"] = _package
from convcodeworld_gym.sandbox.run.codec import Codec  # noqa: E402
from convcodeworld_gym.sandbox.run.mirror import MirrorRefused, Mirrors, mirrored, snapshot  # noqa: E402

_SEEN: dict[int, object] = {}  # each object surveyed once (kept alive, so that its id is not reused)


def _globals_of(data: bytes) -> list[list[str]]:
    """The (module, name) pairs a pickle names, read by an unpickler that records each lookup."""
    seen: set[tuple[str, str]] = set()

    class Recorder(pickle.Unpickler):
        def find_class(self, module: str, name: str):  # noqa: ANN201
            seen.add((module, name))
            if (module, name) == ("convcodeworld_gym.sandbox.run.mirror", "_tagged"):
                return lambda tag, cls: cls.__new__(cls)
            return super().find_class(module, name)

        def persistent_load(self, pid):  # noqa: ANN001, ANN201
            return _Reference()

    Recorder(io.BytesIO(data)).load()
    return sorted([m, n] for m, n in seen)


def _survey_one(obj, found: list) -> None:
    cls = type(obj)
    entry = {"class": f"{cls.__module__}.{cls.__qualname__}"}
    if id(obj) in _SEEN:
        return
    _SEEN[id(obj)] = obj
    if not mirrored(cls):  # crosses as a stand-in: only its class is of interest
        entry.update(ok=None)
        found.append(entry)
        return
    data = snapshot(obj, {}, lambda o: [0, ["", type(o).__qualname__], ["__call__"]])
    if data is None:
        entry.update(ok=False, error="cannot be pickled: it crosses as a stand-in")
    else:
        entry.update(bytes=len(data), globals=_globals_of(data))
        plt = sys.modules.get("matplotlib.pyplot")
        before = set(plt.get_fignums()) if plt is not None else set()
        try:
            Mirrors().load(data, lambda reference: _Reference())
            entry.update(ok=True)
        except MirrorRefused as exc:
            entry.update(ok=False, error=str(exc)[:300])
        for num in set(plt.get_fignums()) - before if plt is not None else ():
            plt.close(num)  # a rebuilt figure registers with pyplot (here the program's own)
    found.append(entry)


class _Reference:
    """What the judge makes of a program object inside a mirror (a callable stand-in), for the survey."""

    def __call__(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN204
        return None


def _walk(value, found: list) -> None:
    """Survey each value inside ``value`` that would not cross to the judge as data (the codec's own test)."""
    def export(obj):  # noqa: ANN001, ANN202
        if not isinstance(obj, BaseException) and type(obj).__module__.split(".")[0] not in ("builtins", "__test__"):
            _survey_one(obj, found)
        return ["x", "surveyed"]

    try:
        Codec(export, None).encode(value)
    except Exception:  # noqa: BLE001 - a value over the codec's limits: not surveyed
        pass


def child(task_json: str) -> None:
    """Run one task (its record as JSON) and print what its objects pickle into."""
    import unittest

    task = json.loads(task_json)
    found: list = []
    os.chdir(tempfile.mkdtemp())
    module = type(sys)("__test__")
    sys.modules["__test__"] = module
    exec(compile(task["code_prompt"] + task["canonical_solution"], "__test__.py", "exec"), module.__dict__)
    original = module.__dict__[task["entry_point"]]

    def surveyed(*args, **kwargs):  # noqa: ANN202
        result = original(*args, **kwargs)
        _walk(result, found)
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is not None:
            for num in plt.get_fignums():
                _survey_one(plt.figure(num), found)
        return result

    module.__dict__[task["entry_point"]] = surveyed
    exec(compile(task["test"], "__test__.py", "exec"), module.__dict__)
    suite = unittest.TestLoader().loadTestsFromTestCase(module.__dict__["TestCases"])
    result = unittest.TestResult()
    suite.run(result)
    print(json.dumps({"task_id": task["task_id"], "passed": result.wasSuccessful(), "objects": found}))


def _run(task: dict) -> str:
    try:
        out = subprocess.run([sys.executable, __file__, "--child"], input=json.dumps(task), capture_output=True,
                             text=True, timeout=120, env={**os.environ, "MPLBACKEND": "Agg"})
        lines = [line for line in out.stdout.splitlines() if line.startswith('{"task_id"')]
        return lines[-1] if lines else json.dumps({"task_id": task["task_id"], "error": out.stderr[-300:]})
    except subprocess.TimeoutExpired:
        return json.dumps({"task_id": task["task_id"], "error": "timeout"})


def main() -> None:
    if sys.argv[1:] == ["--child"]:
        child(sys.stdin.read())
        return
    if os.geteuid() == 0 and "--allow-root" not in sys.argv:
        sys.exit("mirror_survey: this runs canonical solutions unconfined and they write outside their directory; "
                 "run it as an unprivileged user or in a throwaway container (or pass --allow-root there)")
    with gzip.open(sys.argv[1], "rt") as fh:
        tasks = [json.loads(line) for line in fh]
    wanted = tasks[int(os.environ.get("SURVEY_FROM", "0")):int(os.environ.get("SURVEY_TO", len(tasks)))]
    with ThreadPoolExecutor(int(os.environ.get("SURVEY_JOBS", "2"))) as pool:
        for line in pool.map(_run, wanted):
            print(line, flush=True)


if __name__ == "__main__":
    main()
