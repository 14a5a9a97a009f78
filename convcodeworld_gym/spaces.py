"""Spaces for text the environments exchange.

Gymnasium's :class:`~gymnasium.spaces.Text` only contains strings over a fixed charset
(alphanumeric by default). Model replies, tracebacks and task prompts can hold any
Unicode character, so :class:`UnicodeText` contains *every* ``str`` within its length
bounds, and samples from a small mixed charset (ASCII, whitespace, NUL, non-Latin, emoji)
so that random actions exercise the env's handling of odd text.

Holds:
    UnicodeText     a Text space that contains any Unicode string
    MAX_TEXT_CHARS  default upper length bound of every text field
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np
from gymnasium.spaces import Text

__all__ = ["UnicodeText", "MAX_TEXT_CHARS", "SAMPLE_CHARSET"]

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
