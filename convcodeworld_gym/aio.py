"""One code path, run blocking or awaited: how the envs, the protocol and the clients offer both.

Code that needs slow work (a sandbox run, a model call, a cache read) is written once, as a
*plan*: a generator that yields a :class:`Call` for each piece of slow work and receives its
result (or has its exception thrown in). :func:`run_blocking` drives a plan by calling each
``Call``'s blocking function; :func:`run_awaited` drives the same plan on an event loop by
awaiting each ``Call``'s async twin, or, where there is none, by running the blocking function
in a thread. So ``env.step`` and ``await env.astep`` are one piece of logic and give the same
results, and nothing slow ever runs on the event loop.

Holds:
    Call            one piece of slow work: the blocking function, its async twin, the arguments
    Plan            the type of a plan: ``Generator[Call, Any, T]``
    run_blocking    drive a plan by blocking calls
    run_awaited     drive a plan on the running event loop (awaited calls, or threads)
    async_twin      the ``a<name>`` method of an object, or a TypeError naming the object and the fix
    method_call     a Call of ``obj.<name>(...)`` whose awaited form is ``obj.a<name>(...)``
    BoundedThreads  a bounded FIFO thread pool whose calls are awaited (an executor's runs, off the loop)
    LoopThread      an event loop in a thread of its own: awaited work that costs the CPU of whatever loop runs it
                    (an HTTP client's request building and reply parsing) runs there, off the caller's loop
    network_loop    the process's one LoopThread for HTTP requests (the LLM policy's and the LLM user's)
    run_sync        run a coroutine to its end from blocking code, also where a loop is running already

>>> def double_then_add(x):
...     y = yield Call(lambda v: 2 * v, None, (x,))
...     return y + 1
>>> run_blocking(double_then_add(20))
41
>>> import asyncio
>>> asyncio.run(run_awaited(double_then_add(20)))
41
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import functools
import os
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Generator
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

__all__ = ["Call", "Plan", "run_blocking", "run_awaited", "async_twin", "method_call", "BoundedThreads", "LoopThread",
           "network_loop", "run_sync"]

T = TypeVar("T")


@dataclass(frozen=True)
class Call(Generic[T]):
    """One piece of slow work a plan needs done.

    Attributes:
        blocking: does the work and returns its result (what :func:`run_blocking` calls).
        awaited: the async twin, awaited by :func:`run_awaited`; ``None``: the blocking function runs in a
            thread instead (``asyncio.to_thread``), so the event loop is never blocked.
        args: positional arguments of either.
    """

    blocking: Callable[..., T]
    awaited: Callable[..., Awaitable[T]] | None = None
    args: tuple[Any, ...] = ()


#: A plan: yields each :class:`Call` it needs and receives its result; returns its own result.
Plan = Generator[Call[Any], Any, T]


def run_blocking(plan: Plan[T]) -> T:
    """Drive ``plan`` to its end, doing each :class:`Call` by its blocking function; return what it returns.

    An exception of a call is thrown into the plan at the ``yield`` that asked for it.
    """
    try:
        call = next(plan)
        while True:
            try:
                result = call.blocking(*call.args)
            except BaseException as exc:  # noqa: BLE001 - the plan decides: it may catch it, or it ends with it
                call = plan.throw(exc)
            else:
                call = plan.send(result)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


async def run_awaited(plan: Plan[T]) -> T:
    """Drive ``plan`` on the running event loop: each :class:`Call` is awaited (its async twin, else its
    blocking function in a thread); return what the plan returns. Exceptions as in :func:`run_blocking`."""
    try:
        call = next(plan)
        while True:
            try:
                if call.awaited is not None:
                    result = await call.awaited(*call.args)
                else:
                    result = await asyncio.to_thread(call.blocking, *call.args)
            except BaseException as exc:  # noqa: BLE001 - see run_blocking (CancelledError ends the plan too)
                call = plan.throw(exc)
            else:
                call = plan.send(result)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


def async_twin(obj: Any, name: str) -> Callable[..., Awaitable[Any]]:
    """``obj.a<name>`` (e.g. ``astep`` for ``step``), or a TypeError that names ``obj`` and what to do.

    >>> async_twin(object(), "step")
    Traceback (most recent call last):
    ...
    TypeError: object has no async path (no astep method): await only envs and wrappers that have one (this package's envs, ReferenceProtocol, RecordEpisodes); wrap Gymnasium's own wrappers around them only for blocking use, or call step in a thread
    """
    method = getattr(obj, f"a{name}", None)
    if method is None:
        raise TypeError(
            f"{type(obj).__name__} has no async path (no a{name} method): await only envs and wrappers that have one "
            f"(this package's envs, ReferenceProtocol, RecordEpisodes); wrap Gymnasium's own wrappers around them only "
            f"for blocking use, or call {name} in a thread"
        )
    return method  # type: ignore[no-any-return]


def method_call(obj: Any, name: str, *args: Any, **kwargs: Any) -> Call[Any]:
    """A :class:`Call` of ``obj.<name>(*args, **kwargs)``, awaited as ``obj.a<name>(*args, **kwargs)``; the async
    twin is looked up only when the call is awaited (:func:`async_twin`), so blocking use needs none.

    >>> class Env:
    ...     def step(self, action): return action + "!"
    ...     async def astep(self, action): return action + "?"
    >>> run_blocking(_one(method_call(Env(), "step", "hi")))
    'hi!'
    >>> asyncio.run(run_awaited(_one(method_call(Env(), "step", "hi"))))
    'hi?'
    """
    return Call(functools.partial(getattr(obj, name), *args, **kwargs), lambda: async_twin(obj, name)(*args, **kwargs))


def _one(call: Call[T]) -> Plan[T]:
    """The plan of a single call (for examples and one-call uses)."""
    return (yield call)


_MOST_THREADS = 4096  # what a pool's threads may number, whatever its capacity says


class _Waiting(NamedTuple):
    """A call in a :class:`BoundedThreads` queue: ``fn(*args)``, the future its thread sets, and its caller's await of
    it (cancelled at once by ``task.cancel()``, while the cancel reaches ``future`` only on the loop's next turn)."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    future: concurrent.futures.Future[Any]
    awaited: asyncio.Future[Any]


class BoundedThreads:
    """A FIFO pool of threads whose calls are awaited: blocking work (an executor's runs) off the event loop, first
    come first served, never more at once than its capacity. A slow call holds one thread only.

    The capacity is ``size``, or what ``capacity()`` says each time a call could start (it may rise and fall: an
    executor whose idle runs lend their places lets more calls run meanwhile; call :meth:`recheck` when it rose).
    Calls wait in one queue in the order they came, whichever event loop they came from; a call cancelled while it
    waits never runs. The threads stop when the pool is closed or garbage-collected; a call still running then
    finishes first.

    >>> import asyncio
    >>> pool = BoundedThreads(2, "doc")
    >>> asyncio.run(pool.call(sum, [1, 2, 3]))
    6
    >>> pool.close()
    """

    def __init__(self, size: int, name: str, capacity: Callable[[], int] | None = None) -> None:
        if size < 1:
            raise ValueError(f"BoundedThreads needs size >= 1, got {size!r}")
        self.size = size
        self._capacity = capacity or (lambda: size)
        self._waiting: collections.deque[_Waiting] = collections.deque()
        self._running = 0
        self._lock = threading.Lock()
        # Threads are made as calls start (never more than ran at once); the capacity, not the pool, bounds them.
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=_MOST_THREADS, thread_name_prefix=f"ccw-{name}")
        weakref.finalize(self, self._pool.shutdown, wait=False)

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in one of the pool's threads, awaited; queued behind earlier calls while all are busy."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        awaited = asyncio.wrap_future(future)
        with self._lock:
            self._waiting.append(_Waiting(fn, args, future, awaited))
            self._start_next()
        return await awaited

    def recheck(self) -> None:
        """Start waiting calls that the capacity allows now (it rose)."""
        with self._lock:
            self._start_next()

    def close(self) -> None:
        """Stop taking calls; threads end once their current call returns. Idempotent."""
        self._pool.shutdown(wait=False)

    def _start_next(self) -> None:
        """With the lock held: start the calls at the head of the queue while the capacity allows."""
        while self._waiting and self._running < self._capacity():
            call = self._waiting.popleft()
            if call.awaited.cancelled():  # its caller gave up while it waited; the cancel reaches ``future`` later
                call.future.cancel()
            if not call.future.set_running_or_notify_cancel():
                continue
            self._running += 1
            try:
                self._pool.submit(self._run, call.fn, call.args, call.future)
            except RuntimeError as exc:  # closed
                self._running -= 1
                call.future.set_exception(exc)

    def _run(self, fn: Callable[..., Any], args: tuple[Any, ...], future: concurrent.futures.Future[Any]) -> None:
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # noqa: BLE001 - the caller's await raises it
            future.set_exception(exc)
        finally:
            with self._lock:
                self._running -= 1
                self._start_next()


class LoopThread:
    """An event loop that runs in a daemon thread of its own, started on first use: coroutines awaited through
    :meth:`run` from any other loop run there, so the CPU they cost between their awaits is not spent on the caller's
    loop. One thread for all of them, not one per call: an HTTP client of this loop keeps its connections pooled.

    Cancelling the caller's await cancels the coroutine there. A child process forked while the thread runs starts
    a thread of its own on first use (a fork copies no threads).

    >>> import asyncio
    >>> elsewhere = LoopThread("doc")
    >>> async def where():
    ...     return threading.current_thread().name
    >>> asyncio.run(elsewhere.run(where()))
    'doc'
    >>> elsewhere.close()
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    @property
    def started(self) -> bool:
        """Whether this process's thread runs (its loop may hold clients to close)."""
        return self._loop is not None and self._pid == os.getpid() and self._thread is not None and self._thread.is_alive()

    def loop(self) -> asyncio.AbstractEventLoop:
        """The thread's loop (the thread started, or started again in a forked child)."""
        with self._lock:
            if not self.started:
                loop = asyncio.new_event_loop()
                started = threading.Event()

                def serve() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(started.set)
                    loop.run_forever()

                self._thread = threading.Thread(target=serve, name=self.name, daemon=True)
                self._thread.start()
                started.wait()
                self._loop, self._pid = loop, os.getpid()
            return self._loop

    async def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Await ``coroutine`` on this thread's loop (on the caller's own when the caller is that loop)."""
        loop = self.loop()
        if asyncio.get_running_loop() is loop:
            return await coroutine
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, loop))

    def close(self) -> None:
        """Stop the loop and its thread (a later :meth:`run` starts them again)."""
        with self._lock:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is not None and thread is not None and thread.is_alive() and self._pid == os.getpid():
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()


_NETWORK = LoopThread("ccw-network")


def network_loop() -> LoopThread:
    """The process's :class:`LoopThread` for HTTP requests: the LLM policy's and the LLM user's awaited requests are
    sent from it (:class:`~convcodeworld_gym.chat.AsyncClients`), so the ``openai`` client's request building and
    reply parsing (several milliseconds a request, tens of requests ready together with tens of episodes in flight)
    never hold the caller's loop."""
    return _NETWORK


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to its end from blocking code and return its result: ``asyncio.run``, or, when this
    thread already runs an event loop (a notebook), ``asyncio.run`` in a thread of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = asyncio.run(coroutine)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="ccw-run-sync")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["result"]  # type: ignore[no-any-return]
