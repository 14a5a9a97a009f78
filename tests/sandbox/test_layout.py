"""The sandbox's layout is its map: rooms by the process they run in, floors that import only downward, no circle.

The floors, lowest first (a module imports only from its own room or a lower floor, never a higher one nor another
room of its floor):

    0  records        messages, result, limits, children: what every process shares
    1  runtimes       the interpreter a run gets, what a runtime holds and what a task needs of it
    2  confinement    the worker's and the run's confinement layers
    2  run            one run: the test runner, its events, the split judge's two sides
    3  worker         the warm worker: its loop, its zygote, each run's spare
    4  host           the executor in the env's process: the pool, its policy, its launchers
    5  backends       the other executors (local, Docker, Ray)

Checked on the source (``ast``), so a lazy import inside a function or under ``TYPE_CHECKING`` counts too.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from convcodeworld_gym.sandbox.host.launch import PACKAGE_DIR, worker_boot

PACKAGE = Path(__file__).resolve().parents[2] / "convcodeworld_gym"
SANDBOX = "convcodeworld_gym.sandbox"
FLOORS = {"records": 0, "runtimes": 1, "confinement": 2, "run": 2, "worker": 3, "host": 4, "backends": 5}
RECORDS = {"messages", "result", "limits", "children"}
#: A cross-reference in a docstring, relative to the module's package (``:class:`~..result.ExecutionResult```).
RELATIVE_REF = re.compile(r":(?:mod|class|func|meth|data|attr|exc):`~?(\.+[\w.]*)`")


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _package_of(name: str) -> list[str]:
    return name.split(".") if MODULES[name].name == "__init__.py" else name.split(".")[:-1]


def _resolve(name: str, level: int, module: str | None) -> str:
    if not level:
        return module or ""
    base = _package_of(name)
    return ".".join(base[: len(base) - level + 1] + ([module] if module else []))


def _imports(name: str) -> set[str]:
    """The package's modules ``name`` imports (a name imported from a package counts as its submodule if it is one)."""
    found = set()
    for node in ast.walk(ast.parse(MODULES[name].read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(name, node.level, node.module)
            targets = [f"{target}.{alias.name}" if f"{target}.{alias.name}" in MODULES else target for alias in node.names]
        else:
            continue
        found.update(t for t in targets if t in MODULES and t != name)
    return found


def _room(name: str) -> str | None:
    """The room of a sandbox module (``None`` for the sandbox's own ``__init__``, its public door)."""
    parts = name.split(".")[2:]
    if not parts:
        return None
    return "records" if parts[0] in RECORDS else parts[0]


def test_a_booted_worker_loads_its_own_room_and_the_lower_floors_only() -> None:
    """The rooms are real at run time too: a worker boots with no host or backend code in its memory."""
    code = worker_boot(PACKAGE_DIR, start=False) + (
        "import json\nprint(json.dumps(sorted(m for m in sys.modules if m.startswith('convcodeworld_gym.sandbox.'))))")
    loaded = json.loads(subprocess.run([sys.executable, "-s", "-c", code], capture_output=True, text=True, check=True,
                                       timeout=60).stdout)
    rooms = {_room(name) for name in loaded}
    assert {"worker", "run", "confinement", "runtimes", "records"} <= rooms, loaded
    assert FLOORS["worker"] == max(FLOORS[room] for room in rooms), loaded


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_packages_import_graph_has_no_circle() -> None:
    graph = {name: _imports(name) for name in MODULES}
    assert _cycles(graph) == []


def test_a_circle_is_found_where_there_is_one() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_sandbox_module_lives_in_a_room_of_the_map() -> None:
    rooms = {name: _room(name) for name in MODULES if name.startswith(SANDBOX + ".")}
    assert {room for room in rooms.values()} <= set(FLOORS), rooms


def test_a_sandbox_module_imports_only_its_own_room_or_a_lower_floor() -> None:
    wrong = []
    for name in MODULES:
        if not name.startswith(SANDBOX + "."):
            continue
        room = _room(name)
        for target in _imports(name):
            if not target.startswith(SANDBOX + ".") or _room(target) == room:
                continue
            if FLOORS[_room(target)] >= FLOORS[room]:
                wrong.append(f"{name} ({room}, floor {FLOORS[room]}) imports {target} "
                             f"({_room(target)}, floor {FLOORS[_room(target)]})")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.startswith(SANDBOX)))
def test_a_sandbox_modules_first_line_says_which_process_runs_it(name: str) -> None:
    doc = ast.get_docstring(ast.parse(MODULES[name].read_text(encoding="utf-8"))) or ""
    assert re.match(r"Runs (in|as a script in) ", doc), f"{name}: its docstring starts {doc[:60]!r}"


def _top_level_names(name: str) -> set[str]:
    names = set()
    for node in ast.parse(MODULES[name].read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _dangling(name: str, ref: str) -> bool:
    """True when the relative reference ``ref`` in ``name``'s docstrings names no module, or no name in it."""
    dots = len(ref) - len(ref.lstrip("."))
    parts = _resolve(name, dots, ref[dots:] or None).split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        if module in MODULES:
            return cut < len(parts) and parts[cut] not in _top_level_names(module)
    return True


def test_every_relative_cross_reference_in_the_package_names_what_exists() -> None:
    """A moved module leaves no reference to where it was (``:func:`.launch.worker_boot``` from the worker)."""
    dangling = [f"{name}: {match.group(1)}" for name in MODULES
                for match in RELATIVE_REF.finditer(MODULES[name].read_text(encoding="utf-8"))
                if _dangling(name, match.group(1))]
    assert not dangling, "\n".join(dangling)


def test_a_dangling_reference_is_found() -> None:
    assert _dangling(f"{SANDBOX}.host.pool", ".worker.main")  # host/worker does not exist
    assert not _dangling(f"{SANDBOX}.host.pool", "..worker.main")
    assert _dangling(f"{SANDBOX}.host.pool", "..result.NoSuchName")


def _threat_model_rows() -> list[list[str]]:
    """The rows of docs/threat-model.md's tables (the attacks, then who decides), headers and rules left out."""
    page = (PACKAGE.parent / "docs" / "threat-model.md").read_text(encoding="utf-8")
    return [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in page.splitlines()
            if line.startswith("|") and not re.fullmatch(r"\|[\s|:-]+\|", line.strip())
            and not line.startswith(("| attack |", "| operation |", "| reader "))]


def test_the_threat_model_names_files_and_tests_that_exist() -> None:
    """docs/threat-model.md: its "stopped by" column names the sandbox's files, its "proved by" column test files and
    their tests."""
    missing = []
    rows = _threat_model_rows()
    for row in rows:  # attack, stopped by, proved by; or reader, builds, who decides, guard, proved by
        stopped_by, proved_by = (row[1], row[2]) if len(row) == 3 else (row[-2], row[-1])
        for path in re.findall(r"`([\w/]+\.py)`?", stopped_by):
            if not (PACKAGE / "sandbox" / path).is_file() and not (PACKAGE / path).is_file():
                missing.append(f"stopped by: {path}")
        current = None
        for path, test in re.findall(r"`([\w/.]+\.py)?(?:::(\w+))?", proved_by):
            if path:
                current = next((base / path for base in (PACKAGE.parent / "tests" / "sandbox", PACKAGE.parent)
                                if (base / path).is_file()), None)
                if current is None:
                    missing.append(f"proved by: {path}")
            if test and current is not None and f"def {test}(" not in current.read_text(encoding="utf-8"):
                missing.append(f"proved by: {current.name}::{test}")
    assert len(rows) > 10 and not missing, missing
