"""Runs in both processes of a split run: stand-ins, objects of one process used from the other through calls over the
judge's channel.

The split judge's two processes each own their objects. Values that are data cross by copy
(:mod:`.codec`); anything else crosses as a *reference*, and the receiving side gets a
:class:`StandIn`: each call, attribute read and protocol operation on it (``len``, iteration,
indexing, ``with``, ``await``, ``int()`` ...) is a request to the owner, which runs it on the real
object and answers with data or a further reference. A :class:`Peer` holds one side: the objects it
exports, the stand-ins it made, and a message loop that serves the other side's requests while it
waits for its own answer, so calls nest (the judge calls the program, the program calls a mock of
the judge's, the mock's side effect calls back into the program, ...).

What a stand-in never does, whichever side holds it: decide a comparison (``==``, ``!=`` and
``hash`` are identity; ``in`` iterates and compares the items, data, where the test runs), decide
whether a ``with`` block swallows an exception, or carry code: only data and references cross. The
judge's stand-ins of the program's objects (:class:`ProgramStandIn`) also refuse every operation that
would hand the program a value the test compares against (arithmetic, comparison methods, memory
addresses), and the library objects a test inspects do not cross as stand-ins at all: they are rebuilt
in the judge (:mod:`.mirror`).

Two things the judge hands over as themselves, never the other way: a builtin class (``int`` in an
annotation), and a *replica* of each plain function of its own (a test's ``def`` or ``lambda``): a
function of the program's process with the same name, signature, defaults and annotations, whose
body calls the judge's function through its stand-in (:func:`make_replica`), so ``inspect`` and
``types.FunctionType`` checks see what they would in one process while every call still runs in
the judge. An argument of a call that the callee returns (``assertIs(task_func(d), d)``) comes back
as the caller's own object, holding what the call changed in it.

The judge (``strict``) is the trusted side: it may read and set what it likes on the program's
objects. It refuses the program's requests to set attributes or items of its objects, to read their
private names or dunders (beyond ``__name__``, ``__qualname__``, ``__doc__``, ``__module__``; of a
mock, what the test set on it), and a mock's own configuration methods (``reset_mock`` ...); it
never exports modules, frames, code, tracebacks or the builtins that reach into objects
(``setattr``, ``exec``, ``open`` ...). It rebuilds the program's exceptions only as classes it
already has (builtins and the task's own imports, else their nearest such base), never
``unittest``'s, never a ``BaseException`` that is not an ``Exception``, and lets a stand-in claim a
class for ``isinstance`` only when it is a builtin type that carries the program's own code (a function,
a generator, an iterator): never a library's class on the program's word (:func:`class_policy`).
"""

from __future__ import annotations

import builtins
import inspect
import keyword
import os
import struct
import sys
import threading
import time
import traceback
import types
from collections.abc import Callable, Iterable
from typing import Any, NoReturn

from ..result import cut_middle
from .codec import Codec, CodecError, CodecLimits, Unsendable, dumps, loads
from .mirror import MirrorRefused, Mirrors, mirrored, snapshot
from .mirror_allowed import POINTER_PROTOCOLS

__all__ = ["Peer", "StandIn", "ProgramStandIn", "standin_class", "capabilities", "make_replica", "replicable", "RemoteError",
           "RefusedOperation", "ProgramGone", "Channel", "MAX_ERROR_CHARS"]

#: Longest exception argument or traceback text sent for one failure.
MAX_ERROR_CHARS = 10_000
#: Most objects one side exports in a run.
MAX_EXPORTS = 200_000

_READABLE_DUNDERS = frozenset({"__name__", "__qualname__", "__doc__", "__module__"})
_ARITHMETIC = tuple(f"__{p}{name}__" for name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul",
                                                   "and", "or", "xor", "lshift", "rshift") for p in ("", "r")) + (
    "__neg__", "__pos__", "__abs__", "__invert__", "__round__", "__trunc__", "__floor__", "__ceil__")
#: What the judge never lets an object of the program's process answer: every arithmetic operation (both orders,
#: unary, ``abs``, ``round``, ``divmod`` ...), since a test computes with it to compare (``abs(result - expected)``).
_REFUSED_ARITHMETIC = _ARITHMETIC + ("__divmod__", "__rdivmod__")
#: Methods by which a test compares a value it expected to be data with its own (``result.equals(expected)``,
#: ``text.startswith(prefix)``): on an object of the program's process, the program would decide the comparison.
_COMPARING_METHODS = frozenset({
    "equals", "compare", "isin", "between", "eq", "ne", "lt", "le", "gt", "ge", "isclose", "allclose", "array_equal",
    "array_equiv", "identical", "startswith", "endswith", "find", "rfind", "index", "rindex", "count", "issubset",
    "issuperset", "isdisjoint", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__contains__",
    "__cmp__"})
#: Protocol operations a stand-in forwards (the owner runs ``getattr(type(obj), op)(obj, *args)``).
_OPS = frozenset({"__len__", "__iter__", "__next__", "__getitem__", "__setitem__", "__delitem__", "__bool__",
                  "__int__", "__float__", "__index__", "__complex__", "__str__", "__repr__", "__format__",
                  "__enter__", "__exit__", "__aenter__", "__aexit__", "__await__", "__aiter__", "__anext__",
                  "__reversed__", "__instancecheck__"}) | frozenset(_ARITHMETIC)
#: Operations the judge refuses on its objects (the program may not change them).
_STRICT_REFUSED_OPS = frozenset({"__setitem__", "__delitem__"})
#: A mock's own configuration and bookkeeping: the program may not reset or reconfigure the judge's mocks.
_MOCK_MUTATORS = frozenset({"reset_mock", "configure_mock", "attach_mock", "mock_add_spec"})
_DENIED_BUILTINS = frozenset(id(getattr(builtins, n)) for n in (
    "setattr", "delattr", "getattr", "exec", "eval", "compile", "__import__", "vars", "globals", "locals", "open",
    "breakpoint", "input", "type", "object", "super", "memoryview", "classmethod", "staticmethod", "property"))
_OWN_FILES = (os.path.splitext(__file__)[0], os.path.splitext(sys.modules[Codec.__module__].__file__ or "")[0])


