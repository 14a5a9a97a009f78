"""Runs in the zygote: warming the process that runs are forked from, the task set's imports and the first-use work of
its libraries.

The zygote (:mod:`.zygote`) calls :func:`import_quietly` with the module names it is told (never a job), so every
run forked from it starts with them loaded. Nothing here runs task code.

Holds:
    import_quietly   import modules (a failure is left to the run that needs them), warm them up, settle memory
    warm_up          our own small pandas/matplotlib workload, so runs inherit what libraries do on first use
    rehearse         that workload again with a unittest suite and the codec, in a throwaway fork (which pages runs write)
"""

from __future__ import annotations

import importlib
import io
import sys
import unittest
from collections.abc import Callable, Iterable

from ..confinement import memory
from ..run import rng_fingerprint

__all__ = ["import_quietly", "warm_up", "rehearse"]


def import_quietly(names: Iterable[str]) -> None:
    """Import ``names`` into this process (failures are left to the run to report), :func:`warm_up` them, and
    :func:`..confinement.memory.settle` this process so that forking it stays cheap."""
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
    also checks the random generators' layouts for the split judge's fingerprints (:mod:`..run.rng_fingerprint`),
    which loads ``numpy.random`` where numpy is loaded (numpy 2 imports it on first use: each run's judge and
    program paid for that import, about 17 ms each, in the numpy worker group). Two more modules that
    libraries import only on first use, and that many tasks reach, are loaded the same way: ``numpy.testing``
    (numpy 1.x; 13 ms, in 49 BigCodeBench tasks' tests) and pandas' matplotlib plotting
    (``DataFrame.plot``/``hist``: 7-10 ms of imports and set-up, in 65 of the 337 pandas and mocked tasks).
    """
    rng_fingerprint.prepare()
    for name, work in _workloads():
        if name not in _warmed:
            _warmed.add(name)
            _quietly(work)


def rehearse() -> None:
    """What a run does first, done in a throwaway fork of the zygote to learn which pages runs write
    (:meth:`..confinement.memory.Prefault.rehearsed`): every workload of :func:`warm_up` again, a small
    ``unittest`` suite, and the codec both ways on the values those libraries make. Our own code only."""
    from ..run import codec  # the judge's; not needed by warm_up

    for _, work in _workloads():
        _quietly(work)
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(_Rehearsal)
    unittest.TextTestRunner(stream=io.StringIO()).run(suite)
    values: list[object] = [{"a": [1, 2.5, "x", None]}, (1, 2)]
    if "pandas" in sys.modules:
        pd = sys.modules["pandas"]
        values += [pd.DataFrame({"x": [1, 2], "y": ["a", "b"]}), pd.Series([1.0, 2.0])]
    if "numpy" in sys.modules:
        values.append(sys.modules["numpy"].arange(6).reshape(2, 3))
    for value in values:
        _quietly(lambda v=value: codec.loads(codec.dumps(v)))


class _Rehearsal(unittest.TestCase):
    def test_equal(self) -> None:
        self.assertEqual([1, 2], [1, 2])

    def test_fails(self) -> None:
        self.assertIn(3, [1, 2])  # a failure's traceback is formatted too

    def test_raises(self) -> None:
        with self.assertRaises(ValueError):
            int("x")


def _workloads() -> list[tuple[str, Callable[[], object]]]:
    """The first-use workloads of the libraries loaded here, by name."""
    loaded = sys.modules.keys()
    work: list[tuple[str, Callable[[], object]]] = []
    if "numpy" in loaded:
        work.append(("numpy.testing", lambda: _import_one("numpy.testing")))
    if "pandas" in loaded:
        work.append(("pandas", _pandas))
    if "matplotlib.pyplot" in loaded:
        work.append(("matplotlib", _matplotlib))
    if {"pandas", "matplotlib.pyplot"} <= loaded:
        work.append(("pandas.plotting", _pandas_plotting))
    return work


def _quietly(work: Callable[[], object]) -> None:
    try:
        work()
    except Exception:  # noqa: BLE001 - a warm-up is an optimisation only
        pass


def _pandas() -> None:
    pd = sys.modules["pandas"]
    series = pd.Series({"a": 1, "b": 2})
    pd.testing.assert_series_equal(series, series.copy())
    frame = pd.DataFrame({"x": range(6), "y": list("aabbcc")})
    pd.testing.assert_frame_equal(frame.groupby("y").sum(), frame.groupby("y").sum())
    repr(frame), frame.describe(), pd.to_datetime(["2024-01-01"])


def _matplotlib() -> None:
    plt = sys.modules["matplotlib.pyplot"]
    fig, ax = plt.subplots()
    ax.hist([0.1, 0.5, 0.5, 0.9])
    ax.plot([0, 1], [1, 0], label="l")
    ax.set_title("t")
    ax.set_xlabel("x")
    ax.legend()
    fig.canvas.draw()
    plt.close("all")


def _pandas_plotting() -> None:
    pd, plt = sys.modules["pandas"], sys.modules["matplotlib.pyplot"]
    pd.Series([1.0, 2.0]).plot()
    pd.DataFrame({"x": [1.0, 2.0]}).hist()
    plt.close("all")


def _import_one(name: str) -> None:
    """Import ``name``; a failure is left to the run that needs the module to report."""
    try:
        importlib.import_module(name)
    except BaseException:  # noqa: BLE001
        pass
