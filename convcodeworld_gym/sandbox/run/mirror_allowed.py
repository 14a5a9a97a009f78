"""Runs in both processes of a split run: the judge's policy for rebuilding library objects (see :mod:`.mirror`), by an
exact, reviewed table.

A mirror names classes and library callables by their exact ``module:qualname`` (:func:`key_of`). The judge finds a
name only when it is a key of the reviewed table (:mod:`.mirror_table`, made from what BigCodeBench's canonical
solutions return): it looks the *table's* own name up, attribute by attribute, in that module (imported if the judge
has not loaded it: a module the table names, never one the program named), and checks that what it found carries
that very name. The program's string is a dictionary key, never a path the judge walks, and no class is allowed for
belonging to a library.

A class of the table is rebuilt (``cls.__new__`` plus its state as data) only while it passes two screens that are
checked again in the judge's own library version:

* it decides nothing it does not know: its library code defines none of the operations by which a test compares a
  value with its own (:data:`DECIDING`: ``==``, ordering, arithmetic, numpy's dispatch), except those reviewed one
  by one in :data:`REVIEWED` (each answers only from the object's own data, and refuses an operand of another kind);
* its state goes in by a plain update of its ``__dict__`` (and slots), unless its library code defines
  ``__setstate__``, which must then be one of :data:`REVIEWED_SETSTATE` (read: it stores what it is given, or
  rebuilds derived fields from it; it imports nothing, opens nothing and calls nothing it is given).

The program's side reads the same table, as a hint of what the judge will take; the judge decides.

Holds:
    MIRRORED_ROOTS         the libraries whose objects may cross as mirrors
    POINTER_PROTOCOLS      protocols that hand over a memory address (refused on stand-ins and in mirrors)
    DECIDING               the operations by which a test compares a value with its own
    REVIEWED               the deciding operations of mirrored classes that were read and found honest
    REVIEWED_SETSTATE      the ``__setstate__`` methods of mirrored classes that were read and found to store data
    SETSTATE_NEVER_CALLED  library ``__setstate__`` methods the judge never calls (a plain update instead), and why
    SETSTATE_SEQUENCE      reviewed ``__setstate__`` methods whose state is a sequence of plain data
    Setstate               a reviewed ``__setstate__`` and what it may be given
    setstate_of            the reviewed ``__setstate__`` of a class, or None for a plain update
    LAZY_DESCRIPTORS       descriptors whose attributes a mirror leaves for the judge's library to make again
    BOUND_BUILTIN_METHODS  methods of plain containers a mirror may bind
    key_of                 the exact ``module:qualname`` of a class or function
    table_class            the judge's class for a key of the table, or why not
    table_callable         the judge's library callable for a key of the table, or why not
    screen_refusal         why a class fails the screens, or None
    class_refusal          why a class (found by the judge) is not rebuilt, or None
    root_of                the top-level package of a module's name
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
import types
from typing import Any, NamedTuple

from .mirror_table import CALLABLES, CLASSES

__all__ = ["MIRRORED_ROOTS", "POINTER_PROTOCOLS", "DECIDING", "REVIEWED", "REVIEWED_SETSTATE", "SETSTATE_NEVER_CALLED",
           "SETSTATE_SEQUENCE", "LAZY_DESCRIPTORS", "BOUND_BUILTIN_METHODS", "Setstate",
           "key_of", "table_class", "table_callable", "screen_refusal", "class_refusal", "setstate_of", "root_of"]

#: Top-level modules whose objects may cross to the judge as mirrors (the table names only classes of these).
MIRRORED_ROOTS = frozenset({"matplotlib", "mpl_toolkits", "seaborn", "sklearn", "scipy", "statsmodels", "rsa", "bs4",
                            "wordcloud", "gensim", "folium", "branca", "PIL", "networkx", "shapely", "django",
                            "pandas"})  # pandas' plotting parts (its data crosses as the codec's data)
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
    # membership of its own vocabulary (its key-to-index dict)
    "gensim.models.keyedvectors.KeyedVectors.__contains__",
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
#: ``__setstate__`` methods of mirrored classes that were read (matplotlib 3.7 and 3.11, scikit-learn 1.3): each
#: stores the state it is given (after a version check, or turning strong references into weak ones), or rebuilds
#: fields derived from it; none imports a module the state names, opens a file, or calls a value of the state.
#: ``module.Class.__setstate__`` -> the dunder keys of the state it consumes itself (every other dunder is refused).
REVIEWED_SETSTATE: dict[str, frozenset[str]] = {
    # the version popped and compared (a warning); the dict stored; a canvas made; pyplot registration where the
    # state says the figure was in pyplot
    "matplotlib.figure.Figure.__setstate__": frozenset({"__mpl_version__"}),
    # the share and twin groups joined (matplotlib's groupers, with the sibling axes the state names); the dict stored
    "matplotlib.axes._base._AxesBase.__setstate__": frozenset(),
    # (3.7) the dict stored; the property cycle reset
    "matplotlib.axes._base._process_plot_var_args.__setstate__": frozenset(),
    # the dict stored; the callbacks (library callables of this mirror) held by weak or strong references again
    "matplotlib.cbook.CallbackRegistry.__setstate__": frozenset(),
    # the dict stored; its strong references turned into weak ones
    "matplotlib.cbook.Grouper.__setstate__": frozenset(), "matplotlib.transforms.TransformNode.__setstate__": frozenset(),
    # the dict stored; an id counter made from the number it holds
    "matplotlib.figure._AxesStack.__setstate__": frozenset(),
    # its own __init__ with the state's names as keywords: it stores them as its dict of spines
    "matplotlib.spines.Spines.__setstate__": frozenset(),
    # the version popped and compared (a warning); the dict stored
    "sklearn.base.BaseEstimator.__setstate__": frozenset(),
    # the dict stored
    "statsmodels.base.wrapper.ResultsWrapper.__setstate__": frozenset(),
    # (a sequence: SETSTATE_SEQUENCE) an image: its tiles cleared; info, mode and size stored, its pixels made by
    # PIL's C core of that mode and size and filled from the bytes given (PIL checks their size), its palette set
    "PIL.ImageFile.ImageFile.__setstate__": frozenset(), "PIL.Image.Image.__setstate__": frozenset(),
    # (a sequence) the numbers of a key stored; its blinding factors marked to be computed, a lock made
    "rsa.key.PublicKey.__setstate__": frozenset(), "rsa.key.PrivateKey.__setstate__": frozenset(),
}
#: Library ``__setstate__`` methods the judge never calls, each with why: the state goes in by a plain update of the
#: object's dict instead, as data. branca's would compile a jinja2 template from the state's ``_template_str`` (a
#: template is code: ``{{ ''.__class__.__mro__ ... }}`` runs when the map renders; folium's own elements carry
#: template sources, so refusing them would refuse every map): the object keeps its class's own template.
#: statsmodels' would have patsy evaluate the state's formula (Python) to rebuild a model's design.
SETSTATE_NEVER_CALLED: dict[str, str] = {
    "branca.element.Element.__setstate__": "it compiles the state's template source (code) with jinja2",
    "statsmodels.base.data.ModelData.__setstate__": "it has patsy evaluate the state's formula (Python)",
}
#: Reviewed ``__setstate__`` methods whose state is a sequence of plain data (numbers, strings, bytes and their
#: containers) of one of these lengths, not a dict. Pillow 12 and later send an image file's name as a sixth value
#: (``ImageFile.__setstate__`` stores it as the image's ``filename``, a string).
SETSTATE_SEQUENCE: dict[str, tuple[int, ...]] = {
    "PIL.ImageFile.ImageFile.__setstate__": (5, 6), "PIL.Image.Image.__setstate__": (5,),
    "rsa.key.PublicKey.__setstate__": (2,), "rsa.key.PrivateKey.__setstate__": (8,),
}
#: Descriptors by which a library makes an attribute again when an instance lacks it (``module:qualname`` of the
#: descriptor's class): the program's side leaves such an attribute out of a mirror's state, and the judge's library
#: makes it from the rest, as it does after ``reset_ticks``. matplotlib's ticks (``Axis.majorTicks``) are four in
#: five of the objects of a figure; made again from the axis' locator, formatter and tick settings.
LAZY_DESCRIPTORS = frozenset({"matplotlib.axis:_LazyTickList"})
#: Methods of plain containers a mirror may bind (an artist's ``_remove_method`` is its parent's ``list.remove``; a
#: file response closes its ``BytesIO``).
BOUND_BUILTIN_METHODS = frozenset({"remove", "close"})


def root_of(module: str) -> str:
    """The top-level package of a module's dotted name."""
    return module.split(".")[0]


