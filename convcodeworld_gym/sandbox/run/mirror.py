"""Runs in both processes of a split run: mirrors, the library objects a program returns rebuilt in the judge from data.

Runs in both processes of a split run: :func:`snapshot` in the program's, :class:`Mirrors` in the judge's.

A test inspects a library object the program returned by asking the object itself: ``isinstance(ax, plt.Axes)``,
``ax.get_title()``, ``model.predict(X)``. A stand-in would forward each question to the program's process, where
the program answers whatever it likes. So an object of a class in the reviewed table (:mod:`.mirror_allowed`)
crosses as a mirror: a *data tree* that the judge rebuilds into a real object of its own library, whose every answer
is then computed in the judge.

The program owns its process, so whatever crosses may be forged. Nothing in a mirror is loaded as code or as a
pickle, and the judge calls nothing with arguments the program chose, except the typed constructors below. A mirror
is the tree ``["mirror", root, objects, boxes]``:

* ``root`` is a :mod:`.codec` tree (data: numbers, strings, containers, numpy arrays, pandas frames ...) in which
  library objects and callables appear only as references;
* ``objects`` lists each library object the value reaches (an attribute its library makes again when it is
  missing, matplotlib's ticks, is left out: :data:`.mirror_allowed.LAZY_DESCRIPTORS`): ``[tag, key, state, items, entries, members]``. The
  judge makes it with ``cls.__new__(cls)``, ``cls`` being the class the table names ``key`` (an exact
  ``module:qualname``), or, for a tuple subclass, with ``tuple.__new__(cls, members)``; then gives it its
  ``state`` (a codec tree): by a plain update of its ``__dict__`` and slots, or by the library's own reviewed
  ``__setstate__``; ``items`` and ``entries`` fill a library list or dict subclass. States are given in the
  reverse of the order listed, so an object's parts are whole before it (as pickle does).

The references inside the trees (the codec's ``["r", ...]``):

* ``["r", "obj", tag]``: one of the objects listed, or one an earlier mirror listed (a figure and its axes returned
  together: the axes' mirror refers to the figure's listing);
* ``["r", "fn", key]``: a library function or class of the table's callables, as a value (a callback);
* ``["r", "enum", key, value]``: the member of a table's enum class whose value (a string or an int) that is;
* ``["r", "meth", owner, name]``: a library method bound to a listed object, or ``remove``/``close`` of a plain
  container (an artist's ``_remove_method``), that container then being ``["r", "box", index]``, one of ``boxes``:
  each sent once however many methods are bound to it (a figure's hundred labels all hold its axes' ``remove``),
  and decoded once its objects are made, before any state;
* ``["r", "new", name, args]``: one of three typed constructors: ``"partial"`` (``functools.partial`` of
  ``[func, args, kwargs]``, a callable that is itself one of these references or the program's, a tuple and a dict
  of names), ``"object"`` (a bare ``object()``, a sentinel) and ``"count"`` (``itertools.count`` of numbers);
* ``["r", "mine", handle, claim, capabilities]``: an object of the program's own (its lambda formatter, an
  instance of its class): the judge's stand-in of it, whose class the judge never grants; ``["r", "yours", handle]``:
  one of the judge's own objects the program was handed (a test's mock). Inside a library object, such a reference
  is taken only at a place the reviewed table names (:data:`.mirror_table.SLOTS`: a ``FuncFormatter``'s function,
  a fitted tree's Cython ``tree_``): anywhere else the judge's library would ask the program's process, with the
  test's values, what it computes with the object's own data (``'UUID' in response`` looked up in a headers store
  of the program's), so the whole mirror is refused (:func:`references_held`).

State never lands on a class, a module or a function: only on the instances the judge made here (or made for the
same tag before). A state key may not be a dunder nor a memory-address protocol, and the program's code or a
method of another object may not stand in place of a method of the object's class (checked over everything built).

Identity: the program tags each object with its ``id`` there, so the judge gives the same object the same mirror
each time it crosses (``ax.figure is fig``), refreshes it in place with its new state, and hands a mirror back to
the program as the program's original (a ``["r", "tagged", tag]`` reference), on which the program draws. A
mirror is a snapshot: what the program changes later shows when the object crosses again.

A mirror the judge refuses leaves the object a plain stand-in, whose class the judge does not grant: the test
sees no library object there.

Holds:
    mirrored        program side: does an object of this class cross as a mirror?
    snapshot        program side: the tree of an object, its library objects listed and tagged
    references_held both sides: the places of a mirror's library objects that hold an object by reference
    Mirrors         judge side: the mirrors of one run (rebuild, refresh, identity, the way back)
    MirrorRefused   why the judge would not rebuild a mirror
    MAX_OBJECTS     the most objects one mirror may list
"""

