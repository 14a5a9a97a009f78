"""``aio.BoundedThreads``, the queue in front of every awaited sandbox run: first come first served whatever the
capacity does, never more at once than it allows, and a call whose caller gave up while it waited never runs."""

from __future__ import annotations

import asyncio
import threading
import time

from convcodeworld_gym.aio import BoundedThreads


def test_calls_start_in_the_order_they_came_and_never_more_than_the_capacity():
    capacity = [2]
    pool = BoundedThreads(2, "test", capacity=lambda: capacity[0])
    started: list[int] = []
    most = [0]
    running = [0]
    lock = threading.Lock()

    def work(i: int) -> int:
        with lock:
            started.append(i)
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        return i

    async def main() -> list[int]:
        calls = [asyncio.ensure_future(pool.call(work, i)) for i in range(12)]
        await asyncio.sleep(0.12)  # the first rounds ran two at a time
        capacity[0] = 4
        pool.recheck()  # it rose: the next ones start at once, still in order
        return await asyncio.gather(*calls)

    assert asyncio.run(main()) == list(range(12))
    pool.close()
    assert started == list(range(12)), started
    assert most[0] == 4, most  # 2 at first, 4 once it rose, never more


def test_a_call_cancelled_while_it_waits_never_runs():
    pool = BoundedThreads(1, "test")
    ran: list[str] = []
    gate = threading.Event()

    async def main() -> None:
        first = asyncio.ensure_future(pool.call(lambda: gate.wait(5) and ran.append("first")))
        second = asyncio.ensure_future(pool.call(lambda: ran.append("second")))
        third = asyncio.ensure_future(pool.call(lambda: ran.append("third")))
        await asyncio.sleep(0.05)
        second.cancel()
        gate.set()
        time.sleep(0.2)  # the loop does not turn: "first" ends and the queue moves on before the cancel reaches it
        await first
        await third

    asyncio.run(main())
    pool.close()
    assert ran == ["first", "third"]
