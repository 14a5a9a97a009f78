"""The split-process judge: trusted tests in one process, the untrusted program in another.

A program that runs in the same process as its tests can forge a pass (patch ``unittest``, walk
frames to the real ``TestCase``, write a fake result to the result pipe and ``os._exit``, return
an object whose ``__eq__`` is always true). In *split* mode the judge process runs the tests with
the entry point replaced by a :class:`ProgramProxy`; the program runs in a confined child that
answers each call over a pipe. Return values come back pickled and are decoded by
:func:`safe_loads`, which rebuilds only plain data (builtins, datetime, decimal, numpy, pandas
values): an always-equal object cannot cross. The global ``random`` and ``numpy.random`` states
travel with every call, both ways, so tests that seed before calling still see the same numbers.

Tasks whose tests patch what the program uses (``mock.patch``), read names other than the entry
point, or inspect returned objects that are not plain data (matplotlib axes) need *in-process*
mode; :func:`suspicious_constructs` flags programs that touch what lets in-process code forge.

Holds:
    Mode                  ``split`` or ``inprocess``
    static_mode           the mode a test source forces, if any (``inprocess`` when it mocks)
    suspicious_constructs names of forging tools a program's source uses
    safe_loads            restricted unpickler for values coming from the program
    Channel               length-prefixed messages over a pair of file descriptors
    ProgramProxy          the judge's stand-in for the entry point
    serve_program         the program side: run the program, answer calls until the pipe closes
    RemoteError           raised in the judge when the program's exception cannot be rebuilt
"""

from __future__ import annotations

import ast
import builtins
import enum
import io
import os
import pickle
import struct
import sys
import time
import traceback
import types
from typing import Any

from .local import describe_exit

__all__ = [
    "Mode",
    "static_mode",
    "suspicious_constructs",
    "safe_loads",
    "Channel",
    "ProgramProxy",
    "serve_program",
    "RemoteError",
    "ProgramGone",
    "MAX_MESSAGE_BYTES",
]

#: Largest message either side accepts (a bigger return value is an error in that test).
MAX_MESSAGE_BYTES = 256 << 20
#: Longest exception argument or traceback text the program's process sends for one call.
MAX_ERROR_CHARS = 10_000


def _clip(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}... [{len(text) - 2 * half} characters cut] ...{text[-half:]}"


class Mode(str, enum.Enum):
    """How the tests of a task are judged."""

    SPLIT = "split"
    INPROCESS = "inprocess"


_MOCK_MARKERS = ("patch(", "patch.object(", "Mock(", "MagicMock", "mock_open", "@patch")


def static_mode(test_source: str) -> Mode | None:
    """``INPROCESS`` when the tests mock things (a mock cannot reach the program's process), else ``None``.

    >>> static_mode("from unittest.mock import patch\\n@patch('os.listdir')\\ndef test_a(self, m): pass")
    <Mode.INPROCESS: 'inprocess'>
    >>> static_mode("from unittest.mock import patch\\ndef test_a(self): pass") is None
    True
    """
    return Mode.INPROCESS if any(marker in test_source for marker in _MOCK_MARKERS) else None


_SUSPICIOUS_NAMES = {
    "_getframe": "frame access (sys._getframe)",
    "f_back": "frame walking (f_back)",
    "f_globals": "frame globals (f_globals)",
    "f_locals": "frame locals (f_locals)",
    "tb_frame": "frame access (tb_frame)",
    "currentframe": "frame access (inspect.currentframe)",
    "stack": None,  # inspect.stack: only with inspect, checked below
    "get_objects": "gc.get_objects",
    "get_referrers": "gc.get_referrers",
    "_exit": "os._exit",
    "settrace": "tracing hooks (settrace)",
    "setprofile": "profiling hooks (setprofile)",
    "TestCase": "unittest.TestCase internals",
    "TestResult": "unittest.TestResult internals",
    "TextTestRunner": "unittest runner internals",
    "TestLoader": "unittest loader internals",
    "addSuccess": "unittest result internals",
    "__subclasses__": "class-hierarchy walking (__subclasses__)",
}