from __future__ import annotations

import copyreg
import enum
import functools
import inspect
import itertools
import types
from collections.abc import Callable
from typing import Any

from .codec import Codec, CodecError, CodecLimits
from .mirror_allowed import (BOUND_BUILTIN_METHODS, LAZY_DESCRIPTORS, MIRRORED_ROOTS, POINTER_PROTOCOLS, Setstate,
                             key_of, root_of, setstate_of, table_callable, table_class)
from .mirror_table import CALLABLES, CLASSES, SLOTS

__all__ = ["mirrored", "snapshot", "references_held", "Mirrors", "MirrorRefused", "MAX_OBJECTS"]

#: The most objects one mirror may list (a figure of a few hundred artists lists a few thousand).
MAX_OBJECTS = 100_000
#: The bounds of each tree of a mirror (the whole message is bounded by the channel's own limits too).
_LIMITS = CodecLimits(max_depth=100, max_items=2_000_000, max_bytes=256 << 20)


class MirrorRefused(Exception):
    """The judge would not rebuild a mirror from the program's process (the text says why)."""


@functools.lru_cache(maxsize=4096)
def mirrored(cls: type) -> bool:
    """Does an object of ``cls`` cross to the judge as a mirror? (Program side: a hint only; the judge decides.)"""
    return key_of(cls) in CLASSES and not issubclass(cls, BaseException)


# ------------------------------------------------------------------------------------------------ program side

def _reduced(obj: Any) -> tuple[Any, Any, Any, Any] | None:
    """``(state, items, entries, members)`` of ``obj`` as pickle would take them, or None where its class reduces
    another way: made by ``cls.__new__(cls)`` (``copyreg.__newobj__`` of its class alone), then given its state; or,
    for a tuple subclass (a namedtuple, matplotlib's ``BarContainer``), made of its ``members`` (read as the tuple it
    is), then given its state."""
    try:
        reduced = obj.__reduce_ex__(4)
    except Exception:  # noqa: BLE001 - it cannot be pickled: it crosses as a stand-in
        return None
    cls = type(obj)
    if not (type(reduced) is tuple and 2 <= len(reduced) <= 6 and reduced[0] is copyreg.__newobj__
            and type(reduced[1]) is tuple and reduced[1][:1] == (cls,)):
        return None
    members = tuple(tuple.__iter__(obj)) if isinstance(obj, tuple) else None
    if len(reduced[1]) != 1 and members is None:
        return None
    state = reduced[2] if len(reduced) > 2 else None
    if type(state) is dict and _lazy_names(cls):
        state = {name: value for name, value in state.items() if name not in _lazy_names(cls)}
    try:
        items = None if len(reduced) < 4 or reduced[3] is None else list(reduced[3])
        entries = None if len(reduced) < 5 or reduced[4] is None else [tuple(pair) for pair in reduced[4]]
    except Exception:  # noqa: BLE001
        return None
    return state, items, entries, members


@functools.lru_cache(maxsize=4096)
def _lazy_names(cls: type) -> frozenset[str]:
    """The attributes of ``cls`` that a descriptor of :data:`.mirror_allowed.LAZY_DESCRIPTORS` makes again."""
    return frozenset(name for klass in cls.__mro__ for name, found in vars(klass).items()
                     if key_of(type(found)) in LAZY_DESCRIPTORS)


