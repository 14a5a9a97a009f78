"""Runs in the host: the judge's policy, which mode judges a task's run, and what the static check of in-process
programs holds against one.

Everything here runs in the host, before a run or after it, on source text only; nothing here runs
inside a run (the judge itself, both sides of a split run, is :mod:`..run.judge`). The executor
(:class:`~.pool.SandboxExecutor`) asks it: which modes a task's canonical solution is tried in
(:func:`calibration_modes`), which mode a run is judged in (:func:`run_mode`), and, for a passing
in-process run, what it used that could forge its verdict (:func:`flagged_constructs`, :func:`refusal`).

Holds:
    JUDGES                 the ``judge=`` values of an executor
    check_judge            refuse any other ``judge=``
    static_mode            the mode a test source forces, if any
    first_mode             the mode a task is tried in first
    calibration_modes      the modes a canonical solution is tried in, in order
    run_mode               the mode one run is judged in
    suspicious_constructs  what in a program could forge an in-process verdict
    flagged_constructs     what of those a program judged in a mode is held to (beyond the task's own solution)
    refusal                the crash text of a passing run that is not rewarded for them
"""

from __future__ import annotations

import ast

from ...tasks.record import parse_result
from ..messages import Mode

__all__ = ["JUDGES", "check_judge", "static_mode", "first_mode", "calibration_modes", "run_mode",
           "suspicious_constructs", "flagged_constructs", "refusal"]


def static_mode(test_source: str) -> Mode | None:
    """The mode a test source forces, or ``None`` (then calibration decides). No source forces one now:
    the tests' mocks reach the program's process through stand-ins.

    >>> static_mode("from unittest.mock import patch\\n@patch('os.listdir')\\ndef test_a(self, m): pass") is None
    True
    """
    return None


_SUSPICIOUS_NAMES = {
    "_getframe": "frame access (sys._getframe)",
    "f_back": "frame walking (f_back)",
    "f_globals": "frame globals (f_globals)",
    "f_locals": "frame locals (f_locals)",
    "tb_frame": "frame access (tb_frame)",
    "currentframe": "frame access (inspect.currentframe)",
    "stack": None,  # inspect.stack: only with inspect, checked below
    "get_objects": "gc.get_objects",
    "get_referrers": "gc.get_referrers",
    "_exit": "os._exit",
    "settrace": "tracing hooks (settrace)",
    "setprofile": "profiling hooks (setprofile)",
    "TestCase": "unittest.TestCase internals",
    "TestResult": "unittest.TestResult internals",
    "TextTestRunner": "unittest runner internals",
    "TestLoader": "unittest loader internals",
    "addSuccess": "unittest result internals",
    "__subclasses__": "class-hierarchy walking (__subclasses__)",
}


def suspicious_constructs(program: str) -> tuple[str, ...]:
    """What in ``program`` could forge an in-process verdict: frames, gc, unittest internals, ``os._exit``, fds.

    Parsed, never run. A program with a syntax error returns ``()`` (it compiles nowhere); one nested too deep
    for this process to parse is flagged for that (the run's own process may parse it: this check fails closed).

    >>> suspicious_constructs("import sys\\ndef task_func():\\n    sys._getframe(1).f_globals['x'] = 1")
    ('frame globals (f_globals)', 'frame access (sys._getframe)')
    >>> suspicious_constructs("def task_func(x):\\n    return x + 1")
    ()
    """
    tree = parse_result(program)
    if tree == "syntax":
        return ()  # it runs nowhere: the run says why
    if isinstance(tree, str):  # too deep to check here, and it may still compile in the run: fail closed
        return (f"code nested too deep for the check ({tree})",)
    found: dict[str, None] = {}
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Attribute):
            name = node.attr
        elif isinstance(node, ast.Name):
            name = node.id
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            for root in sorted({m.split(".")[0] for m in mods if m} & {"unittest", "gc", "ctypes"}):
                found[f"imports {root}"] = None
            name = None
            for alias in node.names:
                if alias.name in _SUSPICIOUS_NAMES and _SUSPICIOUS_NAMES[alias.name]:
                    found[_SUSPICIOUS_NAMES[alias.name]] = None  # type: ignore[index]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if "/proc/self/fd" in node.value or "/dev/fd" in node.value or "/proc/self/mem" in node.value:
                found["result channel access (/proc/self/fd)"] = None
        if name is not None and _SUSPICIOUS_NAMES.get(name):
            found[_SUSPICIOUS_NAMES[name]] = None  # type: ignore[index]
    return tuple(found)


