"""Runs in both processes of a split run: process-wide state that program and tests share in one module, mirrored across
the judge.

In the reference, the program and its tests are one module in one process: what the program does
to the interpreter's global state (seeding ``random``, appending to ``sys.path``, setting a
matplotlib rcParam) the tests see, and the other way round (a test configures Django's settings,
then calls the program). Split, each process has its own copy, so each side sends, with every
message, the parts that changed since it last sent or applied them (:class:`SharedState`), and the
other side applies them. Every part is plain data, checked by type on arrival; nothing the program
sends is run, imported or looked up by name in the judge:

* :class:`RandomState`, :class:`NumpyRandomState`: the global ``random`` and ``numpy.random`` states, judge to
  program only: the program draws from the stream the tests seeded, but cannot steer what they draw next;
* :class:`SysPath`: ``sys.path``, both ways. The judge lists the program's entries (its tests read
  them) but never imports from them: :func:`pin_imports` makes its imports search only the entries
  it had itself;
* :class:`RcParams`: the matplotlib rcParams the tests name (``plt.rcParams['font.family']``), both
  ways, only as strings, numbers, booleans and lists of them; never ``backend``;
* :class:`DjangoSettings`: the settings the tests configured (``settings.configure(...)``), judge to
  program, once.
"""

from __future__ import annotations

import ast
import functools
import re
import struct
import sys
from collections.abc import Iterable, Sequence
from importlib.machinery import PathFinder
from typing import Any

from ...tasks.record import parse_source
from .rng_fingerprint import numpy_fingerprint, random_fingerprint

__all__ = ["SharedState", "SetterWatch", "RandomState", "NumpyRandomState", "SysPath", "RcParams", "DjangoSettings", "pin_imports", "PinnedPathFinder", "rc_keys"]


class _Part:
    """One piece of shared state: ``out()`` is its value when it changed since it was last sent or applied
    (else None); ``apply(value)`` takes the other side's. Only the sides named in ``sends`` send it.
    ``mark()`` takes the value now as already known to the other side: both processes of a run start
    from the one they were forked from, so nothing is sent until a side changes it.

    A part whose value is costly to read may give a cheap, exact :meth:`fingerprint` (equal fingerprints:
    equal values); ``out()`` then reads the value only when the fingerprint changed."""

    name = ""
    sends: frozenset[str] = frozenset({"judge", "program"})

    def __init__(self, side: str) -> None:
        self.side = side
        self._last: Any = None
        self._seen: Any = None

    def read(self) -> Any:
        raise NotImplementedError

    def write(self, value: Any) -> None:
        raise NotImplementedError

    def key(self, value: Any) -> Any:
        """What tells two values apart (hashable or comparable)."""
        return value

    def fingerprint(self) -> Any:
        """A cheap picture of the value now, equal only where the values are equal; None where there is none."""
        return None

    def reset_since_sent(self) -> bool:
        """Whether this side set the value outright since it last sent it (e.g. reseeded), even to the value it
        sent then: the other side may have moved on from that value since. Asking clears it."""
        return False

    def mark(self) -> None:
        self._seen = self.fingerprint()  # before the read: never newer than the value it stands for
        current = self.read()
        self._last = None if current is None else self.key(current)

    def out(self) -> Any:
        if self.side not in self.sends:
            return None
        reset = self.reset_since_sent()
        seen = self.fingerprint()
        if not reset and seen is not None and seen == self._seen:
            return None
        value = self.read()
        self._seen = seen
        if value is None:
            return None
        key = self.key(value)
        if key == self._last and not reset:
            return None
        self._last = key
        return value

    def takes(self) -> bool:
        """Whether this side takes the other side's value: only when the other side is among those that send it.
        The program owns its process, and so whatever its side sends: a part the judge alone sends (the random
        states the tests draw from) is never taken from the program, whatever its message holds."""
        return ("program" if self.side == "judge" else "judge") in self.sends

    def apply(self, value: Any) -> None:
        self.write(value)
        self.mark()