class _MirrorCodec(Codec):
    """The codec of a mirror's trees on the program's side: an enum member goes to the export hook (by its class and
    value), not as the plain value of its mixed-in type (a ``str`` enum such as matplotlib's ``CapStyle``)."""

    def _enc(self, v: Any, depth: int) -> Any:
        if isinstance(v, enum.Enum):
            return self._export(v)
        return super()._enc(v, depth)


#: What may go as a table callable by its key: a class, a function, a builtin, and a library function wrapped by
#: ``functools.lru_cache`` (pandas 3's period tick finders), whose key is its wrapped function's.
_CALLABLE_KINDS = (type, types.FunctionType, types.BuiltinFunctionType, type(functools.lru_cache(None)(len)))


class _Lister:
    """The program's side of one mirror: encodes a value, listing each library object it reaches (breadth first)."""

    def __init__(self, tagged: dict[int, Any], by_reference: Callable[[Any], list],
                 admit: Callable[[type], bool], admit_callable: Callable[[str], bool],
                 listed: dict[int, Any] | None) -> None:
        self.tagged, self.by_reference = tagged, by_reference
        self.admit, self.admit_callable = admit, admit_callable
        self.listed: dict[int, Any] = {} if listed is None else listed
        self.todo: list[tuple[Any, tuple]] = []
        self.boxes: list = []  # the trees of plain containers that methods are bound to
        self.box_index: dict[int, int] = {}
        self.keep: list = []

    def tree(self, value: Any) -> Any:
        return _MirrorCodec(self._export, None, _LIMITS).encode(value)

    def _export(self, obj: Any) -> list:
        key = key_of(obj) if isinstance(obj, _CALLABLE_KINDS) else None
        if key is not None and self.admit_callable(key):
            return ["r", "fn", key]
        if type(obj) is functools.partial and not obj.__dict__:
            return ["r", "new", "partial", [self.tree(obj.func), self.tree(obj.args), self.tree(obj.keywords)]]
        if type(obj) is object:  # a sentinel
            return ["r", "new", "object", []]
        if type(obj) is itertools.count:  # a counter of ids (its start and step)
            counted = obj.__reduce__()[1]
            if all(type(n) in (int, float) for n in counted):
                return ["r", "new", "count", list(counted)]
        owner = getattr(obj, "__self__", None)
        if isinstance(obj, (types.MethodType, types.BuiltinMethodType)) and owner is not None \
                and not isinstance(owner, (type, types.ModuleType)):
            name = obj.__name__
            if isinstance(obj, types.MethodType) and self.admit(type(owner)):
                return ["r", "meth", self.tree(owner), name]
            if type(owner) in (list, dict, set) and name in BOUND_BUILTIN_METHODS:
                return ["r", "meth", self._box(owner), name]
        cls = type(obj)
        if isinstance(obj, enum.Enum) and self.admit(cls) and type(obj.value) in (str, int):
            return ["r", "enum", key_of(cls), obj.value]  # a member by its value (matplotlib's CapStyle.butt)
        if not isinstance(obj, type) and self.admit(cls):
            if id(obj) in self.listed:
                return ["r", "obj", id(obj)]
            reduced = _reduced(obj)
            if reduced is not None:
                if len(self.listed) >= MAX_OBJECTS:
                    raise CodecError(f"the value holds more than {MAX_OBJECTS} library objects")
                self.listed[id(obj)] = obj
                self.todo.append((obj, reduced))
                return ["r", "obj", id(obj)]
        return ["r", "mine", *self.by_reference(obj)]

    def _box(self, container: Any) -> list:
        """A plain container a method is bound to (an Axes' children, whose ``remove`` each artist holds), sent once
        in the mirror's boxes however many methods are bound to it: ``["r", "box", index]``."""
        index = self.box_index.get(id(container))
        if index is None:
            index = self.box_index[id(container)] = len(self.boxes)
            self.boxes.append(None)
            self.keep.append(container)  # alive while the mirror is made, so that its id is not reused
            self.boxes[index] = self.tree(container)
        return ["r", "box", index]

    def mirror(self, value: Any) -> list:
        root = self.tree(value)
        objects: list = []
        done = 0
        while done < len(self.todo):
            obj, (state, items, entries, members) = self.todo[done]
            done += 1
            objects.append([id(obj), key_of(type(obj)), self.tree(state), None if items is None else self.tree(items),
                            None if entries is None else self.tree(entries),
                            None if members is None else self.tree(members)])
        self.tagged.update(self.listed)
        return ["mirror", root, objects, self.boxes]


