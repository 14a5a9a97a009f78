"""Runs in both processes of a split run: data-only encoding of the values that cross between the judge and the program.

Nothing here unpickles, imports, or looks up a name the sender chose. A value is encoded as a tree
of JSON values (tagged lists for every non-JSON type) and rebuilt on the other side through the
public constructor of a fixed set of data types:

* plain Python data: ``None``, bool, int (any size), float (nan and inf too), complex, str, bytes,
  bytearray, list, tuple, dict, set, frozenset, slice, range;
* ``collections``: OrderedDict, defaultdict (a builtin factory), Counter, deque, and namedtuples
  (rebuilt by :func:`collections.namedtuple` from their field names); ``array.array``;
* datetime, date, time, timedelta, timezone, ``zoneinfo.ZoneInfo``, Decimal, Fraction, UUID, pure
  and concrete paths;
* numpy arrays (numeric, bool, bytes/str, datetime64, timedelta64, structured without objects, and
  object arrays whose items are data), masked arrays and numpy scalars;
* pandas Series, DataFrame, Index (Range, Multi, Datetime, Timedelta, Categorical), Categorical,
  Timestamp, Timedelta, Period, date offsets (by their frequency's name), ``NaT``, ``NA`` and the extension
  arrays pandas names by dtype.

An instance of a *subclass* of a plain type (a ``list`` with its own ``__eq__``) is sent as the plain
type: the receiver never gets behaviour the sender defined. Values that are not data are handed to
an ``export`` hook (the stand-ins of :mod:`.standin`); without one, or past a limit, they become an
:class:`Unsendable`, which equals nothing and says why in its ``repr``.
"""

from __future__ import annotations

import array
import base64
import collections
import datetime
import decimal
import fractions
import json
import math
import os
import pathlib
import re
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Codec", "CodecLimits", "Unsendable", "CodecError", "dumps", "loads"]


class CodecError(ValueError):
    """A message could not be encoded or decoded: malformed, of a refused type, or over a limit."""


@dataclass(frozen=True)
class CodecLimits:
    """Bounds on one message. ``max_depth``: nesting of containers; ``max_items``: encoded nodes (an array
    of numbers is one node); ``max_bytes``: the encoded message."""

    max_depth: int = 100
    max_items: int = 2_000_000
    max_bytes: int = 256 << 20


