"""Runs in the judge's process of a split run: the readers a test may apply to bytes made data-only.

A test may open a file the program wrote, or take bytes it returned, and hand them to a reader that can build any
object or run code: ``pickle`` (``load``, ``loads``, ``Unpickler``, and what calls it: ``pandas.read_pickle``,
``numpy.load(allow_pickle=True)``, ``joblib.load``, ``shelve``, ``dill``, ``cloudpickle``), ``marshal`` (code
objects), unsafe YAML loaders (``yaml.load`` with ``Loader``/``FullLoader``/``UnsafeLoader``, which call what a tag
names). Run in the judge as they are, such a reader lets the program's bytes decide the test: a pickle whose
``__reduce__`` patches ``unittest``, or ``unittest.mock.ANY``, which equals everything. So in the judge
(:func:`install`):

* a pickle is read by :class:`DataUnpickler`: plain data (the stream's own opcodes: numbers, strings, bytes, lists,
  tuples, dicts, sets) and a closed table of value types (:data:`VALUE_TYPES`: ``collections``' containers,
  ``datetime``, ``Decimal``, ``Fraction``, pure paths, numpy arrays, dtypes and scalars), each made by a typed
  constructor from arguments of the types it checks; no other class or function a stream names is looked up, nothing
  is called with the stream's arguments but those constructors, and no state lands anywhere but a numpy array's or
  dtype's own ``__setstate__``. It reads the same whoever wrote the bytes, the program or the test, so the program
  decides nothing of them but the data it wrote, and never sees a test's own bytes;
* bytes the judge itself pickled with ``pickle.dumps``/``dump`` (by digest: a test's deep copy, a fixture) are the
  judge's: those alone are read by the standard unpickler, whatever classes they hold;
* ``marshal`` (other than the import system's own bytecode) reads values and refuses a code object;
* a YAML constructor never looks up a Python name (``python/name``, ``python/module``, ``python/object*``);
* under every other path, an audit hook (:func:`audit`): in the judge no unpickler may look up a class or function
  (the ``pickle.find_class`` event of the C and Python unpicklers alike, whatever module bound them) unless it is
  reading the judge's own bytes; nothing but the import system may unmarshal unless it is a reader above.

What a program may pickle for a test to read is therefore what it could return: plain data, the value types above,
numpy arrays. A pandas frame or a library object in a pickle is refused with a line that says so (no task's tests read
one: ``envs/bigcodebench/reader_survey.py`` lists every reader the tests call; docs/threat-model.md has the table).

Holds:
    VALUE_TYPES     the classes and constructors a pickle may name in the judge, by ``module:name``
    ReaderRefused   the error a refused read raises in the judge
    DataUnpickler   the judge's unpickler of bytes it did not write
    install         make this process's readers data-only (once, in a judge's process only)
    audit           the audit hook under every other path
"""

from __future__ import annotations

import _compat_pickle
import collections
import datetime
import decimal
import fractions
import functools
import hashlib
import importlib
import io
import pathlib
import pickle
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

__all__ = ["VALUE_TYPES", "ReaderRefused", "DataUnpickler", "install", "audit"]


class ReaderRefused(Exception):
    """A reader in the judge refused bytes it would have run or built objects from (raised as a subclass of the
    reader's own error too: ``pickle.UnpicklingError``, ``ValueError``)."""


def _refused(error: type[Exception], why: str) -> Exception:
    return _refusal_class(error)(why)


@functools.lru_cache(maxsize=None)
def _refusal_class(error: type[Exception]) -> type[Exception]:
    """:class:`ReaderRefused` as an ``error`` too (``pickle.UnpicklingError``, ``ValueError``, ...)."""
    return type(error.__name__, (ReaderRefused, error), {"__module__": error.__module__})


# ----------------------------------------------------------------------------- the value types a pickle may name