def snapshot(obj: Any, tagged: dict[int, Any], by_reference: Callable[[Any], list],
             admit: Callable[[type], bool] = mirrored,
             admit_callable: Callable[[str], bool] = CALLABLES.__contains__,
             listed: dict[int, Any] | None = None) -> list | None:
    """The mirror of ``obj``: its tree with its library objects listed and tagged (``tagged`` keeps each by its tag,
    for the way back), and the program's own objects in it by reference (``by_reference(o)``: ``[handle, claim,
    capabilities]`` of a stand-in); None where it cannot be made (then ``obj`` crosses as a stand-in). ``admit``
    and ``admit_callable`` which callables go by their key (the table's: :func:`mirrored` and its callables; a survey
    admits more). ``listed`` holds the objects earlier mirrors of the same message listed (by tag): this one refers
    to them, and lists what it adds there; on a failure it adds nothing."""
    shared = {} if listed is None else listed
    lister = _Lister(tagged, by_reference, admit, admit_callable, dict(shared))
    try:
        tree = lister.mirror(obj)
    except Exception:  # noqa: BLE001 - any failure: the object crosses as a stand-in
        return None
    shared.update(lister.listed)
    return tree


# ------------------------------------------------------------------------------------------------ both sides

#: The references by which a mirror holds an object that is no library object of its own: the program's, or one of
#: the judge's the program was handed (``["r", kind, handle, ...]``).
_BY_REFERENCE = ("mine", "yours")


def _references_in(tree: Any) -> tuple[set[str], set[int]]:
    """The classes claimed by the objects that ``tree`` holds by reference, at any depth (in its containers, a
    partial's parts, a bound method's owner), and the boxes it refers to. An over-reading: every list of the tree
    that reads as a reference counts, a data list that happens to read so too (it can only refuse more). A reference
    to another listed object (``"obj"``) ends the walk there: that object's own places are read as its own."""
    found: set[str] = set()
    boxes: set[int] = set()
    todo = [tree]
    while todo:
        node = todo.pop()
        if type(node) is not list:
            continue
        if len(node) >= 2 and node[0] == "r":
            kind = node[1]
            if kind in _BY_REFERENCE:
                claim = node[3] if kind == "mine" and len(node) > 3 else None
                found.add(":".join(str(part) for part in claim[:2]) if type(claim) is list else str(kind))
                continue
            if kind in ("obj", "fn", "enum"):
                continue
            if kind == "box" and len(node) == 3 and type(node[2]) is int:
                boxes.add(node[2])
                continue
        todo.extend(node)
    return found, boxes


def _places(entry: list) -> list[tuple[str, Any]]:
    """The places of one listed object (``[tag, key, state, items, entries, members]``) and the tree at each: each
    top-level name of a dict state (and of its slots), else ``"[state]"`` for the whole; ``"[items]"``,
    ``"[entries]"``, ``"[members]"``; a name that is no string is ``"?"``."""
    places: list[tuple[str, Any]] = []
    state = entry[2]
    parts = state[1] if type(state) is list and len(state) == 2 and state[0] == "t" and type(state[1]) is list \
        else [state]
    for part in parts:
        if type(part) is list and len(part) == 2 and part[0] == "d" and type(part[1]) is list:
            flat = part[1]
            for i in range(0, len(flat), 2):
                places.append((flat[i] if type(flat[i]) is str else "?", flat[i:i + 2]))
        elif part is not None:
            places.append(("[state]", part))
    places += [(name, tree) for name, tree in zip(("[items]", "[entries]", "[members]"), entry[3:6])
               if tree is not None]
    return places


