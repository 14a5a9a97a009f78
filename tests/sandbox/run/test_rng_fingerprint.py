"""The random generators' fingerprints: equal exactly where the public states are equal, or absent.

The split judge sends a side's random states only when their fingerprint changed
(:mod:`convcodeworld_gym.sandbox.run.rng_fingerprint`), so a fingerprint that missed a change would let
the two processes draw different numbers where one module draws the same. The hard case is a cached
Gaussian: drawing it, or restoring a state that has one, changes no word of the Mersenne Twister.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from convcodeworld_gym.sandbox import SandboxExecutor, SandboxSettings, TimePolicy
from convcodeworld_gym.sandbox.run import rng_fingerprint
from convcodeworld_gym.tasks import Task

np = pytest.importorskip("numpy")


def _numpy_state() -> tuple:
    name, key, pos, has_gauss, gauss = np.random.get_state(legacy=True)
    return name, key.tobytes(), pos, has_gauss, gauss


def _restore_cached(get: Callable[[], object], draw: Callable[[], object], put: Callable[[object], None]
                    ) -> Callable[[], None]:
    """An operation that puts back a state holding a cached Gaussian whose words are the current ones."""
    draw()  # an odd number of Gaussians: one is cached
    saved = get()
    draw()  # the cached one is used: no word changes

    def restore() -> None:
        put(saved)

    return restore


NUMPY_OPS: dict[str, Callable[[], Callable[[], None]]] = {
    "nothing": lambda: lambda: None,
    "a uniform draw": lambda: np.random.rand,
    "a Gaussian (a pair made, one cached)": lambda: np.random.standard_normal,
    "the same seed again": lambda: (np.random.seed(7), lambda: np.random.seed(7))[1],
    "another seed": lambda: lambda: np.random.seed(8),
    "a state with a cached Gaussian put back": lambda: _restore_cached(np.random.get_state, np.random.standard_normal,
                                                                      np.random.set_state),
}
RANDOM_OPS: dict[str, Callable[[], Callable[[], None]]] = {
    "nothing": lambda: lambda: None,
    "a draw": lambda: random.random,
    "a Gaussian (a pair made, one cached)": lambda: lambda: random.gauss(0.0, 1.0),
    "the same seed again": lambda: (random.seed(7), lambda: random.seed(7))[1],
    "a state with a cached Gaussian put back": lambda: _restore_cached(random.getstate, lambda: random.gauss(0.0, 1.0),
                                                                      random.setstate),
}


@pytest.mark.parametrize("op", NUMPY_OPS)
def test_the_numpy_fingerprint_changes_exactly_when_the_state_does(op):
    np.random.seed(3)
    for _ in range(2):  # with no Gaussian cached, then with one
        operation = NUMPY_OPS[op]()
        state, picture = _numpy_state(), rng_fingerprint.numpy_fingerprint()
        assert picture is not None
        operation()
        assert (rng_fingerprint.numpy_fingerprint() == picture) == (_numpy_state() == state), op
        np.random.standard_normal()


@pytest.mark.parametrize("op", RANDOM_OPS)
def test_the_random_fingerprint_changes_exactly_when_the_state_does(op):
    random.seed(3)
    for _ in range(2):
        operation = RANDOM_OPS[op]()
        state, picture = random.getstate(), rng_fingerprint.random_fingerprint()
        assert picture is not None
        operation()
        assert (rng_fingerprint.random_fingerprint() == picture) == (random.getstate() == state), op
        random.gauss(0.0, 1.0)


def test_a_cached_gaussian_put_back_changes_the_numpy_fingerprint_though_no_word_does():
    restore = _restore_cached(np.random.get_state, np.random.standard_normal, np.random.set_state)
    words, picture = np.random.get_state()[1].copy(), rng_fingerprint.numpy_fingerprint()
    restore()
    assert (np.random.get_state()[1] == words).all()
    assert rng_fingerprint.numpy_fingerprint() != picture


def test_no_fingerprint_for_a_generator_that_is_not_the_standard_one(monkeypatch):
    monkeypatch.setattr(np.random, "get_state", np.random.RandomState(np.random.PCG64(1)).get_state)
    assert rng_fingerprint.numpy_fingerprint() is None
    monkeypatch.setattr(random, "getstate", lambda: (3, (0,) * 625, None))  # not a C Mersenne Twister's method
    assert rng_fingerprint.random_fingerprint() is None


# ----------------------------------------------------------------------------- through the split judge

CACHED_TESTS = """import random
import unittest
import numpy as np
class TestCases(unittest.TestCase):
    def test_numpy_cached_gaussian(self):
        np.random.seed(0)
        np.random.standard_normal()
        saved = np.random.get_state()  # a Gaussian cached
        np.random.standard_normal()  # used: the same words, none cached
        task_func(False)  # a call that draws nothing
        np.random.set_state(saved)  # the same words, one cached again
        self.assertEqual(task_func(True), saved[4])
    def test_random_cached_gaussian(self):
        random.seed(0)
        random.gauss(0.0, 1.0)
        saved = random.getstate()
        random.gauss(0.0, 1.0)
        task_func(False)
        random.setstate(saved)
        self.assertEqual(task_func(True, True), saved[2])
"""
CACHED = Task("shared/cached_gaussian", "Draw a Gaussian.", "import random\nimport numpy as np\ndef task_func(draw, std=False):\n",
              "task_func",
              "    if draw:\n        return random.gauss(0.0, 1.0) if std else float(np.random.standard_normal())\n",
              CACHED_TESTS)


def test_a_cached_gaussian_the_tests_put_back_is_the_one_the_program_draws():
    settings = SandboxSettings(tmpfs_mb=64, tmpfs_inodes=2000, address_space_mb=4096, file_size_mb=32, max_processes=64)
    with SandboxExecutor(workers=1, settings=settings, time_policy=TimePolicy(floor_s=10.0, cap_s=30.0)) as ex:
        result = ex.run(CACHED, CACHED.ground_truth)
    assert result.details["judge"] == "split"
    assert result.passed, "\n".join([result.crash or ""] + [t.traceback for t in result.tests])


def test_a_warm_worker_has_numpy_random_loaded_before_it_forks_a_run():
    """numpy 2 imports ``numpy.random`` on first use; the worker's warm-up loads it (through the fingerprints' check),
    so that no run's processes import it again (each run of the numpy group did, in both of its processes)."""
    import subprocess
    import sys

    from convcodeworld_gym.sandbox.host.launch import PACKAGE_DIR, worker_boot

    code = worker_boot(PACKAGE_DIR, start=False) + (
        "import numpy\nbefore = 'numpy.random' in sys.modules\n"
        "from convcodeworld_gym.sandbox.worker.warm import warm_up\nwarm_up()\n"
        "from convcodeworld_gym.sandbox.run import rng_fingerprint\n"
        "print(before, 'numpy.random' in sys.modules, rng_fingerprint.numpy_fingerprint() is not None)\n")
    out = subprocess.run([sys.executable, "-s", "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True", "True"]