#: The ``judge=`` values of an executor: ``auto`` (per task, calibrated) or one mode for every task.
JUDGES = ("auto", Mode.SPLIT.value, Mode.INPROCESS.value)


def check_judge(judge: str) -> None:
    """Raise ValueError unless ``judge`` is one of :data:`JUDGES`.

    >>> check_judge("split")
    >>> check_judge("trusting")
    Traceback (most recent call last):
    ValueError: judge must be 'auto', 'split' or 'inprocess', got 'trusting'
    """
    if judge not in JUDGES:
        raise ValueError(f"judge must be 'auto', 'split' or 'inprocess', got {judge!r}")


def first_mode(test_source: str) -> Mode:
    """The mode a task is tried in first: the one its tests force (:func:`static_mode`), else split."""
    return static_mode(test_source) or Mode.SPLIT


def calibration_modes(test_source: str, allow_forgeable: bool) -> tuple[Mode, ...]:
    """The modes a task's canonical solution is tried in, in order, until one passes: :func:`first_mode`,
    then in-process only with ``allow_forgeable``.

    >>> calibration_modes("", False), calibration_modes("", True)
    ((<Mode.SPLIT: 'split'>,), (<Mode.SPLIT: 'split'>, <Mode.INPROCESS: 'inprocess'>))
    """
    first = first_mode(test_source)
    return tuple(dict.fromkeys((first, Mode.INPROCESS) if allow_forgeable else (first,)))


def run_mode(judge: str, test_source: str, calibrated: Mode | None, allow_forgeable: bool) -> Mode:
    """The mode one run is judged in: ``judge`` when it names a mode; else the task's ``calibrated`` mode, but
    split unless ``allow_forgeable`` (a profile stored before, or by an executor that allowed it, may say
    in-process); else, uncalibrated, :func:`first_mode`.

    >>> run_mode("auto", "", Mode.INPROCESS, False), run_mode("auto", "", None, False)
    (<Mode.SPLIT: 'split'>, <Mode.SPLIT: 'split'>)
    >>> run_mode("inprocess", "", None, False), run_mode("auto", "", Mode.INPROCESS, True)
    (<Mode.INPROCESS: 'inprocess'>, <Mode.INPROCESS: 'inprocess'>)
    """
    if judge != "auto":
        return Mode(judge)
    if calibrated is None:
        return first_mode(test_source)
    return Mode.SPLIT if calibrated is Mode.INPROCESS and not allow_forgeable else calibrated


def flagged_constructs(mode: Mode, program: str, ground_truth: str) -> tuple[str, ...]:
    """What the static check holds against ``program`` judged in ``mode``: in-process, its
    :func:`suspicious_constructs` beyond those of the task's own solution ``ground_truth`` (what the task
    needs is not held against a program); split, nothing.

    >>> flagged_constructs(Mode.INPROCESS, "import gc\\nimport os", "import os")
    ('imports gc',)
    >>> flagged_constructs(Mode.INPROCESS, "import gc", "import gc"), flagged_constructs(Mode.SPLIT, "import gc", "")
    ((), ())
    """
    if mode is not Mode.INPROCESS:
        return ()
    allowed = set(suspicious_constructs(ground_truth))
    return tuple(c for c in suspicious_constructs(program) if c not in allowed)


def refusal(flagged: tuple[str, ...]) -> str:
    """The crash text of a passing in-process run that uses the ``flagged`` constructs: it is not rewarded."""
    return ("JudgeRefused: this task is judged in-process, where a program can forge its own verdict, and this "
            f"program uses {', '.join(flagged)}; it is not rewarded.")
