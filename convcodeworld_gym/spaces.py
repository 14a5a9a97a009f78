"""Spaces for text the environments exchange.

Gymnasium's :class:`~gymnasium.spaces.Text` only contains strings over a fixed charset
(alphanumeric by default). Model replies, tracebacks and task prompts can hold any
Unicode character, so :class:`UnicodeText` contains *every* ``str`` within its length
bounds, and samples from a small mixed charset (ASCII, whitespace, NUL, non-Latin, emoji)
so that random actions exercise the env's handling of odd text.

Vector envs: Gymnasium batches a ``UnicodeText`` as a ``Tuple`` of copies (``batch_space``,
``concatenate`` and ``create_empty_array`` work unchanged). Its shared-memory path for
``Text`` (used by ``AsyncVectorEnv``) stores charset indices of ``max_length`` characters and
is read once, so it loses any character outside the charset and never updates; this module
registers a replacement for ``UnicodeText``: UTF-8 in a fixed inline buffer per env, longer
texts spilled to a private temporary file, read live on every step."""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import string
import tempfile
import weakref
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any

import numpy as np
from gymnasium.spaces import Text
from gymnasium.vector.utils import create_shared_memory, read_from_shared_memory, write_to_shared_memory

__all__ = ["UnicodeText", "MAX_TEXT_CHARS", "SAMPLE_CHARSET", "SharedTextBuffer", "SharedTextView", "SHARED_INLINE_BYTES"]

#: Upper bound on every text field's length (16 Mi characters).
MAX_TEXT_CHARS = 1 << 24
#: What :meth:`UnicodeText.sample` draws from; membership is not limited to it.
SAMPLE_CHARSET = string.printable + "\x00éßΩжй中文コード🙂\u200b"
_SAMPLE_MAX_LEN = 256


class UnicodeText(Text):
    """A :class:`~gymnasium.spaces.Text` space containing every ``str`` with ``min_length <= len <= max_length``.

    >>> space = UnicodeText(100)
    >>> "def f():\\n    return 'π ≈ 3.14'" in space, "" in space, "x" * 101 in space, b"bytes" in space
    (True, True, False, False)
    >>> isinstance(UnicodeText(10, seed=0).sample(), str)
    True
    """

    def __init__(self, max_length: int = MAX_TEXT_CHARS, *, min_length: int = 0, seed: int | np.random.Generator | None = None) -> None:
        super().__init__(max_length, min_length=min_length, charset=SAMPLE_CHARSET, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """A random string of at most 256 characters (or the given length) from :data:`SAMPLE_CHARSET`."""
        if mask is None and probability is None:
            upper = min(self.max_length, max(self.min_length, _SAMPLE_MAX_LEN))
            length = int(self.np_random.integers(self.min_length, upper + 1))
            mask = (length, None)
        return super().sample(mask=mask, probability=probability)

    @property
    def is_np_flattenable(self) -> bool:
        return False  # arbitrary Unicode has no fixed per-character index

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"

    def __eq__(self, other: object, /) -> bool:
        return isinstance(other, UnicodeText) and (self.min_length, self.max_length) == (other.min_length, other.max_length)


#: UTF-8 bytes of one text kept inline in shared memory; longer texts go through a spill file.
SHARED_INLINE_BYTES = 1 << 16


class SharedTextBuffer:
    """Shared memory for ``n`` texts of a :class:`UnicodeText`, written by workers, read by the parent.

    Slot ``i`` holds its UTF-8 length in ``lengths[i]`` and the bytes in ``data``; a text over
    :data:`SHARED_INLINE_BYTES` is written to ``<spill_dir>/<i>`` (atomically) and its length
    stored negated. The spill directory is private (mode 0700) and removed with the buffer.
    """

    def __init__(self, n: int, ctx: ModuleType | Any = mp, inline_bytes: int = SHARED_INLINE_BYTES) -> None:
        self.n = n
        self.inline_bytes = inline_bytes
        self.lengths = ctx.Array("q", n)
        self.data = ctx.Array("B", n * inline_bytes)
        self.spill_dir = tempfile.mkdtemp(prefix="ccw_text_")
        self._cleanup = weakref.finalize(self, _remove_spill_dir, self.spill_dir, os.getpid())

    def __getstate__(self) -> dict[str, Any]:  # sent to worker processes; the parent keeps the cleanup
        return {k: v for k, v in self.__dict__.items() if k != "_cleanup"}

    def write(self, index: int, text: str) -> None:
        raw = text.encode("utf-8", "surrogatepass")
        if len(raw) <= self.inline_bytes:
            start = index * self.inline_bytes
            self.data.get_obj()[start : start + len(raw)] = raw  # type: ignore[index]
            self.lengths[index] = len(raw)
            return
        path = os.path.join(self.spill_dir, str(index))
        with open(path + ".tmp", "wb") as handle:
            handle.write(raw)
        os.replace(path + ".tmp", path)
        self.lengths[index] = -len(raw)

    def read(self, index: int) -> str:
        length = self.lengths[index]
        if length >= 0:
            start = index * self.inline_bytes
            raw = bytes(memoryview(self.data.get_obj())[start : start + length])  # type: ignore[arg-type]
        else:
            with open(os.path.join(self.spill_dir, str(index)), "rb") as handle:
                raw = handle.read()
        return raw.decode("utf-8", "surrogatepass")


def _remove_spill_dir(path: str, owner_pid: int) -> None:
    if os.getpid() == owner_pid:  # a forked worker's copy of the buffer must not remove it
        shutil.rmtree(path, ignore_errors=True)


class SharedTextView(Sequence[str]):
    """The parent's live view of a :class:`SharedTextBuffer`: indexing reads the current texts.

    ``AsyncVectorEnv`` returns ``deepcopy`` of its observations by default (``copy=True``),
    which turns this view into a plain ``tuple`` of ``str``, as the batched space expects.
    """

    def __init__(self, buffer: SharedTextBuffer) -> None:
        self._buffer = buffer

    def __len__(self) -> int:
        return self._buffer.n

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return tuple(self._buffer.read(i) for i in range(self._buffer.n)[index])
        if not -self._buffer.n <= index < self._buffer.n:
            raise IndexError(index)
        return self._buffer.read(index % self._buffer.n)

    def __iter__(self) -> Iterator[str]:
        return (self._buffer.read(i) for i in range(self._buffer.n))

    def __deepcopy__(self, memo: dict) -> tuple[str, ...]:
        return tuple(self)

    def __repr__(self) -> str:
        return f"SharedTextView({tuple(self)!r})"


@create_shared_memory.register(UnicodeText)
def _create_unicode_shared_memory(space: UnicodeText, n: int = 1, ctx: ModuleType = mp) -> SharedTextBuffer:
    return SharedTextBuffer(n, ctx)


@read_from_shared_memory.register(UnicodeText)
def _read_unicode_from_shared_memory(space: UnicodeText, shared_memory: SharedTextBuffer, n: int = 1) -> SharedTextView:
    return SharedTextView(shared_memory)


@write_to_shared_memory.register(UnicodeText)
def _write_unicode_to_shared_memory(space: UnicodeText, index: int, values: str, shared_memory: SharedTextBuffer) -> None:
    shared_memory.write(index, values)
