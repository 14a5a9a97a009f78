"""Secrets of the server process, kept off the wire and out of the logs.

The server holds one kind of secret: the simulated user's API key (``$CONVCODEWORLD_SIMULATOR_API_KEY``, else
``$OPENAI_API_KEY``), which its LLM user sends to its endpoint and nowhere else. It is never an argument of a request
(a client cannot point the server's user at an endpoint of its choosing) and never part of an observation, a state
or an error the server writes; :class:`Secrets` is the last line all the same: the server's guard
(:mod:`.guard`) masks every secret in every frame and body it sends, and :meth:`Secrets.guard_logs` masks them in
every log record of the process, its tracebacks included.

A secret is masked by as many ``*`` as it has characters (so an HTTP body keeps its length), in its plain form and
in its JSON-escaped form. Values shorter than :data:`MIN_SECRET_CHARS` are no secret (``EMPTY``, the placeholder key
of local servers) and are left alone.

Holds:
    Secrets            the values to mask; mask text and bytes; mask every log record of the process
    MIN_SECRET_CHARS   the shortest value that is masked
    SECRET_ENV_VARS    the environment variables whose values are secrets
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping
from typing import Any

from ..feedback.verbal import API_KEY_ENV

__all__ = ["Secrets", "MIN_SECRET_CHARS", "SECRET_ENV_VARS"]

MIN_SECRET_CHARS = 8
SECRET_ENV_VARS: tuple[str, ...] = (API_KEY_ENV, "OPENAI_API_KEY")


class Secrets:
    """The secret values of this server; masks them in text, bytes and log records.

    >>> secrets = Secrets(["sk-not-a-real-key-123"])
    >>> secrets.mask_text("key sk-not-a-real-key-123 seen")
    'key ********************* seen'
    >>> secrets.mask_bytes(b'{"e": "sk-not-a-real-key-123"}') == b'{"e": "' + b"*" * 21 + b'"}'
    True
    >>> Secrets(["EMPTY"]).values
    ()
    """

    def __init__(self, values: Iterable[str | None] = ()) -> None:
        found: set[str] = set()
        for value in values:
            if value and len(value) >= MIN_SECRET_CHARS:
                found.add(value)
                found.add(json.dumps(value)[1:-1])  # as it stands inside a JSON string
        self.values: tuple[str, ...] = tuple(sorted(found, key=len, reverse=True))
        self._encoded = tuple(value.encode("utf-8") for value in self.values)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None, extra: Iterable[str | None] = ()) -> Secrets:
        """The values of :data:`SECRET_ENV_VARS` in ``environ`` (default ``os.environ``), and ``extra``."""
        environ = os.environ if environ is None else environ
        return cls([*(environ.get(name) for name in SECRET_ENV_VARS), *extra])

    def mask_text(self, text: str) -> str:
        """``text`` with every secret replaced by as many ``*``."""
        for value in self.values:
            if value in text:
                text = text.replace(value, "*" * len(value))
        return text

    def mask_bytes(self, data: bytes) -> bytes:
        """``data`` (UTF-8) with every secret replaced by as many ``*`` as its bytes (the length is kept)."""
        for value in self._encoded:
            if value in data:
                data = data.replace(value, b"*" * len(value))
        return data

    def mask(self, obj: Any) -> Any:
        """``obj`` with every string in it masked (dicts, lists and tuples walked)."""
        if isinstance(obj, str):
            return self.mask_text(obj)
        if isinstance(obj, Mapping):
            return {key: self.mask(value) for key, value in obj.items()}
        if isinstance(obj, (list, tuple)):
            return type(obj)(self.mask(value) for value in obj)
        return obj

    def guard_logs(self) -> None:
        """Mask the secrets in every log record this process makes from now on: its message with its arguments, and
        the text of its exception. Idempotent per instance (the record factory is wrapped once)."""
        if not self.values or getattr(logging.getLogRecordFactory(), "_ccw_secrets", None) is self:
            return
        make_record = logging.getLogRecordFactory()
        formatter = logging.Formatter()

        def masked_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = make_record(*args, **kwargs)
            try:
                message = record.getMessage()
            except Exception:  # noqa: BLE001 - a bad format string: logging reports it itself later
                return record
            masked = self.mask_text(message)
            if masked != message:  # else left as it is: formatters that read the arguments (uvicorn's) keep working
                record.msg, record.args = masked, ()
            if record.exc_info and not record.exc_text:
                record.exc_text = self.mask_text(formatter.formatException(record.exc_info))
            if record.stack_info:
                record.stack_info = self.mask_text(record.stack_info)
            return record

        masked_record._ccw_secrets = self  # type: ignore[attr-defined]
        logging.setLogRecordFactory(masked_record)
