"""Warming the process that runs are forked from: the task set's imports, and the first-use work of its libraries.

The zygote (:mod:`.zygote`) calls :func:`import_quietly` with the module names it is told (never a job), so every
run forked from it starts with them loaded. Nothing here runs task code.

Holds:
    import_quietly   import modules (a failure is left to the run that needs them), warm them up, settle memory
    warm_up          our own small pandas/matplotlib workload, so runs inherit what libraries do on first use
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable

from . import rng_fingerprint
from .confinement import memory

__all__ = ["import_quietly", "warm_up"]


def import_quietly(names: Iterable[str]) -> None:
    """Import ``names`` into this process (failures are left to the run to report), :func:`warm_up` them, and
    :func:`.confinement.memory.settle` this process so that forking it stays cheap."""
    for name in names:
        if name not in sys.modules:
            _import_one(name)
    warm_up()
    memory.settle()


_warmed: set[str] = set()


def warm_up() -> None:
    """Run our own small pandas and matplotlib workload once in this process (never task code).

    Libraries set up much on first use (pandas' formatters and testing helpers, matplotlib's
    figure, font and Agg machinery); done here, every forked run inherits it instead of redoing it.
    It draws no random numbers and leaves no figure open: the state a run starts from is unchanged. It
    also checks the random generators' layouts for the split judge's fingerprints (:mod:`.rng_fingerprint`),
    which loads ``numpy.random`` where numpy is loaded (numpy 2 imports it on first use: each run's judge and
    program paid for that import, about 17 ms each, in the numpy worker group). Two more modules that
    libraries import only on first use, and that many tasks reach, are loaded the same way: ``numpy.testing``
    (numpy 1.x; 13 ms, in 49 BigCodeBench tasks' tests) and pandas' matplotlib plotting
    (``DataFrame.plot``/``hist``: 7-10 ms of imports and set-up, in 65 of the 337 pandas and mocked tasks).
    """
    rng_fingerprint.prepare()
    if "numpy" in sys.modules and "numpy.testing" not in _warmed:
        _warmed.add("numpy.testing")
        _import_one("numpy.testing")
    if "pandas" in sys.modules and "pandas" not in _warmed:
        _warmed.add("pandas")
        try:
            pd = sys.modules["pandas"]
            series = pd.Series({"a": 1, "b": 2})
            pd.testing.assert_series_equal(series, series.copy())
            frame = pd.DataFrame({"x": range(6), "y": list("aabbcc")})
            pd.testing.assert_frame_equal(frame.groupby("y").sum(), frame.groupby("y").sum())
            repr(frame), frame.describe(), pd.to_datetime(["2024-01-01"])
        except Exception:  # noqa: BLE001 - a warm-up is an optimisation only
            pass
    if "matplotlib.pyplot" in sys.modules and "matplotlib" not in _warmed:
        _warmed.add("matplotlib")
        try:
            plt = sys.modules["matplotlib.pyplot"]
            fig, ax = plt.subplots()
            ax.hist([0.1, 0.5, 0.5, 0.9])
            ax.plot([0, 1], [1, 0], label="l")
            ax.set_title("t")
            ax.set_xlabel("x")
            ax.legend()
            fig.canvas.draw()
            plt.close("all")
        except Exception:  # noqa: BLE001
            pass
    if {"pandas", "matplotlib.pyplot"} <= sys.modules.keys() and "pandas.plotting" not in _warmed:
        _warmed.add("pandas.plotting")
        try:
            pd, plt = sys.modules["pandas"], sys.modules["matplotlib.pyplot"]
            pd.Series([1.0, 2.0]).plot()
            pd.DataFrame({"x": [1.0, 2.0]}).hist()
            plt.close("all")
        except Exception:  # noqa: BLE001
            pass


def _import_one(name: str) -> None:
    """Import ``name``; a failure is left to the run that needs the module to report."""
    try:
        importlib.import_module(name)
    except BaseException:  # noqa: BLE001
        pass