_TYPE_MODULE, _TYPE_QUALNAME = type.__dict__["__module__"], type.__dict__["__qualname__"]


def key_of(obj: Any) -> str | None:
    """The exact ``module:qualname`` of a class or function, or None when it has none (read for a class by
    ``type``'s own descriptors, so that a metaclass cannot answer for it).

    >>> key_of(dict), key_of(inspect.getattr_static)
    ('builtins:dict', 'inspect:getattr_static')
    """
    if isinstance(obj, type):  # type's own descriptors: what the class is, not what a metaclass says
        module, name = _TYPE_MODULE.__get__(obj, type), _TYPE_QUALNAME.__get__(obj, type)
    else:
        module, name = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    return f"{module}:{name}" if isinstance(module, str) and isinstance(name, str) else None


def _lookup(key: str) -> Any:
    """What the judge's module holds under the table's ``key`` (None where it holds nothing of that name). Walks the
    table's own qualified name, never a program's string. The module is imported when the judge has not loaded it
    yet (a figure's pandas converter, a folium map's layers): only a module the reviewed table names, never one a
    program named; one that fails to import holds nothing."""
    module, _, qualname = key.partition(":")
    found: Any = sys.modules.get(module)
    if found is None:
        try:
            found = importlib.import_module(module)
        except Exception:  # noqa: BLE001 - a library this interpreter lacks, or that fails to load: not rebuilt
            return None
    for part in qualname.split(".") if found is not None else ():
        found = inspect.getattr_static(found, part, None)
        if isinstance(found, (staticmethod, classmethod)):
            found = found.__func__
        if found is None:
            return None
    return found if found is not None and key_of(found) == key else None


