"""Survey: what the library objects of BigCodeBench's canonical solutions are made of, and the table made from it.

The split judge rebuilds the library objects a program returns (matplotlib figures, fitted models ...) from a data
tree that names each class by its exact ``module:qualname``, only where the class is in the reviewed table of
:mod:`convcodeworld_gym.sandbox.run.mirror_table`. This tool measures what that table must hold: it runs each task's
canonical solution with its tests in one process (as the reference does, no sandbox: canonical solutions only), and
for every value that ``task_func`` returns and every open matplotlib figure after each call, makes its mirror with
the program side's own :func:`~convcodeworld_gym.sandbox.run.mirror.snapshot`, and prints, as JSON lines:

* ``--open`` (the evidence): every class of a mirrored library the mirror lists, every library callable it holds
  as a value, and the classes that it leaves to stand-ins;
* without it (the check): for each value, whether the judge's own ``Mirrors.load`` rebuilds its mirror under the
  table as it is (or why not), and ``held``: each place of a listed object that holds an object by reference
  (``"module:qualname place"`` -> the classes held there; :func:`~convcodeworld_gym.sandbox.run.mirror.references_held`,
  what the judge checks against the table's ``SLOTS``).

``--table survey.jsonl [check.jsonl ...]`` writes the table module from the lines of the surveys given: the classes
of an ``--open`` survey whose screens pass in this runtime, each with why its comparisons are its library's own;
callables of the mirrored libraries; the places a check survey found holding objects by reference (``SLOTS``), each
with what was read of it (an unread one says so), and the places read before (of another library version, or that
the project's own tests use: a ``FuncFormatter``'s function).

Run it with the runtime's interpreter, from the repository root:

    /path/to/runtime/bin/python envs/bigcodebench/mirror_survey.py --open BigCodeBench.jsonl.gz > survey.jsonl
    /path/to/runtime/bin/python envs/bigcodebench/mirror_survey.py BigCodeBench.jsonl.gz > check.jsonl
    /path/to/runtime/bin/python envs/bigcodebench/mirror_survey.py --table survey.jsonl check.jsonl \
        > convcodeworld_gym/sandbox/run/mirror_table.py

Each task runs in a subprocess of its own (a crash or hang costs only that task: 120 s at most). The canonical
solutions and their tests run **unconfined**: they write where they like (one creates ``/non/existent/path``, which
then fails BigCodeBench/288 and 350 in every later run on that machine). Run it as an unprivileged user or in a
throwaway container; as root it refuses unless ``--allow-root`` is given.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

_PACKAGE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "convcodeworld_gym")
for _name, _dir in (("convcodeworld_gym", _PACKAGE_DIR), ("convcodeworld_gym.sandbox", os.path.join(_PACKAGE_DIR, "sandbox"))):
    _package = type(sys)(_name)  # the sandbox's run room alone, as a worker boots it (no gymnasium in a runtime)
    _package.__path__ = [_dir]
    sys.modules[_name] = _package
from convcodeworld_gym.sandbox.run.codec import Codec  # noqa: E402
from convcodeworld_gym.sandbox.run.mirror import MirrorRefused, Mirrors, mirrored, references_held, snapshot  # noqa: E402
from convcodeworld_gym.sandbox.run.mirror_allowed import (DECIDING, MIRRORED_ROOTS, key_of, root_of,  # noqa: E402
                                                          screen_refusal)

_SEEN: dict[int, object] = {}  # each object surveyed once (kept alive, so that its id is not reused)
_OPEN = "--open" in sys.argv
#: Roots whose functions and classes an open survey lets a mirror hold as values (each then read for the table).
_CALLABLE_ROOTS = MIRRORED_ROOTS | {"numpy", "pandas"}


def _open_admit(cls: type) -> bool:
    key = key_of(cls) or ""
    return root_of(key.partition(":")[0]) in MIRRORED_ROOTS and "<locals>" not in key and not issubclass(cls, BaseException)


def _open_callable(key: str) -> bool:
    return root_of(key.partition(":")[0]) in _CALLABLE_ROOTS and "<locals>" not in key


def _survey_one(obj, found: list) -> None:
    if id(obj) in _SEEN:
        return
    _SEEN[id(obj)] = obj
    entry = {"class": key_of(type(obj))}
    standins: list[str] = []

    def by_reference(o):  # noqa: ANN001, ANN202
        standins.append(key_of(type(o)) or repr(type(o)))
        return [0, [type(o).__module__, type(o).__qualname__], ["__call__"]]

    if _OPEN:
        tree = snapshot(obj, {}, by_reference, _open_admit, _open_callable)
        if tree is None:
            entry.update(ok=False, error="no mirror: it crosses as a stand-in")
        else:
            entry.update(classes=sorted({o[1] for o in tree[2]} | _refs(tree, "enum")), callables=sorted(_refs(tree, "fn")),
                         standins=sorted(set(standins)))
        found.append(entry)
        return
    if not mirrored(type(obj)):  # crosses as a stand-in: only its class is of interest
        entry.update(ok=None)
        found.append(entry)
        return
    tree = snapshot(obj, {}, by_reference)
    if tree is None:
        entry.update(ok=False, error="no mirror: it crosses as a stand-in")
    else:
        entry.update(bytes=len(json.dumps(tree)), objects=len(tree[2]), standins=sorted(set(standins)),
                     held={f"{key} {place}": sorted(claims) for (key, place), claims in
                           sorted(references_held(tree[2], tree[3]).items())})
        plt = sys.modules.get("matplotlib.pyplot")
        before = set(plt.get_fignums()) if plt is not None else set()
        try:
            Mirrors().load(tree, lambda reference: _Reference())
            entry.update(ok=True)
        except MirrorRefused as exc:
            entry.update(ok=False, error=str(exc)[:300])
        for num in set(plt.get_fignums()) - before if plt is not None else ():
            plt.close(num)  # a rebuilt figure registers with pyplot (here the program's own)
    found.append(entry)


def _refs(tree, kind: str) -> set[str]:  # noqa: ANN001
    """The keys of a mirror's ``["r", kind, key, ...]`` references (``"fn"``: callables held; ``"enum"``: the enum
    classes whose members it holds)."""
    found: set[str] = set()
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, list):
            if len(node) >= 3 and node[0] == "r" and node[1] == kind and isinstance(node[2], str):
                found.add(node[2])
            todo.extend(node)
    return found


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
    """Run one task (its record as JSON) and print what its objects are made of."""
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


def _why(cls: type) -> str:
    """Why a class's comparisons are its library's own (the screens of .mirror_allowed, as this runtime has it)."""
    own = sorted(f"{k.__qualname__}.{op}" for k in cls.__mro__ if root_of(str(k.__dict__.get("__module__", ""))) in MIRRORED_ROOTS
                 for op in DECIDING & vars(k).keys())  # each in mirror_allowed.REVIEWED, or the screen refused it
    bases = [k.__name__ for k in cls.__mro__ if k.__module__ == "builtins" and k is not object]
    if own:
        return "its comparisons were read (mirror_allowed.REVIEWED): " + ", ".join(own[:4])
    if bases:
        return f"no comparison of its own: compares as its builtin base {bases[0]}"
    return "no comparison or arithmetic of its own: compared by identity"


def table(lines: list[str]) -> str:
    """The table module from an open survey's lines: each class listed whose screens pass here, each callable held."""
    import importlib

    classes: set[str] = set()
    callables: set[str] = set()
    slots: dict[tuple[str, str], set[str]] = {}
    for line in lines:
        record = json.loads(line)
        for entry in record.get("objects", ()):
            classes.update(entry.get("classes", ()))
            callables.update(entry.get("callables", ()))
            for place, held in entry.get("held", {}).items():
                slots.setdefault(tuple(place.split(" ", 1)), set()).update(held)
    rows, refused = [], []
    for key in sorted(classes):
        module, _, qualname = key.partition(":")
        try:
            found = importlib.import_module(module)
            for part in qualname.split("."):
                found = getattr(found, part)
        except Exception as exc:  # noqa: BLE001
            refused.append(f"# {key}: not found here ({type(exc).__name__})")
            continue
        why = screen_refusal(found)
        if why is not None:
            refused.append(f"# {key}: {why}")
            continue
        rows.append(f"    {key!r}: {_why(found)!r},")
    out = [TABLE_HEAD, "CLASSES: dict[str, str] = {", *rows, "}", "#: Left out (the screens refuse them here):",
           *refused, "CALLABLES: dict[str, str] = {"]
    from convcodeworld_gym.sandbox.run.mirror_table import CALLABLES, SLOTS  # what each was read to be, kept

    out += [f"    {key!r}: {CALLABLES.get(key, 'UNREAD: say what it is and what it does when called')!r},"
            for key in sorted(callables)]
    out += ["}", "SLOTS: dict[tuple[str, str], str] = {"]
    unread = "UNREAD: what library code does with it (held: {})"
    out += [f"    {slot!r}: {SLOTS.get(slot) or unread.format(', '.join(sorted(slots[slot])))!r},"
            for slot in sorted(set(slots) | set(SLOTS))]  # those read before kept (another version's, a test's)
    out.append("}")
    return "\n".join(out) + "\n"