class Unsendable:
    """Stands for a value that could not cross between the processes: it equals nothing (itself included)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __eq__(self, other: object) -> bool:
        return False

    def __ne__(self, other: object) -> bool:
        return True

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"<value that could not cross to the judge: {self.reason}>"

    __str__ = __repr__


# Bound once: a test may patch json.dumps, base64.b64encode, ... in the judge's own modules.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_DECODER = json.JSONDecoder()
_b64encode, _b64decode = base64.b64encode, base64.b64decode


def dumps(tree: Any, limits: CodecLimits | None = None) -> bytes:
    """An encoded tree as bytes (JSON; nan and inf as JSON's common extensions)."""
    data = _ENCODER.encode(tree).encode("utf-8", "surrogatepass")
    cap = (limits or CodecLimits()).max_bytes
    if len(data) > cap:
        raise CodecError(f"the value is {len(data)} bytes encoded, over the limit of {cap} bytes")
    return data


def loads(data: bytes, limits: CodecLimits | None = None) -> Any:
    """The tree of a message; :class:`CodecError` for one that is not well-formed JSON or too deep."""
    cap = (limits or CodecLimits()).max_bytes
    if len(data) > cap:
        raise CodecError(f"a message of {len(data)} bytes, over the limit of {cap} bytes")
    try:
        return _DECODER.decode(data.decode("utf-8", "surrogatepass"))
    except RecursionError:
        raise CodecError("a message nested too deeply to read") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise CodecError(f"a malformed message ({exc})") from None


_BIG_INT_DIGITS = 4000
_DTYPE_STR = re.compile(r"[<>|=]?(?:[biufc]\d{1,2}|b1|[SUV]\d{1,9}|[mM]8(?:\[\d*(?:Y|M|W|D|h|m|s|ms|us|ns|ps|fs|as)\])?)\Z")
_EA_DTYPE = re.compile(r"(?:U?Int(?:8|16|32|64)|Float(?:32|64)|boolean|string(?:\[(?:python|pyarrow)\])?|str|"
                       r"(?:u?int(?:8|16|32|64)|float(?:32|64)|bool|string|double|large_string)\[pyarrow\])\Z")
_TZ_NAME = re.compile(r"[A-Za-z0-9_+\-:/]{1,64}\Z")
_FREQ = re.compile(r"-?[0-9]{0,9}[A-Za-z]{1,8}(?:-[A-Za-z]{1,4})?\Z")
_UNITS = ("s", "ms", "us", "ns")
_DEFAULT_FACTORIES: dict[str, Callable[[], Any]] = {
    "list": list, "dict": dict, "set": set, "int": int, "float": float, "str": str, "tuple": tuple,
    "frozenset": frozenset, "bool": bool, "bytes": bytes, "Counter": collections.Counter,
    "OrderedDict": collections.OrderedDict, "deque": collections.deque,
}
_PATHS = {cls.__name__: cls for cls in (pathlib.Path, pathlib.PosixPath, pathlib.PurePath, pathlib.PurePosixPath,
                                        pathlib.PureWindowsPath)}
_PLAIN = (bool, int, float, str)
#: Types whose values are their own tree both ways (encoded without a call of ``_enc``).
_LEAVES = frozenset({str, bool, type(None)})
#: Types whose trees are their own value (decoded without a call of ``_dec``): every JSON scalar.
_TREE_LEAVES = frozenset({str, bool, type(None), int, float})


def _b64(data: bytes) -> str:
    return _b64encode(data).decode("ascii")


def _unb64(text: Any) -> bytes:
    if not isinstance(text, str):
        raise CodecError("malformed bytes")
    try:
        return _b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        raise CodecError("malformed bytes") from None


class Codec:
    """Encodes values to trees of JSON values and back, with stand-ins for what is not data.

    Args:
        export: called with a value that is not data; returns its tree (a stand-in reference), or
            None to make it :class:`Unsendable`.
        resolve: called with the body of a reference tree (``["r", ...]``); returns the object it stands for.
        limits: the bounds of one message.
        known: ``id(object) -> tree`` for objects to encode as that tree wherever they occur (a call's
            own arguments, returned: a reference the caller resolves to its original object).
        masks: whether a numpy masked array keeps the mask it was sent with. The judge decodes the program's
            values with ``masks=False``: a masked element would hide a value from the test's comparison
            (``assert_array_equal`` skips it), and what a test compares is not the program's to withhold, so each
            element crosses as the program's data beneath the mask, none masked (docs/differences.md).
    """

    def __init__(self, export: Callable[[Any], Any] | None = None, resolve: Callable[[list], Any] | None = None,
                 limits: CodecLimits | None = None, known: dict[int, Any] | None = None, masks: bool = True) -> None:
        self.export, self.resolve, self.masks = export, resolve, masks
        self.limits = limits or CodecLimits()
        self.known = known or {}
        self._count = 0

    # ------------------------------------------------------------------ encoding

    def encode(self, value: Any) -> Any:
        """The tree of ``value``. Raises :class:`CodecError` past a limit."""
        self._count = 0
        return self._enc(value, 0)

    def _tick(self, depth: int) -> None:
        self._count += 1
        if self._count > self.limits.max_items:
            raise CodecError(f"the value holds more than {self.limits.max_items} items")
        if depth > self.limits.max_depth:
            raise CodecError(f"the value is nested more than {self.limits.max_depth} levels deep")

    def _seq(self, items: Any, depth: int) -> list:
        if self.known:
            return [self._enc(item, depth + 1) for item in items]
        out = [item if type(item) in _LEAVES else self._enc(item, depth + 1) for item in items]
        self._count += len(out)  # the leaves' share (an item encoded by _enc counts twice: a bound, not a tally)
        return out

    def _pairs(self, mapping: Any, depth: int) -> list:
        out: list = []
        plain = not self.known
        for key, val in list(dict.items(mapping)):
            out.append(key if plain and type(key) is str else self._enc(key, depth + 1))
            out.append(val if plain and type(val) in _LEAVES else self._enc(val, depth + 1))
        self._count += len(out)
        return out

    def _enc(self, v: Any, depth: int) -> Any:  # noqa: C901 - one dispatch over the data types
        self._count += 1  # _tick, inline: this runs for every node
        if self._count > self.limits.max_items or depth > self.limits.max_depth:
            self._tick(depth)
        if self.known and id(v) in self.known:
            return self.known[id(v)]
        t = type(v)
        if v is None or t is bool or t is str:
            return v
        if t is int:
            return v if abs(v).bit_length() < _BIG_INT_DIGITS * 3 else ["I", format(v, "x")]
        if t is float:
            if math.isfinite(v):
                return v
            np = sys.modules.get("numpy")  # the well-known nan objects keep their identity ([np.nan] == [np.nan])
            return ["F", "np.nan" if np is not None and v is np.nan else "math.nan" if v is math.nan else repr(v)]
        if t is list:
            return ["l", self._seq(v, depth)]
        if t is tuple:
            return ["t", self._seq(v, depth)]
        if t is dict:
            return ["d", self._pairs(v, depth)]
        if t is set or t is frozenset:
            return ["s" if t is set else "fs", self._seq(v, depth)]
        if t is bytes or t is bytearray:
            return ["b" if t is bytes else "ba", _b64(bytes(v))]
        if t is complex:
            return ["c", self._enc(v.real, depth), self._enc(v.imag, depth)]
        if t is slice:
            return ["sl", self._seq((v.start, v.stop, v.step), depth)]
        if t is range:
            return ["rg", v.start, v.stop, v.step]
        tree = self._enc_library(v, t, depth)
        if tree is not None:
            return tree
        # Subclasses of plain types travel as the plain type: never the sender's behaviour (by the real
        # type: a program's object may claim any __class__). A library's container subclass (matplotlib's
        # BarContainer, a tuple; the standard library's dicts, http.cookies' SimpleCookie and Morsel) crosses
        # as a stand-in, so isinstance() sees its class and its attributes (morsel.value) are there.
        if issubclass(t, (list, tuple, dict, set, frozenset)) and _third_party(t) or issubclass(t, dict) and _stdlib(t):
            return self._export(v)
        if issubclass(t, tuple) and isinstance(getattr(t, "_fields", None), tuple):
            return ["nt", str(t.__name__), [str(f) for f in t._fields], self._seq(tuple.__iter__(v), depth)]
        if issubclass(t, str):  # its characters, not what its own __str__ says (a str enum's is 'Color.RED')
            return str.__getitem__(v, slice(None))
        for base in (int, float, bytes, complex):
            if issubclass(t, base):
                return self._enc(base.__new__(base, v) if base is not complex else complex(v.real, v.imag), depth)
        for base in (list, tuple, set, frozenset):
            if issubclass(t, base):
                return self._enc(base(base.__iter__(v)), depth)
        if issubclass(t, dict) and not issubclass(t, (collections.OrderedDict, collections.defaultdict, collections.Counter)):
            return ["d", self._pairs(v, depth)]
        return self._export(v)

    def _export(self, v: Any) -> Any:
        if self.export is not None:
            tree = self.export(v)
            if tree is not None:
                return tree
        return ["x", f"a {type(v).__module__}.{type(v).__qualname__} object is not data"]

    def _enc_library(self, v: Any, t: type, depth: int) -> Any:  # noqa: C901, PLR0911
        if t is datetime.datetime:
            tree = ["dt", v.year, v.month, v.day, v.hour, v.minute, v.second, v.microsecond, v.fold,
                    self._enc_tz(v.tzinfo, depth)]
            if isinstance(tree[-1], list) and tree[-1][0] == "pytz":  # its zone's offset at that time goes too
                tree.append(self._enc(v.utcoffset(), depth))
            return tree
        if t is datetime.date:
            return ["date", v.year, v.month, v.day]
        if t is datetime.time:
            return ["time", v.hour, v.minute, v.second, v.microsecond, v.fold, self._enc_tz(v.tzinfo, depth)]
        if t is datetime.timedelta:
            return ["td", v.days, v.seconds, v.microseconds]
        if isinstance(v, datetime.tzinfo) and t.__module__ in ("datetime", "zoneinfo") or t.__module__.startswith("pytz"):
            return self._enc_tz(v, depth)
        if t is decimal.Decimal:
            return ["dec", str(v)]
        if t is fractions.Fraction:
            return ["frac", self._enc(v.numerator, depth), self._enc(v.denominator, depth)]
        if t is uuid.UUID:
            return ["uuid", v.hex]
        if t in _PATHS.values():
            return ["path", t.__name__, str(v)]
        if t is collections.OrderedDict:
            return ["od", self._pairs(v, depth)]
        if t is collections.Counter:
            return ["ctr", self._pairs(v, depth)]
        if t is collections.defaultdict:
            factory = v.default_factory
            name = getattr(factory, "__name__", None)
            if factory is not None and _DEFAULT_FACTORIES.get(name) is not factory:  # type: ignore[arg-type]
                return self._export(v)
            return ["dd", name, self._pairs(v, depth)]
        if t is collections.deque:
            return ["dq", self._seq(v, depth), v.maxlen]
        if t is array.array:
            return ["arr", v.typecode, _b64(v.tobytes())]
        np, pd = sys.modules.get("numpy"), sys.modules.get("pandas")
        if np is not None and isinstance(v, (np.ndarray, np.generic, np.dtype)):  # subclasses too, as the base type
            return self._enc_numpy(v, t, depth)
        if pd is not None and (t.__module__.split(".")[0] == "pandas"
                               or isinstance(v, (pd.DataFrame, pd.Series, pd.Index, pd.Categorical))):
            return self._enc_pandas(v, t, depth)
        return None

    def _enc_tz(self, tz: Any, depth: int) -> Any:
        if tz is None:
            return None
        if type(tz) is datetime.timezone:
            offset = tz.utcoffset(None)
            name = tz.tzname(None)
            default = datetime.timezone(offset).tzname(None)
            return ["tz", self._enc(offset, depth), None if name == default else name]
        key = getattr(tz, "key", None) or getattr(tz, "zone", None)
        if type(tz).__module__ == "zoneinfo" and isinstance(key, str):
            return ["zi", key]
        if type(tz).__module__.startswith("pytz") and isinstance(key, str):
            return ["pytz", key]
        return ["x", f"the time zone {tz!r} is not data"]

    def _enc_ndarray(self, a: Any, depth: int) -> Any:
        np = sys.modules["numpy"]
        if type(a) is not np.ndarray:
            if isinstance(a, np.ma.MaskedArray):
                return ["ma", self._enc_ndarray(np.ma.getdata(a).view(np.ndarray), depth + 1),
                        self._enc_ndarray(np.ma.getmaskarray(a), depth + 1)]
            a = np.asarray(a).view(np.ndarray)
        shape = [int(n) for n in a.shape]
        if a.dtype.hasobject:
            if a.dtype.names is not None:
                return ["x", "a structured numpy array with object fields is not data"]
            return ["ndo", shape, self._seq(list(a.ravel(order="C")), depth)]
        if a.dtype.names is not None:
            descr = a.dtype.descr
            if any(not isinstance(f[0], str) or not isinstance(f[1], str) or len(f) > 2 for f in descr):
                return ["x", f"the numpy dtype {a.dtype} is not data"]
            return ["nds", [[f[0], f[1]] for f in descr], shape, _b64(np.ascontiguousarray(a).tobytes())]
        if not _DTYPE_STR.match(a.dtype.str):
            return ["x", f"the numpy dtype {a.dtype} is not data"]
        self._count += a.size // 64  # big arrays count for their size too
        return ["nd", a.dtype.str, shape, _b64(np.ascontiguousarray(a).tobytes())]

    def _enc_numpy(self, v: Any, t: type, depth: int) -> Any:
        np = sys.modules["numpy"]
        if isinstance(v, np.ndarray):
            return self._enc_ndarray(v, depth)
        if isinstance(v, np.generic):
            if isinstance(v, np.object_) or v.dtype.hasobject or v.dtype.names is not None:
                return None
            if not _DTYPE_STR.match(v.dtype.str):
                return ["x", f"the numpy scalar type {v.dtype} is not data"]
            return ["npv", v.dtype.str, _b64(np.asarray(v).tobytes() if v.dtype.itemsize else b"")]  # b'' is |S0
        if t is np.dtype or isinstance(v, np.dtype):
            if _DTYPE_STR.match(v.str) or v.str == "|O":
                return ["npdt", v.str]
        return None

    def _enc_array(self, arr: Any, depth: int) -> Any:
        """A Series' or Index's values: a numpy array, or a pandas extension array by its dtype's name."""
        np, pd = sys.modules["numpy"], sys.modules["pandas"]
        if isinstance(arr, np.ndarray):
            return self._enc_ndarray(arr, depth)
        if isinstance(arr, pd.Categorical):
            return ["cat", self._enc_index(arr.categories, depth), self._enc_ndarray(np.asarray(arr.codes), depth),
                    bool(arr.ordered)]
        dtype = arr.dtype
        if isinstance(dtype, pd.DatetimeTZDtype):
            naive = np.asarray(arr.tz_convert("UTC").tz_localize(None))
            return ["dtz", self._enc_ndarray(naive, depth), self._enc_tz(dtype.tz, depth) if not isinstance(dtype.tz, str) else ["zi", dtype.tz]]
        name = str(dtype)
        if isinstance(arr, (pd.arrays.DatetimeArray, pd.arrays.TimedeltaArray)):
            return self._enc_ndarray(np.asarray(arr), depth)
        if _EA_DTYPE.match(name):
            return ["ea", name, self._seq(list(arr), depth)]
        return ["x", f"a pandas array of dtype {name} is not data"]

    def _enc_index(self, idx: Any, depth: int) -> Any:
        pd = sys.modules["pandas"]
        name = self._enc(idx.name, depth) if not isinstance(idx, pd.MultiIndex) else None
        if type(idx) is pd.RangeIndex:
            return ["ri", int(idx.start), int(idx.stop), int(idx.step), name]
        if type(idx) is pd.MultiIndex:
            return ["mi", [self._enc_index(level, depth + 1) for level in idx.levels],
                    [self._enc_ndarray(c.copy(), depth + 1) for c in idx.codes], self._seq(idx.names, depth)]
        if type(idx) is pd.DatetimeIndex:
            return ["dti", self._enc_array(idx.array, depth + 1), idx.freqstr, name]
        if type(idx) is pd.TimedeltaIndex:
            return ["tdi", self._enc_array(idx.array, depth + 1), idx.freqstr, name]
        if type(idx) is pd.CategoricalIndex:
            return ["ci", self._enc_array(idx.array, depth + 1), name]
        if type(idx) is pd.Index:
            return ["ix", self._enc_array(_values(idx), depth + 1), name]
        return ["x", f"a pandas {type(idx).__name__} is not data"]

    def _enc_pandas(self, v: Any, t: type, depth: int) -> Any:  # noqa: PLR0911
        pd = sys.modules["pandas"]
        if isinstance(v, pd.DataFrame):
            cols = [self._enc_array(_values(v.iloc[:, i]), depth + 1) for i in range(v.shape[1])]
            return ["df", cols, self._enc_index(v.columns, depth + 1), self._enc_index(v.index, depth + 1)]
        if isinstance(v, pd.Series):
            return ["ser", self._enc_array(_values(v), depth + 1), self._enc_index(v.index, depth + 1), self._enc(v.name, depth + 1)]
        if isinstance(v, pd.Index):
            return self._enc_index(v, depth)
        if isinstance(v, pd.Categorical):
            return self._enc_array(v, depth)
        if v is pd.NaT:
            return ["nat"]
        if v is pd.NA:
            return ["na"]
        if t is pd.Timestamp:
            return ["ts", int(v.value), v.unit, self._enc_tz(v.tzinfo, depth)]
        if t is pd.Timedelta:
            return ["ptd", int(v.value), v.unit]
        if t is pd.Period:
            return ["per", int(v.ordinal), v.freqstr]
        if isinstance(v, pd.offsets.BaseOffset) and _FREQ.match(v.freqstr or "") and _offset(v.freqstr) == v:
            return ["off", v.freqstr]
        return None

    # ------------------------------------------------------------------ decoding

    def decode(self, tree: Any) -> Any:
        """The value of ``tree``, built only from data types; :class:`CodecError` for a malformed one."""
        self._count = 0
        try:
            return self._dec(tree, 0)
        except CodecError:
            raise
        except RecursionError:
            raise CodecError("a value nested too deeply to rebuild") from None
        except (TypeError, ValueError, KeyError, IndexError, OverflowError, AttributeError, ArithmeticError) as exc:
            raise CodecError(f"a malformed value ({type(exc).__name__}: {exc})") from None

    def _items(self, seq: Any, depth: int) -> list:
        if not isinstance(seq, list):
            raise CodecError("malformed sequence")
        out = [item if type(item) in _TREE_LEAVES else self._dec(item, depth + 1) for item in seq]
        self._count += len(out)  # the leaves' share (a bound, not a tally)
        if self._count > self.limits.max_items:
            self._tick(depth)
        return out

    def _dict(self, seq: Any, depth: int, into: dict) -> dict:
        items = self._items(seq, depth)
        if len(items) % 2:
            raise CodecError("malformed mapping")
        for i in range(0, len(items), 2):
            into[items[i]] = items[i + 1]
        return into

    def _dec(self, tree: Any, depth: int) -> Any:  # noqa: C901, PLR0911, PLR0912
        self._count += 1  # _tick, inline: this runs for every node
        if self._count > self.limits.max_items or depth > self.limits.max_depth:
            self._tick(depth)
        t = type(tree)
        if tree is None or t in _PLAIN:
            return tree
        if t is not list or not tree or type(tree[0]) is not str:
            raise CodecError(f"malformed value of type {t.__name__}")
        tag, args = tree[0], tree[1:]
        if tag == "l":
            return self._items(args[0], depth)
        if tag == "t":
            return tuple(self._items(args[0], depth))
        if tag == "d":
            return self._dict(args[0], depth, {})
        if tag == "s":
            return set(self._items(args[0], depth))
        if tag == "fs":
            return frozenset(self._items(args[0], depth))
        if tag == "I":
            return int(_str(args[0]), 16)
        if tag == "F":
            text = _choice(args[0], ("nan", "inf", "-inf", "np.nan", "math.nan"))
            if text == "math.nan":
                return math.nan
            if text == "np.nan":
                return sys.modules["numpy"].nan if "numpy" in sys.modules else math.nan
            return float(text)
        if tag in ("b", "ba"):
            return (bytes if tag == "b" else bytearray)(_unb64(args[0]))
        if tag == "c":
            return complex(_num(self._dec(args[0], depth)), _num(self._dec(args[1], depth)))
        if tag == "sl":
            return slice(*self._items(args[0], depth)[:3])
        if tag == "rg":
            return range(_int(args[0]), _int(args[1]), _int(args[2]))
        if tag == "nt":
            names = args[1]
            if not isinstance(names, list) or not all(isinstance(n, str) and n.isidentifier() for n in names):
                raise CodecError("malformed namedtuple")
            cls = _namedtuple(_identifier(args[0]), tuple(names))
            return cls._make(self._items(args[2], depth))
        if tag == "x":
            return Unsendable(_str(args[0])[:2000])
        if tag == "r":
            if self.resolve is None:
                return Unsendable("a reference to an object of the other process cannot be followed here")
            return self.resolve(args)
        return self._dec_library(tag, args, depth)

    def _dec_library(self, tag: str, a: list, depth: int) -> Any:  # noqa: C901, PLR0911, PLR0912
        if tag == "dt":
            tz = self._dec_tz(a[8], depth)
            stamp = datetime.datetime(*map(_int, a[:7]), tzinfo=tz, fold=_int(a[7]))
            return _localized(stamp, self._dec(a[9], depth)) if len(a) > 9 and hasattr(tz, "localize") else stamp
        if tag == "date":
            return datetime.date(*map(_int, a[:3]))
        if tag == "time":
            return datetime.time(*map(_int, a[:4]), tzinfo=self._dec_tz(a[5], depth), fold=_int(a[4]))
        if tag == "td":
            return datetime.timedelta(days=_int(a[0]), seconds=_int(a[1]), microseconds=_int(a[2]))
        if tag in ("tz", "zi", "pytz"):
            return self._dec_tz([tag, *a], depth)
        if tag == "dec":
            return decimal.Decimal(_str(a[0]))
        if tag == "frac":
            return fractions.Fraction(_int(self._dec(a[0], depth)), _int(self._dec(a[1], depth)))
        if tag == "uuid":
            return uuid.UUID(hex=_str(a[0]))
        if tag == "path":
            return _PATHS[_str(a[0])](_str(a[1]))
        if tag == "od":
            return self._dict(a[0], depth, collections.OrderedDict())
        if tag == "ctr":
            return self._dict(a[0], depth, collections.Counter())
        if tag == "dd":
            factory = None if a[0] is None else _DEFAULT_FACTORIES[_str(a[0])]
            return self._dict(a[1], depth, collections.defaultdict(factory))
        if tag == "dq":
            return collections.deque(self._items(a[0], depth), None if a[1] is None else _int(a[1]))
        if tag == "arr":
            if _str(a[0]) not in array.typecodes:
                raise CodecError("malformed array")
            made = array.array(a[0])
            try:
                made.frombytes(_unb64(a[1]))
            except ValueError:
                raise CodecError("malformed array") from None
            return made
        if tag in ("nd", "ndo", "nds", "ma", "npv", "npdt"):
            return self._dec_numpy(tag, a, depth)
        if tag in ("df", "ser", "ri", "mi", "dti", "tdi", "ci", "ix", "cat", "dtz", "ea", "nat", "na", "ts", "ptd", "per",
                   "off"):
            return self._dec_pandas(tag, a, depth)
        raise CodecError(f"unknown value tag {tag[:20]!r}")

    def _dec_tz(self, tree: Any, depth: int) -> Any:
        if tree is None:
            return None
        if not isinstance(tree, list) or not tree:
            raise CodecError("malformed time zone")
        if tree[0] == "tz":
            offset = self._dec(tree[1], depth)
            if type(offset) is not datetime.timedelta:
                raise CodecError("malformed time zone")
            return datetime.timezone(offset) if tree[2] is None else datetime.timezone(offset, _str(tree[2]))
        key = _str(tree[1])
        if not _TZ_NAME.match(key) or ".." in key or key.startswith("/"):
            raise CodecError(f"malformed time zone name {key[:64]!r}")
        if tree[0] == "zi":
            import zoneinfo

            return zoneinfo.ZoneInfo(key)
        if tree[0] == "pytz" and "pytz" in sys.modules:
            return sys.modules["pytz"].timezone(key)
        if tree[0] == "pytz":
            import zoneinfo

            return zoneinfo.ZoneInfo(key)
        if tree[0] == "x":
            return Unsendable(_str(tree[1]))
        raise CodecError("malformed time zone")

    def _dec_numpy(self, tag: str, a: list, depth: int) -> Any:
        np = _need("numpy")
        if tag == "nd":
            dtype = np.dtype(_dtype(a[0]))
            shape = _shape(a[1])
            data = _unb64(a[2])
            count = math.prod(shape)
            if count * dtype.itemsize != len(data):
                raise CodecError("malformed numpy array (size and data differ)")
            return np.frombuffer(data, dtype=dtype, count=count).reshape(shape).copy()
        if tag == "ndo":
            shape = _shape(a[0])
            items = self._items(a[1], depth)
            if len(items) != math.prod(shape):
                raise CodecError("malformed numpy object array")
            out = np.empty(len(items), dtype=object)
            out[:] = items if items else out[:0]
            return out.reshape(shape)
        if tag == "nds":
            fields = a[0]
            if not isinstance(fields, list) or not all(isinstance(f, list) and len(f) == 2 for f in fields):
                raise CodecError("malformed structured dtype")
            dtype = np.dtype([(_str(name), _dtype(fmt)) for name, fmt in fields])
            shape, data = _shape(a[1]), _unb64(a[2])
            if math.prod(shape) * dtype.itemsize != len(data):
                raise CodecError("malformed numpy array (size and data differ)")
            return np.frombuffer(data, dtype=dtype).reshape(shape).copy()
        if tag == "ma":
            data, mask = self._dec(a[0], depth), self._dec(a[1], depth)
            if not isinstance(data, np.ndarray) or not isinstance(mask, np.ndarray):
                raise CodecError("malformed masked array")
            return np.ma.MaskedArray(data, mask=mask if self.masks else np.ma.nomask)
        if tag == "npv":
            dtype = np.dtype(_dtype(a[0]))
            data = _unb64(a[1])
            if len(data) != dtype.itemsize:
                raise CodecError("malformed numpy scalar")
            if not dtype.itemsize:  # an empty bytes or str scalar (numpy reads none from a buffer)
                return dtype.type()
            return np.frombuffer(data, dtype=dtype)[0]
        text = _str(a[0])
        return np.dtype(object) if text == "|O" else np.dtype(_dtype(text))

    def _dec_array(self, tree: Any, depth: int) -> Any:
        np, pd = _need("numpy"), _need("pandas")
        tag = tree[0] if isinstance(tree, list) and tree else None
        if tag in ("nd", "ndo", "nds", "ma"):
            return self._dec(tree, depth)
        if tag == "cat":
            cats = self._dec_index(tree[1], depth)
            codes = self._dec(tree[2], depth)
            return pd.Categorical.from_codes(codes, categories=cats, ordered=bool(tree[3]))
        if tag == "dtz":
            naive = self._dec(tree[1], depth)
            tz = self._dec_tz(tree[2], depth)
            if not isinstance(naive, np.ndarray) or naive.dtype.kind != "M":
                raise CodecError("malformed datetime array")
            return pd.DatetimeIndex(naive).tz_localize("UTC").tz_convert(tz).array
        if tag == "ea":
            name = _str(tree[1])
            if not _EA_DTYPE.match(name):
                raise CodecError(f"refused pandas dtype {name[:40]!r}")
            return pd.array(self._items(tree[2], depth), dtype=pd.api.types.pandas_dtype(name))
        if tag == "x":
            return Unsendable(_str(tree[1]))
        raise CodecError("malformed array")

    def _dec_index(self, tree: Any, depth: int) -> Any:
        pd = _need("pandas")
        self._tick(depth)
        if not isinstance(tree, list) or not tree:
            raise CodecError("malformed index")
        tag, a = tree[0], tree[1:]
        if tag == "ri":
            return pd.RangeIndex(_int(a[0]), _int(a[1]), _int(a[2]), name=self._dec(a[3], depth))
        if tag == "mi":
            levels = [self._dec_index(level, depth + 1) for level in a[0]]
            codes = [self._dec(c, depth + 1) for c in a[1]]
            return pd.MultiIndex(levels=levels, codes=codes, names=self._items(a[2], depth))
        if tag in ("dti", "tdi"):
            values = self._dec_array(a[0], depth + 1)
            freq = None if a[1] is None else _str(a[1])
            cls = pd.DatetimeIndex if tag == "dti" else pd.TimedeltaIndex
            idx = cls(values, name=self._dec(a[2], depth))
            if freq is not None:
                try:
                    idx = cls(values, freq=freq, name=idx.name)
                except ValueError:
                    pass
            return idx
        if tag == "ci":
            return pd.CategoricalIndex(self._dec_array(a[0], depth + 1), name=self._dec(a[1], depth))
        if tag == "ix":
            values = self._dec_array(a[0], depth + 1)
            if isinstance(values, Unsendable):
                return values
            return pd.Index(values, dtype=values.dtype, name=self._dec(a[1], depth), copy=False)
        if tag == "x":
            return Unsendable(_str(a[0]))
        raise CodecError("malformed index")

    def _dec_pandas(self, tag: str, a: list, depth: int) -> Any:  # noqa: PLR0911
        pd = _need("pandas")
        if tag == "df":
            cols = [self._dec_array(c, depth + 1) for c in a[0]]
            columns, index = self._dec_index(a[1], depth + 1), self._dec_index(a[2], depth + 1)
            for part in (*cols, columns, index):
                if isinstance(part, Unsendable):
                    return part
            if len(columns) != len(cols):
                raise CodecError("malformed DataFrame (columns and data differ)")
            if not cols:
                return pd.DataFrame(index=index, columns=columns)
            frame = pd.DataFrame({i: pd.Series(c, index=index, copy=False) for i, c in enumerate(cols)}, index=index)
            frame.columns = columns
            return frame
        if tag == "ser":
            values, index = self._dec_array(a[0], depth + 1), self._dec_index(a[1], depth + 1)
            for part in (values, index):
                if isinstance(part, Unsendable):
                    return part
            return pd.Series(values, index=index, name=self._dec(a[2], depth + 1), copy=False)
        if tag in ("ri", "mi", "dti", "tdi", "ci", "ix"):
            return self._dec_index([tag, *a], depth)
        if tag in ("cat", "dtz", "ea"):
            return self._dec_array([tag, *a], depth)
        if tag == "nat":
            return pd.NaT
        if tag == "na":
            return pd.NA
        if tag == "per":
            return pd.Period(ordinal=_int(a[0]), freq=_freq(a[1]))
        if tag == "off":
            return _offset(_freq(a[0]))
        if tag == "ts":
            unit = _choice(a[1], _UNITS)
            stamp = pd.Timestamp(_int(a[0]), unit="ns").as_unit(unit)
            tz = self._dec_tz(a[2], depth)
            return stamp if tz is None else stamp.tz_localize("UTC").tz_convert(tz)
        return pd.Timedelta(_int(a[0]), unit="ns").as_unit(_choice(a[1], _UNITS))


def _localized(stamp: datetime.datetime, offset: Any) -> datetime.datetime:
    """A pytz zone's datetime as its sender had it: ``stamp`` carries the zone's first (LMT) offset, as pytz
    zones do when attached directly; rebuilt from the UTC time by the zone's ``fromutc``, which picks the
    zone's tzinfo of that offset (so ``dt.tzinfo`` compares equal too)."""
    if type(offset) is not datetime.timedelta:
        raise CodecError("malformed datetime offset")
    tz = stamp.tzinfo
    utc = stamp.replace(tzinfo=None) - offset
    return tz.fromutc(utc.replace(tzinfo=tz))  # type: ignore[union-attr]


_namedtuples: dict[tuple[str, tuple[str, ...]], type] = {}


def _namedtuple(name: str, fields: tuple[str, ...]) -> type:
    key = (name, fields)
    if key not in _namedtuples:
        if len(_namedtuples) > 1000:
            raise CodecError("too many namedtuple types")
        _namedtuples[key] = collections.namedtuple(name, fields, rename=True)  # type: ignore[misc]
    return _namedtuples[key]


def _third_party(cls: type) -> bool:
    """Is ``cls`` defined by an installed library (not the standard library, not the program)?"""
    module = sys.modules.get(getattr(cls, "__module__", "") or "")
    path = getattr(module, "__file__", None) or ""
    return isinstance(path, str) and ("site-packages" in path or "dist-packages" in path)


_STDLIB_DIRS = (os.path.join(os.path.dirname(os.__file__), ""),)  # its .py modules (C ones have no file)


def _stdlib(cls: type) -> bool:
    """Is ``cls`` defined by a module of the standard library (a ``.py`` file of it; not the program)?
    ``collections``' own dict types are data (encoded before this is asked)."""
    module = sys.modules.get(getattr(cls, "__module__", "") or "")
    path = getattr(module, "__file__", None) or ""
    return (isinstance(path, str) and path.startswith(_STDLIB_DIRS) and "site-packages" not in path
            and "dist-packages" not in path)


def _values(obj: Any) -> Any:
    """A Series' or Index's values: its numpy array, or its pandas extension array."""
    return obj.to_numpy() if isinstance(obj.dtype, sys.modules["numpy"].dtype) else obj.array


def _freq(v: Any) -> str:
    """A pandas frequency's name (``"M"``, ``"W-SUN"``, ``"2B"``), checked to be only that."""
    text = _str(v)
    if not _FREQ.match(text):
        raise CodecError(f"malformed frequency {text[:30]!r}")
    return text


def _offset(name: str) -> Any:
    """pandas' date offset of a frequency's name (its own parser of such names)."""
    return _need("pandas").tseries.frequencies.to_offset(name)


def _need(module: str) -> Any:
    if module not in sys.modules:  # the judge has the libraries its tests use; nothing is imported for the sender
        raise CodecError(f"a {module} value, but {module} is not loaded here")
    return sys.modules[module]


def _str(v: Any) -> str:
    if type(v) is not str:
        raise CodecError("malformed text")
    return v


def _identifier(v: Any) -> str:
    text = _str(v)
    if not text.isidentifier():
        raise CodecError("malformed name")
    return text


def _int(v: Any) -> int:
    if type(v) is not int:
        raise CodecError("malformed integer")
    return v


def _num(v: Any) -> float:
    if type(v) not in (int, float):
        raise CodecError("malformed number")
    return v


def _choice(v: Any, allowed: tuple[str, ...]) -> str:
    if v not in allowed:
        raise CodecError("malformed value")
    return v


def _dtype(v: Any) -> str:
    text = _str(v)
    if not _DTYPE_STR.match(text):
        raise CodecError(f"refused numpy dtype {text[:40]!r}")
    return text


def _shape(v: Any) -> tuple[int, ...]:
    if not isinstance(v, list) or len(v) > 32 or not all(type(n) is int and 0 <= n for n in v):
        raise CodecError("malformed array shape")
    if math.prod(v) > 1 << 34:
        raise CodecError("array too large")
    return tuple(v)