def _plain(value: Any, depth: int = 0) -> bool:
    """Is ``value`` plain data (what the stream's own opcodes build, and the value types this table made)?"""
    if depth > 50:
        return False
    if value is None or type(value) in (bool, int, float, complex, str, bytes, bytearray):
        return True
    if type(value) in (list, tuple, set, frozenset):
        return all(_plain(v, depth + 1) for v in value)
    if type(value) is dict:
        return all(_plain(k, depth + 1) and _plain(v, depth + 1) for k, v in value.items())
    return type(value) in _MADE_TYPES or _is_numpy_value(value)


def _is_numpy_value(value: Any) -> bool:
    numpy = sys.modules.get("numpy")
    return numpy is not None and (type(value) is numpy.ndarray or isinstance(value, numpy.generic)
                                  or isinstance(value, numpy.dtype))


def _check(condition: bool, what: str) -> None:
    if not condition:
        raise _refused(pickle.UnpicklingError, f"the split judge builds {what} only from plain arguments of its types")


def _items(factory: Callable[..., Any], what: str) -> Callable[..., Any]:
    """A container type made from plain arguments (its items come by the stream's own SETITEMS/APPENDS)."""
    def make(*args: Any) -> Any:
        _check(all(_plain(a) for a in args), what)
        return factory(*args)
    return make


def _defaultdict(*args: Any) -> collections.defaultdict:
    factory = _FACTORY_OF.get(args[0], args[0]) if args and callable(args[0]) else (args[0] if args else None)
    _check(len(args) <= 2 and (factory is None or factory in _DEFAULT_FACTORIES) and all(_plain(a) for a in args[1:]),
           "a defaultdict")
    return collections.defaultdict(factory, *args[1:])


def _deque(*args: Any) -> collections.deque:
    _check(len(args) <= 2 and all(_plain(a) for a in args) and (len(args) < 2 or args[1] is None or type(args[1]) is int),
           "a deque")
    return collections.deque(*args)


def _encode(text: Any, encoding: Any = "utf-8") -> bytes:
    """``_codecs.encode`` as protocol 2 writes bytes: a text in latin-1."""
    _check(type(text) is str and encoding == "latin1", "bytes")
    return text.encode("latin1")


def _typed(factory: Callable[..., Any], *kinds: tuple[type, ...], what: str) -> Callable[..., Any]:
    """``factory`` called with at most ``len(kinds)`` arguments, each of one of its kinds."""
    def make(*args: Any) -> Any:
        _check(len(args) <= len(kinds) and all(type(a) in k for a, k in zip(args, kinds)), what)
        return factory(*args)
    return make


def _numpy_function(module: str, name: str) -> Callable[..., Any]:
    """numpy's own ``module.name`` (``numpy._core`` in numpy 2, ``numpy.core`` before)."""
    for prefix in ("numpy._core.", "numpy.core."):
        try:
            return getattr(importlib.import_module(prefix + module), name)
        except (ImportError, AttributeError):
            continue
    raise _refused(pickle.UnpicklingError, f"this judge's numpy has no {module}.{name}")


def _numpy(name: str) -> Callable[..., Any]:
    """numpy's constructor ``name`` as its pickles call it, given only arguments of the types it checks."""
    def make(*args: Any) -> Any:
        numpy = importlib.import_module("numpy")
        if name == "_reconstruct":  # (ndarray, shape, typecode): an empty array its BUILD fills
            _check(len(args) == 3 and args[0] is numpy.ndarray and _plain(args[1]) and type(args[2]) is bytes,
                   "a numpy array")
            return _numpy_function("multiarray", "_reconstruct")(*args)
        if name == "dtype":  # (type string, align, copy)
            _check(1 <= len(args) <= 3 and type(args[0]) is str and all(type(a) is bool for a in args[1:]),
                   "a numpy dtype")
            return numpy.dtype(*args)
        if name == "scalar":  # (dtype, its bytes)
            _check(len(args) == 2 and isinstance(args[0], numpy.dtype) and args[0].kind != "O"
                   and type(args[1]) is bytes, "a numpy scalar")
            return _numpy_function("multiarray", "scalar")(*args)
        # _frombuffer: (buffer, dtype, shape, order)
        _check(len(args) == 4 and type(args[0]) in (bytes, bytearray) and isinstance(args[1], numpy.dtype)
               and args[1].kind != "O" and _plain(args[2]) and args[3] in ("C", "F"), "a numpy array")
        return _numpy_function("numeric", "_frombuffer")(bytes(args[0]), *args[1:])
    return make


