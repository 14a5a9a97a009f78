"""The event loop's lag, and where the loop was when it stalled: the heartbeat the async benchmarks share.

``LoopWatch`` runs a heartbeat on the loop (a ``HEARTBEAT_S`` sleep, again and again: how late each one wakes is
the loop's lag) and, beside it, a watcher thread that looks at the loop thread's stack whenever a beat is more than
``stall_s`` overdue. A stall is the time from one beat to the next that was more than ``stall_s`` late; its
``where`` is the stack the watcher saw most often during it (the innermost frames first, ``file:line function``), so
a benchmark can say not only how long the loop was held but by what.

On a machine busier than its cores, part of a lag is only the loop thread waiting for a CPU. The kernel counts that
wait (``/proc/self/task/<tid>/schedstat``: time run, time runnable but not running): a stall's ``queued_s`` is it,
and ``held_s`` (its lag less that wait) is what the loop's own work held it, running or blocked in a call. Where
the kernel does not count, ``queued_s`` is 0 and ``held_s`` the whole lag.

A lag is one turn of the loop, which may run many callbacks. ``per_callback=True`` also times each callback alone
(the loop's debug mode, whose ``slow_callback_duration`` is ``stall_s``; it slows the loop down): ``slow_callbacks``
then lists each callback that ran longer than ``stall_s`` (seconds, phase, the task or handle it ran). That is the
measure of "no awaited call holds the loop longer than ``stall_s``".

    watch = LoopWatch()
    async with watch.beating():
        ...  # the awaited work
    watch.worst_s, watch.p99_s, watch.worst(), watch.worst_where()
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

__all__ = ["HEARTBEAT_S", "Stall", "LoopWatch"]

HEARTBEAT_S = 0.005


@dataclass
class Stall:
    """One time the loop was held longer than the watch's ``stall_s``: how long, what the benchmark was doing (its
    ``phase``), and the loop thread's stacks seen meanwhile (each a tuple of frames, innermost first)."""

    seconds: float
    phase: str
    stacks: Counter[tuple[str, ...]] = field(default_factory=Counter)
    queued_s: float = 0.0

    @property
    def held_s(self) -> float:
        """The lag less the time the loop thread waited for a CPU: what its own work (running, or blocked in a call)
        held the loop."""
        return max(0.0, self.seconds - self.queued_s)

    def where(self, frames: int = 6) -> str:
        """The stack seen most often during the stall, its ``frames`` innermost frames, innermost first ("?" when
        the watcher saw none: a stall shorter than its poll)."""
        if not self.stacks:
            return "?"
        stack, _ = self.stacks.most_common(1)[0]
        return " <- ".join(stack[:frames])


