"""Runs in both processes of a split run: mocks across the split judge; the judge owns every mock, the program's process
sees stand-ins where it patched.

In the judge (trusted), :class:`PatchTracker` wraps ``unittest.mock``'s patchers (``patch``,
``patch.object``, ``patch.multiple``, ``patch.dict``; decorators, context managers and
``start``/``stop`` all go through them) to know which patches are active. Before each call into
the program, :meth:`PatchTracker.state` describes them as data: the target (a module by name, a
class by module and qualified name, the test module meaning the program's own module) and the
value there now (a mock: a reference, so the program gets a :class:`~.standin.StandIn` that
forwards to it; data: a copy). :class:`PatchApplier`, in the program's process, makes its own
modules look the same, and undoes what is no longer active. Calls reach the judge's mocks, which
record them, so ``assert_called_once_with`` and ``call_args`` run in the judge on what it saw.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
from typing import Any

__all__ = ["PatchTracker", "PatchApplier", "same_state"]

_import_module = importlib.import_module  # bound once: a test may patch importlib.import_module

_MISSING = object()


def _describe_target(target: Any, judge_module: str) -> list | None:
    """Where ``target`` lives, as data the program's process can resolve, or None."""
    import types

    if isinstance(target, types.ModuleType):
        name = target.__name__
        return ["mod", name]
    if isinstance(target, type):
        module, qualname = getattr(target, "__module__", None), getattr(target, "__qualname__", None)
        if isinstance(module, str) and isinstance(qualname, str) and "<" not in qualname and module != judge_module:
            return ["cls", module, qualname]
    if target is os.environ:
        return ["mod", "os", "environ"]
    return None


class PatchTracker:
    """The judge's active patches (and redirected output, recorded warnings). ``install()`` instruments
    ``unittest.mock`` in this process (once)."""

    def __init__(self, judge_module: str, warning_recorder: Any = None) -> None:
        self.judge_module = judge_module
        self.warning_recorder = warning_recorder
        import warnings

        self._show_warning = warnings._showwarnmsg_impl  # noqa: SLF001 - catch_warnings(record=True) replaces it
        self.version = 0
        self._active: list[tuple[int, Any, Any, str | None]] = []  # (key, target, attribute or None, kind)
        self._lock = threading.Lock()

    def install(self) -> None:
        from unittest import mock

        tracker = self
        enter, exit_ = mock._patch.__enter__, mock._patch.__exit__  # noqa: SLF001 - the judge instruments its own mock
        patch_dict, unpatch_dict = mock._patch_dict._patch_dict, mock._patch_dict._unpatch_dict  # noqa: SLF001

        def tracked_enter(self: Any) -> Any:
            result = enter(self)
            tracker._add(self, self.target, self.attribute, "attr")
            return result

        def tracked_exit(self: Any, *exc_info: Any) -> Any:
            try:
                return exit_(self, *exc_info)
            finally:
                tracker._remove(self)

        def tracked_patch_dict(self: Any) -> Any:
            result = patch_dict(self)
            tracker._add(self, self.in_dict, None, "dict")
            return result

        def tracked_unpatch_dict(self: Any) -> Any:
            try:
                return unpatch_dict(self)
            finally:
                tracker._remove(self)

        mock._patch.__enter__ = tracked_enter  # type: ignore[method-assign]
        mock._patch.__exit__ = tracked_exit  # type: ignore[method-assign]
        mock._patch_dict._patch_dict = tracked_patch_dict  # type: ignore[method-assign]
        mock._patch_dict._unpatch_dict = tracked_unpatch_dict  # type: ignore[method-assign]

    def _add(self, patcher: Any, target: Any, attribute: str | None, kind: str) -> None:
        with self._lock:
            self._active.append((id(patcher), target, attribute, kind))
            self.version += 1

    def _remove(self, patcher: Any) -> None:
        with self._lock:
            for i in range(len(self._active) - 1, -1, -1):
                if self._active[i][0] == id(patcher):
                    del self._active[i]
                    self.version += 1
                    break

    def state(self, program_module: str) -> list:
        """The active patches, in the order they began: ``[key, where, attribute, value]`` (``value`` a dict's
        whole contents for ``patch.dict``). Targets the program's process cannot find are left out. A test
        that redirected ``sys.stdout`` or ``sys.stderr`` (by hand, ``redirect_stdout``) counts as a patch:
        what the program prints then reaches the test's stream."""
        out: list = [[-1 - i, ["mod", "sys"], name, getattr(sys, name)]
                     for i, name in enumerate(("stdout", "stderr")) if getattr(sys, name) is not getattr(sys, f"__{name}__")]
        warnings = sys.modules.get("warnings")
        if (self.warning_recorder is not None and warnings is not None
                and warnings._showwarnmsg_impl is not self._show_warning):  # noqa: SLF001 - a test records warnings
            out.append([-3, ["warnings"], "record", self.warning_recorder])
        with self._lock:
            active = list(self._active)
        for key, target, attribute, kind in active:
            where = _describe_target(target, self.judge_module)
            if target is sys.modules.get(self.judge_module):
                where = ["mod", program_module]
            if where is None:
                continue
            if kind == "dict":
                try:
                    out.append([key, where, None, dict(target)])
                except Exception:  # noqa: BLE001 - a dict-like that cannot be copied
                    continue
            else:
                out.append([key, where, attribute, getattr(target, attribute, None)])
        return out