def references_held(objects: list, boxes: list) -> dict[tuple[str, str], set[str]]:
    """Where the library objects of a mirror (its ``objects`` and ``boxes`` as sent) hold an object by reference:
    ``(key, place) -> the classes those objects claim``, ``key`` the class the mirror names for the holder, ``place``
    a top-level name of its state (see :func:`_places`). Read from the trees alone, before anything is made: the
    judge refuses a mirror with a place the table does not name (:data:`.mirror_table.SLOTS`); the survey records
    them. A malformed entry is skipped here (the judge refuses it when it makes the objects); references at the
    mirror's root, outside every library object, are the program's value itself and are not counted."""
    in_boxes = [_references_in(box) for box in boxes]

    def through(linked: set[int]) -> set[str]:  # what the boxes reached from ``linked`` hold, boxes in boxes too
        found: set[str] = set()
        todo, seen = list(linked), set(linked)
        while todo:
            index = todo.pop()
            if not 0 <= index < len(in_boxes):
                continue
            found |= in_boxes[index][0]
            todo += [more for more in in_boxes[index][1] - seen]
            seen |= in_boxes[index][1]
        return found

    held: dict[tuple[str, str], set[str]] = {}
    for entry in objects:
        if not (type(entry) is list and len(entry) == 6):
            continue
        key = entry[1] if type(entry[1]) is str else "?"
        for place, tree in _places(entry):
            found, linked = _references_in(tree)
            found |= through(linked)
            if found:
                held.setdefault((key, place), set()).update(found)
    return held


# ------------------------------------------------------------------------------------------------ judge side

class Mirrors:
    """The judge's mirrors of one run.

    >>> mirrors = Mirrors()
    >>> mirrors.tag_of(object()) is None
    True
    >>> mirrors.load(["mirror", ["r", "fn", "builtins:print"], []])
    Traceback (most recent call last):
    ...
    convcodeworld_gym.sandbox.run.mirror.MirrorRefused: 'builtins:print' is not among the library callables a mirror may hold
    """

    def __init__(self) -> None:
        self._by_tag: dict[int, Any] = {}
        self._tags: dict[int, int] = {}  # id(mirror) -> tag

    def tag_of(self, obj: Any) -> int | None:
        """The program's tag of ``obj`` when it is one of this run's mirrors (then it goes back as the original)."""
        return self._tags.get(id(obj))

    def load(self, tree: Any, by_reference: Callable[[list], Any] | None = None) -> Any:
        """Rebuild a mirror from the program's process (see the module docstring); :class:`MirrorRefused` if not.
        ``by_reference`` turns the ``["mine", handle, claim, capabilities]`` of a program object (or ``["yours",
        handle]`` of the judge's own) into what it stands for; without one, such a mirror is refused."""
        if not (type(tree) is list and len(tree) in (3, 4) and tree[0] == "mirror" and type(tree[2]) is list
                and (len(tree) == 3 or type(tree[3]) is list)):
            raise MirrorRefused("a malformed mirror")
        if len(tree[2]) > MAX_OBJECTS or len(tree) == 4 and len(tree[3]) > MAX_OBJECTS:
            raise MirrorRefused(f"a mirror of more than {MAX_OBJECTS} objects")
        boxes = tree[3] if len(tree) == 4 else []
        for (key, place), claims in references_held(tree[2], boxes).items():
            if (key, place) not in SLOTS:
                raise MirrorRefused(f"a {key[:120]} object holds the program's {sorted(claims)[0][:80]} object at "
                                    f"{place[:60]!r}, where the judge's library would ask the program what it computes "
                                    "from the object's own data")
        build = _Build(self, by_reference)
        try:
            return build.run(tree[1], tree[2], boxes)
        except MirrorRefused:
            raise
        except RecursionError:
            raise MirrorRefused("the mirror is nested too deeply") from None
        except Exception as exc:  # noqa: BLE001 - a malformed tree, or a state the library refused
            raise MirrorRefused(f"the mirror could not be rebuilt ({type(exc).__name__}: {str(exc)[:200]})") from None

    def _object(self, tag: int, cls: type, members: Any = None) -> Any:
        """This run's mirror of ``tag`` when it is of ``cls`` (refreshed in place by the state that follows), else a
        new object of ``cls``, made by its ``__new__`` alone, or, for a tuple subclass, by ``tuple.__new__`` of its
        ``members`` (a tuple; no library code runs)."""
        found = self._by_tag.get(tag)
        if members is None and found is not None and type(found) is cls:
            return found
        if members is None:
            obj = cls.__new__(cls)
        elif issubclass(cls, tuple) and type(members) is tuple:
            obj = tuple.__new__(cls, members)
        else:
            raise MirrorRefused(f"members given to a {cls.__qualname__} object, which is no tuple")
        if type(obj) is not cls:
            raise MirrorRefused(f"{key_of(cls)}.__new__ made no object of its class")
        self._by_tag[tag] = obj
        self._tags[id(obj)] = tag
        return obj


