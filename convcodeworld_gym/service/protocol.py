"""Runs in the episode server's process: uvicorn's HTTP/1.1 protocol with a time limit on each request's headers.

uvicorn times nothing before a request's headers are complete: a connection that sends half a request line (or half
a WebSocket upgrade request, or one byte of its next request on a kept-alive connection) and then nothing stays open
for ever, and 300 of them stayed open for 80 s and more (issue 39). :func:`timed_h11` gives uvicorn's h11 protocol
with a timer that runs from the moment a connection is made, and again from the end of each response, until the next
request's headers have arrived: past ``header_timeout_s`` the connection is closed. (A body's time is the guard's:
:class:`~.guard.Guard`; a WebSocket's silence is its idle timeout.) Header bytes are bounded by h11 already (16 KiB).

Holds:
    timed_h11   the protocol class for uvicorn's ``Config(http=...)``, with a given time for headers
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

__all__ = ["timed_h11"]

_log = logging.getLogger(__name__)


def timed_h11(header_timeout_s: float) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol, closing a connection whose request headers take longer than ``header_timeout_s``
    (uvicorn is imported here, not with the module: it comes with the ``openenv`` extra, so the example is skipped
    where the default suite collects it; tests/service checks the protocol against a real server).

    >>> timed_h11(2.5).header_timeout_s  # doctest: +SKIP
    2.5
    """
    if not header_timeout_s > 0:
        raise ValueError(f"header_timeout_s must be > 0, got {header_timeout_s!r}")
    from uvicorn.protocols.http.h11_impl import H11Protocol

    seconds = float(header_timeout_s)

    class TimedH11Protocol(H11Protocol):
        """uvicorn's h11 protocol; a connection whose next request's headers take longer than ``header_timeout_s`` is
        closed."""

        header_timeout_s: float = seconds
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:  # type: ignore[override]
            super().connection_made(transport)  # type: ignore[arg-type]
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def handle_events(self) -> None:
            cycle = self.cycle
            super().handle_events()
            if self.cycle is not cycle:  # a request's headers arrived: its body and its answer are timed elsewhere
                self._disarm()

        def handle_websocket_upgrade(self, event: Any) -> None:
            self._disarm()  # the upgrade request is complete; the WebSocket's own protocol takes over
            super().handle_websocket_upgrade(event)

        def on_response_complete(self) -> None:
            self._arm()  # the next request's headers are timed (a pipelined one, parsed below, disarms it at once)
            super().on_response_complete()

        def _arm(self) -> None:
            self._disarm()
            self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_too_slow(self) -> None:
            self._header_timer = None
            if not self.transport.is_closing():
                _log.info("%s: no complete request headers within %g s; connection closed",
                          "%s:%d" % self.client if self.client else "a client", self.header_timeout_s)
                self.transport.close()

    return TimedH11Protocol
