"""Runs in a run's program process: what runs a model's code for an input/output task's tests, and returns data only.

The program an :class:`~convcodeworld_gym.tasks.io.IOTask` runs for some code
(:meth:`~convcodeworld_gym.tasks.io.IOTask.program_for`) is a few lines: the code, the dataset's import header and the
task's facts as string literals (nothing of the code runs as the module loads), given to a :class:`Program` of this
module, whose method is the entry point the generated tests call. It never says whether a test passed (the
comparison is the judge's, :mod:`.iocheck`, on the data returned):

* :meth:`Program.run_program` (``stdio``): runs the code afresh, as ``__main__`` in a namespace of its own, with the
  input as its standard input (``sys.stdin``, its ``buffer``, ``input()``, ``open(0)``) and its standard output and
  error captured (``sys.stdout`` and its ``buffer``, ``open(1, "w")``); waits for the threads it started, as the
  interpreter does at exit; returns ``{"stdout", "stderr", "error", "exit"}``: what it wrote, the traceback of an
  exception it raised (None if none), and its exit status (``SystemExit`` ends it as an exit would).
* :meth:`Program.call_solution` (``call``): runs the code once, as a module named ``solution``, then for each call
  finds ``Solution().<name>`` (where the code says ``class Solution``: the judges' own test for LeetCode's form) or
  the function ``<name>``, calls it with the JSON-decoded arguments and returns ``{"value", "stdout", "error"}``.

The import header runs once per process (its imports and its ``sys.setrecursionlimit`` are the process's anyway); each
run of a ``stdio`` program gets a copy of the names it bound. Tracebacks name the code's file ``solution.py`` (the
header's ``header.py``) with the model's own line numbers. Standard library only; imported by every sandbox worker
up front, so that a run compiles nothing of it.

>>> program = Program("print(int(input()) * 2)", kind="stdio")
>>> program.run_program("21\\n")["stdout"]
'42\\n'
>>> Program("def f(a, b):\\n    return a + b", kind="call", func_name="f").call_solution("1\\n2")["value"]
3
"""

from __future__ import annotations

import builtins
import io
import json
import linecache
import sys
import threading
import traceback
from typing import Any

__all__ = ["Program", "FILENAME", "HEADER_FILENAME"]

#: The file name the model's code has in tracebacks, and the import header's.
FILENAME = "solution.py"
HEADER_FILENAME = "header.py"


class _Kept(io.BytesIO):
    """A buffer the program cannot close: its text is read after the program ended."""

    def close(self) -> None:
        pass


def _stream(data: bytes, writing: bool) -> tuple[io.BytesIO, io.TextIOWrapper]:
    raw = _Kept() if writing else io.BytesIO(data)
    return raw, io.TextIOWrapper(raw, encoding="utf-8", errors="replace", write_through=writing)


def _opener(stdin_data: bytes, stdout: io.TextIOWrapper) -> Any:
    """The ``open`` a run's namespace gets: descriptor 0 reads the input, 1 writes the output, any other is a file."""
    real = builtins.open

    def open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:  # noqa: A001 - the program's own open
        if type(file) is int and file == 0:
            raw = io.BytesIO(stdin_data)
            return raw if "b" in mode else io.TextIOWrapper(raw, encoding="utf-8", errors="replace")
        if type(file) is int and file == 1:
            return stdout.buffer if "b" in mode else stdout
        return real(file, mode, *args, **kwargs)

    return open