class _Build:
    """One mirror being rebuilt in the judge."""

    def __init__(self, mirrors: Mirrors, by_reference: Callable[[list], Any] | None) -> None:
        self.mirrors, self.by_reference = mirrors, by_reference
        self.made: dict[int, Any] = {}
        self.classes: dict[int, type] = {}
        self.made_ids: set[int] = set()
        self.boxes: list = []
        self.references: dict[int, Any] = {}  # id -> the stand-ins this mirror's references became

    def run(self, root: Any, objects: list, boxes: list) -> Any:
        tuples = []
        for entry in objects:
            if not (type(entry) is list and len(entry) == 6 and type(entry[0]) is int):
                raise MirrorRefused("a malformed object in the mirror")
            tag = entry[0]
            if tag in self.made or tag in self.classes:
                raise MirrorRefused("an object listed twice in the mirror")
            try:
                cls = self.classes[tag] = table_class(entry[1])
            except LookupError as exc:
                raise MirrorRefused(str(exc)) from None
            if entry[5] is None:
                self.made[tag] = self.mirrors._object(tag, cls)  # noqa: SLF001
            else:
                tuples.append(entry)
        self.made_ids = {id(obj) for obj in self.made.values()}
        for tag, _, _, _, _, members in reversed(tuples):  # made of their members: after them (listed later)
            self.made[tag] = self.mirrors._object(tag, self.classes[tag], self.value(members))  # noqa: SLF001
            self.made_ids.add(id(self.made[tag]))
        for box in boxes:  # plain containers that methods are bound to: after the objects they hold are made
            found = self.value(box)
            if type(found) not in (list, dict, set):
                raise MirrorRefused("a box of the mirror holds no plain container")
            self.boxes.append(found)
        for tag, _, state, items, entries, _ in reversed(objects):
            obj = self.made[tag]
            _give_state(obj, self.value(state), None if items is None else self.value(items),
                        None if entries is None else self.value(entries))
        value = self.value(root)
        _refuse_hidden_state(self.made.values(), self.references)
        return value

    def value(self, tree: Any) -> Any:
        try:
            return Codec(None, self._resolve, _LIMITS, masks=False).decode(tree)
        except CodecError as exc:
            raise MirrorRefused(str(exc)) from None

    def _resolve(self, ref: list) -> Any:  # noqa: PLR0911
        kind = ref[0] if ref else None
        if kind == "obj" and len(ref) == 2 and type(ref[1]) is int:
            found = self.made.get(ref[1])
            if found is None:  # listed by an earlier mirror (of the same message): the judge's object of that tag
                found = self.mirrors._by_tag.get(ref[1])  # noqa: SLF001
            if found is not None:
                return found
        if kind == "fn" and len(ref) == 2:
            try:
                return table_callable(ref[1])
            except LookupError as exc:
                raise MirrorRefused(str(exc)) from None
        if kind == "box" and len(ref) == 2 and type(ref[1]) is int and 0 <= ref[1] < len(self.boxes):
            return self.boxes[ref[1]]
        if kind == "enum" and len(ref) == 3:
            return _member(ref[1], ref[2])
        if kind == "meth" and len(ref) == 3:
            return _method(self.value(ref[1]), ref[2], self.made_ids)
        if kind == "new" and len(ref) == 3 and ref[1] == "partial":
            return self._partial(ref[2])
        if kind == "new" and len(ref) == 3 and ref[1] == "object" and ref[2] == []:
            return object()
        if kind == "new" and len(ref) == 3 and ref[1] == "count" and type(ref[2]) is list and len(ref[2]) <= 2 \
                and all(type(n) in (int, float) for n in ref[2]):
            return itertools.count(*ref[2])
        if kind in ("mine", "yours") and self.by_reference is not None:
            found = self.by_reference(list(ref))
            self.references[id(found)] = found
            return found
        raise MirrorRefused(f"the mirror holds a malformed reference ({str(kind)[:20]!r})")

    def _partial(self, parts: Any) -> functools.partial:
        """``functools.partial`` from typed parts: a callable of this mirror, a tuple, a dict of names."""
        if type(parts) is not list or len(parts) != 3:
            raise MirrorRefused("a malformed partial in the mirror")
        func, args, keywords = (self.value(part) for part in parts)
        if not callable(func) or type(args) is not tuple or type(keywords) is not dict \
                or not all(type(name) is str for name in keywords):
            raise MirrorRefused("a malformed partial in the mirror")
        return functools.partial(func, *args, **keywords)


