"""Runs in the host: a run that waits on nothing (it sleeps, it blocks) lends its place to the next run in line.

An executor lets ``workers`` runs use the CPUs at once, one per slot. A program that sleeps 100 s holds its slot all
that time while using no CPU, and with one slot per core the other episodes of a rollout then share the rest: a
slow program delays everyone. The kernel knows better than the pool whether a run computes: its slot's cgroup
counts the CPU time of all its processes (:meth:`..confinement.slot_cgroup.SlotCgroup.cpu_seconds`). So the pool watches each run that has a
count; once it has used less than :data:`IDLE_SHARE` of a CPU over :data:`IDLE_AFTER_S`, it lends its token
(:class:`RunTokens`): one more run may start, on another slot. A lender that computes again (more than
:data:`BUSY_SHARE` of a CPU over a watch) takes a token back at once, even into debt: then no new run starts until
the runs in flight have given back enough, so the CPUs are never promised for long to more runs than they hold.
Each run keeps its own cgroup's quota, time limits and isolation; only the number of slots in use changes (at most
``2 × workers``).

Holds:
    RunTokens   how many runs may compute at once: take, give back, lend, take back (into debt)
    IdleWatch   the thread that lends the tokens of idle runs and takes them back when they compute again
    Watched     one run in flight as the watch sees it: its CPU count, and how long its token was lent
    IDLE_AFTER_S  how long a run must stay idle before it lends its token
    IDLE_SHARE    below this share of one CPU a run is idle
    BUSY_SHARE    above it, a lender computes again and takes a token back
    WATCH_S       how often the runs' CPU counts are read
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["RunTokens", "IdleWatch", "Watched", "IDLE_AFTER_S", "IDLE_SHARE", "BUSY_SHARE", "WATCH_S"]

#: A run idle this long (its cgroup below IDLE_SHARE of a CPU all the while) lends its token.
IDLE_AFTER_S = 1.0
#: Below this share of one CPU, a run is idle (a sleeping process's wake-ups cost far less).
IDLE_SHARE = 0.05
#: Above this share of one CPU over one watch, a lender computes again and takes a token back.
BUSY_SHARE = 0.25
#: How often the watch reads the runs' CPU counts.
WATCH_S = 0.25


class RunTokens:
    """``n`` tokens, one per run that may compute at once. Unlike a semaphore, a token can be taken back by a
    lender into debt (``free`` below 0): no run starts until the debt is paid.

    >>> tokens = RunTokens(1)
    >>> tokens.take(); tokens.free
    0
    >>> tokens.give(); tokens.take_back(); tokens.take_back(); tokens.free   # a lender took one back meanwhile
    -1
    """

    def __init__(self, n: int) -> None:
        self.free = n
        self._cond = threading.Condition()

    def take(self) -> None:
        """Wait until a token is free, and take it."""
        with self._cond:
            while self.free <= 0:
                self._cond.wait()
            self.free -= 1

    def give(self) -> None:
        """Give a token back (a run ended, or lent its token while it waits)."""
        with self._cond:
            self.free += 1
            self._cond.notify()

    def take_back(self) -> None:
        """Take a token without waiting, into debt if none is free (a lender computes again)."""
        with self._cond:
            self.free -= 1


@dataclass
class Watched:
    """One run in flight that the watch may lend for: its slot's CPU count (``cpu_seconds``), whether its token is
    lent now, and how long it was lent in all."""

    cpu_seconds: Callable[[], float | None]
    lent: bool = False
    lent_s: float = 0.0
    _last: tuple[float, float] | None = None  # (monotonic time, CPU seconds) of the last reading
    _idle_since: float | None = None
    _lent_at: float = 0.0


class IdleWatch:
    """Watches runs in flight (:meth:`add`, :meth:`remove`), lending the token of each that stays idle and taking
    it back when it computes again; ``lent`` is how many are lent now, and ``on_lend`` is called (outside its lock)
    after each lending. Its thread starts with the first run and stops at :meth:`close`."""

    def __init__(self, tokens: RunTokens, every_s: float = WATCH_S, on_lend: Callable[[], None] | None = None) -> None:
        self.tokens, self.every_s, self.on_lend = tokens, every_s, on_lend
        self.lent = 0
        self._watched: dict[int, Watched] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, run: Watched) -> int:
        """Watch ``run`` (its token is held); returns the key for :meth:`remove`."""
        with self._lock:
            key = id(run)
            self._watched[key] = run
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="sandbox-idle-watch", daemon=True)
                self._thread.start()
            return key

    def remove(self, key: int) -> Watched:
        """Stop watching a run that ended, and give its token back unless it is lent (then it was given already)."""
        with self._lock:
            run = self._watched.pop(key)
            if run.lent:
                run.lent_s += time.monotonic() - run._lent_at
                self.lent -= 1
            else:
                self.tokens.give()
        return run

    def close(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            with self._lock:
                lent = sum([self._look_at(run, time.monotonic()) for run in list(self._watched.values())])
            if lent and self.on_lend is not None:
                self.on_lend()

    def _look_at(self, run: Watched, now: float) -> bool:
        """Read ``run``'s CPU count; lend its token, or take one back, as its share since the last reading says.
        True when it lent its token now."""
        used = run.cpu_seconds()
        if used is None:
            return False
        last, run._last = run._last, (now, used)
        if last is None or now <= last[0]:
            return False
        share = (used - last[1]) / (now - last[0])
        if run.lent:
            if share > BUSY_SHARE:  # it computes again: it needs a token of its own
                self.tokens.take_back()
                run.lent, run.lent_s, run._idle_since = False, run.lent_s + now - run._lent_at, None
                self.lent -= 1
            return False
        if share >= IDLE_SHARE:
            run._idle_since = None
            return False
        run._idle_since = run._idle_since if run._idle_since is not None else last[0]
        if now - run._idle_since < IDLE_AFTER_S:
            return False
        run.lent, run._lent_at = True, now
        self.lent += 1
        self.tokens.give()
        return True
