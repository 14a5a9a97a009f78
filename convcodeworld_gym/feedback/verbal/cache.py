"""A persistent, content-addressed cache of LLM answers for simulated user feedback.

Key: SHA-256 of the canonical JSON of (simulator model, the full message list, the
sampling parameters). The API key, base URL and any other credential never enter the
key or the value, so a cache file can be shared: a second run of the same episode reads
every answer from it, byte-identical, and makes no API call.

One sqlite file, WAL journal, one short transaction per read or write, so several
processes can share it; a race on the same key keeps the first answer."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["FeedbackCache", "cache_key", "default_cache_path", "CACHE_ENV"]

CACHE_ENV = "CONVCODEWORLD_SIMULATOR_CACHE"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    content TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL
)
"""

_BUSY_WAIT_S = 60.0


def default_cache_path() -> Path:
    """``$CONVCODEWORLD_SIMULATOR_CACHE``, else ``$XDG_CACHE_HOME`` (or ``~/.cache``)``/convcodeworld-gym/verbal_feedback.sqlite``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "convcodeworld-gym" / "verbal_feedback.sqlite"


def cache_key(model: str, messages: Sequence[Mapping[str, str]], params: Mapping[str, Any]) -> str:
    """Content address of one request: model, full messages and sampling parameters, nothing else.

    >>> a = cache_key("gpt-4o", [{"role": "user", "content": "hi"}], {"temperature": 0.0})
    >>> a == cache_key("gpt-4o", [{"role": "user", "content": "hi"}], {"temperature": 0.0}), len(a)
    (True, 64)
    >>> a == cache_key("gpt-4o", [{"role": "user", "content": "hi"}], {"temperature": 0.7})
    False
    """
    payload = json.dumps({"model": model, "messages": list(messages), "params": dict(params)}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


class FeedbackCache:
    """sqlite-backed answers, safe to share between threads and processes.

    >>> import tempfile, os
    >>> with FeedbackCache(os.path.join(tempfile.mkdtemp(), "c.sqlite")) as cache:
    ...     cache.put("k", "gpt-4o", "Sort ascending.", 10, 3)
    ...     cache.get("k")
    ('Sort ascending.', 10, 3)
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(str(self.path), timeout=_BUSY_WAIT_S, check_same_thread=False, isolation_level=None)
        try:
            _set_up(self._conn)
        except BaseException:
            self._conn.close()
            raise

    def get(self, key: str) -> tuple[str, int, int] | None:
        """``(content, prompt_tokens, completion_tokens)`` stored under ``key``, or ``None``."""
        with self._lock:
            row = self._conn.execute(
                "SELECT content, prompt_tokens, completion_tokens FROM answers WHERE key = ?", (key,)
            ).fetchone()
        return None if row is None else (row[0], int(row[1]), int(row[2]))

    def put(self, key: str, model: str, content: str, prompt_tokens: int, completion_tokens: int) -> None:
        """Store an answer; when another process stored ``key`` first, its answer is kept."""
        with self._lock:
            self._conn.execute(
                "INSERT OR IGNORE INTO answers (key, model, content, prompt_tokens, completion_tokens) VALUES (?, ?, ?, ?, ?)",
                (key, model, content, prompt_tokens, completion_tokens),
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM answers").fetchone()[0])

    def close(self) -> None:
        """Close the connection; idempotent."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> FeedbackCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _set_up(conn: sqlite3.Connection) -> None:
    """Switch the file to WAL and create the table, retrying while another process holds it.

    Two processes opening a new file at once can get "database is locked" from the
    switch to WAL at once, without sqlite's busy handler waiting first, so the retry
    is ours: with growing pauses, for at most ``_BUSY_WAIT_S`` seconds.
    """
    deadline = time.monotonic() + _BUSY_WAIT_S
    pause = 0.005
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(_SCHEMA)
            return
        except sqlite3.OperationalError as exc:
            busy = "locked" in str(exc) or "busy" in str(exc)
            if not busy or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.5)
