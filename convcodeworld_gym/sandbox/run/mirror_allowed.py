"""Runs in the judge's process: what a mirror's pickle may name, the judge's policy for rebuilding library objects (see
:mod:`.mirror`).

Runs in the judge. A global a pickle names is rebuilt only when it is, in a module the judge has already loaded:

* a class of a mirrored library (:data:`MIRRORED_ROOTS`) that is no exception and that decides nothing it does
  not know: its library code defines none of the operations by which a test compares a value with its own
  (:data:`DECIDING`: ``==``, ordering, arithmetic, numpy's dispatch), except those reviewed one by one in
  :data:`REVIEWED` (each answers only from the object's own data, and refuses an operand of another kind);
* a class of numpy or pandas: the data types the codec rebuilds too, whose operations are their own;
* one of the plain data types of :data:`PLAIN_TYPES` (the standard library's, and time zones');
* one of the library functions of :data:`FUNCTIONS` (the rebuilding functions of numpy and pandas; callbacks a
  figure holds), each named by its library and its qualified name, so that the list holds across versions.

The lists were measured with ``envs/bigcodebench/mirror_survey.py`` (every object of a mirrored library that a
BigCodeBench canonical solution returns, and every figure it draws) on the BigCodeBench runtime and on this
package's own test environment, and each entry of :data:`REVIEWED` and :data:`FUNCTIONS` was read.

Holds:
    MIRRORED_ROOTS         the libraries whose objects cross as mirrors
    DATA_ROOTS             the libraries of data types (numpy, pandas, pyarrow, pytz), rebuilt as they pickle
    PLAIN_TYPES            plain data types a pickle may name (the standard library's; time zones)
    FUNCTIONS              the library functions a pickle may name
    POINTER_PROTOCOLS      protocols that hand over a memory address (refused on stand-ins and in mirrors)
    DECIDING               the operations by which a test compares a value with its own
    REVIEWED               the deciding operations of mirrored classes that were read and found honest
    BOUND_BUILTIN_METHODS  methods of plain containers a pickle may bind
    refusal                why the judge will not rebuild a global, or None
    root_of                the top-level package of a module's name
"""

from __future__ import annotations

from typing import Any

__all__ = ["MIRRORED_ROOTS", "DATA_ROOTS", "PLAIN_TYPES", "FUNCTIONS", "POINTER_PROTOCOLS", "DECIDING", "REVIEWED", "BOUND_BUILTIN_METHODS",
           "refusal", "root_of"]

#: Top-level modules whose objects cross to the judge as mirrors.
MIRRORED_ROOTS = frozenset({"matplotlib", "mpl_toolkits", "seaborn", "sklearn", "scipy", "statsmodels", "rsa", "bs4",
                            "wordcloud", "gensim", "folium", "branca", "PIL", "networkx", "shapely", "django"})
#: Libraries of data types: their classes and constants are rebuilt as they pickle (the codec's own data types).
DATA_ROOTS = frozenset({"numpy", "pandas", "pyarrow", "pytz"})
#: Plain data types a pickle may name, by module: the standard library's, and time zones (not dateutil's ``tzfile``,
#: which rebuilds by reading a file path).
PLAIN_TYPES: dict[str, frozenset[str]] = {
    "builtins": frozenset({"object", "range", "slice", "complex", "set", "frozenset", "bytearray"}),
    "collections": frozenset({"OrderedDict", "defaultdict", "Counter", "deque"}),
    "datetime": frozenset({"date", "datetime", "time", "timedelta", "timezone"}),
    "decimal": frozenset({"Decimal"}),
    "fractions": frozenset({"Fraction"}),
    "functools": frozenset({"partial"}),
    "http.cookies": frozenset({"SimpleCookie", "Morsel"}),
    "_io": frozenset({"BytesIO", "StringIO"}),
    "itertools": frozenset({"count"}),
    "uuid": frozenset({"UUID"}),
    "zoneinfo": frozenset({"ZoneInfo"}),
    "dateutil.tz.tz": frozenset({"tzutc", "tzoffset"}),
}
#: Library functions a pickle may name: ``(top-level module, qualified name)``, in any module of that library.
FUNCTIONS = frozenset({
    # numpy's and pandas' own rebuilding of their arrays, frames and scalars
    ("numpy", "_reconstruct"), ("numpy", "scalar"), ("numpy", "_mareconstruct"), ("numpy", "_frombuffer"),
    ("pandas", "_unpickle_block"), ("pandas", "_new_Index"), ("pandas", "_new_PeriodIndex"),
    ("pandas", "_new_DatetimeIndex"), ("pandas", "_unpickle_timestamp"), ("pandas", "_unpickle_timedelta"),
    ("pandas", "__pyx_unpickle_NDArrayBacked"), ("pandas", "_unpickle_series_compat"),
    # time zones by name: pytz's and zoneinfo's own rebuilding (a zone looked up in the judge's database)
    ("pytz", "_p"), ("pytz", "_UTC"), ("zoneinfo", "ZoneInfo._unpickle"),
    # pyarrow's (the strings of pandas 3): each array it makes is validated in full (see .mirror)
    ("pyarrow", "_restore_array"), ("pyarrow", "py_buffer"), ("pyarrow", "type_for_alias"),
    # an iterator over a list, or over a callable until a sentinel (a file response's content, read as it streams)
    ("builtins", "iter"),
    # callbacks a figure holds: key and mouse handlers, the printer of a callback's exception, tick formatters
    ("matplotlib", "_key_handler"), ("matplotlib", "_mouse_handler"), ("matplotlib", "_exception_printer"),
    ("matplotlib", "Axis._format_with_dict"), ("matplotlib", "_remove_cbar_axes"), ("pandas", "_format_coord"),
    ("pandas", "_daily_finder"),
})
#: Protocols whose answer is an address in memory that a library in the judge would read (numpy's array interface,
#: pandas' interchange, Arrow's and DLPack's capsules): a program must never point the judge at memory, neither through
#: a stand-in (see .standin) nor through the state of a mirror (an ``__array_interface__`` in an object's own dict).
POINTER_PROTOCOLS = frozenset({
    "__array_interface__", "__array_struct__", "__cuda_array_interface__", "__dataframe__", "__arrow_c_array__",
    "__arrow_c_stream__", "__arrow_c_schema__", "__arrow_c_device_array__", "__dlpack__", "__dlpack_device__",
    "__buffer__"})