class PatchApplier:
    """The program side: makes its modules look as the judge's active patches say, undoing the rest."""

    def __init__(self) -> None:
        self._applied: list[tuple[Any, str | None, Any]] = []  # (target, attribute, original or dict copy)
        self._state: list | None = None

    def apply(self, state: Any) -> None:
        """Undo what was applied (newest first), then apply ``state`` (a :meth:`PatchTracker.state`)."""
        if not isinstance(state, list) or state == self._state:
            return
        self._undo()
        self._state = state
        for entry in state:
            if not (isinstance(entry, list) and len(entry) == 4):
                continue
            _, where, attribute, value = entry
            if where == ["warnings"] and attribute == "record":
                self._record_warnings(value)
                continue
            target = _resolve(where)
            if target is None:
                continue
            try:
                if attribute is None:
                    if isinstance(value, dict):
                        saved = dict(target)
                        target.clear()
                        target.update(value)
                        self._applied.append((target, None, saved))
                elif isinstance(attribute, str):
                    self._applied.append((target, attribute, getattr(target, attribute, _MISSING)))
                    setattr(target, attribute, value)
            except Exception:  # noqa: BLE001 - a target that refuses: the program sees the original
                continue

    def _record_warnings(self, recorder: Any) -> None:
        """Send this process's warnings to the judge's recorder (the test's ``catch_warnings(record=True)``),
        as data: text, the category's class chain, file and line; every warning is shown meanwhile."""
        import warnings

        def send(msg: Any) -> None:
            chain = [[c.__module__, c.__qualname__] for c in type(msg.message).__mro__[:8]] if isinstance(
                msg.message, Warning) else [[msg.category.__module__, msg.category.__qualname__]]
            recorder(str(msg.message), chain, str(msg.filename), int(msg.lineno or 0))

        self._applied.append((warnings, "_showwarnmsg_impl", warnings._showwarnmsg_impl))  # noqa: SLF001
        self._applied.append((warnings, "filters", warnings.filters))
        warnings._showwarnmsg_impl = send  # noqa: SLF001
        warnings.filters = list(warnings.filters)
        warnings.simplefilter("always")

    def _undo(self) -> None:
        while self._applied:
            target, attribute, original = self._applied.pop()
            try:
                if attribute is None:
                    target.clear()
                    target.update(original)
                elif original is _MISSING:
                    delattr(target, attribute)
                else:
                    setattr(target, attribute, original)
                    if attribute == "filters" and target is sys.modules.get("warnings"):
                        target._filters_mutated()  # noqa: SLF001
            except Exception:  # noqa: BLE001
                pass


def _resolve(where: Any) -> Any:
    """The object a target description names, in this process (imported if needed), or None."""
    if not (isinstance(where, list) and where and all(isinstance(p, str) for p in where)):
        return None
    try:
        if where[0] == "mod" and len(where) in (2, 3):
            obj = sys.modules.get(where[1]) or _import_module(where[1])
            return getattr(obj, where[2]) if len(where) == 3 else obj
        if where[0] == "cls" and len(where) == 3:
            obj = sys.modules.get(where[1]) or _import_module(where[1])
            for part in where[2].split("."):
                obj = getattr(obj, part)
            return obj
    except Exception:  # noqa: BLE001 - not importable here
        return None
    return None


def same_state(a: list | None, b: list) -> bool:
    """Do two :meth:`PatchTracker.state` lists describe the same patches (the same objects, equal dicts)?"""
    if a is None or len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x[:3] != y[:3]:
            return False
        if x[2] is None and x[3] != y[3] or x[2] is not None and x[3] is not y[3]:
            return False
    return True