def _member(key: Any, value: Any) -> enum.Enum:
    """The member of the table's enum class ``key`` whose value is ``value`` (a string or an int), as the enum's own
    lookup by value finds it."""
    try:
        cls = table_class(key)
    except LookupError as exc:
        raise MirrorRefused(str(exc)) from None
    if not issubclass(cls, enum.Enum) or type(value) not in (str, int):
        raise MirrorRefused(f"a malformed enum member of {str(key)[:80]} in the mirror")
    return cls(value)


def _method(owner: Any, name: Any, made: set[int]) -> Any:
    """A bound method as a mirror may hold it: a library method of an object rebuilt here (a callback registry's
    ``fig.pick``), or ``remove``/``close`` of a plain container; never a dunder, never anything else."""
    if type(name) is not str or name.startswith("__") or not name.isidentifier():
        raise MirrorRefused(f"the mirror binds attribute {str(name)[:40]!r}, which the judge refuses")
    cls = type(owner)
    if cls in (list, dict, set) and name in BOUND_BUILTIN_METHODS:
        return getattr(owner, name)
    if id(owner) not in made:
        raise MirrorRefused(f"the mirror binds {name!r} of a {cls.__qualname__} object, which the judge refuses")
    found = inspect.getattr_static(owner, name, None)
    module = getattr(found, "__module__", None)
    if not isinstance(found, types.FunctionType) or not isinstance(module, str) or root_of(module) not in MIRRORED_ROOTS:
        raise MirrorRefused(f"the mirror binds {cls.__qualname__}.{name}, which is not a method of the library")
    return getattr(owner, name)


def _checked_keys(part: Any, cls: type, consumed: frozenset[str] = frozenset()) -> dict:
    """A state's dict, its keys names that are neither dunders (but those its ``__setstate__`` consumes, and a
    ``__doc__`` of text) nor memory-address protocols."""
    if type(part) is not dict:
        raise MirrorRefused(f"a {cls.__qualname__} object's state is no dict")
    for name, value in part.items():
        if name == "__doc__" and (value is None or type(value) is str):
            continue  # a docstring of its own (statsmodels' results wrappers copy their results'): inert text
        if type(name) is not str or name in POINTER_PROTOCOLS or \
                (name.startswith("__") and name.endswith("__") and name not in consumed):
            raise MirrorRefused(f"the mirror sets {str(name)[:40]!r} on a {cls.__qualname__} object, which the judge "
                                "refuses")
    return part