def _traceback_text(exc: BaseException) -> str:
    """The traceback of ``exc`` from the code's (or the header's) first frame on: none of this module's frames."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename not in (FILENAME, HEADER_FILENAME):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


def _exit_status(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    return code if type(code) is int else 1


def _join_new_threads(before: set[threading.Thread]) -> None:
    """Wait for the non-daemon threads the code started, as the interpreter waits at exit."""
    for thread in threading.enumerate():
        if thread not in before and not thread.daemon and thread is not threading.current_thread():
            thread.join()


class Program:
    """A model's ``code`` as the tests of one input/output task run it.

    Args:
        code: the model's code.
        kind: ``"stdio"`` or ``"call"``.
        header: the imports the dataset's judge runs before the code (``""``: none).
        func_name: the function (or ``Solution`` method) a ``call`` task calls.
        args: how a call's arguments are encoded: ``"lines"`` (one JSON value a line: LiveCodeBench's) or ``"list"``
            (one JSON list: APPS's and TACO's, a first argument that is a dict keyed by numbers as ints, as theirs).
    """

    def __init__(self, code: str, *, kind: str = "stdio", header: str = "", func_name: str = "", args: str = "lines") -> None:
        self.code, self.kind, self.header, self.func_name, self.args = str(code), kind, str(header), str(func_name), args
        self._compiled: dict[str, Any] = {}
        self._names: dict[str, Any] | None = None
        self._stream_names: list[tuple[str, int]] = []  # the header's names bound to a standard stream, and which
        self._streams: tuple[Any, Any, Any] = (sys.stdin, sys.stdout, sys.stderr)
        self._target: tuple[Any, str | None] | None = None

    def _code(self, source: str, filename: str) -> Any:
        """``source`` compiled as ``filename`` (once), its lines in the line cache for tracebacks."""
        found = self._compiled.get(filename)
        if found is None:
            linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
            found = self._compiled[filename] = compile(source, filename, "exec", dont_inherit=True)
        return found

    def _header_names(self, streams: tuple[Any, Any, Any]) -> dict[str, Any]:
        """A fresh ``__main__`` namespace holding what the header bound, the names it bound to the process's standard
        streams (``from sys import *``, ``stdin = sys.stdin``) pointing at this run's ``streams`` instead."""
        if self._names is None:
            names = {"__name__": "__main__", "__builtins__": builtins, "__file__": FILENAME}
            if self.header:
                now = sys.stdin, sys.stdout, sys.stderr
                sys.stdin, sys.stdout, sys.stderr = self._streams
                try:
                    exec(self._code(self.header, HEADER_FILENAME), names)
                finally:
                    sys.stdin, sys.stdout, sys.stderr = now
            self._names = names
            which = {id(stream): index for index, stream in enumerate(self._streams)}
            self._stream_names = [(key, which[id(value)]) for key, value in names.items()
                                  if key != "__builtins__" and id(value) in which]
        names = dict(self._names)
        for key, index in self._stream_names:
            names[key] = streams[index]
        return names

    def run_program(self, stdin: str) -> dict[str, Any]:
        """Run the code as a ``stdio`` program on ``stdin`` (text); what it wrote, raised and exited with, as data."""
        data = str(stdin).encode("utf-8", "replace")
        _, stdin_stream = _stream(data, False)
        out_raw, out = _stream(b"", True)
        err_raw, err = _stream(b"", True)
        saved = sys.stdin, sys.stdout, sys.stderr
        before = set(threading.enumerate())
        error, status = None, 0
        sys.stdin, sys.stdout, sys.stderr = stdin_stream, out, err
        try:
            try:
                namespace = self._header_names((stdin_stream, out, err))
                namespace["open"] = _opener(data, out)  # after the header: LiveCodeBench's binds io.open
                exec(self._code(self.code, FILENAME), namespace)
            except SystemExit as exc:
                status = _exit_status(exc)
                if status and exc.code is not None and type(exc.code) is not int:
                    err.write(f"{exc.code}\n")
            except BaseException as exc:  # noqa: BLE001 - the program's failure is data for the judge
                error, status = _traceback_text(exc), 1
            _join_new_threads(before)
        finally:
            for stream in (out, err):
                try:
                    stream.flush()
                except Exception:  # noqa: BLE001 - the program closed or broke it
                    pass
            sys.stdin, sys.stdout, sys.stderr = saved
        return {"stdout": out_raw.getvalue().decode("utf-8", "replace"),
                "stderr": err_raw.getvalue().decode("utf-8", "replace"), "error": error, "exit": status}

    def _load(self) -> tuple[Any, str | None]:
        """Run the code once as module ``solution`` and find what a call calls: ``(callable, None)`` or ``(None, why)``."""
        if self._target is None:
            module = type(sys)("solution")
            module.__file__ = FILENAME
            try:
                if self.header:
                    exec(self._code(self.header, HEADER_FILENAME), module.__dict__)
                exec(self._code(self.code, FILENAME), module.__dict__)
            except BaseException as exc:  # noqa: BLE001
                self._target = (None, _traceback_text(exc))
                return self._target
            found = module.__dict__.get("Solution") if "class Solution" in self.code else None  # the judges' test
            try:
                target = getattr(found(), self.func_name) if found is not None else module.__dict__[self.func_name]
            except (KeyError, AttributeError):
                where = f"method {self.func_name!r} in its class Solution" if found is not None else \
                    f"function {self.func_name!r}"
                self._target = (None, f"NameError: the code defines no {where}\n")
            except BaseException as exc:  # noqa: BLE001 - Solution() itself failed
                self._target = (None, _traceback_text(exc))
            else:
                self._target = (target, None)
        return self._target

    def _arguments(self, text: str) -> list[Any]:
        if self.args == "lines":
            return [json.loads(line) for line in text.split("\n")]
        values = json.loads(text)
        if not isinstance(values, list):
            values = [values]
        try:  # the judges' int keys: a first argument that is a dict keyed by numbers
            if values and isinstance(values[0], dict):
                values = [{int(k): v for k, v in values[0].items()}]
        except (ValueError, TypeError):
            pass
        return values

    def call_solution(self, arguments: str) -> dict[str, Any]:
        """Call the code's function with ``arguments`` (JSON text): the value returned, what it printed and raised."""
        out_raw, out = _stream(b"", True)
        saved = sys.stdout
        sys.stdout = out
        value, error = None, None
        try:
            try:
                target, error = self._load()
                if error is None:
                    value = target(*self._arguments(str(arguments)))
            except BaseException as exc:  # noqa: BLE001
                error = _traceback_text(exc)
        finally:
            sys.stdout = saved
        return {"value": value, "stdout": out_raw.getvalue().decode("utf-8", "replace"), "error": error}