@functools.lru_cache(maxsize=None)
def _deciding(cls: type) -> tuple[str, ...]:
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
    return tuple(found)


class Setstate(NamedTuple):
    """A reviewed ``__setstate__``: the function, the dunder keys it consumes, and the lengths its state may have where
    that is a sequence (:data:`SETSTATE_SEQUENCE`)."""

    function: types.FunctionType
    consumed: frozenset[str]
    sequence: tuple[int, ...] | None


def setstate_of(cls: type) -> Setstate | None:
    """The reviewed library ``__setstate__`` that rebuilds an object of ``cls``, or None for a plain update of its
    dict (its class has none, or one the judge never calls: :data:`SETSTATE_NEVER_CALLED`); raises ``LookupError``
    (saying which) for one that no one has reviewed."""
    for klass in cls.__mro__:
        found = klass.__dict__.get("__setstate__")
        if found is None:
            continue
        module = klass.__dict__.get("__module__")
        if not isinstance(module, str) or root_of(module) not in MIRRORED_ROOTS:
            return None  # the standard library's (object's own, or a builtin base's): a plain update
        name = f"{module}.{klass.__qualname__}.__setstate__"
        if name in SETSTATE_NEVER_CALLED:
            return None
        if name not in REVIEWED_SETSTATE or not isinstance(found, types.FunctionType):
            raise LookupError(f"its state goes in by {name}, which no one has reviewed")
        return Setstate(found, REVIEWED_SETSTATE[name], SETSTATE_SEQUENCE.get(name))
    return None


def screen_refusal(cls: type) -> str | None:
    """Why ``cls`` fails the screens (an exception or metaclass, an unreviewed comparison or ``__setstate__`` in its
    library code, as this version of its library has it), or None when it passes them."""
    key = key_of(cls)
    if issubclass(cls, (BaseException, type)):
        return f"{key} is an exception or a metaclass"
    deciding = _deciding(cls)
    if deciding:
        return f"{key} decides comparisons itself ({', '.join(sorted(deciding)[:3])}), which no one has reviewed"
    try:
        setstate_of(cls)
    except LookupError as exc:
        return f"{key}: {exc}"
    return None


def class_refusal(cls: type) -> str | None:
    """Why the judge will not rebuild an object of ``cls`` (a clause), or None when it may: it is in the table and
    passes the screens.

    >>> class_refusal(dict)
    'builtins:dict is not in the reviewed table of library classes'
    """
    key = key_of(cls)
    if key not in CLASSES:
        return f"{key} is not in the reviewed table of library classes"
    return screen_refusal(cls)


def table_class(key: Any) -> type:
    """The judge's class named by ``key`` (a key of the table, found in a module the judge has loaded, passing the
    screens); ``LookupError`` saying why not.

    >>> table_class("builtins:eval")
    Traceback (most recent call last):
    ...
    LookupError: 'builtins:eval' is not in the reviewed table of library classes
    """
    if type(key) is not str or key not in CLASSES:
        raise LookupError(f"{str(key)[:120]!r} is not in the reviewed table of library classes")
    found = _lookup(key)
    if not isinstance(found, type):
        raise LookupError(f"{key} is not in the judge's version of its library")
    why = class_refusal(found)
    if why is not None:
        raise LookupError(why)
    return found


def table_callable(key: Any) -> Any:
    """The judge's library callable (a function, or a class as a value) named by ``key``, a key of the table's
    callables found in a module the judge has loaded; ``LookupError`` saying why not.

    >>> table_callable("os:system")
    Traceback (most recent call last):
    ...
    LookupError: 'os:system' is not among the library callables a mirror may hold
    """
    if type(key) is not str or key not in CALLABLES:
        raise LookupError(f"{str(key)[:120]!r} is not among the library callables a mirror may hold")
    found = _lookup(key)
    if found is None or not callable(found):
        raise LookupError(f"{key} is not in the judge's version of its library")
    return found
