"""Runs in both processes of a split run: mirrors, the library objects a program returns rebuilt in the judge as real
objects of the judge's library.

Runs in both processes of a split run: :func:`snapshot` in the program's, :class:`Mirrors` in the judge's.

A test inspects a library object the program returned by asking the object itself: ``isinstance(ax, plt.Axes)``,
``ax.get_title()``, ``model.predict(X)``. A stand-in would forward each question to the program's process, where
the program answers whatever it likes: it may patch the library, or define a class that only claims the
library's name. So an object of a *mirrored library* (:data:`MIRRORED_ROOTS`) crosses as a mirror: the program's
process pickles it (:func:`snapshot`); the judge rebuilds it (:meth:`Mirrors.load`) with an unpickler that

* finds only the globals that :func:`.mirror_allowed.refusal` lets through (classes of the mirrored libraries
  that decide no comparison themselves, numpy's and pandas' data types and their rebuilding functions, plain
  data types, a few callbacks), and only in modules the judge has already loaded: it never imports a module
  the program named;
* makes each tagged object with ``cls.__new__(cls)`` (no ``__init__`` runs) and gives it its state;
* reads ``getattr`` only as a method of an object it rebuilt, defined by an allowed class (a bound method
  in a callback registry), never a dunder or a private attribute of anything else.

The test then asks a real object of the judge's own library, whose every answer is computed in the judge
from data: a claimed class buys nothing, and no library code of the program's process is asked.

Identity: the program tags each object of a mirrored library with its ``id`` there, so the judge gives the same
object the same mirror each time it crosses (``ax.figure is fig``), refreshes it in place with its new state, and
hands a mirror back to the program as the program's original (a ``["r", "tagged", tag]`` reference), on which
the program draws. A mirror is a snapshot: what the program changes later shows when the object crosses again.

A pickle the judge refuses (a class of the program's own, an unlisted global) leaves the object a plain
stand-in, whose class the judge does not grant: the test sees no library object there.

Holds:
    MIRRORED_ROOTS  the libraries whose objects cross as mirrors
    mirrored        program side: does an object of this class cross as a mirror?
    snapshot        program side: the pickle of an object, its mirrored parts tagged
    Mirrors         judge side: the mirrors of one run (rebuild, refresh, identity, the way back)
    MirrorRefused   why the judge would not rebuild a pickle
    MAX_SNAPSHOT_BYTES  the largest pickle the judge rebuilds
"""

from __future__ import annotations

import copyreg
import functools
import gc
import inspect
import io
import pickle
import sys
import types
from collections.abc import Callable
from typing import Any

from .mirror_allowed import (BOUND_BUILTIN_METHODS, FUNCTIONS, MIRRORED_ROOTS, PLAIN_TYPES, POINTER_PROTOCOLS, refusal,
                             root_of)

__all__ = ["MIRRORED_ROOTS", "mirrored", "snapshot", "Mirrors", "MirrorRefused", "MAX_SNAPSHOT_BYTES"]

#: The largest pickle the judge rebuilds (a larger one leaves the object a stand-in).
MAX_SNAPSHOT_BYTES = 64 << 20


class MirrorRefused(Exception):
    """The judge would not rebuild a pickle from the program's process (the text says why)."""


def mirrored(cls: type) -> bool:
    """Does an object of ``cls`` cross to the judge as a mirror? (Program side: a hint only; the judge decides.)"""
    module = cls.__dict__.get("__module__") if isinstance(cls.__dict__.get("__module__"), str) else ""
    return root_of(module) in MIRRORED_ROOTS and not issubclass(cls, BaseException)


def _tagged(tag: int, cls: type) -> Any:
    """The name a tagged object is pickled under; the judge's unpickler answers it with :meth:`Mirrors._object`."""
    raise MirrorRefused("a tagged object is rebuilt only by the judge's unpickler")


#: Types pickle writes itself: always in the pickle.
_NATIVE = frozenset({int, float, complex, str, bytes, bytearray, bool, type(None), list, tuple, dict, set, frozenset,
                     slice, range, type(Ellipsis), type(NotImplemented)})


@functools.lru_cache(maxsize=4096)
def _class_refusal(cls: type) -> str | None:
    """Why the judge will not rebuild an object of ``cls`` (:func:`.mirror_allowed.refusal`), or None."""
    return refusal(str(getattr(cls, "__module__", "")), str(getattr(cls, "__qualname__", "")), cls)