#: The operations by which a test compares a value with its own: an object that defines one would decide it.
DECIDING = frozenset(
    {"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__array_ufunc__", "__array_function__",
     "__array_priority__", "__array_interface__", "__array_struct__", "__divmod__", "__rdivmod__", "__abs__",
     "__neg__", "__pos__", "__invert__", "__round__", "__trunc__", "__floor__", "__ceil__", "__contains__"}
    | {f"__{p}{name}__" for name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or",
                                     "xor", "lshift", "rshift") for p in ("", "r", "i")})
#: Deciding operations of mirrored classes, read and found to answer only from the object's own data (an operand
#: of another kind gets NotImplemented, False or an exception): ``module.Class.__op__``.
REVIEWED = frozenset({
    # membership of the object's own dict or set of the objects it holds
    "matplotlib.cbook.Grouper.__contains__", "matplotlib.cbook._OrderedSet.__contains__",
    # False for an operand that is no Colormap; else names and lookup tables compared
    "matplotlib.colors.Colormap.__eq__",
    # equal hashes of the font's own properties: a value it does not know, it cannot aim a collision at
    "matplotlib.font_manager.FontProperties.__eq__",
    # its (gridspec, num1, num2) against the operand's same attributes (a sentinel where it has none)
    "matplotlib.gridspec.SubplotSpec.__eq__",
    # NotImplemented (or False) for an operand that is no (affine) transform; else transforms compared
    "matplotlib.transforms.AffineBase.__eq__", "matplotlib.transforms.CompositeGenericTransform.__eq__",
    "matplotlib.transforms.Transform.__add__", "matplotlib.transforms.Transform.__sub__",
    # delegate to a child transform's own equality (an object the judge rebuilt under this same policy)
    "matplotlib.transforms._BlendedMixin.__eq__", "matplotlib.transforms.TransformWrapper.__eq__",
    # a header name looked up in the response's own headers ('UUID' in response)
    "django.http.response.HttpResponseBase.__contains__",
    # False for an operand that is no Mapping; else both lower-cased into dicts and compared
    "django.utils.datastructures.CaseInsensitiveMapping.__eq__",
    # False for an operand of another class; else mode, size, info, palette and pixel bytes compared
    "PIL.Image.Image.__eq__",
    # the image's own pixel bytes (data, not an address) with a shape from its mode and size; numpy checks the size
    "PIL.Image.Image.__array_interface__",
    # False for an operand without a tag's name, attributes and contents; else those compared; membership of its
    # own contents
    "bs4.element.Tag.__eq__", "bs4.element.Tag.__ne__", "bs4.element.Tag.__contains__",
    # False for an operand that is no key of that kind; else the numbers compared
    "rsa.key.PublicKey.__eq__", "rsa.key.PublicKey.__ne__", "rsa.key.PrivateKey.__eq__", "rsa.key.PrivateKey.__ne__",
})
#: Methods of plain containers and of :data:`PLAIN_TYPES` a pickle may bind (an artist's ``_remove_method`` is its
#: parent's ``list.remove``; a file response closes its ``BytesIO``).
BOUND_BUILTIN_METHODS = frozenset({"remove", "close"})


def root_of(module: str) -> str:
    """The top-level package of a module's dotted name."""
    return module.split(".")[0]


def _deciding(cls: type) -> list[str]:
    """The deciding operations that the mirrored library code in ``cls``'s bases defines and no one reviewed."""
    found = []
    for klass in cls.__mro__:
        module = klass.__dict__.get("__module__")
        if not isinstance(module, str) or root_of(module) not in MIRRORED_ROOTS:
            continue
        for name in DECIDING & klass.__dict__.keys():
            key = f"{module}.{klass.__qualname__}.{name}"
            if key not in REVIEWED:
                found.append(key)
    return found


def refusal(module: str, name: str, found: Any) -> str | None:
    """Why the judge will not rebuild ``found``, the global ``module.name`` of a pickle (a clause: "it is an exception
    class"), or None when it may.

    >>> refusal("builtins", "print", print)
    'it is not among the functions the judge rebuilds with'
    >>> refusal("builtins", "slice", slice) is None
    True
    """
    root = root_of(module)
    if isinstance(found, type):
        if root in DATA_ROOTS or name in PLAIN_TYPES.get(module, ()):
            return None
        if root not in MIRRORED_ROOTS:
            return "it is no class of a mirrored library"
        if issubclass(found, BaseException):
            return "it is an exception class"
        deciding = _deciding(found)
        return None if not deciding else (f"it decides comparisons itself ({', '.join(sorted(deciding)[:3])}), "
                                          "which no one has reviewed")
    if callable(found) and (root, name) in FUNCTIONS:  # Python, C or Cython functions
        return None
    if root in DATA_ROOTS and not callable(found) and root_of(str(type(found).__module__)) in DATA_ROOTS:
        return None  # a constant of a data library (pandas.NA)
    return "it is not among the functions the judge rebuilds with"
