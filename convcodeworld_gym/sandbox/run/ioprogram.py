"""Runs in a run's program process: what runs a model's code for an input/output task's tests, and returns data only.

The program an :class:`~convcodeworld_gym.tasks.io.IOTask` runs for some code
(:meth:`~convcodeworld_gym.tasks.io.IOTask.program_for`) is a few lines: the code, the dataset's import header and the
task's facts as string literals (nothing of the code runs as the module loads), given to a :class:`Program` of this
module, whose method is the entry point the generated tests call. It never says whether a test passed (the
comparison is the judge's, :mod:`.iocheck`, on the data returned):

* :meth:`Program.run_program` (``stdio``): runs the code afresh, as ``__main__`` in a namespace of its own, as a
  script ``solution.py`` run bare would run (``sys.argv == ["solution.py"]``): its standard input, output and error
  are this process's descriptors 0, 1 and 2 for the run, memory files (:class:`_StandardFiles`) holding the input and
  collecting what it wrote, with streams over them as the interpreter makes them, so every way a program reads and
  writes them works as in a process of its own (``input()``, ``sys.stdin`` and its ``buffer``, ``open(0)``,
  ``os.read(0, n)``, ``fileinput``; ``print``, ``sys.stdout.buffer``, ``os.write(1, b)``, a C library's writes);
  waits for the threads it started, as the interpreter does at exit; returns ``{"stdout", "stderr", "error",
  "exit"}``: what it wrote, the traceback of an exception it raised (None if none), and its exit status
  (``SystemExit`` ends it as an exit would; ``os._exit`` ends the process, so the tests after it fail).
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
import os
import sys
import tempfile
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


def _captured() -> tuple[io.BytesIO, io.TextIOWrapper]:
    """A text stream whose bytes stay readable after the program closed it: a call's ``sys.stdout``."""
    raw = _Kept()
    return raw, io.TextIOWrapper(raw, encoding="utf-8", errors="replace", write_through=True)


class _StandardFiles:
    """Descriptors 0, 1 and 2 of this process during the runs of ``stdio`` programs: three memory files (``memfd``;
    where the sandbox refuses one, unlinked files in the run's private ``/tmp``), made once and emptied for each run,
    holding the input on 0 and collecting what the program writes on 1 and 2, and the streams the interpreter would
    make over them. :meth:`end` reads what was written and gives the process its own descriptors back, whatever the
    program did to 0-2; files the program closed or replaced are made again at the next :meth:`start`."""

    NAMES = ("stdin", "stdout", "stderr")

    def __init__(self) -> None:
        self._saved: list[int] | None = None
        self._files: list[int] | None = None

    def start(self, data: bytes) -> tuple[io.TextIOWrapper, io.TextIOWrapper, io.TextIOWrapper]:
        """Put ``data`` on descriptor 0 and empty files on 1 and 2; the run's ``stdin``, ``stdout`` and ``stderr``."""
        if self._saved is None:
            self._saved = [os.dup(fd) for fd in range(3)]
        try:
            self._fill(data)
        except OSError:  # the program closed or broke one of the files: new ones
            self._files = None
            self._fill(data)
        return (io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "rb", closefd=False)), encoding="utf-8", errors="replace"),
                io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "wb", closefd=False)), encoding="utf-8", errors="replace"),
                io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "wb", closefd=False)), encoding="utf-8",
                                 errors="backslashreplace", write_through=True))

    def _fill(self, data: bytes) -> None:
        if self._files is None:
            self._files = [_memory_file(name) for name in self.NAMES]
        view, offset = memoryview(data), 0
        for fd, file in enumerate(self._files):
            os.ftruncate(file, 0)
            os.lseek(file, 0, os.SEEK_SET)
            os.dup2(file, fd)  # 0-2 share each file's offset
        while offset < len(view):
            offset += os.pwrite(self._files[0], view[offset:], offset)

    def end(self, streams: tuple[io.TextIOWrapper, ...]) -> tuple[str, str]:
        """Flush ``streams``, read what was written, restore descriptors 0-2: ``(stdout, stderr)`` as text."""
        for stream in streams[1:]:
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - the program closed or broke it
                pass
        files = self._files or [-1, -1, -1]
        written = [_read_all(file) for file in files[1:]]
        for fd, saved in enumerate(self._saved or ()):
            try:
                os.dup2(saved, fd)
            except OSError:  # the program closed the saved copy: nothing of the process's own to give back
                pass
        return written[0].decode("utf-8", "replace"), written[1].decode("utf-8", "replace")


#: This process's standard descriptors during ``stdio`` runs (one program process runs one task's tests, in turn).
_STANDARD_FILES = _StandardFiles()


def _memory_file(name: str) -> int:
    """A new read-write file descriptor on an anonymous file, closed on exec: a ``memfd``, else an unlinked file."""
    try:
        return os.memfd_create(name, os.MFD_CLOEXEC)
    except (AttributeError, OSError):
        fd, path = tempfile.mkstemp(prefix=f"ccw-{name}-")
        os.unlink(path)
        return fd


def _read_all(fd: int) -> bytes:
    """Everything in file ``fd`` from its start (b"" where the program closed or replaced it)."""
    chunks, offset = [], 0
    try:
        while chunk := os.pread(fd, 1 << 20, offset):
            chunks.append(chunk)
            offset += len(chunk)
    except OSError:
        pass
    return b"".join(chunks)


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
        streams = _STANDARD_FILES.start(str(stdin).encode("utf-8", "replace"))
        saved = sys.stdin, sys.stdout, sys.stderr, sys.argv
        before = set(threading.enumerate())
        error, status = None, 0
        sys.stdin, sys.stdout, sys.stderr = streams
        sys.argv = [FILENAME]
        try:
            try:
                namespace = self._header_names(streams)
                exec(self._code(self.code, FILENAME), namespace)
            except SystemExit as exc:
                status = _exit_status(exc)
                if status and exc.code is not None and type(exc.code) is not int:
                    streams[2].write(f"{exc.code}\n")
            except BaseException as exc:  # noqa: BLE001 - the program's failure is data for the judge
                error, status = _traceback_text(exc), 1
            _join_new_threads(before)
        finally:
            sys.stdin, sys.stdout, sys.stderr, sys.argv = saved
            stdout, stderr = _STANDARD_FILES.end(streams)
        return {"stdout": stdout, "stderr": stderr, "error": error, "exit": status}

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
        out_raw, out = _captured()
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
