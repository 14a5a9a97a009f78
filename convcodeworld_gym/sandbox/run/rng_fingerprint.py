"""Runs in both processes of a split run and the warm worker: cheap, exact pictures of the global random generators'
states, for telling whether one changed.

The split judge sends a side's ``random`` and ``numpy.random`` states with every message on which they
changed (:mod:`.shared`). Reading a state the public way costs about 18 us (``random.getstate``: a
tuple of 625 ints) and 45 us (``numpy.random.get_state``: its MT19937 key copied word by word) on each
side of each message; a program that calls a mocked function 500 times pays that 2000 times. These
fingerprints read the same state as raw bytes in about 1 us:

* ``random``: the C struct of the global ``random.Random`` (its index and 624 words, right after the
  object header) and its cached Gaussian ``gauss_next``;
* ``numpy.random``: the MT19937 struct behind the legacy global ``RandomState`` (624 words and the
  position, at the bit generator's public ``ctypes.state_address``) and the ``RandomState``'s own
  cached Gaussian (``has_gauss`` and ``gauss``, which ``get_state`` also returns).

Equal fingerprints mean equal states; never the other way round is needed. Each layout is checked in
this process against the public state before it is trusted (numpy's cached Gaussian is found by
setting known values on a private ``RandomState`` and looking for them), and where a check fails, or the
generator is not the standard one, the fingerprint is None and the caller reads the state the public way.

Holds:
    random_fingerprint   the global ``random`` state's picture, or None
    numpy_fingerprint    the global ``numpy.random`` state's picture, or None (also where numpy is not loaded)
    prepare              check the layouts now (a warm worker does, so that its runs inherit the result)
"""

from __future__ import annotations

import ctypes
import struct
import sys
from typing import Any

__all__ = ["random_fingerprint", "numpy_fingerprint", "prepare"]

_WORDS = 624
_MT_BYTES = 4 * _WORDS + 4  # the words and one int (random: the index, before them; numpy: the position, after)
_HEADER = object.__basicsize__  # a Python object's header: the C struct's fields follow it
_UNCHECKED: Any = object()

_random_layout: Any = _UNCHECKED
_numpy_gauss_offset: Any = _UNCHECKED


def _raw(address: int, size: int) -> bytes:
    return ctypes.string_at(address, size)


def _global_random() -> Any:
    """The instance behind ``random``'s module functions, where it is a C Mersenne Twister, else None."""
    import _random
    import random

    instance = getattr(random.getstate, "__self__", None)
    return instance if isinstance(instance, _random.Random) else None


def _random_layout_holds(instance: Any) -> bool:
    version, words, _gauss = instance.getstate()
    if len(words) != _WORDS + 1:
        return False
    raw = _raw(id(instance) + _HEADER, _MT_BYTES)
    return raw == struct.pack(f"=i{_WORDS}I", words[-1], *words[:-1])


def random_fingerprint() -> tuple[bytes, Any] | None:
    """The global ``random`` state as (its C struct's bytes, ``gauss_next``); None where not known to be exact."""
    global _random_layout  # noqa: PLW0603 - checked once per process
    instance = _global_random()
    if instance is None:
        return None
    if _random_layout is _UNCHECKED:
        _random_layout = _random_layout_holds(instance)
    if not _random_layout:
        return None
    return _raw(id(instance) + _HEADER, _MT_BYTES), instance.gauss_next


def _find_gauss_offset(np: Any) -> int | None:
    """Where a legacy ``RandomState`` keeps ``has_gauss`` (an int, 8 bytes before) and ``gauss`` (a double):
    the one offset that shows four known pairs set through ``set_state``; None if not exactly one does."""
    probe = np.random.RandomState(12345)
    size = type(probe).__basicsize__
    _name, key, pos, _has, _gauss = probe.get_state(legacy=True)
    found: set[int] | None = None
    for has_gauss, gauss in ((1, 1.2345678901234567e-300), (0, -9.87654321e299), (1, 3.5e-310), (0, 0.0)):
        probe.set_state(("MT19937", key, pos, has_gauss, gauss))
        raw = _raw(id(probe), size)
        wanted, flag = struct.pack("=d", gauss), struct.pack("=i", has_gauss)
        here = {o for o in range(8, size - 7) if raw[o:o + 8] == wanted and raw[o - 8:o - 4] == flag}
        found = here if found is None else found & here
    if found is None or len(found) != 1:
        return None
    offset = found.pop()
    return offset if _numpy_key_layout_holds(probe) else None


def _numpy_key_layout_holds(generator: Any) -> bool:
    _name, key, pos, _has, _gauss = generator.get_state(legacy=True)
    raw = _raw(generator._bit_generator.ctypes.state_address, _MT_BYTES)  # noqa: SLF001 - numpy's public attribute
    return raw == key.astype("=u4").tobytes() + struct.pack("=i", pos)


def numpy_fingerprint() -> tuple[bytes, bytes] | None:
    """The legacy global ``numpy.random`` state as (MT19937 struct bytes, cached Gaussian bytes); None where
    numpy is not loaded or the picture is not known to be exact."""
    global _numpy_gauss_offset  # noqa: PLW0603 - found once per process
    np = sys.modules.get("numpy")
    if np is None:
        return None
    generator = getattr(getattr(np.random, "get_state", None), "__self__", None)
    if type(generator) is not np.random.RandomState:
        return None
    bit_generator = generator._bit_generator  # noqa: SLF001 - numpy's public attribute
    if type(bit_generator) is not np.random.MT19937:
        return None
    if _numpy_gauss_offset is _UNCHECKED:
        try:
            _numpy_gauss_offset = _find_gauss_offset(np) if _numpy_key_layout_holds(generator) else None
        except Exception:  # noqa: BLE001 - an unexpected numpy: the public way
            _numpy_gauss_offset = None
    if _numpy_gauss_offset is None:
        return None
    return (_raw(bit_generator.ctypes.state_address, _MT_BYTES),
            _raw(id(generator) + _numpy_gauss_offset - 8, 16))


def prepare() -> None:
    """Check both layouts in this process now (numpy's only where numpy is loaded), so that processes forked later
    start with the answers. Where numpy is loaded this also loads ``numpy.random``, which numpy 2 imports only on
    first use (about 17 ms): a warm worker that calls this spares each run's two processes that import."""
    random_fingerprint()
    numpy_fingerprint()
