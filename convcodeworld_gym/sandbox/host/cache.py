"""Runs in the host: the result cache, where a repeated (tests, program, runtime) costs a dictionary lookup.

Holds:
    ResultCache  thread-safe LRU of ExecutionResults keyed by test digest + program hash + fingerprint
    result_key   the key (hashes of public text only: no secrets)
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

from ..result import ExecutionResult

__all__ = ["ResultCache", "result_key"]


def result_key(test_digest: str, program: str, fingerprint: str) -> str:
    """``sha256(test digest, program, fingerprint)``; the fingerprint covers runtime, limits and judge mode."""
    h = hashlib.sha256()
    for part in (test_digest, program, fingerprint):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()


class ResultCache:
    """Least-recently-used map from :func:`result_key` to :class:`ExecutionResult`.

    >>> from convcodeworld_gym.sandbox.result import ExecutionResult
    >>> cache = ResultCache(maxsize=1)
    >>> cache.put("a", ExecutionResult(tests=())); cache.put("b", ExecutionResult(tests=()))
    >>> cache.get("a") is None, cache.get("b") is not None, len(cache)
    (True, True, 1)
    """

    def __init__(self, maxsize: int = 65536) -> None:
        if maxsize <= 0:
            raise ValueError(f"ResultCache maxsize must be > 0, got {maxsize}")
        self.maxsize = maxsize
        self._data: OrderedDict[str, ExecutionResult] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> ExecutionResult | None:
        with self._lock:
            result = self._data.get(key)
            if result is None:
                self.misses += 1
                return None
            self._data.move_to_end(key)
            self.hits += 1
            return result

    def put(self, key: str, result: ExecutionResult) -> None:
        with self._lock:
            self._data[key] = result
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)