TABLE_HEAD = '''"""Runs in both processes of a split run: the reviewed table of what a mirror may name (see :mod:`.mirror_allowed`).

Generated by ``envs/bigcodebench/mirror_survey.py --table`` from what the 1140 BigCodeBench canonical solutions
return (and the figures they leave open), surveyed in the pinned runtime (the lines of every survey given, so a class
an earlier version of the mirrors listed, such as a tick, is rebuilt too when one is sent); then read. Each class says
why its comparisons are its library's own; a class that defines a comparison of its own passes only where that comparison
was read (``mirror_allowed.REVIEWED``), and its ``__setstate__`` only where that was read (``REVIEWED_SETSTATE``).

Holds:
    CLASSES    ``module:qualname`` of each library class a mirror may list -> why its comparisons are its library's
    CALLABLES  ``module:qualname`` of each library function or class a mirror may hold as a value -> what it is
    SLOTS      ``(module:qualname, place)`` where an object of a listed class may hold an object by reference (the
               program's own, or one of the judge's handed to it) -> what the judge's library does with it
"""

__all__ = ["CLASSES", "CALLABLES", "SLOTS"]

#: The library classes a mirror may list.'''


def _run(task: dict) -> str:
    try:
        out = subprocess.run([sys.executable, __file__, "--child", *(["--open"] if _OPEN else [])],
                             input=json.dumps(task), capture_output=True,
                             text=True, timeout=120, env={**os.environ, "MPLBACKEND": "Agg"})
        lines = [line for line in out.stdout.splitlines() if line.startswith('{"task_id"')]
        return lines[-1] if lines else json.dumps({"task_id": task["task_id"], "error": out.stderr[-300:]})
    except subprocess.TimeoutExpired:
        return json.dumps({"task_id": task["task_id"], "error": "timeout"})