def _by_reference(obj: Any) -> bool:
    """Program side: does ``obj``, inside a mirror, cross as a reference (a stand-in in the judge) rather than in the
    pickle? It does where the judge would not rebuild it (:func:`.mirror_allowed.refusal`): the program's own code
    and objects (a lambda tick formatter, an instance of its class), an open file, a lock, a class no one has
    reviewed. So a mirror degrades part by part instead of being refused whole. (A hint only: the judge decides.)"""
    cls = type(obj)
    if cls in _NATIVE or obj is _tagged or obj is getattr:
        return False
    if isinstance(obj, type):
        return _class_refusal(obj) is not None
    owner = getattr(obj, "__self__", None)
    if isinstance(obj, (types.MethodType, types.BuiltinMethodType)) and owner is not None \
            and not isinstance(owner, types.ModuleType):  # a bound method: pickled as getattr(owner, name)
        name = str(getattr(obj, "__name__", ""))
        if isinstance(owner, type):  # a class's own rebuilding function (zoneinfo's ZoneInfo._unpickle)
            return _class_refusal(owner) is not None or (root_of(str(owner.__module__)), f"{owner.__qualname__}.{name}") not in FUNCTIONS
        if isinstance(obj, types.MethodType):  # a library method of an object the judge rebuilds
            module = getattr(obj.__func__, "__module__", None)
            return _by_reference(owner) or not isinstance(module, str) or root_of(module) not in MIRRORED_ROOTS
        return not (name in BOUND_BUILTIN_METHODS and (type(owner) in (list, dict, set) or _class_refusal(type(owner)) is None))
    module, name = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if callable(obj) and isinstance(module, str) and isinstance(name, str):  # a function: Python, C or Cython
        return refusal(module, name, obj) is not None
    return _class_refusal(cls) is not None


class _Snapshotter(pickle.Pickler):
    """A pickler that tags each object of a mirrored library with its ``id`` (and keeps it in ``tagged``), and
    sends the program's own objects inside it by reference (``by_reference`` gives the reference's parts)."""

    def __init__(self, file: io.BytesIO, tagged: dict[int, Any], by_reference: Callable[[Any], list]) -> None:
        super().__init__(file, protocol=4)
        self.tagged, self.by_reference = tagged, by_reference

    def persistent_id(self, obj: Any) -> Any:
        return ("ref", *self.by_reference(obj)) if _by_reference(obj) else None

    def reducer_override(self, obj: Any) -> Any:
        cls = type(obj)
        if isinstance(obj, type) or not mirrored(cls):
            return NotImplemented
        try:
            reduced = obj.__reduce_ex__(4)
        except Exception:  # noqa: BLE001 - pickle then says why it cannot
            return NotImplemented
        if not (isinstance(reduced, tuple) and len(reduced) >= 2 and reduced[0] is copyreg.__newobj__
                and reduced[1] == (cls,)):
            return NotImplemented  # a custom reduction (a numpy-backed type): pickled as the library does it
        self.tagged[id(obj)] = obj
        return (_tagged, (id(obj), cls), *reduced[2:])


def snapshot(obj: Any, tagged: dict[int, Any], by_reference: Callable[[Any], list]) -> bytes | None:
    """The pickle of ``obj`` with its mirrored parts tagged (``tagged`` keeps each by its tag, for the way back)
    and the program's own objects in it by reference (``by_reference(o)``: ``[handle, claim, capabilities]``
    of a stand-in), or None where it cannot be pickled (a file, a lock)."""
    buffer = io.BytesIO()
    try:
        _Snapshotter(buffer, tagged, by_reference).dump(obj)
    except Exception:  # noqa: BLE001 - any failure: the object crosses as a stand-in
        return None
    data = buffer.getvalue()
    return data if len(data) <= MAX_SNAPSHOT_BYTES else None


