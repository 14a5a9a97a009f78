"""Runs in both processes of a split run: the readers a test may apply to bytes the program's side wrote, made
data-only in the judge.

A test may open a file the program wrote, or take bytes it returned, and hand them to a reader that can build any
object or run code: ``pickle`` (``load``, ``loads``, ``Unpickler``, and what calls it: ``pandas.read_pickle``,
``numpy.load(allow_pickle=True)``, ``joblib.load``, ``shelve``, ``dill``, ``cloudpickle``), ``marshal`` (code
objects), unsafe YAML loaders (``yaml.load`` with ``Loader``/``FullLoader``/``UnsafeLoader``, which call what a tag
names). Run in the judge, such a reader lets the program's bytes decide the test: a pickle whose ``__reduce__`` patches
``unittest``, or ``unittest.mock.ANY``, which equals everything. So in the judge (:func:`install`):

* those readers are replaced by ones that send the bytes to the program's process (:func:`read_data`, its handle
  :data:`READ_HANDLE`), where the library's own reader runs on them, and take back what it made through the judge's
  one intake (:mod:`.codec`, :mod:`.mirror`, :mod:`.standin`): data, a library object rebuilt from the reviewed
  table, or a stand-in whose claims are never granted. What a program's bytes unpickle to is then exactly what the
  program could have returned, and decides no more;
* bytes the judge itself pickled (a test's own ``pickle.dumps``) are the judge's: those alone are unpickled here;
* a guard under every other path (:func:`audit`, a ``sys.addaudithook`` hook): in the judge no unpickler may look up a
  class or function (the ``pickle.find_class`` event of the C and Python unpicklers alike, whatever module bound them,
  ``_pickle.Unpickler`` subclasses included), and nothing but the import system may unmarshal, unless the reader is
  unpickling the judge's own bytes. A plain-data pickle (lists, dicts, strings, numbers) names no global and builds
  nothing else;
* a YAML constructor never looks up a Python name (``python/name``, ``python/module``, ``python/object*``).

The survey behind the table of readers is ``envs/bigcodebench/reader_survey.py``; the table is in
docs/threat-model.md.

Holds:
    READ_HANDLE   the program side's handle of :func:`read_data`
    READERS       the readers the program's side runs for the judge, by name
    ReaderRefused the error a refused read raises in the judge
    read_data     (program side) run a reader on bytes; what it made and how many bytes it read
    install       (judge side) make this process's readers data-only, asking ``peer`` to read
"""

from __future__ import annotations

import functools
import hashlib
import io
import sys
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["READ_HANDLE", "READERS", "ReaderRefused", "read_data", "install"]

#: The handle the program's process exports :func:`read_data` under (after its module and the two helpers of
#: :func:`.judge.serve_program`).
READ_HANDLE = 4
#: The readers :func:`read_data` runs.
READERS = ("pickle", "marshal", "joblib", "dill", "yaml")
#: The YAML loaders a read may name (the safe ones run in the judge itself).
_YAML_LOADERS = ("Loader", "FullLoader", "UnsafeLoader", "CLoader", "CFullLoader", "CUnsafeLoader")
_SAFE_YAML_LOADERS = ("SafeLoader", "CSafeLoader", "BaseLoader", "CBaseLoader")


class ReaderRefused(Exception):
    """A reader in the judge refused bytes it would have run or built objects from (a subclass of
    ``pickle.UnpicklingError`` where raised by an unpickler, so that callers catching that see it)."""


# ----------------------------------------------------------------------------- the program's side

def read_data(reader: Any, data: Any, options: Any) -> list:
    """Program side (handle :data:`READ_HANDLE`): run ``reader`` on ``data`` (bytes; text for YAML) with ``options``
    and return ``[what it made, how many bytes it read]``. The answer crosses to the judge as any value this process
    returns does."""
    if reader not in READERS or not isinstance(data, (bytes, str)) or not isinstance(options, dict):
        raise ValueError("a malformed read request")
    if reader == "yaml":
        import yaml

        name = options.get("loader")
        loader = getattr(yaml, name) if name in _YAML_LOADERS and hasattr(yaml, name) else yaml.FullLoader
        return [list(yaml.load_all(data, Loader=loader)) if options.get("all") else yaml.load(data, Loader=loader), -1]
    stream = io.BytesIO(data if isinstance(data, bytes) else data.encode())
    if reader == "pickle":
        import pickle

        kwargs = {k: v for k, v in options.items() if k in ("encoding", "errors") and isinstance(v, str)}
        value = pickle.load(stream, fix_imports=bool(options.get("fix_imports", True)), **kwargs)
    elif reader == "marshal":
        import marshal

        value = marshal.load(stream)
    elif reader == "joblib":
        import joblib

        value = joblib.load(stream)
    else:
        import dill

        value = dill.load(stream)
    return [value, stream.tell()]


