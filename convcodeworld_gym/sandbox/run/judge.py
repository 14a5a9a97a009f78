"""Runs in both processes of a split run: the split-process judge, trusted tests in one process, the untrusted program
in another.

A program that runs in the same process as its tests can forge a pass (patch ``unittest``, walk
frames to the real ``TestCase``, write a fake result to the result pipe and ``os._exit``, return
an object whose ``__eq__`` is always true). In *split* mode the judge process runs the tests with
the entry point (and the program's other names the tests read) replaced by stand-ins; the program
runs in a confined child that answers each call over a pipe. Values cross as data only
(:mod:`.codec`: rebuilt through public constructors, never unpickled), so an always-equal object
cannot cross; what is not data crosses as a stand-in (:mod:`.standin`), whose calls go back to
the process that owns the object. The tests' mocks stay in the judge: the program's process gets
stand-ins where a test patched (:mod:`.mocks`). Process-wide state that one module would share
(the ``random`` states, ``sys.path``, rcParams the tests name, Django's settings) travels with the
messages as data (:mod:`.shared`), so tests that seed before calling still see the same numbers.

*In-process* judging (program and tests in one process, as the reference does) is an explicit
opt-in only: there a program can forge its verdict, and :func:`..host.judge_policy.suspicious_constructs` flags the
programs that touch what lets it.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import os
import sys
import time
import traceback
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from ...tasks.record import parse_source
from ..children import describe_exit
from .codec import CodecError, dumps, loads
from .mocks import PatchApplier, PatchTracker, same_state
from .readers import install as install_readers
from .shared import SharedState, rc_keys
from .standin import Channel, Peer, ProgramGone, RemoteError, StandIn, _clip, class_policy, exception_policy

__all__ = ["serve_program", "connect_program", "Connection", "JudgeFacts", "judge_facts", "judge_source", "Channel", "ProgramGone",
           "RemoteError"]


# ----------------------------------------------------------------------------- both sides of a split run

def _exit_text(pid: int | None) -> Callable[[], str]:
    """How the program's process ended, when this judge is its parent (waits up to 2 s)."""
    box = [pid]

    def text() -> str:
        if box[0] is None:
            return ""
        for _ in range(200):
            try:
                done, status = _waitpid(box[0], os.WNOHANG)
            except ChildProcessError:
                return ""
            if done:
                box[0] = None
                return f" (it {describe_exit(os.waitstatus_to_exitcode(status))})"
            _sleep(0.01)
        return " (it is still running)"

    return text


_MAX_NAMES = 10_000
_waitpid, _sleep = os.waitpid, time.sleep  # bound once: tests patch time.sleep


def serve_program(channel: Channel, private_paths: tuple[str, ...] = ()) -> None:
    """The program side: receive ``["init", program, module_name, entry_point, test imports, rc keys]``, exec the
    program as that module, then answer the judge's requests until the channel closes. ``private_paths`` (the
    run's work dir) stay in this process's ``sys.path`` only (see :mod:`.shared`).

    The first answer is ``["crash", traceback]`` (the module failed), ``["missing"]`` (no entry point),
    or ``["ready", {name: module name or None}]`` for the module's globals.
    """
    import linecache

    message = loads(channel.recv())
    if not (isinstance(message, list) and len(message) == 6 and all(isinstance(p, str) for p in message[1:4])):
        return
    _, program, module_name, entry_point, test_imports, rc = message
    filename = f"{module_name}.py"
    if not program.endswith("\n"):  # as in one module with the tests after it (traceback carets depend on it)
        program += "\n"
    linecache.cache[filename] = (len(program), None, program.splitlines(keepends=True), filename)
    module = types.ModuleType(module_name)
    module.__file__ = filename
    sys.modules[module_name] = module
    shared = SharedState.program(rc if isinstance(rc, list) else (), private_paths)  # before the program runs
    tree = parse_source(program)
    try:  # compiled from its tree (parsed once: its names are read below); a syntax error as compile() writes it
        exec(compile(program if tree is None else tree, filename, "exec"), module.__dict__)
    except BaseException as exc:  # noqa: BLE001
        tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
        channel.send(dumps(["crash", _clip("".join(traceback.format_exception(type(exc), exc, tb)))]))
        return
    if entry_point not in module.__dict__:  # the tests then meet a NameError, as in one module
        channel.send(dumps(["missing"]))
        return
    # By the real type: isinstance() reads __class__, which a lazy object (Django's settings) computes by running code.
    names = {name: (value.__name__ if issubclass(type(value), types.ModuleType) else None)
             for name, value in list(module.__dict__.items())[:_MAX_NAMES] if not name.startswith("__")}
    _bind_imports(module, test_imports, _test_names(tree)[0])
    patches = PatchApplier()

    def sync_in(state: dict[str, Any]) -> None:
        shared.apply(state)
        if "patches" in state:
            patches.apply(state["patches"])

    peer = Peer(channel, strict=False, claim=class_policy(False), exceptions=exception_policy(False),
                sync_out=shared.out, sync_in=sync_in)
    peer.export(module)  # handle 1: the judge reads the names its tests use from it
    peer.export(_loaded_module)  # handle 2: the judge's pyplot asks for the program's (see _share_pyplot)
    peer.export(functools.partial(_module_values, module))  # handle 3: the names the tests read, in one answer
    channel.send(dumps(["ready", {k: v for k, v in names.items() if v is None or isinstance(v, str)}]))
    peer.serve_forever()