#: ``module:name`` -> what a pickle's global of that name is in the judge: a checked constructor (REDUCE calls it), or
#: a class a constructor takes as an argument. Nothing else resolves.
VALUE_TYPES: dict[str, Any] = {
    "builtins:set": _items(set, "a set"), "builtins:frozenset": _items(frozenset, "a frozenset"),
    "builtins:bytearray": _items(bytearray, "a bytearray"), "builtins:bytes": _items(bytes, "bytes"),
    "builtins:complex": _typed(complex, (int, float), (int, float), what="a complex number"),
    "builtins:range": _typed(range, (int,), (int,), (int,), what="a range"),
    "builtins:slice": _typed(slice, (int, type(None)), (int, type(None)), (int, type(None)), what="a slice"),
    "builtins:list": list, "builtins:dict": dict, "builtins:int": int, "builtins:str": str, "builtins:float": float,
    "builtins:tuple": tuple,
    "_codecs:encode": _encode,
    "collections:OrderedDict": _items(collections.OrderedDict, "an OrderedDict"),
    "collections:Counter": _items(collections.Counter, "a Counter"),
    "collections:defaultdict": _defaultdict, "collections:deque": _deque,
    "datetime:date": _typed(datetime.date, (bytes, int), (int,), (int,), what="a date"),
    "datetime:time": _typed(datetime.time, (bytes, int), (datetime.timezone, int, type(None)), (int,), (int,),
                            (datetime.timezone, type(None)), what="a time"),
    "datetime:datetime": _typed(datetime.datetime, (bytes, int), (datetime.timezone, int, type(None)), (int,), (int,),
                                (int,), (int,), (int,), (datetime.timezone, type(None)), what="a datetime"),
    "datetime:timedelta": _typed(datetime.timedelta, (int, float), (int, float), (int, float), what="a timedelta"),
    "datetime:timezone": _typed(datetime.timezone, (datetime.timedelta,), (str,), what="a timezone"),
    "decimal:Decimal": _typed(decimal.Decimal, (str, int), what="a Decimal"),
    "fractions:Fraction": _typed(fractions.Fraction, (str, int), (int,), what="a Fraction"),
    "pathlib:PurePosixPath": _items(pathlib.PurePosixPath, "a path"),
    "pathlib:PosixPath": _items(pathlib.PurePosixPath, "a path"),  # the judge makes the pure path: no file is touched
    "pathlib:Path": _items(pathlib.PurePosixPath, "a path"),
    "numpy.core.multiarray:_reconstruct": _numpy("_reconstruct"), "numpy._core.multiarray:_reconstruct": _numpy("_reconstruct"),
    "numpy.core.multiarray:scalar": _numpy("scalar"), "numpy._core.multiarray:scalar": _numpy("scalar"),
    "numpy.core.numeric:_frombuffer": _numpy("_frombuffer"), "numpy._core.numeric:_frombuffer": _numpy("_frombuffer"),
    "numpy:dtype": _numpy("dtype"),
}
#: A defaultdict's default factory, where a pickle names one.
_DEFAULT_FACTORIES = (list, dict, set, frozenset, int, float, str, tuple)
#: The builtin types that the table's checked constructors stand for (a pickle names ``builtins:set``).
_FACTORY_OF = {VALUE_TYPES["builtins:set"]: set, VALUE_TYPES["builtins:frozenset"]: frozenset}
#: The types of what this table makes (its constructors' results), which a later constructor may take.
_MADE_TYPES = frozenset({collections.OrderedDict, collections.Counter, collections.defaultdict, collections.deque,
                         datetime.date, datetime.time, datetime.datetime, datetime.timedelta, datetime.timezone,
                         decimal.Decimal, fractions.Fraction, pathlib.PurePosixPath, range, slice})