def _plain(value: Any, depth: int = 0) -> bool:
    """Is ``value`` plain data: numbers, strings, bytes, None, and lists, tuples and dicts of them?"""
    if value is None or type(value) in (bool, int, float, str, bytes):
        return True
    if depth > 20:
        return False
    if type(value) in (list, tuple):
        return all(_plain(item, depth + 1) for item in value)
    if type(value) is dict:
        return all(_plain(k, depth + 1) and _plain(v, depth + 1) for k, v in value.items())
    return False


def _reviewed_state(state: Any, cls: type, reviewed: Setstate) -> Any:
    """``state`` as a reviewed ``__setstate__`` may be given it: a sequence of plain data of its length, or a dict
    whose keys pass :func:`_checked_keys`."""
    if reviewed.sequence is not None:
        if type(state) not in (list, tuple) or len(state) not in reviewed.sequence or not _plain(state):
            lengths = " or ".join(map(str, reviewed.sequence))
            raise MirrorRefused(f"a {cls.__qualname__} object's state is no sequence of {lengths} plain values")
        return state
    return _checked_keys(state, cls, reviewed.consumed)


def _give_state(obj: Any, state: Any, items: Any, entries: Any) -> None:
    """Give ``obj`` (an instance the judge made) its state: the library's reviewed ``__setstate__``, else a plain
    update of its dict and slots; then a list subclass's items and a dict subclass's entries."""
    cls = type(obj)
    if state is not None:
        reviewed = setstate_of(cls)
        if reviewed is not None:
            reviewed.function(obj, _reviewed_state(state, cls, reviewed))
        else:
            slots = None
            if type(state) is tuple and len(state) == 2:
                state, slots = state
            if state:
                object.__getattribute__(obj, "__dict__").update(_checked_keys(state, cls))
            for name, value in _checked_keys(slots, cls).items() if slots else ():
                object.__setattr__(obj, name, value)
    if items is not None:
        if not isinstance(obj, list) or type(items) is not list:
            raise MirrorRefused(f"the mirror gives items to a {cls.__qualname__} object, which is no list")
        list.extend(obj, items)
    if entries is not None:
        if not isinstance(obj, dict) or type(entries) is not list:
            raise MirrorRefused(f"the mirror gives entries to a {cls.__qualname__} object, which is no dict")
        for pair in entries:
            if type(pair) is not tuple or len(pair) != 2:
                raise MirrorRefused("a malformed entry in the mirror")
            dict.__setitem__(obj, pair[0], pair[1])


def _refuse_hidden_state(made: Any, references: dict[int, Any]) -> None:
    """Refuse a mirror whose objects hold, in their own dicts, what would make the judge's library ask the program
    where it asks the object's class: the program's code in place of a method of their class (``ax.get_title =
    lambda: 'Counts'``: the test would call the program where it calls the library, with its own values), directly
    or inside a partial; or a memory-address protocol. Only the objects made here have dicts the mirror filled: a
    state's containers are plain data (codec trees), its library objects are these, and the program's objects in it
    are stand-ins (``references``). A library callable of the table there (pandas' ``format_coord`` partial) stays."""
    for obj in made:
        try:
            own = object.__getattribute__(obj, "__dict__")
        except AttributeError:
            continue
        for name, value in own.items():
            if name in POINTER_PROTOCOLS:
                raise MirrorRefused(f"the program put {name} in a {type(obj).__qualname__} object's own state")
            if references and _foreign(value, references) and _method_of(type(obj), str(name)):
                raise MirrorRefused(f"the program put its own code in place of {type(obj).__qualname__}.{name}")


@functools.lru_cache(maxsize=65536)
def _method_of(cls: type, name: str) -> bool:
    """Does ``cls`` have a callable attribute ``name`` (a method an instance's own dict would shadow)?"""
    return callable(inspect.getattr_static(cls, name, None))


def _foreign(value: Any, references: dict[int, Any]) -> bool:
    """Is ``value`` (through partials) one of the program's objects sent by reference? (A library callable of the
    table, a library method of a rebuilt object, or a partial of one, is the library's own.)"""
    for _ in range(32):
        if id(value) in references:
            return True
        if not isinstance(value, functools.partial):
            return False
        value = value.func
    return True