class SetterWatch:
    """Counts this process's calls of the functions that set a module's global generator outright
    (``random.seed``, ``random.setstate``): each is wrapped in the module, from when the watch is made
    (or, for a module loaded later, from the first :meth:`called` after it is). A value that does not
    travel back (:class:`RandomState`) needs it: a test that reseeds to the value it sent before has still
    reset the stream the program has drawn from since.

    >>> import random
    >>> watch = SetterWatch("random", ("seed",))
    >>> watch.called(), random.seed(1), watch.called(), watch.called()
    (False, None, True, False)
    >>> watch.restore()
    """

    def __init__(self, module: str, names: tuple[str, ...]) -> None:
        self.module, self.names = module, names
        self._calls = 0
        self._originals: dict[str, Any] = {}
        self._install()

    def called(self) -> bool:
        """Whether one of the functions was called since the last ask."""
        self._install()
        called, self._calls = self._calls > 0, 0
        return called

    def _install(self) -> None:
        if self._originals or (module := sys.modules.get(self.module)) is None:
            return
        for name in self.names:
            original = getattr(module, name, None)
            if callable(original):
                self._originals[name] = original
                setattr(module, name, self._counting(original))

    def restore(self) -> None:
        """Put the original functions back."""
        module = sys.modules.get(self.module)
        for name, original in self._originals.items():
            if module is not None:
                setattr(module, name, original)
        self._originals.clear()

    def _counting(self, original: Any) -> Any:
        @functools.wraps(original)
        def counted(*args: Any, **kwargs: Any) -> Any:
            self._calls += 1
            return original(*args, **kwargs)

        return counted


class _GlobalGenerator(_Part):
    """A module's global random generator: judge to program only. The tests' seeds and draws reach the
    program, while what the program does to its own state (drawing, reseeding) never changes the inputs
    the tests draw next. In one module it would, and a program that reseeds after each call could make
    every later input one it knows. On the judge's side, a reseed is sent even when it gives the value
    sent before (:class:`SetterWatch`: the program may have drawn from that value since)."""

    sends = frozenset({"judge"})
    setters: tuple[str, tuple[str, ...]] = ("", ())

    def __init__(self, side: str) -> None:
        super().__init__(side)
        self.watch = SetterWatch(*self.setters) if side in self.sends else None

    def reset_since_sent(self) -> bool:
        return self.watch is not None and self.watch.called()


class RandomState(_GlobalGenerator):
    """The global ``random`` state (tests that seed before calling), its 625 words packed as bytes: one value
    to encode, not 625."""

    name = "random"
    setters = ("random", ("seed", "setstate"))

    def read(self) -> tuple:
        import random

        version, words, gauss = random.getstate()
        return version, struct.pack(f"<{len(words)}I", *words), gauss

    def fingerprint(self) -> Any:
        return random_fingerprint()

    def write(self, value: Any) -> None:
        import random

        if not (isinstance(value, tuple) and len(value) == 3 and type(value[1]) is bytes and len(value[1]) % 4 == 0):
            return
        version, packed, gauss = value
        random.setstate((version, struct.unpack(f"<{len(packed) // 4}I", packed), gauss))


class NumpyRandomState(_GlobalGenerator):
    """``numpy.random``'s global state, where numpy is loaded on both sides."""

    name = "numpy_random"
    setters = ("numpy.random", ("seed", "set_state"))

    def read(self) -> tuple | None:
        np = sys.modules.get("numpy")
        return None if np is None else np.random.get_state(legacy=True)

    def key(self, value: tuple) -> tuple:
        return (value[1].tobytes(), *value[2:])

    def fingerprint(self) -> Any:
        return numpy_fingerprint()

    def write(self, value: Any) -> None:
        np = sys.modules.get("numpy")
        if np is not None and isinstance(value, tuple):
            np.random.set_state(value)