class Mirrors:
    """The judge's mirrors of one run.

    >>> mirrors = Mirrors()
    >>> mirrors.tag_of(object()) is None
    True
    >>> mirrors.load(pickle.dumps(print))
    Traceback (most recent call last):
    ...
    convcodeworld_gym.sandbox.run.mirror.MirrorRefused: the pickle names builtins.print, which the judge does not rebuild: it is not among the functions the judge rebuilds with
    """

    def __init__(self) -> None:
        self._by_tag: dict[int, Any] = {}
        self._tags: dict[int, int] = {}  # id(mirror) -> tag

    def tag_of(self, obj: Any) -> int | None:
        """The program's tag of ``obj`` when it is one of this run's mirrors (then it goes back as the original)."""
        return self._tags.get(id(obj))

    def load(self, data: bytes, by_reference: Callable[[list], Any] | None = None) -> Any:
        """Rebuild a pickle from the program's process (see the module docstring); :class:`MirrorRefused` if not.
        ``by_reference`` turns the ``[handle, claim, capabilities]`` of a program object sent by reference into
        the judge's stand-in of it (without one, such a pickle is refused)."""
        if type(data) is not bytes or len(data) > MAX_SNAPSHOT_BYTES:
            raise MirrorRefused("the pickle is not bytes or is over the size limit")
        unpickler = _Unpickler(io.BytesIO(data), self, by_reference)
        try:
            rebuilt = unpickler.load()
            _refuse_hidden_state(rebuilt, unpickler.references)
            return rebuilt
        except MirrorRefused:
            raise
        except RecursionError:
            raise MirrorRefused("the pickle is nested too deeply") from None
        except Exception as exc:  # noqa: BLE001 - a malformed pickle, or a state the library refused
            raise MirrorRefused(f"the pickle could not be rebuilt ({type(exc).__name__}: {str(exc)[:200]})") from None

    def _object(self, tag: Any, cls: Any) -> Any:
        """A tagged object: this run's mirror of that tag (refreshed in place by the state that follows), else new."""
        if type(tag) is not int or not isinstance(cls, type) or _class_refusal(cls) is not None:
            raise MirrorRefused("a malformed tagged object")
        found = self._by_tag.get(tag)
        if found is not None and type(found) is cls:
            return found
        obj = cls.__new__(cls)
        self._by_tag[tag] = obj
        self._tags[id(obj)] = tag
        return obj


def _method(obj: Any, name: Any) -> Any:
    """``getattr`` as a pickle may use it: a bound method of a rebuilt object, defined by an allowed class's own
    code (a callback registry's ``fig.pick``), or a plain container's method in :data:`BOUND_BUILTIN_METHODS`
    or of a standard data type (an artist's ``_remove_method``, a list's ``remove``; a response's ``BytesIO.close``);
    never a dunder, never anything else."""
    if type(name) is not str or name.startswith("__"):
        raise MirrorRefused(f"the pickle reads attribute {str(name)[:40]!r}, which the judge refuses")
    cls = type(obj)
    if name in BOUND_BUILTIN_METHODS and (cls in (list, dict, set) or cls.__name__ in PLAIN_TYPES.get(cls.__module__, ())):
        return getattr(obj, name)
    if isinstance(obj, type):  # a class's own rebuilding function (zoneinfo's ZoneInfo._unpickle)
        if _class_refusal(obj) is None and (root_of(str(obj.__module__)), f"{obj.__qualname__}.{name}") in FUNCTIONS:
            return getattr(obj, name)
        raise MirrorRefused(f"the pickle reads {name!r} of class {obj.__qualname__}, which the judge refuses")
    if root_of(str(cls.__module__)) not in MIRRORED_ROOTS or _class_refusal(cls) is not None:
        raise MirrorRefused(f"the pickle reads {name!r} of a {cls.__qualname__} object, which the judge refuses")
    found = inspect.getattr_static(obj, name, None)
    if not isinstance(found, types.FunctionType) or root_of(str(found.__module__)) not in MIRRORED_ROOTS:
        raise MirrorRefused(f"the pickle reads {cls.__qualname__}.{name}, which is not a method of the library")
    return getattr(obj, name)