# ----------------------------------------------------------------------------- the judge's side

class _State:
    """The judge's readers: the program's peer (None: none to ask), the digests of what the judge pickled itself,
    and whether this thread is unpickling such bytes now."""

    def __init__(self) -> None:
        self.peer: Any = None
        self.own: set[tuple[int, str]] = set()
        self.local = threading.local()

    def trusted(self) -> bool:
        return getattr(self.local, "depth", 0) > 0


_state = _State()
_installed = False


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


def _refused(error: type[Exception], why: str) -> Exception:
    return _refusal_class(error)(why)


@functools.lru_cache(maxsize=None)
def _refusal_class(error: type[Exception]) -> type[Exception]:
    """:class:`ReaderRefused` as an ``error`` too (``pickle.UnpicklingError``, ``yaml.YAMLError``, ...)."""
    return type(error.__name__, (ReaderRefused, error), {"__module__": error.__module__})


def _ask(reader: str, data: bytes | str, options: dict[str, Any], error: type[Exception]) -> tuple[Any, int]:
    """What the program's process makes of ``data`` with ``reader``: ``(value, bytes read or -1)``."""
    peer = _state.peer
    if peer is None:
        raise _refused(error, f"the split judge reads no {reader} stream it did not write: such bytes are read in the "
                              "program's process, and there is none to ask here")
    from .standin import ProgramGone, RemoteError

    try:
        answer = peer.request("call", READ_HANDLE, [[reader, data, options], {}])
    except ProgramGone as exc:
        raise _refused(error, f"the program's process ended before it could read the {reader} stream ({exc})") from None
    except RemoteError as exc:
        raise _refused(error, f"the program's process could not read the {reader} stream: {exc}") from None
    if not (isinstance(answer, list) and len(answer) == 2 and type(answer[1]) is int):
        raise _refused(error, f"the program's process answered a {reader} read with something else than its result")
    return answer[0], answer[1]