class SysPath(_Part):
    """``sys.path`` as the other side last left it. ``private`` entries (the program's work dir) stay on
    this side only: never sent, kept when the other side's list arrives."""

    name = "path"
    _MAX = 10_000

    def __init__(self, side: str, private: Sequence[str] = (), finder: PinnedPathFinder | None = None) -> None:
        super().__init__(side)
        self.private = tuple(private)
        self.finder = finder

    def read(self) -> list[str]:
        return [p for p in sys.path if isinstance(p, str) and p not in self.private][: self._MAX]

    def key(self, value: list[str]) -> tuple:
        return tuple(value)

    def write(self, value: Any) -> None:
        if not (isinstance(value, list) and all(type(p) is str for p in value)):
            return
        if self.finder is not None:
            self.finder.listed_by_program.update(p for p in value if p not in sys.path)
        sys.path[:] = [p for p in self.private if p not in value] + value


class RcParams(_Part):
    """The matplotlib rcParams named in ``keys`` (what the tests read or set), where matplotlib is loaded."""

    name = "rc"
    _VALUE = (str, int, float, bool)

    def __init__(self, side: str, keys: Iterable[str]) -> None:
        super().__init__(side)
        self.keys = tuple(k for k in keys if k != "backend")

    def read(self) -> dict[str, Any] | None:
        mpl = sys.modules.get("matplotlib")
        if mpl is None or not self.keys:
            return None
        params = mpl.rcParams
        return {k: _plain(params[k]) for k in self.keys if k in params}

    def key(self, value: dict[str, Any]) -> str:
        return repr(sorted(value.items()))

    def write(self, value: Any) -> None:
        mpl = sys.modules.get("matplotlib")
        if mpl is None or not isinstance(value, dict):
            return
        for k, v in value.items():
            if k in self.keys and self._is_value(v):
                try:
                    mpl.rcParams[k] = v
                except (ValueError, KeyError, TypeError):
                    continue

    def _is_value(self, v: Any) -> bool:
        return type(v) in self._VALUE or (type(v) is list and all(type(x) in self._VALUE for x in v))


def _plain(value: Any) -> Any:
    """An rcParam's value as plain data (matplotlib keeps some as its own list subclasses), else None."""
    if isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(x, (str, int, float, bool)) for x in value):
        return list(value)
    return None


class DjangoSettings(_Part):
    """Django's settings as the tests configured them in the judge (its module-level ``settings.configure()``),
    replayed once in the program's process, where the program's responses read them."""

    name = "django"
    sends = frozenset({"judge"})

    def read(self) -> dict[str, Any] | None:
        conf = sys.modules.get("django.conf")
        settings = getattr(conf, "settings", None)
        if settings is None or not settings.configured:
            return None
        holder = object.__getattribute__(settings, "_wrapped")  # a UserSettingsHolder: the explicit settings
        explicit = getattr(holder, "__dict__", {})
        return {k: v for k, v in explicit.items() if k.isupper() and _is_data(v)}

    def key(self, value: dict[str, Any]) -> str:
        return repr(sorted(value))

    def write(self, value: Any) -> None:
        if not isinstance(value, dict) or not all(type(k) is str and k.isupper() for k in value):
            return
        try:
            from django.conf import settings
        except ImportError:
            return
        if not settings.configured:
            settings.configure(**value)


def _is_data(value: Any) -> bool:
    if value is None or type(value) in (str, int, float, bool):
        return True
    if type(value) in (list, tuple):
        return all(_is_data(v) for v in value)
    if type(value) is dict:
        return all(type(k) is str and _is_data(v) for k, v in value.items())
    return False