def main() -> None:
    if "--child" in sys.argv:
        child(sys.stdin.read())
        return
    if sys.argv[1] == "--table":
        lines: list[str] = []
        for path in sys.argv[2:]:
            with open(path) as fh:
                lines += fh.readlines()
        sys.stdout.write(table(lines))
        return
    if os.geteuid() == 0 and "--allow-root" not in sys.argv:
        sys.exit("mirror_survey: this runs canonical solutions unconfined and they write outside their directory; "
                 "run it as an unprivileged user or in a throwaway container (or pass --allow-root there)")
    with gzip.open([a for a in sys.argv[1:] if not a.startswith("--")][0], "rt") as fh:
        tasks = [json.loads(line) for line in fh]
    wanted = tasks[int(os.environ.get("SURVEY_FROM", "0")):int(os.environ.get("SURVEY_TO", len(tasks)))]
    if os.environ.get("SURVEY_IDS"):  # comma-separated numbers: those tasks alone
        ids = {f"BigCodeBench/{n}" for n in os.environ["SURVEY_IDS"].split(",")}
        wanted = [t for t in wanted if t["task_id"] in ids]
    # a library object can come only from a library the task imports (pandas' plots are matplotlib's)
    wanted = [t for t in wanted if any(name in t["code_prompt"] + t["canonical_solution"] + t["test"]
                                       for name in (*MIRRORED_ROOTS, "pandas"))]
    with ThreadPoolExecutor(int(os.environ.get("SURVEY_JOBS", "2"))) as pool:
        for line in pool.map(_run, wanted):
            print(line, flush=True)


if __name__ == "__main__":
    main()