def _clip(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    return cut_middle(text, limit)


class ProgramGone(EOFError):
    """The other process closed the channel (it exited, crashed or was killed)."""


class RemoteError(Exception):
    """The other side raised an exception this side cannot rebuild as its own class; the text says what it was."""


class RefusedOperation(TypeError):
    """The judge refused an operation on an object of the program's process whose answer would be the program's to
    decide with the test's own values (arithmetic, a comparison method, a memory address): the test that met it
    fails, even where it catches the exception (see :meth:`Peer.take_refusals`)."""


# Bound once: a test may patch os.read, struct.pack, ... in the judge's own modules.
_read, _write, _pack, _unpack, _getpid = os.read, os.write, struct.pack, struct.unpack, os.getpid
_monotonic = time.monotonic


class Channel:
    """Length-prefixed messages over a read fd and a write fd."""

    def __init__(self, read_fd: int, write_fd: int, max_bytes: int = CodecLimits().max_bytes) -> None:
        self.read_fd, self.write_fd, self.max_bytes = read_fd, write_fd, max_bytes

    def send(self, payload: bytes) -> None:
        view = memoryview(_pack("<Q", len(payload)) + payload)
        while view:
            view = view[_write(self.write_fd, view):]

    def _read_exact(self, n: int) -> bytes:
        chunks, left = [], n
        while left:
            chunk = _read(self.read_fd, min(left, 1 << 20))
            if not chunk:
                raise ProgramGone("the other process closed the channel")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def recv(self) -> bytes:
        (size,) = _unpack("<Q", self._read_exact(8))
        if size > self.max_bytes:
            raise ProgramGone(f"the other process sent a message of {size} bytes, over the limit of {self.max_bytes}")
        return self._read_exact(size)

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            try:
                os.close(fd)
            except OSError:
                pass


class StandIn:
    """An object the other process owns. Every use but identity is a request to that process.

    A stand-in has the protocol methods (call, ``len``, iteration, ``with`` ...) of the object it stands
    for, no others (:func:`standin_class`), so ``callable()`` and the ``collections.abc`` checks tell the
    truth; its type carries the name of the claimed class, so ``str(type(ax))`` reads as in one process.
    """

    __slots__ = ("_ccw_peer", "_ccw_handle", "_ccw_class", "_ccw_label", "__weakref__")

    def __init__(self, peer: Peer, handle: int, claimed: type | None, label: str = "") -> None:
        object.__setattr__(self, "_ccw_peer", peer)
        object.__setattr__(self, "_ccw_handle", handle)
        object.__setattr__(self, "_ccw_class", claimed)
        object.__setattr__(self, "_ccw_label", label)  # the class the owner named, for messages only

    def _ccw_op(self, op: str, *args: Any) -> Any:
        return self._ccw_peer.request("op", self._ccw_handle, [op, list(args)])

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # isinstance() of a claimed library class (see class_policy)
        claimed = object.__getattribute__(self, "_ccw_class")
        return claimed if claimed is not None else type(self)

    def __getattribute__(self, name: str) -> Any:  # also for explicit calls: ``obj.__getattribute__("app")``
        try:
            return object.__getattribute__(self, name)
        except AttributeError:  # the owner decides what may be read (the judge: no private names)
            return object.__getattribute__(self, "_ccw_peer").request(
                "getattr", object.__getattribute__(self, "_ccw_handle"), name)

    def __setattr__(self, name: str, value: Any) -> None:  # the judge refuses; the program's objects take it
        self._ccw_peer.request("setattr", self._ccw_handle, [name, value])

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete {name!r}: the object belongs to the other process")

    def __eq__(self, other: object) -> bool:
        return self is other

    def __ne__(self, other: object) -> bool:
        return self is not other

    __hash__ = object.__hash__

    def __str__(self) -> str:
        return _typed(self._ccw_op("__str__"), str, "__str__")

    def __repr__(self) -> str:
        try:
            return _typed(self._ccw_op("__repr__"), str, "__repr__")
        except Exception:  # noqa: BLE001 - repr is used in failure texts: it must not fail
            return f"<object {self._ccw_handle} of the other process>"

    def __format__(self, spec: str) -> str:
        return _typed(self._ccw_op("__format__", spec), str, "__format__")

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("a stand-in for an object of the other process cannot be pickled or copied")


def _call(self: StandIn, *args: Any, **kwargs: Any) -> Any:
    return self._ccw_peer.request("call", self._ccw_handle, [list(args), kwargs])


def _exit(self: StandIn, *exc: Any) -> bool:
    self._ccw_op("__exit__")  # the owner's exit runs; whether an exception is swallowed is never its say
    return False


async def _aenter(self: StandIn) -> Any:
    return await self._ccw_op("__aenter__")


async def _aexit(self: StandIn, *exc: Any) -> bool:
    await self._ccw_op("__aexit__")
    return False


def _forward(op: str, kind: type | tuple[type, ...] | None = None, cast: Callable[[Any], Any] | None = None) -> Callable:
    def method(self: StandIn, *args: Any) -> Any:
        value = self._ccw_op(op, *args)
        if kind is not None:
            value = _typed(value, kind, op)
        return cast(value) if cast is not None else value

    method.__name__ = op
    return method


#: The protocol methods a stand-in may have, each only when the real object's type has it.
_PROTOCOL: dict[str, Callable] = {
    "__call__": _call, "__len__": _forward("__len__", int), "__iter__": _forward("__iter__"),
    "__next__": _forward("__next__"), "__reversed__": _forward("__reversed__"),
    "__getitem__": _forward("__getitem__"), "__setitem__": _forward("__setitem__"),
    "__delitem__": _forward("__delitem__"), "__bool__": _forward("__bool__", (bool, int), bool),
    "__int__": _forward("__int__", int), "__index__": _forward("__index__", int),
    "__float__": _forward("__float__", (float, int), float), "__complex__": _forward("__complex__", (complex, float, int), complex),
    "__enter__": _forward("__enter__"), "__exit__": _exit, "__aenter__": _aenter, "__aexit__": _aexit,
    "__await__": _forward("__await__"), "__aiter__": _forward("__aiter__"), "__anext__": _forward("__anext__"),
    "__instancecheck__": lambda self, obj: self._ccw_op("__instancecheck__", obj) is True,
    # Arithmetic answers with a value (data or a stand-in); comparisons are never forwarded (identity only).
    **{op: _forward(op) for op in _ARITHMETIC},
}


def _refuse(self: StandIn, what: str) -> NoReturn:
    """Raise (and record, see :meth:`Peer.refuse`) the refusal of ``what`` on the program's object ``self``."""
    label = object.__getattribute__(self, "_ccw_label") or "object"
    raise object.__getattribute__(self, "_ccw_peer").refuse(
        f"the program returned a {label!r} object where the test {what}; the judge never lets an object of the "
        "program's process decide that with the test's values: return data (numbers, strings, lists, arrays, "
        "DataFrames ...)")


def _refusing(op: str) -> Callable:
    def method(self: StandIn, *args: Any) -> NoReturn:
        _refuse(self, f"computes with it ({op})")

    method.__name__ = op
    return method


class ProgramStandIn(StandIn):
    """A stand-in the judge holds for an object of the program's process.

    It answers what the program may decide alone, with no value of the test's in hand: its attributes, calls
    and indexing with the inputs the test chose to give it, conversions to data (``len``, ``bool``, ``float``,
    ``str``, iteration). It refuses what would let the program see or answer for a value the test compares
    against: every arithmetic operation (``abs(result - expected) < tol``, ``np.isclose``), the comparison
    methods of data types (``result.equals(expected)``), and the memory-address protocols a library in the
    judge would read (``__array_interface__``). A refusal raises :class:`RefusedOperation` and fails the
    test even where the test catches it. The table, with the reasons, is in docs/threat-model.md.
    """

    __slots__ = ()

    def __getattribute__(self, name: str) -> Any:
        if name in _COMPARING_METHODS:
            _refuse(self, f"compares with it ({name})")
        if name in POINTER_PROTOCOLS:
            _refuse(self, f"reads it through {name}, a protocol that hands the judge a memory address")
        return StandIn.__getattribute__(self, name)


for _op in _REFUSED_ARITHMETIC:  # defined on the class, so that Python, numpy and an explicit ``obj.__sub__`` find them
    setattr(ProgramStandIn, _op, _refusing(_op))


_CO_VARARGS, _CO_VARKEYWORDS = 0x04, 0x08
_CO_NOT_PLAIN = 0x20 | 0x80 | 0x100 | 0x200  # generator, coroutine, iterable coroutine, async generator


def replicable(obj: Any) -> bool:
    """Does the judge hand ``obj`` to the program as a replica (a plain Python function: a test's ``def`` or
    ``lambda``), not as a stand-in? Generators, coroutines and wrapped functions stay stand-ins."""
    if type(obj) is not types.FunctionType or obj.__code__.co_flags & _CO_NOT_PLAIN:
        return False
    own = obj.__dict__
    return "__wrapped__" not in own and "__signature__" not in own


def _builtin_class(obj: Any) -> bool:
    """A builtin class the judge may hand over as itself (``int`` in an annotation), not one that reaches
    into objects (``type``, ``object`` ...)."""
    return (isinstance(obj, type) and getattr(builtins, getattr(obj, "__name__", ""), None) is obj
            and id(obj) not in _DENIED_BUILTINS)


def _claim_of(cls: type) -> list[str]:
    """The ``[module, qualname]`` a side names for its object's class (a claim the other side may not grant)."""
    return [getattr(cls, "__module__", "") or "", getattr(cls, "__qualname__", "") or ""]


def _label(claim: Any) -> str:
    """``module.qualname`` of the class the owner named for its object (for messages only), or ''."""
    if isinstance(claim, list) and len(claim) == 2 and all(type(p) is str for p in claim):
        return _clip(".".join(p for p in claim if p), 200)
    return ""


def _str_arg(args: list, i: int) -> str:
    if len(args) <= i or type(args[i]) is not str:
        raise CodecError("malformed reference")
    return args[i]


def _parameter_names(spec: dict) -> tuple[list[str], int, str | None, list[str], str | None] | None:
    """The validated parameter lists of a function description, or None."""
    positional, kwonly = spec.get("positional"), spec.get("kwonly")
    varargs, varkw, posonly = spec.get("varargs"), spec.get("varkw"), spec.get("posonly")
    if not (isinstance(positional, list) and isinstance(kwonly, list) and type(posonly) is int
            and 0 <= posonly <= len(positional)):
        return None
    names = [*positional, *kwonly, *(n for n in (varargs, varkw) if n is not None)]
    if len(names) > 255 or len(set(names)) != len(names):
        return None
    if not all(type(n) is str and n.isidentifier() and not keyword.iskeyword(n) and not n.startswith("_ccw")
               for n in names):
        return None
    return positional, posonly, varargs, kwonly, varkw


def make_replica(target: StandIn, spec: dict, decode: Callable[[Any], Any]) -> Any:
    """A function of this process with the signature, names, defaults and annotations of the other side's function
    that ``spec`` describes (see :meth:`Peer._describe`), whose body calls ``target`` (its stand-in) with the
    arguments it was given. A description that does not hold together gives ``target`` itself."""
    parsed = _parameter_names(spec)
    name, qualname = spec.get("name"), spec.get("qualname")
    if parsed is None or type(name) is not str or type(qualname) is not str:
        return target
    positional, posonly, varargs, kwonly, varkw = parsed
    declared = [*positional[:posonly], *(["/"] if posonly else []), *positional[posonly:],
                *([f"*{varargs}"] if varargs else ["*"] if kwonly else []), *kwonly,
                *([f"**{varkw}"] if varkw else [])]
    passed = [*positional, *([f"*{varargs}"] if varargs else []), *(f"{n}={n}" for n in kwonly),
              *([f"**{varkw}"] if varkw else [])]
    source = f"def _ccw_replica({', '.join(declared)}):\n    return _ccw_target({', '.join(passed)})\n"
    namespace: dict[str, Any] = {"_ccw_target": target}
    exec(compile(source, "<a function of the judge>", "exec"), namespace)  # noqa: S102 - names checked above
    fn = namespace["_ccw_replica"]
    try:
        defaults, kwdefaults, annotations = (decode(spec.get(k)) for k in ("defaults", "kwdefaults", "annotations"))
        fn.__code__ = fn.__code__.replace(co_name=name, **({"co_qualname": qualname} if sys.version_info >= (3, 11) else {}))
        fn.__name__, fn.__qualname__ = name, qualname
        fn.__module__ = spec.get("module") if type(spec.get("module")) is str else None
        fn.__doc__ = spec.get("doc") if type(spec.get("doc")) is str else None
        fn.__defaults__ = defaults if type(defaults) is tuple and len(defaults) <= len(positional) else None
        fn.__kwdefaults__ = kwdefaults if type(kwdefaults) is dict and set(kwdefaults) <= set(kwonly) else None
        fn.__annotations__ = annotations if type(annotations) is dict else {}
    except (CodecError, TypeError, ValueError):
        return target
    return fn


def capabilities(obj: Any) -> list[str]:
    """The protocol methods ``obj``'s type has (what its stand-in will have)."""
    # Looked up in the classes' dicts: a getattr would run descriptors (a MagicMock makes a child mock for each).
    defined: set[str] = set()
    for klass in type(obj).__mro__:
        defined.update(k for k, v in vars(klass).items() if v is not None)
    caps = [name for name in _PROTOCOL if name != "__instancecheck__" and name in defined]
    if isinstance(obj, type):
        caps.append("__instancecheck__")
    return caps


_classes: dict[tuple, type] = {}


def standin_class(claimed: type | None, caps: Any, base: type[StandIn] = StandIn) -> type:
    """The subclass of ``base`` with the protocol methods ``caps`` (others ignored), named after ``claimed``.

    On a :class:`ProgramStandIn` (the judge's side) the arithmetic operations stay refused whatever ``caps`` says.
    """
    refused = _REFUSED_ARITHMETIC if base is ProgramStandIn else ()
    wanted = tuple(sorted(c for c in caps if c in _PROTOCOL and c not in refused)) if isinstance(caps, list) else ()
    name = (claimed.__module__, claimed.__qualname__) if claimed is not None else ("", "StandIn")
    key = (name, wanted, base)
    cls = _classes.get(key)
    if cls is None:
        if len(_classes) > 10_000:
            raise CodecError("too many kinds of stand-ins")
        namespace: dict[str, Any] = {name: _PROTOCOL[name] for name in wanted}
        namespace.update(__slots__=(), __module__=key[0][0] or __name__, __qualname__=key[0][1])
        cls = _classes[key] = type(key[0][1].rpartition(".")[2], (base,), namespace)
    return cls


_BUILTIN_OPS: dict[str, Callable[..., Any]] = {
    "__str__": str, "__repr__": repr, "__format__": format, "__iter__": iter, "__reversed__": reversed,
    "__next__": next, "__int__": int, "__float__": float, "__complex__": complex,
}


_EXACT_WRITE_BACK = (list, dict, set, bytearray)


def _mutable(value: Any) -> bool:
    np = sys.modules.get("numpy")
    return type(value) in (list, dict, set, bytearray) or (np is not None and type(value) is np.ndarray)


def _write_back(payload: Any, changed: list) -> None:
    """Make this side's arguments of a call hold what the call left in the other side's copies (in place)."""
    args, kwargs = payload
    for item in changed:
        if not (isinstance(item, list) and len(item) == 2):
            continue
        key, new = item
        if type(key) is int and 0 <= key < len(args):
            orig = args[key]
        elif type(key) is str and key in kwargs:
            orig = kwargs[key]
        else:
            continue
        if type(orig) is not type(new) or not _mutable(orig):
            continue
        if type(orig) in (list, bytearray):
            orig[:] = new
        elif type(orig) in (dict, set):
            orig.clear()
            orig.update(new)
        elif orig.shape == new.shape and orig.dtype == new.dtype and orig.flags.writeable:
            orig[...] = new


def _argument_refs(payload: list) -> dict[int, list]:
    """``id(argument) -> ["r", "arg", position or keyword]`` for a call's arguments whose in-place changes
    :func:`_write_back` copies exactly (lists, dicts, sets, bytearrays): returned, or inside what is returned,
    each comes back to the caller as its own object (``assertIs(task_func(d), d)``)."""
    args, kwargs = payload
    refs = {id(v): ["r", "arg", i] for i, v in enumerate(args) if type(v) in _EXACT_WRITE_BACK}
    refs.update((id(v), ["r", "arg", k]) for k, v in kwargs.items() if type(v) in _EXACT_WRITE_BACK)
    return refs


def _argument(payload: list, ref: list) -> Any:
    """The caller's own argument a ``["r", "arg", key]`` reference of the answer names."""
    args, kwargs = payload
    key = ref[1] if len(ref) == 2 else None
    if type(key) is int and 0 <= key < len(args) and type(args[key]) in _EXACT_WRITE_BACK:
        return args[key]
    if type(key) is str and type(kwargs.get(key)) in _EXACT_WRITE_BACK:
        return kwargs[key]
    raise CodecError("a reference to an argument the call did not have")


def _readable_by_program(obj: Any, name: str) -> bool:
    """May the program read attribute ``name`` of the judge's ``obj``? Public names, but not a mock's own
    configuration methods; of a mock also what the test set on it (``m.__path__ = [...]``, ``m._name = ...``)
    and the child mocks of other private names; never a mock's internals (``_mock_*``, ``_spec*``, its class's)."""
    if not name.startswith("_"):
        return not (name in _MOCK_MUTATORS and _is_mock(obj))
    if name in _READABLE_DUNDERS:
        return True
    if not _is_mock(obj) or name.startswith(("_mock_", "_spec")):
        return False
    if name.startswith("__"):
        return name in _instance_dict(obj)
    return name in _instance_dict(obj) or not hasattr(type(obj), name)


def _is_mock(obj: Any) -> bool:
    mock = sys.modules.get("unittest.mock")
    return mock is not None and isinstance(obj, mock.NonCallableMock)


def _instance_dict(obj: Any) -> dict:
    try:
        return object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return {}


def _typed(value: Any, kind: type | tuple[type, ...], op: str) -> Any:
    if not isinstance(value, kind) or isinstance(value, StandIn):
        raise TypeError(f"{op} of an object of the other process returned {type(value).__name__}, not data")
    return value


def class_policy(strict: bool) -> Callable[[Any], type | None]:
    """How a side turns a claimed ``(module, qualname)`` into a class for ``isinstance``, or None.

    Strict (the judge): only a builtin type that carries the program's own code (a function, a generator, an
    iterator: a real one runs the program's code as much as one that only claims to be one). A library's class
    is never granted on the program's word: its objects are rebuilt in the judge where the library is mirrored
    (:mod:`.mirror`), and are no instances of it otherwise. The program's side grants the judge's claims of any
    class it has loaded.
    """

    def resolve(claim: Any) -> type | None:
        if not (isinstance(claim, list) and len(claim) == 2 and all(type(p) is str for p in claim)):
            return None
        module, qualname = claim
        if module == "builtins" and qualname in _BUILTIN_NONDATA:
            return _BUILTIN_NONDATA[qualname]
        mod = sys.modules.get(module)
        if strict or mod is None or "<" in qualname:
            return None
        obj: Any = mod
        for part in qualname.split("."):
            obj = getattr(obj, part, None)
        return obj if isinstance(obj, type) else None

    return resolve


_BUILTIN_NONDATA = {t.__qualname__: t for t in (
    types.GeneratorType, types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.CoroutineType,
    types.AsyncGeneratorType, map, filter, zip, enumerate, reversed, type(iter([])), type(iter(())), type(iter({})),
    type(iter(range(0))), type(iter("")), type({}.items()), type({}.keys()), type({}.values()))}


def exception_policy(strict: bool, allowed_roots: Iterable[str] = ()) -> Callable[[str, str], type | None]:
    """How a side finds the class of the other side's exception, or None (then it raises :class:`RemoteError`).

    Strict (the judge): an ``Exception`` subclass in builtins or in a loaded module of the task's own
    imports (``allowed_roots``); never one of ``unittest``. The name is looked up in what the loaded module
    holds, attribute by attribute, statically: a module's lazy ``__getattr__`` never imports what the program
    named.
    """
    roots = frozenset(allowed_roots) - {"unittest", "convcodeworld_gym"}

    def resolve(module: str, qualname: str) -> type | None:
        if strict and module != "builtins" and module.split(".")[0] not in roots:
            return None
        mod = builtins if module == "builtins" else sys.modules.get(module)
        if mod is None or "<" in qualname:
            return None
        obj: Any = mod
        for part in qualname.split("."):  # what the module holds: no lazy import, no descriptor runs, no dunder
            obj = None if part.startswith("__") else inspect.getattr_static(obj, part, None)
        if not isinstance(obj, type) or not issubclass(obj, BaseException):
            return None
        if strict and (not issubclass(obj, Exception) or obj.__module__.split(".")[0] == "unittest"):
            return None
        return obj

    return resolve


class Peer:
    """One side of the split judge's channel.

    Args:
        channel: the message channel to the other process.
        strict: this side is the judge (see the module docstring for what that refuses).
        claim: :func:`class_policy` of this side.
        exceptions: :func:`exception_policy` of this side.
        sync_out: what travels with every message this side sends (e.g. the random states), as data.
        sync_in: applies what came with a message from the other side.
        on_gone: text appended when the other process is found gone (how it ended).
    """

    def __init__(self, channel: Channel, *, strict: bool, claim: Callable[[Any], type | None],
                 exceptions: Callable[[str, str], type | None], sync_out: Callable[[], Any] | None = None,
                 sync_in: Callable[[Any], None] | None = None, on_gone: Callable[[], str] | None = None,
                 limits: CodecLimits | None = None) -> None:
        self.channel, self.strict = channel, strict
        self._claim, self._exceptions = claim, exceptions
        self._sync_out, self._sync_in, self._on_gone = sync_out, sync_in, on_gone
        self.limits = limits or CodecLimits()
        self._exports: dict[int, Any] = {}
        self._export_ids: dict[int, int] = {}
        self._standins: dict[int, Any] = {}  # handle -> StandIn, or the function replica of one
        self._replicas: dict[int, int] = {}  # id(function replica) -> the other side's handle
        self._describing: set[int] = set()  # handles of functions whose description is being encoded
        self._lock = threading.RLock()
        self._gone: str | None = None
        self._pid = _getpid()
        self._depth = 0
        self.round_trips = 0  # this side's own requests (not those nested in serving the other side's)
        self.round_trip_s = 0.0
        self._refusals: list[str] = []
        self._mirrors = Mirrors() if strict else None  # the judge's rebuilt library objects (see .mirror)
        self._tagged: dict[int, Any] = {}  # the program's objects the judge mirrored, by tag (for the way back)
        self._listed: dict[int, Any] | None = None  # those listed in the value being encoded (each listed once)

    # ------------------------------------------------------------------ refusals

    def refuse(self, why: str) -> RefusedOperation:
        """Record that the judge refused an operation on a program object (``why``), and the exception to raise."""
        if len(self._refusals) < 100:
            self._refusals.append(why)
        exc = RefusedOperation(why)
        # The test runner shows the test's own frames, then this text: none of the judge's (nor where it is installed).
        exc.ccw_remote_traceback = f"{RefusedOperation.__name__}: {why}\n"  # type: ignore[attr-defined]
        return exc

    def take_refusals(self) -> list[str]:
        """The refusals recorded since the last call (the test runner fails a test that met any)."""
        taken, self._refusals = self._refusals, []
        return taken

    # ------------------------------------------------------------------ exporting and importing

    def export(self, obj: Any) -> int:
        """The handle of ``obj`` (exported once; kept alive for the run)."""
        key = id(obj)
        handle = self._export_ids.get(key)
        if handle is None:
            if len(self._exports) >= MAX_EXPORTS:
                raise CodecError(f"more than {MAX_EXPORTS} objects crossed to the other process")
            handle = len(self._exports) + 1
            self._exports[handle] = obj
            self._export_ids[key] = handle
        return handle

    def _export_tree(self, obj: Any) -> Any:
        if isinstance(obj, StandIn) and object.__getattribute__(obj, "_ccw_peer") is self:
            return ["r", "yours", object.__getattribute__(obj, "_ccw_handle")]
        if self._mirrors is not None and (tag := self._mirrors.tag_of(obj)) is not None:
            return ["r", "tagged", tag]  # a mirror goes back as the program's original
        if type(obj) is types.FunctionType and id(obj) in self._replicas:
            return ["r", "yours", self._replicas[id(obj)]]
        if isinstance(obj, Unsendable):
            return ["x", obj.reason]
        if self.strict and self._refused_export(obj):
            return ["x", f"the judge does not hand its {type(obj).__name__} objects to the program"]
        if self.strict and _builtin_class(obj):
            return ["r", "builtin", obj.__name__]
        if self.strict and replicable(obj):
            handle = self.export(obj)
            if handle not in self._describing:
                self._describing.add(handle)
                try:
                    return ["r", "fn", handle, self._describe(obj)]
                finally:
                    self._describing.discard(handle)
        cls = type(obj)
        claim = _claim_of(cls)
        if not self.strict and mirrored(cls) and \
                (data := snapshot(obj, self._tagged, self._reference, listed=self._listed)) is not None:
            return ["r", "mirror", self.export(obj), claim, capabilities(obj), data]
        return ["r", "mine", self.export(obj), claim, capabilities(obj)]

    def _reference(self, obj: Any) -> list:
        """``[handle, claim, capabilities]``: the reference by which ``obj`` crosses inside a mirror."""
        return [self.export(obj), _claim_of(type(obj)), capabilities(obj)]

    @staticmethod
    def _refused_export(obj: Any) -> bool:
        return (isinstance(obj, (types.ModuleType, types.FrameType, types.TracebackType, types.CodeType))
                or id(obj) in _DENIED_BUILTINS)

    def _describe(self, fn: types.FunctionType) -> dict[str, Any]:
        """What the program's replica of the judge's function ``fn`` needs: its signature and names, its
        defaults and annotations as values (data, stand-ins, further replicas)."""
        code = fn.__code__
        names, n_pos, n_kw = code.co_varnames, code.co_argcount, code.co_kwonlyargcount
        extra = iter(names[n_pos + n_kw:])
        doc = fn.__doc__ if isinstance(fn.__doc__, str) else None
        return {"name": str(fn.__name__), "qualname": str(fn.__qualname__), "module": str(fn.__module__ or ""),
                "doc": None if doc is None else _clip(doc),
                "positional": list(names[:n_pos]), "posonly": code.co_posonlyargcount,
                "varargs": next(extra) if code.co_flags & _CO_VARARGS else None,
                "kwonly": list(names[n_pos:n_pos + n_kw]),
                "varkw": next(extra, None) if code.co_flags & _CO_VARKEYWORDS else None,
                "defaults": self.encode(fn.__defaults__), "kwdefaults": self.encode(fn.__kwdefaults__),
                "annotations": self.encode(dict(fn.__annotations__))}

    def _resolve(self, args: list) -> Any:
        if args and args[0] in ("builtin", "fn", "tagged"):
            if self.strict:
                raise CodecError("malformed reference")
            return self._resolve_given(args)
        if not args or args[0] not in ("mine", "yours", "mirror") or len(args) < 2 or type(args[1]) is not int:
            raise CodecError("malformed reference")
        if args[0] == "mirror":
            if not self.strict or len(args) != 5:
                raise CodecError("malformed reference")
            return self._rebuild_mirror(args)
        if args[0] == "yours":  # one of this side's own objects, coming back
            if args[1] not in self._exports:
                raise CodecError("a reference to an object this side never exported")
            return self._exports[args[1]]
        handle = args[1]
        found = self._standins.get(handle)
        if found is None:
            if len(self._standins) >= MAX_EXPORTS:
                raise CodecError(f"more than {MAX_EXPORTS} objects crossed from the other process")
            claim = args[2] if len(args) > 2 else None
            claimed = self._claim(claim)
            base = ProgramStandIn if self.strict else StandIn
            found = standin_class(claimed, args[3] if len(args) > 3 else [], base)(self, handle, claimed, _label(claim))
            self._standins[handle] = found
        return found

    def _rebuild_mirror(self, args: list) -> Any:
        """The judge's side of a mirrored object (:mod:`.mirror`): rebuilt from its data tree, or, where the judge
        refuses the tree, a stand-in of the object whose class the judge does not grant (its label says why)."""
        _, handle, claim, caps, data = args
        try:
            return self._mirrors.load(data, self._resolve)  # type: ignore[union-attr]
        except MirrorRefused as exc:
            found = self._standins.get(handle)
            if found is None:
                label = f"{_label(claim)} (not rebuilt in the judge: {exc})"
                found = standin_class(None, caps, ProgramStandIn)(self, handle, None, _clip(label, 400))
                self._standins[handle] = found
            return found

    def _resolve_given(self, args: list) -> Any:
        """The program's side of what the judge hands over as itself: a builtin class, a real function that
        forwards each call to the judge's (:func:`make_replica`), so ``inspect`` and ``types.FunctionType``
        checks see a function with the judge's signature, or one of its own objects the judge mirrored."""
        if args[0] == "tagged":
            if len(args) != 2 or type(args[1]) is not int or args[1] not in self._tagged:
                raise CodecError("malformed reference")
            return self._tagged[args[1]]
        if args[0] == "builtin":
            found = getattr(builtins, _str_arg(args, 1), None)
            if not _builtin_class(found):
                raise CodecError("malformed reference")
            return found
        if len(args) != 3 or type(args[1]) is not int or not isinstance(args[2], dict):
            raise CodecError("malformed reference")
        handle = args[1]
        found = self._standins.get(handle)
        if found is None:
            target = standin_class(None, ["__call__"])(self, handle, None)
            found = make_replica(target, args[2], self.decode)
            self._standins[handle] = found
            if found is not target:
                self._replicas[id(found)] = handle
        return found

    def codec(self, arguments: list | None = None, known: dict[int, Any] | None = None) -> Codec:
        """A codec of this side's references; ``arguments`` (the ``[args, kwargs]`` of this side's call being
        answered) resolve the answer's ``["r", "arg", key]`` references; ``known`` presets trees by object."""
        resolve = self._resolve if arguments is None else (
            lambda ref: _argument(arguments, ref) if ref and ref[0] == "arg" else self._resolve(ref))
        return Codec(self._export_tree, resolve, self.limits, known, masks=not self.strict)

    def encode(self, value: Any) -> Any:
        """The tree of ``value``; the library objects its mirrors reach are listed once in it (a figure and its axes
        returned together share one listing: the later mirrors refer to what the first listed)."""
        outer = self._listed is None
        if outer:
            self._listed = {}
        try:
            return self.codec().encode(value)
        finally:
            if outer:
                self._listed = None

    def decode(self, tree: Any) -> Any:
        return self.codec().decode(tree)

    # ------------------------------------------------------------------ the message loop

    def _send(self, message: list) -> None:
        try:
            self.channel.send(dumps(message, self.limits))
        except OSError as exc:
            raise self._gone_error(exc) from None

    def _gone_error(self, exc: BaseException) -> ProgramGone:
        if self._gone is None:
            extra = self._on_gone() if self._on_gone is not None else ""
            self._gone = f"{exc}{extra}"
            return ProgramGone(self._gone)
        return ProgramGone(f"the program process ended during an earlier call: {self._gone}")

    def _recv(self) -> list:
        if self._gone is not None:
            raise self._gone_error(ProgramGone(self._gone))
        try:
            data = self.channel.recv()
        except (ProgramGone, OSError) as exc:
            raise self._gone_error(exc) from None
        try:
            message = loads(data, self.limits)
        except CodecError as exc:
            raise self._gone_error(ProgramGone(f"the other process sent a malformed message ({exc})")) from None
        if not isinstance(message, list) or not message or message[0] not in ("q", "a"):
            raise self._gone_error(ProgramGone("the other process sent a malformed message"))
        return message

    def _outgoing_sync(self) -> Any:
        """``[[key, tree], ...]``: each part of ``sync_out()`` encoded on its own (one that cannot cross is left out)."""
        if self._sync_out is None:
            return None
        parts = []
        for key, value in self._sync_out().items():
            try:
                parts.append([key, self.encode(value)])
            except CodecError:
                continue
        return parts or None

    def _incoming_sync(self, parts: Any) -> None:
        """Apply what came with a message: each part decoded on its own, so one this side cannot rebuild (a numpy
        state where numpy is not loaded) does not keep the others from being applied."""
        if not isinstance(parts, list) or self._sync_in is None:
            return
        state = {}
        for part in parts:
            if isinstance(part, list) and len(part) == 2 and type(part[0]) is str:
                try:
                    state[part[0]] = self.decode(part[1])
                except CodecError:
                    continue
        try:
            self._sync_in(state)
        except Exception:  # noqa: BLE001 - a state the other side garbled is not applied
            pass

    def request(self, op: str, handle: int, payload: Any) -> Any:
        """Ask the other side to run ``op`` on its object ``handle``; serve its requests meanwhile; the answer."""
        if _getpid() != self._pid:
            raise RemoteError("an object of the other process cannot be used from a process this one forked "
                              "(the judge's mocks and objects answer only the process they were handed to)")
        with self._lock:
            started = _monotonic()
            self._depth += 1
            try:
                return self._request(op, handle, payload)
            finally:
                self._depth -= 1
                if not self._depth:
                    self.round_trips += 1
                    self.round_trip_s += _monotonic() - started

    def stats(self) -> dict[str, float]:
        """This side's outermost requests so far: how many, and the seconds until their answers."""
        return {"round_trips": self.round_trips, "round_trip_s": round(self.round_trip_s, 6)}

    def _request(self, op: str, handle: int, payload: Any) -> Any:
        """Send one request and serve the other side's until its answer comes (see :meth:`request`)."""
        try:
            body = self.encode(payload)
        except CodecError as exc:
            raise RemoteError(f"an argument cannot be sent to the other process: {exc}") from None
        self._send(["q", op, handle, body, self._outgoing_sync()])
        while True:
            message = self._recv()
            if message[0] == "q":
                self._serve(message)
                continue
            if len(message) != 4:
                raise self._gone_error(ProgramGone("the other process sent a malformed answer"))
            _, kind, body, sync = message
            self._incoming_sync(sync)
            if kind == "ok":
                try:
                    answer = self.codec(payload if op == "call" else None).decode(body)
                except CodecError as exc:
                    raise RemoteError(f"the answer of the other process cannot be read: {exc}") from None
                if op != "call":
                    return answer
                if not (isinstance(answer, tuple) and len(answer) == 2 and isinstance(answer[1], list)):
                    raise RemoteError("the other process sent a malformed answer to a call")
                _write_back(payload, answer[1])
                return answer[0]
            raise self._rebuild(body)

    def serve_forever(self) -> None:
        """Answer the other side's requests until it closes the channel."""
        while True:
            try:
                message = self._recv()
            except ProgramGone:
                return
            if message[0] == "q":
                self._serve(message)

    def _serve(self, message: list) -> None:
        try:
            if len(message) != 5 or type(message[1]) is not str or type(message[2]) is not int:
                raise RemoteError("a malformed request")
            _, op, handle, body, sync = message
            self._incoming_sync(sync)
            if handle not in self._exports:
                raise RemoteError(f"no object {handle} here")
            payload = self.decode(body)
            result = self._dispatch(op, self._exports[handle], payload)
            if op == "call":  # with the arguments the call changed in place (a list the program sorted)
                changed = self.encode(self._changed_arguments(payload, body))
                tree = ["t", [self.codec(known=_argument_refs(payload)).encode(result), changed]]
            else:
                tree = self.encode(result)
            reply = ["a", "ok", tree]
        except CodecError as exc:
            reply = ["a", "exc", self._exception_tree(RemoteError(f"the value cannot cross between the processes: {exc}"))]
        except BaseException as exc:  # noqa: BLE001 - the other side's failure, SystemExit included
            reply = ["a", "exc", self._exception_tree(exc)]
        self._send([*reply, self._outgoing_sync()])

    def _changed_arguments(self, payload: list, body: Any) -> list:
        """``[[position or keyword, new value]]`` for the mutable arguments of a call that it changed."""
        changed: list = []
        try:
            args, kwargs = body[1][0][1], body[1][1][1]  # the trees the arguments came as: ["l", [...]], ["d", [...]]
            before = {**dict(enumerate(args)), **{kwargs[i]: kwargs[i + 1] for i in range(0, len(kwargs), 2)}}
        except (TypeError, IndexError, KeyError):
            return changed
        now = {**dict(enumerate(payload[0])), **payload[1]}
        for key, value in now.items():
            if _mutable(value):
                tree = self.encode(value)
                if tree != before.get(key):
                    changed.append([key, value])
        return changed

    def _dispatch(self, op: str, obj: Any, payload: Any) -> Any:
        if op == "call":
            if not (isinstance(payload, list) and len(payload) == 2 and isinstance(payload[0], list)
                    and isinstance(payload[1], dict) and all(type(k) is str for k in payload[1])):
                raise RemoteError("a malformed call")
            return obj(*payload[0], **payload[1])
        if op == "getattr":
            if type(payload) is not str:
                raise RemoteError("a malformed attribute name")
            if self.strict and not _readable_by_program(obj, payload):
                raise AttributeError(f"{payload!r}: the program may not read this attribute of a judge object")
            return getattr(obj, payload)
        if op == "setattr":
            if not (isinstance(payload, list) and len(payload) == 2 and type(payload[0]) is str):
                raise RemoteError("a malformed attribute assignment")
            if self.strict:
                raise AttributeError(f"cannot set {payload[0]!r}: the program may not change a judge object")
            setattr(obj, payload[0], payload[1])
            return None
        if op == "op":
            if not (isinstance(payload, list) and len(payload) == 2 and payload[0] in _OPS and isinstance(payload[1], list)):
                raise RemoteError("a malformed operation")
            name, args = payload
            if self.strict and name in _STRICT_REFUSED_OPS:
                raise TypeError(f"the program may not change a judge object ({name})")
            if name == "__instancecheck__":
                return isinstance(args[0], obj) if isinstance(obj, type) and args else False
            if name == "__bool__":
                return bool(obj)
            if name == "__len__":
                return len(obj)
            if name in _BUILTIN_OPS:
                return _BUILTIN_OPS[name](obj, *args[:1])
            if name in ("__exit__", "__aexit__"):
                args = [None, None, None]
            method = getattr(type(obj), name, None)
            if method is None:
                raise TypeError(f"{type(obj).__name__!r} object does not support {name}")
            result = method(obj, *args)
            if result is NotImplemented:
                raise TypeError(f"unsupported operand for {name}: {type(obj).__name__!r}")
            return result
        raise RemoteError(f"unknown operation {op[:40]!r}")

    # ------------------------------------------------------------------ exceptions

    def _exception_tree(self, exc: BaseException) -> list:
        try:
            text = _clip("".join(_format_exception(exc)))
        except Exception:  # noqa: BLE001 - a hostile exception whose str() fails
            text = f"{type(exc).__qualname__} (its text could not be formatted)"
        try:
            args = self.encode(tuple(_clip(a) if isinstance(a, str) else a for a in exc.args))
        except Exception:  # noqa: BLE001
            args = ["t", []]
        cls = type(exc)
        bases = [[str(getattr(c, "__module__", "")), str(getattr(c, "__qualname__", ""))] for c in cls.__mro__[1:8]
                 if c not in (object, BaseException, Exception)]
        return [str(getattr(cls, "__module__", "")), str(getattr(cls, "__qualname__", "")), args, text, bases,
                self._exception_attributes(exc)]

    def _exception_attributes(self, exc: BaseException) -> Any:
        """The public attributes of ``exc``'s own ``__dict__`` (an ``HTTPError``'s ``code`` and ``msg``), encoded."""
        try:
            own = {k: v for k, v in object.__getattribute__(exc, "__dict__").items()
                   if type(k) is str and k.isidentifier() and not k.startswith("_")}
            return self.encode(dict(list(own.items())[:100]))
        except Exception:  # noqa: BLE001 - no __dict__, or a value that cannot cross: sent without them
            return None

    def _rebuild(self, body: Any) -> BaseException:
        if not (isinstance(body, list) and len(body) == 6 and all(type(p) is str for p in (body[0], body[1], body[3]))):
            return RemoteError("the other process failed, and sent a malformed description")
        module, qualname, args_tree, text, bases, attributes = body
        try:
            args = self.decode(args_tree)
        except CodecError:
            args = ()
        args = args if isinstance(args, tuple) else ()
        # Its own class if this side may rebuild it, else its nearest base that it may (binascii.Error: ValueError).
        cls = self._exceptions(module, qualname)
        for base in bases if cls is None and isinstance(bases, list) else ():
            if isinstance(base, list) and len(base) == 2 and all(type(p) is str for p in base):
                cls = self._exceptions(*base)
                if cls is not None:
                    break
        exc: BaseException
        if cls is not None:
            try:
                exc = cls(*args)
            except Exception:  # noqa: BLE001 - a constructor with other arguments (JSONDecodeError): same class, same args
                try:
                    exc = cls.__new__(cls, *args)
                    exc.args = args
                except Exception:  # noqa: BLE001
                    exc = RemoteError(f"{module}.{qualname}: {', '.join(map(repr, args))}")
        elif module == "builtins" and qualname in ("SystemExit", "KeyboardInterrupt", "GeneratorExit"):
            exc = RemoteError(f"the program raised {qualname}{args!r}")
        else:
            exc = RemoteError(f"{module}.{qualname}: {', '.join(map(str, args))}")
        self._set_attributes(exc, attributes)
        # The judge's test runner splices this after the test's own frames, so the traceback reads
        # as if the program had run in the test's process (as in the reference).
        exc.ccw_remote_traceback = text  # type: ignore[attr-defined]
        exc.__suppress_context__ = True
        return exc


    def _set_attributes(self, exc: BaseException, tree: Any) -> None:
        """Give a rebuilt exception the other side's public instance attributes, in its ``__dict__`` (so none
        replaces a property of its class). The judge takes only values that are data or stand-ins, never
        a callable, and none of the program's exceptions' names that its class defines (methods)."""
        if tree is None or isinstance(exc, RemoteError):
            return
        try:
            values = self.decode(tree)
            own = object.__getattribute__(exc, "__dict__")
        except (CodecError, AttributeError):
            return
        if not isinstance(values, dict):
            return
        for key, value in values.items():
            if not (type(key) is str and key.isidentifier() and not key.startswith("_")) or key in own:
                continue
            if self.strict and (callable(value) or hasattr(type(exc), key)):
                continue
            own[key] = value


def _format_exception(exc: BaseException) -> list[str]:
    """The traceback text of ``exc``, without the frames of this module and the codec (as if called directly)."""
    te = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    seen: set[int] = set()
    todo = [te]
    while todo:
        item = todo.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        item.stack = traceback.StackSummary.from_list(
            [f for f in item.stack if os.path.splitext(f.filename)[0] not in _OWN_FILES])
        todo.extend(x for x in (item.__cause__, item.__context__) if x is not None)
    return list(te.format())