def _top_level_imports(tree: ast.Module | None) -> list[list]:
    """The module-level imports of a module's ``tree``: ``[bound name, module, attribute or None]`` each."""
    if tree is None:
        return []
    out: list[list] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    out.append([alias.asname, alias.name, None])
                else:
                    root = alias.name.split(".")[0]
                    out.append([root, alias.name, ""])  # "": bind the top package after importing the dotted name
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.extend([alias.asname or alias.name, node.module, alias.name] for alias in node.names if alias.name != "*")
    return out


def _bind_imports(module: types.ModuleType, imports: Any, used: set[str]) -> None:
    """Bind in the program's module the tests' module-level imports: in one module (the reference's way) the
    program's functions see them, over its own names (a test's ``from datetime import datetime`` replaces
    the program's ``import datetime``). Only the names the program's source reads (``used``) are bound:
    importing the rest would cost time and change nothing."""
    if not isinstance(imports, list):
        return
    for item in imports:
        if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str) and isinstance(item[1], str)):
            continue
        name, target, attr = item
        if name not in used:
            continue
        try:
            imported = importlib.import_module(target)
            if attr == "":
                imported = sys.modules[target.split(".")[0]]
            elif isinstance(attr, str):
                imported = getattr(imported, attr)
            module.__dict__[name] = imported
        except Exception:  # noqa: BLE001 - the tests' own import fails there too, or names a submodule
            continue


def _warning_recorder(exceptions: Callable[[str, str], type | None]) -> Callable[..., None]:
    """The judge's end of the program's warnings while a test records them: rebuilt as the nearest
    warning class the judge may rebuild (else ``UserWarning``) and handed to the test's recorder."""
    import warnings

    def record(text: Any, chain: Any, filename: Any, lineno: Any) -> None:
        category: type = UserWarning
        for item in chain if isinstance(chain, list) else ():
            found = exceptions(*item) if isinstance(item, list) and len(item) == 2 and all(
                isinstance(p, str) for p in item) else None
            if found is not None and issubclass(found, Warning):
                category = found
                break
        message = warnings.WarningMessage(category(str(text)), category, str(filename), lineno if type(lineno) is int else 0)
        warnings._showwarnmsg_impl(message)  # noqa: SLF001 - the test's catch_warnings(record=True) put its recorder there

    return record


def _module_values(module: types.ModuleType, names: Any) -> dict[str, Any]:
    """Program side (handle 3): the values of those of ``names`` the program's module has."""
    if not isinstance(names, list):
        return {}
    own = module.__dict__
    return {name: own[name] for name in names[:_MAX_NAMES] if type(name) is str and name in own}


def _loaded_module(name: str) -> types.ModuleType | None:
    """Program side (handle 2): a module the program's process has loaded, or None."""
    return sys.modules.get(name) if isinstance(name, str) else None


#: pyplot's global state (current figure and axes, open figures) lives where the program plots.
_PYPLOT_STATE = ("gca", "gcf", "gci", "sca", "figure", "subplots", "subplot", "clf", "cla", "get_fignums",
                 "get_figlabels", "fignum_exists", "savefig", "show", "draw")