def suspicious_constructs(program: str) -> tuple[str, ...]:
    """What in ``program`` could forge an in-process verdict: frames, gc, unittest internals, ``os._exit``, fds.

    Parsed, never run. An unparsable program returns ``()`` (it fails to compile anyway).

    >>> suspicious_constructs("import sys\\ndef task_func():\\n    sys._getframe(1).f_globals['x'] = 1")
    ('frame globals (f_globals)', 'frame access (sys._getframe)')
    >>> suspicious_constructs("def task_func(x):\\n    return x + 1")
    ()
    """
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError):
        return ()
    found: dict[str, None] = {}
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Attribute):
            name = node.attr
        elif isinstance(node, ast.Name):
            name = node.id
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            for root in sorted({m.split(".")[0] for m in mods if m} & {"unittest", "gc", "ctypes"}):
                found[f"imports {root}"] = None
            name = None
            for alias in node.names:
                if alias.name in _SUSPICIOUS_NAMES and _SUSPICIOUS_NAMES[alias.name]:
                    found[_SUSPICIOUS_NAMES[alias.name]] = None  # type: ignore[index]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if "/proc/self/fd" in node.value or "/dev/fd" in node.value or "/proc/self/mem" in node.value:
                found["result channel access (/proc/self/fd)"] = None
        if name is not None and _SUSPICIOUS_NAMES.get(name):
            found[_SUSPICIOUS_NAMES[name]] = None  # type: ignore[index]
    return tuple(found)


# ----------------------------------------------------------------------------- restricted unpickling

_SAFE_BUILTINS = frozenset({
    "int", "float", "complex", "str", "bytes", "bytearray", "list", "tuple", "dict", "set", "frozenset",
    "bool", "slice", "range", "object",
})
_SAFE_GLOBALS = frozenset({
    ("collections", "OrderedDict"), ("collections", "defaultdict"), ("collections", "Counter"), ("collections", "deque"),
    ("datetime", "date"), ("datetime", "datetime"), ("datetime", "time"), ("datetime", "timedelta"), ("datetime", "timezone"),
    ("decimal", "Decimal"), ("fractions", "Fraction"), ("uuid", "UUID"), ("copyreg", "_reconstructor"),
    ("pathlib", "PosixPath"), ("pathlib", "PurePosixPath"), ("pathlib", "Path"), ("re", "_compile"),
    ("ipaddress", "IPv4Address"), ("ipaddress", "IPv6Address"), ("ipaddress", "IPv4Network"), ("ipaddress", "IPv6Network"),
    ("zoneinfo", "ZoneInfo"), ("array", "array"), ("array", "_array_reconstructor"),
})
_DATA_LIBS = ("numpy", "pandas", "pyarrow")  # pyarrow: the string columns of pandas >= 3
_DATA_LIB_EXCLUDED = ("numpy.lib.npyio", "numpy.ctypeslib", "numpy.f2py", "numpy.distutils", "numpy.testing",
                      "pandas.io", "pandas.plotting", "pandas.testing", "pandas.util", "pyarrow.fs", "pyarrow.parquet")
_FUNCTION_TYPES = ("function", "builtin_function_or_method", "cython_function_or_method", "fused_cython_function")
_DATA_LIB_FUNCTION_MARKERS = ("unpickle", "reconstruct", "_new_", "frombuffer", "new_block", "scalar", "_restore", "type_for_alias", "py_buffer")


class _SafeUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name in _SAFE_BUILTINS:
            return getattr(builtins, name)
        if (module, name) in _SAFE_GLOBALS:
            return super().find_class(module, name)
        root = module.split(".")[0]
        if root in _DATA_LIBS and not module.startswith(_DATA_LIB_EXCLUDED) and "." not in name:
            if module not in sys.modules:
                raise pickle.UnpicklingError(f"refusing {module}.{name}: module not loaded in the judge")
            obj = super().find_class(module, name)
            owner = getattr(obj, "__module__", "") or ""
            if isinstance(obj, type) and owner.split(".")[0] in _DATA_LIBS and "File" not in name:
                return obj
            if type(obj).__name__ in _FUNCTION_TYPES and any(m in name.lower() for m in _DATA_LIB_FUNCTION_MARKERS):
                return obj
        raise pickle.UnpicklingError(
            f"the program returned a {module}.{name} object; only plain data (builtins, datetime, decimal, "
            "numpy, pandas values) can be judged across the process boundary"
        )