class SharedState:
    """The parts one side mirrors: ``out()`` goes with each message it sends, ``apply()`` takes what came."""

    def __init__(self, parts: Iterable[_Part]) -> None:
        """Mirror ``parts``, each taken as the other side has it now (:meth:`_Part.mark`): make both sides'
        before either runs anything of the task."""
        self.parts = {part.name: part for part in parts}
        for part in self.parts.values():
            part.mark()

    @classmethod
    def judge(cls, rc: Iterable[str] = ()) -> SharedState:
        """Every part, on the judge's side: its imports pinned first (:func:`pin_imports`)."""
        side = "judge"
        return cls([RandomState(side), NumpyRandomState(side), SysPath(side, finder=pin_imports()), RcParams(side, rc),
                    DjangoSettings(side)])

    @classmethod
    def program(cls, rc: Iterable[str] = (), private_paths: Sequence[str] = ()) -> SharedState:
        """Every part, on the program's side; ``private_paths`` (its work dir) stay in its ``sys.path`` only."""
        side = "program"
        return cls([RandomState(side), NumpyRandomState(side), SysPath(side, private_paths), RcParams(side, rc),
                    DjangoSettings(side)])

    def out(self) -> dict[str, Any]:
        changed = {}
        for name, part in self.parts.items():
            value = part.out()
            if value is not None:
                changed[name] = value
        return changed

    def apply(self, state: Any) -> None:
        if not isinstance(state, dict):
            return
        for name, value in state.items():
            part = self.parts.get(name) if type(name) is str else None
            if part is not None and value is not None and part.takes():
                try:
                    part.apply(value)
                except Exception:  # noqa: BLE001 - a value the other side garbled is not applied
                    continue


_RC_KEY = re.compile(r"[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+\Z")


def rc_keys(test_source: str) -> list[str]:
    """The strings in ``test_source`` that may be rcParams keys (``'font.family'``), where it reads ``rcParams``
    or calls ``rc(``; each side keeps those its matplotlib has.

    >>> rc_keys("import matplotlib.pyplot as plt\\nassert 'Arial' in plt.rcParams['font.family']")
    ['font.family']
    >>> rc_keys("x = 'font.family'")
    []
    """
    if "rcParams" not in test_source and ".rc(" not in test_source:
        return []
    tree = parse_source(test_source)
    if tree is None:
        return []
    return sorted({node.value for node in ast.walk(tree)
                   if isinstance(node, ast.Constant) and isinstance(node.value, str) and _RC_KEY.match(node.value)})


class PinnedPathFinder:
    """The judge's path finder: searches its own ``sys.path`` entries, never those only the program listed there
    (``listed_by_program``), so a test can read them while no module the program wrote is imported in the judge.
    Its own entries as they were when it was pinned stay searched even if the program removed them."""

    def __init__(self) -> None:
        self.listed_by_program: set[str] = set()
        self._own = [p for p in sys.path if isinstance(p, str)]

    def _path(self, path: Any) -> Any:
        if path is not None:
            return path
        current = [p for p in sys.path if isinstance(p, str) and p not in self.listed_by_program]
        return current + [p for p in self._own if p not in current]

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        return PathFinder.find_spec(fullname, self._path(path), target)

    def invalidate_caches(self) -> None:
        PathFinder.invalidate_caches()

    def find_distributions(self, context: Any = None) -> Any:
        from importlib.metadata import DistributionFinder

        context = context or DistributionFinder.Context()
        given = vars(context).get("path")
        return PathFinder.find_distributions(DistributionFinder.Context(name=context.name, path=self._path(given)))


def pin_imports() -> PinnedPathFinder:
    """Put a :class:`PinnedPathFinder` in place of ``PathFinder`` in this process's ``sys.meta_path`` and return
    it (the one already there, if pinned before)."""
    for finder in sys.meta_path:
        if isinstance(finder, PinnedPathFinder):
            return finder
    pinned = PinnedPathFinder()
    sys.meta_path[:] = [pinned if finder is PathFinder else finder for finder in sys.meta_path]
    return pinned