class _Unpickler(pickle.Unpickler):
    """Finds only allowed globals, in modules already loaded (see the module docstring)."""

    def __init__(self, file: io.BytesIO, mirrors: Mirrors, by_reference: Callable[[list], Any] | None) -> None:
        super().__init__(file)
        self._mirrors, self._by_reference = mirrors, by_reference
        self.references: dict[int, Any] = {}  # id -> the stand-ins this pickle's references became

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == (__name__, "_tagged"):
            return self._mirrors._object  # noqa: SLF001
        if (module, name) == ("builtins", "getattr"):
            return _method
        loaded = sys.modules.get(module)
        if loaded is None:
            raise MirrorRefused(f"the pickle names {module}.{name}, and the judge has not loaded {module}")
        found: Any = loaded
        for part in name.split("."):
            dunder = part.startswith("__") and part.endswith("__")
            found = None if dunder else inspect.getattr_static(found, part, None)
        if found is None:
            raise MirrorRefused(f"the pickle names {module}.{name}, which the judge's {module} does not have")
        why = refusal(module, name, found)
        if why is not None:
            raise MirrorRefused(f"the pickle names {module}.{name}, which the judge does not rebuild: {why}")
        return _validated(found) if root_of(module) == "pyarrow" and not isinstance(found, type) else found

    def persistent_load(self, pid: Any) -> Any:
        """A program object sent by reference: the judge's stand-in of it, under the stand-ins' own rules."""
        if not (self._by_reference is not None and type(pid) is tuple and len(pid) == 4 and pid[0] == "ref"
                and type(pid[1]) is int):
            raise MirrorRefused("the pickle holds a malformed reference")
        found = self._by_reference(["mine", *pid[1:]])
        self.references[id(found)] = found
        return found


#: The most objects :func:`_refuse_hidden_state` walks in one mirror (a larger one is refused).
_MAX_WALK = 500_000
#: What the walk does not enter: the library itself (classes, modules, functions, code), never rebuilt by a pickle.
_NOT_WALKED = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.CodeType,
               types.FrameType, types.CellType, str, bytes, int, float, complex, bool)


def _refuse_hidden_state(root: Any, references: dict[int, Any]) -> None:
    """Refuse a mirror whose objects hold, in their own dicts, what would make the judge's library ask the program or
    read memory: the program's code in place of a method of their class (``ax.get_title = lambda: 'Counts'``,
    ``frame.equals = ...``: the test would call the program where it calls the library, with its own values), or a
    memory-address protocol (an ``__array_interface__`` dict that numpy would follow). Walks everything the pickle
    built: containers, objects' dicts and slots, numpy object arrays, pandas' blocks (by ``gc.get_referents``), not
    into classes, modules or functions. The library's own callables there (pandas' ``format_coord`` partial) stay."""
    seen: set[int] = set()
    todo = [root]
    while todo:
        obj = todo.pop()
        if id(obj) in seen or id(obj) in references or isinstance(obj, _NOT_WALKED):
            continue
        seen.add(id(obj))
        if len(seen) > _MAX_WALK:
            raise MirrorRefused("the object holds too many objects to check")
        own = getattr(obj, "__dict__", None) if not isinstance(obj, dict) else None
        if type(own) is dict:
            for name, value in own.items():
                if name in POINTER_PROTOCOLS:
                    raise MirrorRefused(f"the program put {name} in a {type(obj).__qualname__} object's own state")
                if (references and _is_programs(value, references)
                        and callable(inspect.getattr_static(type(obj), str(name), None))):
                    raise MirrorRefused(f"the program put its own code in place of {type(obj).__qualname__}.{name}")
        if getattr(getattr(obj, "dtype", None), "hasobject", False) and hasattr(obj, "ravel"):
            todo.extend(obj.ravel(order="K").tolist()[:_MAX_WALK])  # a numpy object array: its items
        todo.extend(gc.get_referents(obj))


def _is_programs(value: Any, references: dict[int, Any]) -> bool:
    """Is ``value`` (through partials and bound methods) one of the program's objects sent by reference?"""
    for _ in range(32):
        if id(value) in references:
            return True
        inner = value.func if isinstance(value, functools.partial) else getattr(value, "__func__", None)
        if inner is None:
            return False
        value = inner
    return True


def _validated(function: Callable[..., Any]) -> Callable[..., Any]:
    """pyarrow's rebuilding ``function``, checking in full each array it makes (an array rebuilt from buffers is
    not validated, and a malformed one reads past its memory)."""

    def rebuild(*args: Any) -> Any:
        made = function(*args)
        validate = getattr(made, "validate", None)
        if callable(validate):
            validate(full=True)
        return made

    return rebuild