#: What REDUCE may call: the table's checked constructors, never a bare builtin type (those are factories' names).
_CONSTRUCTORS = tuple(made for made in VALUE_TYPES.values() if made not in (list, dict, int, str, float, tuple))
#: Classes a pickle may name as an argument of a constructor (numpy's array class), resolved lazily.
_CLASS_ARGUMENTS = {"numpy:ndarray"}


class DataUnpickler(pickle._Unpickler):  # noqa: SLF001 - the pure-Python unpickler: its opcodes can be overridden
    """The judge's unpickler of bytes it did not write: plain data and :data:`VALUE_TYPES` only.

    >>> import collections, io, pickle
    >>> DataUnpickler(io.BytesIO(pickle.dumps({"a": collections.Counter("ab"), "b": [1.5, b"x"]}))).load()
    {'a': Counter({'a': 1, 'b': 1}), 'b': [1.5, b'x']}
    >>> DataUnpickler(io.BytesIO(b"cbuiltins\\nexec\\n(Vprint(1)\\ntR.")).load()
    Traceback (most recent call last):
    ...
    _pickle.UnpicklingError: the split judge unpickles no builtins.exec from bytes it did not write: only plain data, standard value types and numpy arrays (return the data itself, or write it as JSON)
    """

    dispatch = dict(pickle._Unpickler.dispatch)  # noqa: SLF001

    def find_class(self, module: str, name: str) -> Any:
        if self.proto < 3 and self.fix_imports:
            if (module, name) in _compat_pickle.NAME_MAPPING:
                module, name = _compat_pickle.NAME_MAPPING[(module, name)]
            elif module in _compat_pickle.IMPORT_MAPPING:
                module = _compat_pickle.IMPORT_MAPPING[module]
        key = f"{module}:{name}"
        if key in VALUE_TYPES:
            return VALUE_TYPES[key]
        if key in _CLASS_ARGUMENTS:
            return importlib.import_module(module).__dict__[name]
        raise _refused(pickle.UnpicklingError, f"the split judge unpickles no {module}.{name} from bytes it did not "
                       "write: only plain data, standard value types and numpy arrays (return the data itself, or "
                       "write it as JSON)")

    def persistent_load(self, pid: Any) -> Any:
        raise _refused(pickle.UnpicklingError, "the split judge resolves no persistent id in a pickle")

    def load_reduce(self) -> None:
        args = self.stack.pop()
        func = self.stack[-1]
        _check(type(args) is tuple and any(func is made for made in _CONSTRUCTORS), "an object")
        self.stack[-1] = func(*args)

    def load_build(self) -> None:
        state = self.stack.pop()
        target = self.stack[-1]
        numpy = sys.modules.get("numpy")
        if numpy is not None and (type(target) is numpy.ndarray or isinstance(target, numpy.dtype)):
            _check(type(state) is tuple and _plain(state), "a numpy array or dtype's state")
            if type(target) is numpy.ndarray and len(state) == 5 and isinstance(state[2], numpy.dtype) \
                    and state[2].kind == "O":
                _check(type(state[4]) is list and all(_plain(v) for v in state[4]), "an object array")
            target.__setstate__(state)
            return
        raise _refused(pickle.UnpicklingError, f"the split judge gives no state to a {type(target).__name__} "
                                               "from bytes it did not write")

    def _refuse_op(self) -> None:
        raise _refused(pickle.UnpicklingError, "the split judge makes no object by a class's constructor from bytes "
                                               "it did not write (NEWOBJ, INST, OBJ)")

    dispatch[pickle.REDUCE[0]] = load_reduce
    dispatch[pickle.BUILD[0]] = load_build
    for _opcode in (pickle.NEWOBJ, pickle.NEWOBJ_EX, pickle.INST, pickle.OBJ):
        dispatch[_opcode[0]] = _refuse_op
    del _opcode


