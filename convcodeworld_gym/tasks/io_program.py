"""Runs in a run's program process: the wrapper that runs a model's code for an input/output task's tests.

The source of this file is the first part of every program an :class:`~convcodeworld_gym.tasks.io.IOTask` runs
(:meth:`~convcodeworld_gym.tasks.io.IOTask.program_for`); the model's code, the dataset's import header and the
function's name follow it as assignments to the names below. It defines the entry point the generated tests call,
and it returns data only, never a verdict (the comparison is the judge's: :mod:`convcodeworld_gym.sandbox.run.iocheck`):

* :func:`run_program` (``stdio``): runs the code afresh, as ``__main__`` in a namespace of its own, with the input as
  its standard input (``sys.stdin``, its ``buffer``, ``input()``, ``open(0)``) and its standard output and error
  captured (``sys.stdout`` and its ``buffer``, ``open(1, "w")``); waits for the threads it started, as the
  interpreter does at exit; returns ``{"stdout", "stderr", "error", "exit"}``: what it wrote, the traceback of an
  exception it raised (None if none), and its exit status (``SystemExit`` ends it as an exit would).
* :func:`call_solution` (``call``): runs the code once, as a module named ``solution``, then for each call finds
  ``Solution().<name>`` (when the code defines ``class Solution``: LeetCode's form) or the function ``<name>``, calls
  it with the JSON-decoded arguments and returns ``{"value", "stdout", "error"}``.

Tracebacks name the code's file ``solution.py`` and give the model's own line numbers; the import header runs first,
from a file of its own. Standard library only. Runnable as a script too: ``python program.py < input`` runs a
``stdio`` program on its standard input.
"""

import builtins as _builtins
import io as _io
import json as _json
import linecache as _linecache
import sys as _sys
import threading as _threading
import traceback as _traceback

#: Set after this source by the program's builder: the model's code, the dataset's import header, the kind
#: (``stdio`` or ``call``), the function's name, and how a call's arguments are encoded (``lines``: one JSON value a
#: line, LiveCodeBench's; ``list``: one JSON list, APPS's and TACO's).
CODE = ""
HEADER = ""
KIND = "stdio"
FUNC_NAME = ""
ARGS = "lines"

_FILENAME = "solution.py"
_HEADER_FILENAME = "header.py"
_compiled = {}


def _code(source, filename):
    """``source`` compiled as ``filename`` (once), its lines in the line cache for tracebacks."""
    found = _compiled.get(filename)
    if found is None:
        _linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        found = _compiled[filename] = compile(source, filename, "exec", dont_inherit=True)
    return found


class _Kept(_io.BytesIO):
    """A buffer the program cannot close: its text is read after the program ended."""

    def close(self):
        pass


def _stream(data, writing):
    raw = _Kept() if writing else _io.BytesIO(data)
    return raw, _io.TextIOWrapper(raw, encoding="utf-8", errors="replace", write_through=writing)


def _opener(stdin_data, stdout):
    """The ``open`` the program's namespace gets: descriptor 0 reads the input, 1 writes the output, others are files."""
    real = _builtins.open

    def open(file, mode="r", *args, **kwargs):
        if type(file) is int and file == 0:
            raw = _io.BytesIO(stdin_data)
            return raw if "b" in mode else _io.TextIOWrapper(raw, encoding="utf-8", errors="replace")
        if type(file) is int and file == 1:
            return stdout.buffer if "b" in mode else stdout
        return real(file, mode, *args, **kwargs)

    return open


def _traceback_text(exc):
    """The traceback of ``exc`` without this wrapper's frames."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename not in (_FILENAME, _HEADER_FILENAME):
        tb = tb.tb_next
    return "".join(_traceback.format_exception(type(exc), exc, tb))


def _exit_status(exc):
    code = exc.code
    if code is None:
        return 0
    return code if type(code) is int else 1


def _join_new_threads(before):
    """Wait for the non-daemon threads the code started, as the interpreter waits at exit."""
    for thread in _threading.enumerate():
        if thread not in before and not thread.daemon and thread is not _threading.current_thread():
            thread.join()


def run_program(stdin):
    """Run the code as a ``stdio`` program on ``stdin`` (text); what it wrote, raised and exited with, as data."""
    data = str(stdin).encode("utf-8", "replace")
    _, stdin_stream = _stream(data, False)
    out_raw, out = _stream(b"", True)
    err_raw, err = _stream(b"", True)
    namespace = {"__name__": "__main__", "__builtins__": _builtins, "__file__": _FILENAME}
    saved = _sys.stdin, _sys.stdout, _sys.stderr
    before = set(_threading.enumerate())
    error, status = None, 0
    _sys.stdin, _sys.stdout, _sys.stderr = stdin_stream, out, err
    try:
        try:
            if HEADER:
                exec(_code(HEADER, _HEADER_FILENAME), namespace)
            namespace["open"] = _opener(data, out)  # after the header: LiveCodeBench's binds io.open
            exec(_code(CODE, _FILENAME), namespace)
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
        _sys.stdin, _sys.stdout, _sys.stderr = saved
    return {"stdout": out_raw.getvalue().decode("utf-8", "replace"),
            "stderr": err_raw.getvalue().decode("utf-8", "replace"), "error": error, "exit": status}


_loaded = []


def _load():
    """Run the code once as module ``solution`` and find what a call calls: ``(callable, None)`` or ``(None, why)``."""
    if not _loaded:
        module = type(_sys)("solution")
        module.__file__ = _FILENAME
        try:
            if HEADER:
                exec(_code(HEADER, _HEADER_FILENAME), module.__dict__)
            exec(_code(CODE, _FILENAME), module.__dict__)
        except BaseException as exc:  # noqa: BLE001
            _loaded.append((None, _traceback_text(exc)))
            return _loaded[0]
        found = module.__dict__.get("Solution") if "class Solution" in CODE else None  # the judges' own test
        try:
            target = getattr(found(), FUNC_NAME) if found is not None else module.__dict__[FUNC_NAME]
        except (KeyError, AttributeError):
            where = f"a method {FUNC_NAME!r} of class Solution" if found is not None else f"a function {FUNC_NAME!r}"
            _loaded.append((None, f"NameError: the code defines no {where}\n"))
        except BaseException as exc:  # noqa: BLE001 - Solution() itself failed
            _loaded.append((None, _traceback_text(exc)))
        else:
            _loaded.append((target, None))
    return _loaded[0]


def _arguments(text):
    if ARGS == "lines":
        return [_json.loads(line) for line in text.split("\n")]
    values = _json.loads(text)
    if not isinstance(values, list):
        values = [values]
    try:  # the judges' int keys: a first argument that is a dict keyed by numbers
        if values and isinstance(values[0], dict):
            values = [{int(k): v for k, v in values[0].items()}]
    except (ValueError, TypeError):
        pass
    return values


def call_solution(arguments):
    """Call the code's function with ``arguments`` (JSON text); the value returned, what it printed, what it raised."""
    out_raw, out = _stream(b"", True)
    saved = _sys.stdout
    _sys.stdout = out
    value, error = None, None
    try:
        try:
            target, error = _load()
            if error is None:
                value = target(*_arguments(str(arguments)))
        except BaseException as exc:  # noqa: BLE001
            error = _traceback_text(exc)
    finally:
        _sys.stdout = saved
    return {"value": value, "stdout": out_raw.getvalue().decode("utf-8", "replace"), "error": error}