def _share_pyplot(peer: Peer) -> None:
    """Make the judge's ``matplotlib.pyplot`` state functions act on the program's pyplot (where it has one):
    a test's ``plt.gca()``, ``plt.gcf().axes`` or ``plt.close()`` sees the figures the program drew, as in
    one process. ``close`` closes the judge's own figures too."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    box: list = []

    def program_pyplot() -> Any:
        if not box:
            try:
                box.append(peer.request("call", 2, [["matplotlib.pyplot"], {}]))
            except Exception:  # noqa: BLE001 - the program process is gone: the judge's own pyplot answers
                return None
        return box[0]

    def forwarding(name: str, original: Callable) -> Callable:
        def forward(*args: Any, **kwargs: Any) -> Any:
            remote = program_pyplot()
            return original(*args, **kwargs) if remote is None else getattr(remote, name)(*args, **kwargs)

        forward.__name__ = forward.__qualname__ = name
        forward.__doc__ = original.__doc__
        return forward

    for name in _PYPLOT_STATE:
        original = getattr(plt, name, None)
        if callable(original):
            setattr(plt, name, forwarding(name, original))
    judge_close = plt.close

    def close(fig: Any = None) -> None:
        remote = program_pyplot()
        if remote is not None and (fig is None or isinstance(fig, (str, int)) or isinstance(fig, StandIn)):
            remote.close(fig)
        if not isinstance(fig, StandIn):
            judge_close(fig)

    close.__doc__ = judge_close.__doc__
    plt.close = close


def _test_names(tree: ast.Module | None) -> tuple[set[str], set[str]]:
    """The names a module's ``tree`` reads (also in dotted strings: patch targets), and the top-level modules it
    imports."""
    read: set[str] = set()
    roots: set[str] = set()
    if tree is None:
        return read, roots
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            read.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "." in node.value:
            read.update(part for part in node.value.split(".") if part.isidentifier())  # patch('__test__.helper')
        elif isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            roots.add(node.module.split(".")[0])
    return read, roots


def judge_source(program: str, prelude: str, test: str) -> str:
    r"""The judge's module: the task's imports, then the tests at the same line numbers as in ``program + "\n" + test``.

    Only where the imports take more lines than the program do the tests start later (right after them).

    >>> judge_source("import os\ndef f():\n    return 1\n", "import os\n", "T").splitlines()
    ['import os', '', '', '', 'T']
    >>> judge_source("import os\nimport re", "import os\nimport re\n", "T").splitlines()  # T on line 3 in both
    ['import os', 'import re', 'T']
    """
    prelude = prelude if prelude.endswith("\n") or not prelude else prelude + "\n"
    offset = (program + "\n").count("\n")
    return prelude + "\n" * max(0, offset - prelude.count("\n")) + test


@dataclass(frozen=True)
class JudgeFacts:
    """What the split judge reads from its module's source (the task's imports, then its tests), found
    without running it: the same for every program of a task, so the executor finds them once per task
    and sends them with each job (:func:`judge_facts`), and a run's critical path parses nothing.

    Attributes:
        imports: the module-level imports, ``[bound name, module, attribute or None]`` each (bound in the
            program's module too, as in one module).
        read: the names the source reads (also in dotted strings: patch targets).
        roots: the top-level modules it imports.
        rc: the matplotlib rcParams keys it may read (:func:`.shared.rc_keys`).
        mocks: whether it can patch (it mentions ``mock``).

    >>> facts = judge_facts("import os\\nfrom unittest.mock import patch\\nclass TestCases: x = task_func")
    >>> facts.imports, sorted(facts.read), sorted(facts.roots), facts.mocks
    ([['os', 'os', ''], ['patch', 'unittest.mock', 'patch']], ['task_func', 'x'], ['os', 'unittest'], True)
    >>> JudgeFacts.from_data(facts.to_data()) == facts
    True
    """

    imports: list
    read: frozenset[str]
    roots: frozenset[str]
    rc: tuple[str, ...]
    mocks: bool

    def to_data(self) -> dict[str, Any]:
        """Plain JSON data (for the job)."""
        return {"imports": self.imports, "read": sorted(self.read), "roots": sorted(self.roots), "rc": list(self.rc),
                "mocks": self.mocks}

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> JudgeFacts:
        return cls([list(item) for item in data["imports"]], frozenset(data["read"]), frozenset(data["roots"]),
                   tuple(data["rc"]), bool(data["mocks"]))


def judge_facts(source: str) -> JudgeFacts:
    """The :class:`JudgeFacts` of a judge module's ``source`` (blank lines in it change nothing)."""
    tree = parse_source(source)
    read, roots = _test_names(tree)
    return JudgeFacts(_top_level_imports(tree), frozenset(read), frozenset(roots), tuple(rc_keys(source)),
                     "mock" in source)  # only then can the tests patch (importing unittest.mock costs ~10 ms)


class Connection(NamedTuple):
    """What :func:`connect_program` made: ``crash`` (the program's module failed: its traceback), else the
    program's names the tests read (``provided``), the judge module's code, compiled while the program
    started (None where it does not compile: :func:`.runner.run_suite` then reports why), the judge's
    round trips to the program so far (``stats``, :meth:`.standin.Peer.stats`), and ``times``: the
    ``time.monotonic()`` at which the program was sent to its process (``sent_at``) and its first answer came
    (``ready_at``), for the run's stages (timings only); ``refusals``: the operations refused on the program's
    objects since last asked (:meth:`.standin.Peer.take_refusals`), each of which fails the test that met it."""

    crash: str | None
    provided: dict[str, Any]
    code: types.CodeType | None = None
    stats: Callable[[], dict[str, float]] | None = None
    times: dict[str, float] | None = None
    refusals: Callable[[], list[str]] | None = None


def connect_program(channel: Channel, pid: int | None, program: str, module_name: str, entry_point: str,
                    judge_module_source: str, facts: JudgeFacts | None = None) -> Connection:
    """The judge side: start the program in its process and get what the tests read from it.

    ``facts`` are the judge module's :class:`JudgeFacts` (found here when not given). The result's
    ``provided`` names are the program's globals that the tests read (the entry point among them unless it
    is missing), each a :class:`~.standin.StandIn`, a copy of its data, or the judge's own import of the
    same module. Installs the :class:`~.mocks.PatchTracker` that carries the tests' patches to the program.
    """
    facts = facts or judge_facts(judge_module_source)
    channel.send(dumps(["init", program, module_name, entry_point, facts.imports, list(facts.rc)]))
    sent_at = time.monotonic()
    code = _compiled(judge_module_source, f"{module_name}.py")  # while the program's process runs the program
    try:
        first = loads(channel.recv())
        times = {"sent_at": sent_at, "ready_at": time.monotonic()}
    except (ProgramGone, OSError, CodecError) as exc:
        return Connection(f"The program process ended before it was ready ({exc}{_exit_text(pid)()}).", {})
    if not isinstance(first, list) or not first or first[0] not in ("crash", "missing", "ready"):
        return Connection("The program process sent a malformed first message.", {})
    if first[0] == "crash":
        return Connection(str(first[1]) if len(first) > 1 else "The program crashed.", {})
    if first[0] == "missing":  # the tests run without it and fail with NameError, as in one module
        install_readers()  # files and bytes are data to the judge (readers.py)
        return Connection(None, {}, code, times=times)
    names = first[1] if len(first) > 1 and isinstance(first[1], dict) else {}
    read, roots = facts.read, facts.roots
    exceptions = exception_policy(True, roots | {"builtins"})
    tracker = PatchTracker(module_name, _warning_recorder(exceptions))
    if facts.mocks:
        tracker.install()
    shared = SharedState.judge(facts.rc)
    sent: list = [None]

    def sync_out() -> dict[str, Any]:
        state = shared.out()
        patches = tracker.state(module_name)
        if not same_state(sent[0], patches):
            sent[0] = state["patches"] = patches
        return state

    def sync_in(state: dict[str, Any]) -> None:
        shared.apply(state)

    peer = Peer(channel, strict=True, claim=class_policy(True),
                exceptions=exceptions, sync_out=sync_out, sync_in=sync_in,
                on_gone=_exit_text(pid))
    if "matplotlib" in roots:  # the tests import it anyway: now, so that its state can be shared first
        try:
            importlib.import_module("matplotlib.pyplot")
        except Exception:  # noqa: BLE001 - the tests meet the same failure themselves
            pass
    _share_pyplot(peer)
    install_readers()  # files and bytes are data to the judge (readers.py)
    provided: dict[str, Any] = {}
    wanted: list[str] = []
    for name in sorted((read | {entry_point}) & set(names)):
        if name in dir(builtins) and name != entry_point:
            continue
        module_of = names[name]
        if isinstance(module_of, str):  # a module the program imported: the judge's own copy
            if module_of.split(".")[0] in roots or module_of in sys.modules:
                try:
                    provided[name] = importlib.import_module(module_of)
                except Exception:  # noqa: BLE001 - left unbound: the test meets a NameError
                    pass
            continue
        wanted.append(name)
    provided.update(_fetch(peer, wanted))
    return Connection(None, provided, code, peer.stats, times, peer.take_refusals)


def _fetch(peer: Peer, names: list[str]) -> dict[str, Any]:
    """The program's values of ``names``: in one request (handle 3), else name by name (one that cannot
    cross is left unbound: the test meets a NameError)."""
    if not names:
        return {}
    try:
        values = peer.request("call", 3, [[names], {}])
        if isinstance(values, dict) and all(type(k) is str for k in values):
            return {k: v for k, v in values.items() if k in names}
    except ProgramGone:
        return {}
    except Exception:  # noqa: BLE001 - one value could not cross: each alone
        pass
    found: dict[str, Any] = {}
    for name in names:
        try:
            found[name] = peer.request("getattr", 1, name)
        except ProgramGone:
            break
        except Exception:  # noqa: BLE001 - left unbound
            continue
    return found


def _compiled(source: str, filename: str) -> types.CodeType | None:
    try:
        return compile(source, filename, "exec")
    except (SyntaxError, ValueError):
        return None