# ----------------------------------------------------------------------------- the judge's side

class _State:
    """The digests of what the judge pickled itself, and whether this thread reads such bytes (or its import system's
    bytecode) now."""

    def __init__(self) -> None:
        self.own: set[tuple[int, str]] = set()
        self.local = threading.local()

    def trusted(self) -> bool:
        return getattr(self.local, "depth", 0) > 0


_state = _State()
_installed = False
_ORIGINAL_PY_LOAD = pickle._Unpickler.load  # noqa: SLF001 - kept before install replaces it
DataUnpickler.load = _ORIGINAL_PY_LOAD  # its own opcodes, whatever install does to the base class


def _digest(data: bytes) -> tuple[int, str]:
    return len(data), hashlib.sha256(data).hexdigest()


def _own_prefix(data: bytes) -> int:
    """The length of the judge's own pickle at the start of ``data``, or 0."""
    for length, digest in _state.own:
        if length <= len(data) and hashlib.sha256(data[:length]).hexdigest() == digest:
            return length
    return 0


def _as_bytes(data: Any) -> bytes:
    if isinstance(data, str):
        raise TypeError("a bytes-like object is required, not 'str'")
    return bytes(data)


def _trusted_call(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    _state.local.depth = getattr(_state.local, "depth", 0) + 1
    try:
        return function(*args, **kwargs)
    finally:
        _state.local.depth -= 1


def _seekable(file: Any) -> bool:
    try:
        return bool(file.seekable())
    except Exception:  # noqa: BLE001 - a file-like without seekable()
        return False


def _read_one(file: Any, fix_imports: bool, encoding: str, errors: str) -> Any:
    """One pickle from ``file`` at its position: the judge's own with the standard unpickler, anything else with
    :class:`DataUnpickler`; ``file`` is left after it where it can seek."""
    start = file.tell() if _seekable(file) else None
    data = _as_bytes(file.read())
    own = _own_prefix(data)
    stream = io.BytesIO(data[:own] if own else data)
    options = {"fix_imports": fix_imports, "encoding": encoding, "errors": errors}
    if own:
        value = _trusted_call(lambda: _ORIGINAL_UNPICKLER(stream, **options).load())
    else:
        value = DataUnpickler(stream, **options).load()
    if start is not None:
        file.seek(start + stream.tell())
    return value


_ORIGINAL_UNPICKLER: Any = None


def _install_pickle() -> None:
    global _ORIGINAL_UNPICKLER
    import _pickle

    _ORIGINAL_UNPICKLER = _pickle.Unpickler
    original_dumps = _pickle.dumps

    def dumps(obj: Any, protocol: Any = None, *, fix_imports: bool = True, buffer_callback: Any = None) -> bytes:
        data = original_dumps(obj, protocol, fix_imports=fix_imports, buffer_callback=buffer_callback)
        _state.own.add(_digest(data))
        return data

    def dump(obj: Any, file: Any, protocol: Any = None, *, fix_imports: bool = True, buffer_callback: Any = None) -> None:
        file.write(dumps(obj, protocol, fix_imports=fix_imports, buffer_callback=buffer_callback))

    def loads(data: Any, /, *, fix_imports: bool = True, encoding: str = "ASCII", errors: str = "strict",
              buffers: Any = ()) -> Any:
        return _read_one(io.BytesIO(_as_bytes(data)), fix_imports, encoding, errors)

    def load(file: Any, *, fix_imports: bool = True, encoding: str = "ASCII", errors: str = "strict",
             buffers: Any = ()) -> Any:
        return _read_one(file, fix_imports, encoding, errors)

    class Unpickler:
        """The judge's ``pickle.Unpickler``: :func:`load` on the file it was given (a subclass's ``find_class`` and
        ``persistent_load`` take no part: the judge resolves only its own table)."""

        def __init__(self, file: Any, *, fix_imports: bool = True, encoding: str = "ASCII", errors: str = "strict",
                     buffers: Any = ()) -> None:
            self._file, self._options = file, (fix_imports, encoding, errors)

        def load(self) -> Any:
            return _read_one(self._file, *self._options)

    def python_load(self: Any) -> Any:
        """``pickle._Unpickler.load`` (pure Python; joblib's, pandas' and dill's unpicklers inherit it)."""
        read = getattr(self, "_file_read", None)
        if read is None:
            raise _refused(pickle.UnpicklingError, "Unpickler.__init__() was not called")
        return _read_one(_ReadOnly(read), getattr(self, "fix_imports", True), getattr(self, "encoding", "ASCII"),
                         getattr(self, "errors", "strict"))

    for module in (pickle, _pickle):
        module.loads, module.load, module.Unpickler = loads, load, Unpickler
    pickle._loads, pickle._load = loads, load  # noqa: SLF001 - the pure-Python twins
    pickle.dumps, pickle.dump, pickle._dumps, pickle._dump = dumps, dump, dumps, dump  # noqa: SLF001
    _pickle.dumps, _pickle.dump = dumps, dump
    pickle._Unpickler.load = python_load  # noqa: SLF001 - every subclass that does not define its own load
    _ORIGINALS.update(loads=pickle.loads, load=pickle.load, Unpickler=pickle.Unpickler)
    _rebind()


class _ReadOnly:
    """A stream that is only a ``read`` callable (an unpickler's ``_file_read``): read all, no seeking."""

    def __init__(self, read: Callable[..., bytes]) -> None:
        self._read = read

    def read(self) -> bytes:
        chunks = []
        while chunk := self._read(1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)

    def seekable(self) -> bool:
        return False


#: Where libraries bind the originals under their own names (found by tests/sandbox/run/test_readers.py's scan of a
#: loaded judge): module (or class) -> names, each replaced by the judge's reader of the same name.
_BOUND = {
    "cloudpickle": ("load", "loads"),
    "cloudpickle.cloudpickle": ("load", "loads"),
    "shelve": ("Unpickler",),
    "dill": ("load", "loads"),
    "dill._dill": ("load", "loads"),
    "joblib.externals.loky.backend.reduction": ("loads",),
    "joblib.externals.loky.cloudpickle_wrapper": ("loads",),
    "joblib._memmapping_reducer": ("loads",),
    "multiprocessing.reduction.ForkingPickler": ("loads",),
    "multiprocessing.connection._ForkingPickler": ("loads",),
    "multiprocessing.queues._ForkingPickler": ("loads",),
    "rich.style": ("loads",),
}
#: The judge's replacements, by name, for :func:`_rebind`.
_ORIGINALS: dict[str, Any] = {}


def _rebind() -> None:
    """Replace, where a loaded library bound a reader under its own name (:data:`_BOUND`), that binding with the
    judge's reader of the same name (dill's own readers too: they subclass the standard unpickler)."""
    for dotted, names in _BOUND.items():
        owner = _loaded(dotted)
        for name in names if owner is not None else ():
            if name in _ORIGINALS and name in vars(owner):
                setattr(owner, name, _ORIGINALS[name])


def _loaded(dotted: str) -> Any:
    """The loaded module, or a class of a loaded module, named ``dotted`` (never imported here)."""
    if dotted in sys.modules:
        return sys.modules[dotted]
    module, _, attribute = dotted.rpartition(".")
    owner = sys.modules.get(module)
    return vars(owner).get(attribute) if owner is not None else None


def _install_marshal() -> None:
    import marshal

    original_loads, original_load = marshal.loads, marshal.load

    def loads(data: Any, /) -> Any:
        if _imports_calling():
            return _trusted_call(original_loads, data)
        return _no_code(_trusted_call(original_loads, data))

    def load(file: Any, /) -> Any:
        if _imports_calling():
            return _trusted_call(original_load, file)
        return _no_code(_trusted_call(original_load, file))

    marshal.loads, marshal.load = loads, load


def _no_code(value: Any, depth: int = 0) -> Any:
    """``value`` (what marshal made), refused where it holds a code object: the judge loads no code from bytes."""
    if isinstance(value, types.CodeType):
        raise _refused(ValueError, "the split judge loads no code object from marshalled bytes")
    if depth < 100 and type(value) in (list, tuple, set, frozenset):
        for item in value:
            _no_code(item, depth + 1)
    elif depth < 100 and type(value) is dict:
        for key, item in value.items():
            _no_code(key, depth + 1)
            _no_code(item, depth + 1)
    return value


def _imports_calling() -> bool:
    """Is the caller of the caller the import system (which unmarshals the judge's own bytecode)?"""
    try:
        name = sys._getframe(2).f_globals.get("__name__")  # noqa: SLF001
    except ValueError:
        return False
    return name in _IMPORT_SYSTEM


_IMPORT_SYSTEM = frozenset({"importlib._bootstrap_external", "_frozen_importlib_external", "zipimport",
                            "importlib._bootstrap", "_frozen_importlib"})


def _install_yaml() -> None:
    yaml = sys.modules.get("yaml")
    if yaml is None or getattr(yaml, "_ccw_data_only", False):
        return
    from yaml.constructor import ConstructorError, FullConstructor

    def never(self: Any, name: Any, mark: Any, *args: Any, **kwargs: Any) -> Any:
        raise ConstructorError(None, None, f"the split judge builds no Python object a YAML tag names ({name!r})", mark)

    FullConstructor.find_python_name = never  # UnsafeConstructor (yaml.Loader's) is a FullConstructor too
    FullConstructor.find_python_module = never
    yaml._ccw_data_only = True  # noqa: SLF001


#: Modules whose readers the judge makes data-only as they are imported (after :func:`install`).
_LATE: dict[str, Callable[[], None]] = {"yaml": _install_yaml, "cloudpickle": _rebind, "shelve": _rebind,
                                        "joblib": _rebind, "multiprocessing.reduction": _rebind, "dill": _rebind}


class _AfterImport:
    """A ``sys.meta_path`` finder that makes the readers of a module in :data:`_LATE` data-only once it has loaded."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in _LATE:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = _Patching(spec.loader, _LATE[fullname])
                return spec
            if spec is not None:
                return spec
        return None


class _Patching:
    """A loader that runs ``patch`` after the loader it wraps has run the module."""

    def __init__(self, loader: Any, patch: Callable[[], None]) -> None:
        self._loader, self._patch = loader, patch

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        self._patch()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


def audit(event: str, args: tuple) -> None:
    """The judge's audit hook: no unpickler may look up a global, and nothing may unmarshal, unless one of the judge's
    readers above is reading (see the module docstring)."""
    if event == "pickle.find_class" and not _state.trusted():
        raise _refused(pickle.UnpicklingError, f"the split judge unpickles no class or function from bytes it did not "
                       f"write ({args[0]}.{args[1]}): pickle.load/loads read only plain data and value types")
    if event in ("marshal.loads", "marshal.load") and not _state.trusted():
        raise _refused(ValueError, "the split judge unmarshals only through marshal.load/loads, which load no code")


def install() -> None:
    """Make this process's readers data-only: once per process, for good, so call it only in a judge's process. A
    module of :data:`_LATE` loaded later is made data-only as it loads."""
    global _installed
    if _installed:
        return
    _installed = True
    _install_pickle()
    _install_marshal()
    for name, patch in _LATE.items():
        if name in sys.modules:
            patch()
    sys.meta_path.insert(0, _AfterImport())
    sys.addaudithook(audit)