class LoopWatch:
    """The heartbeat and the stall watcher of one event loop (see the module's docstring).

    ``phase`` is a label the benchmark sets as it goes ("make", "first areset", ...): each stall records it.
    ``on_beat`` is called on every beat (a benchmark samples its RSS there).
    """

    def __init__(self, stall_s: float = 0.05, on_beat: Callable[[], None] | None = None, per_callback: bool = False) -> None:
        self.stall_s = stall_s
        self.on_beat = on_beat
        self.per_callback = per_callback
        self.phase = ""
        self.lags: list[float] = []
        self.stalls: list[Stall] = []
        self.slow_callbacks: list[tuple[float, str, str]] = []  # (seconds, phase, what ran), with per_callback
        self._last_beat = time.perf_counter()
        self._seen: Counter[tuple[str, ...]] = Counter()
        self._loop_thread = threading.get_ident()
        self._lock = threading.Lock()

    @property
    def worst_s(self) -> float:
        """The longest a beat was late (seconds); NaN before any beat."""
        return max(self.lags, default=float("nan"))

    @property
    def p99_s(self) -> float:
        lags = sorted(self.lags)
        return lags[int(0.99 * (len(lags) - 1))] if lags else float("nan")

    def worst(self) -> Stall | None:
        """The stall in which the loop's own work held it longest (:attr:`Stall.held_s`), or None when the loop was
        never late by more than ``stall_s``."""
        return max(self.stalls, key=lambda s: s.held_s, default=None)

    def worst_where(self, frames: int = 6) -> str:
        """Where the loop was in that stall, with its phase ("-" when there was none)."""
        stall = self.worst()
        return "-" if stall is None else f"[{stall.phase}] {stall.where(frames)}"

    @contextlib.asynccontextmanager
    async def beating(self) -> AsyncIterator[LoopWatch]:
        """Beat and watch while the block runs (on the running loop)."""
        self._loop_thread = threading.get_ident()
        self._schedstat = f"/proc/self/task/{threading.get_native_id()}/schedstat"
        self._last_beat = time.perf_counter()
        stop = asyncio.Event()
        done = threading.Event()
        watcher = threading.Thread(target=self._watch, args=(done,), name="loop-watch", daemon=True)
        watcher.start()
        loop = asyncio.get_running_loop()
        debug = loop.get_debug(), loop.slow_callback_duration
        timer = _SlowCallbacks(self)
        if self.per_callback:
            loop.set_debug(True)
            loop.slow_callback_duration = self.stall_s
            logging.getLogger("asyncio").addFilter(timer)
        beat = asyncio.ensure_future(self._beat(stop))
        await asyncio.sleep(0)  # the first beat is under way before the block's first line runs
        try:
            yield self
        finally:
            stop.set()
            await beat
            done.set()
            watcher.join()
            if self.per_callback:
                logging.getLogger("asyncio").removeFilter(timer)
                loop.set_debug(debug[0])
                loop.slow_callback_duration = debug[1]

    def _queued_s(self) -> float:
        """Seconds the loop thread has waited for a CPU so far (0.0 where the kernel does not say)."""
        try:
            with open(self._schedstat) as fh:
                return int(fh.read().split()[1]) / 1e9
        except (OSError, ValueError, IndexError):
            return 0.0

    async def _beat(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            began, queued = time.perf_counter(), self._queued_s()
            await asyncio.sleep(HEARTBEAT_S)
            now = time.perf_counter()
            late = now - began - HEARTBEAT_S
            self.lags.append(late)
            with self._lock:
                if late > self.stall_s:
                    self.stalls.append(Stall(late, self.phase, self._seen, self._queued_s() - queued))
                self._seen = Counter()
                self._last_beat = now
            if self.on_beat is not None:
                self.on_beat()

    def _watch(self, done: threading.Event) -> None:
        """Sample the loop thread's stack while a beat is overdue by more than ``stall_s``."""
        poll = min(self.stall_s / 4, 0.01)
        while not done.wait(poll):
            with self._lock:
                overdue = time.perf_counter() - self._last_beat - HEARTBEAT_S > self.stall_s
            if overdue:
                frame = sys._current_frames().get(self._loop_thread)
                if frame is not None:
                    stack = tuple(_frame_text(f) for f in reversed(traceback.extract_stack(frame)))
                    with self._lock:
                        self._seen[stack] += 1


def _frame_text(frame: traceback.FrameSummary) -> str:
    """``rel/path.py:line function`` (paths shortened below this checkout or site-packages)."""
    path = frame.filename
    for root in (os.getcwd() + os.sep, "site-packages" + os.sep):
        if root in path:
            path = path.split(root, 1)[1]
    return f"{path}:{frame.lineno} {frame.name}"


class _SlowCallbacks(logging.Filter):
    """Takes the debug loop's "Executing <what> took 0.123 seconds" records into the watch (and drops them)."""

    _TOOK = re.compile(r"^Executing (?P<what>.*) took (?P<seconds>[0-9.]+) seconds$", re.S)

    def __init__(self, watch: LoopWatch) -> None:
        super().__init__()
        self.watch = watch

    def filter(self, record: logging.LogRecord) -> bool:
        found = self._TOOK.match(record.getMessage())
        if found is None:
            return True
        what = re.sub(r" (?:created at|wait_for=|cb=\[).*", "", found["what"])  # the task and where its coroutine is
        self.watch.slow_callbacks.append((float(found["seconds"]), self.watch.phase, what))
        return False