def _trusted_call(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    _state.local.depth = getattr(_state.local, "depth", 0) + 1
    try:
        return function(*args, **kwargs)
    finally:
        _state.local.depth -= 1


def _from_stream(file: Any, reader: str, read_here: Callable[[io.BytesIO], Any], error: type[Exception],
                 options: dict[str, Any]) -> Any:
    """Read one object from ``file`` (at its position): the judge's own pickle with ``read_here``, anything else in
    the program's process; ``file`` is left after what was read, where it can seek."""
    start = file.tell() if _seekable(file) else None
    data = _as_bytes(file.read())
    own = _own_prefix(data) if reader == "pickle" else 0
    if own:
        value, used = _trusted_call(read_here, io.BytesIO(data[:own])), own
    else:
        value, used = _ask(reader, data, options, error)
    if start is not None and 0 <= used <= len(data):
        file.seek(start + used)
    return value


def _seekable(file: Any) -> bool:
    try:
        return bool(file.seekable())
    except Exception:  # noqa: BLE001 - a file-like without seekable()
        return False


def _pickle_options(fix_imports: bool, encoding: str, errors: str) -> dict[str, Any]:
    return {"fix_imports": bool(fix_imports), "encoding": str(encoding), "errors": str(errors)}


def _install_pickle() -> None:
    import pickle

    import _pickle

    original_loads, original_dumps = _pickle.loads, pickle.dumps
    original_unpickler = _pickle.Unpickler

    def dumps(obj: Any, protocol: Any = None, *, fix_imports: bool = True, buffer_callback: Any = None) -> bytes:
        data = original_dumps(obj, protocol, fix_imports=fix_imports, buffer_callback=buffer_callback)
        _state.own.add(_digest(data))
        return data

    def dump(obj: Any, file: Any, protocol: Any = None, *, fix_imports: bool = True, buffer_callback: Any = None) -> None:
        file.write(dumps(obj, protocol, fix_imports=fix_imports, buffer_callback=buffer_callback))

    def loads(data: Any, /, *, fix_imports: bool = True, encoding: str = "ASCII", errors: str = "strict",
              buffers: Any = ()) -> Any:
        data = _as_bytes(data)
        options = _pickle_options(fix_imports, encoding, errors)
        own = _own_prefix(data)
        if own:
            return _trusted_call(original_loads, data[:own], fix_imports=fix_imports, encoding=encoding, errors=errors)
        return _ask("pickle", data, options, pickle.UnpicklingError)[0]

    def load(file: Any, *, fix_imports: bool = True, encoding: str = "ASCII", errors: str = "strict",
             buffers: Any = ()) -> Any:
        return _from_stream(file, "pickle", lambda s: original_unpickler(s, fix_imports=fix_imports, encoding=encoding,
                                                                            errors=errors).load(),
                            pickle.UnpicklingError, _pickle_options(fix_imports, encoding, errors))

    class Unpickler:
        """The judge's ``pickle.Unpickler``: :func:`load` on the file it was given."""

        def __init__(self, file: Any, *, fix_imports: bool = True, encoding: str = "ASCII", errors: str = "strict",
                     buffers: Any = ()) -> None:
            self._file, self._options = file, dict(fix_imports=fix_imports, encoding=encoding, errors=errors)

        def load(self) -> Any:
            return load(self._file, **self._options)

    def python_load(self: Any) -> Any:
        """``pickle._Unpickler.load`` (pure Python; joblib's, pandas' and dill's unpicklers inherit it)."""
        reader = _reader_of(type(self))
        read = getattr(self, "_file_read", None)
        if read is None:
            raise _refused(pickle.UnpicklingError, "Unpickler.__init__() was not called")
        file = _ReadOnly(read)
        return _from_stream(file, reader, lambda s: original_unpickler(s).load(), pickle.UnpicklingError,
                            _pickle_options(getattr(self, "fix_imports", True), getattr(self, "encoding", "ASCII"),
                                            getattr(self, "errors", "strict")))

    for module in (pickle, _pickle):
        module.loads, module.load, module.Unpickler = loads, load, Unpickler
    pickle._loads, pickle._load = loads, load  # noqa: SLF001 - the pure-Python twins
    pickle.dumps, pickle.dump, pickle._dumps, pickle._dump = dumps, dump, dumps, dump  # noqa: SLF001
    pickle._Unpickler.load = python_load  # noqa: SLF001 - every subclass that does not define its own load
    _rebind()


def _reader_of(cls: type) -> str:
    """Which reader the program's side runs for an unpickler of class ``cls`` (by its library)."""
    names = {f"{k.__module__}.{k.__qualname__}" for k in cls.__mro__}
    if any(name.startswith("joblib.") for name in names):
        return "joblib"
    if any(name.startswith("dill.") for name in names):
        return "dill"
    return "pickle"


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
#: loaded judge): module -> names, each replaced by the judge's reader of the same kind.
_BOUND = {
    "cloudpickle": ("load", "loads"),
    "cloudpickle.cloudpickle": ("load", "loads"),
    "shelve": ("Unpickler",),
    "joblib.externals.loky.backend.reduction": ("loads",),
    "joblib.externals.loky.cloudpickle_wrapper": ("loads",),
    "joblib._memmapping_reducer": ("loads",),
    "multiprocessing.reduction.ForkingPickler": ("loads",),
    "multiprocessing.connection._ForkingPickler": ("loads",),
    "multiprocessing.queues._ForkingPickler": ("loads",),
    "rich.style": ("loads",),
}


def _rebind() -> None:
    """Replace, where a loaded library bound an original reader under its own name (:data:`_BOUND`), that binding
    with the judge's reader of the same name."""
    import pickle

    replacements = {id(_ORIGINALS[name]): getattr(pickle, name) for name in ("load", "loads", "Unpickler")}
    for dotted, names in _BOUND.items():
        owner = _loaded(dotted)
        for name in names if owner is not None else ():
            value = vars(owner).get(name)
            if id(value) in replacements:
                setattr(owner, name, replacements[id(value)])


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
        return _ask("marshal", _as_bytes(data), {}, ValueError)[0]

    def load(file: Any, /) -> Any:
        if _imports_calling():
            return _trusted_call(original_load, file)
        return _from_stream(file, "marshal", original_load, ValueError, {})

    marshal.loads, marshal.load = loads, load


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

    original_load, original_load_all = yaml.load, yaml.load_all
    safe = tuple(getattr(yaml, name) for name in _SAFE_YAML_LOADERS if hasattr(yaml, name))

    def text_of(stream: Any) -> str:
        data = stream.read() if hasattr(stream, "read") else stream
        return data.decode("utf-8", "replace") if isinstance(data, (bytes, bytearray)) else str(data)

    def loader_name(loader: Any) -> str:
        return next((name for name in _YAML_LOADERS if getattr(yaml, name, None) is loader), "FullLoader")

    def load(stream: Any, Loader: Any) -> Any:  # noqa: N803 - yaml's own keyword
        if Loader in safe:
            return original_load(stream, Loader=Loader)
        return _ask("yaml", text_of(stream), {"loader": loader_name(Loader)}, yaml.YAMLError)[0]

    def load_all(stream: Any, Loader: Any) -> Any:  # noqa: N803
        if Loader in safe:
            return original_load_all(stream, Loader=Loader)
        return iter(_ask("yaml", text_of(stream), {"loader": loader_name(Loader), "all": True}, yaml.YAMLError)[0])

    def never(self: Any, name: Any, mark: Any, *args: Any, **kwargs: Any) -> Any:
        raise ConstructorError(None, None, f"the split judge builds no Python object a file names ({name!r})", mark)

    yaml.load, yaml.load_all = load, load_all
    yaml.full_load = lambda stream: load(stream, yaml.FullLoader)
    yaml.full_load_all = lambda stream: load_all(stream, yaml.FullLoader)
    yaml.unsafe_load = lambda stream: load(stream, yaml.UnsafeLoader)
    yaml.unsafe_load_all = lambda stream: load_all(stream, yaml.UnsafeLoader)
    FullConstructor.find_python_name = never
    FullConstructor.find_python_module = never
    yaml._ccw_data_only = True  # noqa: SLF001


def _install_dill() -> None:
    dill = sys.modules.get("dill")
    if dill is None:
        return
    import pickle

    def loads(data: Any, *args: Any, **kwargs: Any) -> Any:
        data = _as_bytes(data)
        if _own_prefix(data):
            return pickle.loads(data)
        return _ask("dill", data, {}, pickle.UnpicklingError)[0]

    def load(file: Any, *args: Any, **kwargs: Any) -> Any:
        return _from_stream(file, "dill", lambda s: pickle.load(s), pickle.UnpicklingError, {})

    for module in (dill, sys.modules.get("dill._dill")):
        if module is not None:
            module.loads, module.load = loads, load


_ORIGINALS: dict[str, Any] = {}
#: Modules whose readers the judge makes data-only as they are imported (after :func:`install`).
_LATE: dict[str, Callable[[], None]] = {"yaml": _install_yaml, "cloudpickle": _rebind, "shelve": _rebind,
                                        "joblib": _rebind, "multiprocessing.reduction": _rebind, "dill": _install_dill}


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
    """The judge's audit hook: no unpickler may look up a global, and nothing but the import system may unmarshal,
    unless the judge is reading its own bytes (see the module docstring)."""
    if event == "pickle.find_class" and not _state.trusted():
        raise _refused(_unpickling_error(), f"the split judge unpickles no class or function from bytes it did not "
                       f"write ({args[0]}.{args[1]}): read them with pickle.load/loads, which ask the program's process")
    if event in ("marshal.loads", "marshal.load") and not _state.trusted():
        raise _refused(ValueError, "the split judge unmarshals only its own bytecode: read such bytes with "
                                   "marshal.load/loads, which ask the program's process")


def _unpickling_error() -> type[Exception]:
    pickle = sys.modules.get("pickle")
    return pickle.UnpicklingError if pickle is not None else ValueError


def install(peer: Any) -> None:
    """Make this process's readers data-only (judge side; once per process, for good: call it only in a judge's
    process): ``peer`` reads what the judge did not write (None: nothing is read). A module of :data:`_LATE` loaded
    later is made data-only as it loads."""
    global _installed
    _state.peer = peer
    if _installed:
        return
    _installed = True
    import _pickle

    _ORIGINALS.update(loads=_pickle.loads, load=_pickle.load, Unpickler=_pickle.Unpickler)
    _install_pickle()
    _install_marshal()
    for name, patch in _LATE.items():
        if name in sys.modules:
            patch()
    sys.meta_path.insert(0, _AfterImport())
    sys.addaudithook(audit)