def safe_loads(data: bytes) -> Any:
    """Unpickle ``data``, rebuilding only plain-data types; anything else raises ``pickle.UnpicklingError``.

    >>> safe_loads(pickle.dumps({"a": [1, 2.5, (3, "x")], "b": {4}}))
    {'a': [1, 2.5, (3, 'x')], 'b': {4}}
    >>> import argparse
    >>> safe_loads(pickle.dumps(argparse.Namespace(a=1)))
    Traceback (most recent call last):
    ...
    _pickle.UnpicklingError: the program returned a argparse.Namespace object; only plain data (builtins, datetime, decimal, numpy, pandas values) can be judged across the process boundary
    """
    return _SafeUnpickler(io.BytesIO(data)).load()


# ----------------------------------------------------------------------------- the channel

class ProgramGone(EOFError):
    """The program's process closed the channel (it exited, crashed or was killed)."""


class Channel:
    """Length-prefixed messages over a read fd and a write fd. Not thread-safe."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd, self.write_fd = read_fd, write_fd

    def send(self, payload: bytes) -> None:
        data = struct.pack("<Q", len(payload)) + payload
        view = memoryview(data)
        while view:
            view = view[os.write(self.write_fd, view):]

    def _read_exact(self, n: int) -> bytes:
        chunks, left = [], n
        while left:
            chunk = os.read(self.read_fd, min(left, 1 << 20))
            if not chunk:
                raise ProgramGone("the program process closed the channel")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            os.close(fd)

    def recv(self) -> bytes:
        (size,) = struct.unpack("<Q", self._read_exact(8))
        if size > MAX_MESSAGE_BYTES:
            raise ProgramGone(f"the program sent a message of {size} bytes, over the limit of {MAX_MESSAGE_BYTES}")
        return self._read_exact(size)


def _rng_states() -> dict[str, Any]:
    import random

    states: dict[str, Any] = {"random": random.getstate()}
    np = sys.modules.get("numpy")
    if np is not None:
        states["numpy"] = np.random.get_state()
    return states


def _set_rng_states(states: dict[str, Any]) -> None:
    import random

    if "random" in states:
        random.setstate(states["random"])
    np = sys.modules.get("numpy")
    if np is not None and "numpy" in states:
        np.random.set_state(states["numpy"])


class RemoteError(Exception):
    """The program raised an exception the judge could not rebuild as its own class; the text is the program's traceback."""


class ProgramProxy:
    """Stands in for the program's entry point in the judge: each call is forwarded to the program process.

    Arguments go out pickled (they come from the trusted tests); the return value comes back through
    :func:`safe_loads`. An exception in the program is re-raised here as the same builtin (or already
    loaded) exception class when possible, else as :class:`RemoteError`; its traceback text is attached.
    """

    def __init__(self, channel: Channel, name: str, pid: int | None = None) -> None:
        self._channel = channel
        self.__name__ = self.__qualname__ = name
        self._pid = pid
        self._gone: str | None = None

    def _exit_text(self) -> str:
        """How the program's process ended, when this judge is its parent (waits up to 2 s)."""
        if self._pid is None:
            return ""
        for _ in range(200):
            try:
                pid, status = os.waitpid(self._pid, os.WNOHANG)
            except ChildProcessError:
                return ""
            if pid:
                self._pid = None
                return f" (it {describe_exit(os.waitstatus_to_exitcode(status))})"
            time.sleep(0.01)
        return " (it is still running)"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._gone is not None:
            raise ProgramGone(self._gone)
        try:
            request = pickle.dumps(("call", args, kwargs, _rng_states()), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - an argument that cannot travel (a lambda, a mock)
            raise RemoteError(f"argument cannot be sent to the program process: {exc}") from None
        try:
            self._channel.send(request)
            kind, value, states, text = safe_loads(self._channel.recv())
        except (ProgramGone, OSError) as exc:
            text = f"{exc}{self._exit_text()}"
            self._gone = f"the program process ended during an earlier call: {text}"
            raise ProgramGone(text) from None
        if isinstance(states, dict):
            _set_rng_states(states)
        if kind == "ok":
            return safe_loads(value)
        raise _rebuild_exception(value, text)


def _rebuild_exception(value: Any, text: str) -> BaseException:
    module, qualname, args = value if isinstance(value, tuple) and len(value) == 3 else ("", "", ())
    cls: Any = None
    if module == "builtins":
        cls = getattr(builtins, str(qualname), None)
    elif module in sys.modules and "." not in str(qualname):
        cls = getattr(sys.modules[module], str(qualname), None)
    exc: BaseException
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            exc = cls(*args)
        except Exception:  # noqa: BLE001 - a constructor with other arguments
            exc = RemoteError(f"{module}.{qualname}: {args}")
    elif isinstance(cls, type) and issubclass(cls, BaseException):  # SystemExit, KeyboardInterrupt: not the judge's
        exc = RemoteError(f"the program raised {qualname}{tuple(args)!r}")
    else:
        exc = RemoteError(f"{module}.{qualname}: {', '.join(map(str, args))}")
    # The judge's test runner splices this after the test's own frames, so the traceback reads
    # as if the program had run in the test's process (as in the reference).
    exc.ccw_remote_traceback = text  # type: ignore[attr-defined]
    exc.__suppress_context__ = True
    return exc


def serve_program(channel: Channel, program: str, module_name: str, entry_point: str) -> None:
    """The program side: exec ``program`` as module ``module_name``, then answer calls until the channel closes.

    A module-level failure is sent as the first message ``("crash", traceback)``; a program that does not
    define ``entry_point`` gets ``("missing",)``; otherwise ``("ready",)``.
    Each call answers ``(kind, value, rng_states, traceback_text)`` with ``kind`` ``ok`` or ``exc``.
    """
    import linecache

    filename = f"{module_name}.py"
    if not program.endswith("\n"):  # as in one module with the tests after it (traceback carets depend on it)
        program += "\n"
    linecache.cache[filename] = (len(program), None, program.splitlines(keepends=True), filename)
    module = types.ModuleType(module_name)
    module.__file__ = filename
    sys.modules[module_name] = module
    try:
        exec(compile(program, filename, "exec"), module.__dict__)
    except BaseException as exc:  # noqa: BLE001
        tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
        channel.send(pickle.dumps(("crash", "".join(traceback.format_exception(type(exc), exc, tb)))))
        return
    if entry_point not in module.__dict__:  # the tests then meet a NameError, as in one module
        channel.send(pickle.dumps(("missing",)))
        return
    func = module.__dict__[entry_point]
    channel.send(pickle.dumps(("ready",)))
    while True:
        try:
            request = channel.recv()
        except ProgramGone:
            return
        _kind, args, kwargs, states = pickle.loads(request)
        _set_rng_states(states)
        try:
            value = func(*args, **kwargs)
            answer = ("ok", pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL), _rng_states(), "")
        except BaseException as exc:  # noqa: BLE001 - SystemExit included: it is the program's failure
            tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
            try:
                text = _clip("".join(traceback.format_exception(type(exc), exc, tb)))
                args_out = tuple(_clip(a) if isinstance(a, str) else a
                                 for a in exc.args if isinstance(a, (str, int, float, bool, type(None))))
            except Exception:  # noqa: BLE001 - a hostile exception whose str() or args fail
                text, args_out = f"{type(exc).__qualname__} (its text could not be formatted)", ()
            answer = ("exc", (type(exc).__module__, type(exc).__qualname__, args_out), _rng_states(), text)
        try:
            data = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - the return value cannot be pickled (a generator, a lock)
            data = pickle.dumps(("exc", ("builtins", "TypeError", (f"the return value cannot be sent to the judge: {exc}",)),
                                 _rng_states(), ""))
        channel.send(data)
