"""Runs in the warm worker and its zygote: keeping a warm worker cheap to fork, its memory after the heavy imports
arranged once.

A worker that has imported pandas and matplotlib holds about 100 MB of private memory, and
every run forks it. Two costs follow each fork: the kernel copies (and at exit tears down) one
page-table entry per 4 KiB page, and any page the child writes is copied on that first write.
:func:`settle` lowers both, in the worker, after each import:

* ``gc.freeze()``: the objects the worker has made are left out of every later collection, so
  a full collection in a run (which would otherwise write to every object's header, copying
  the whole heap page by page) stays as small as the run's own garbage;
* huge pages for the heap (``MADV_HUGEPAGE`` then ``MADV_COLLAPSE``, Linux 6.1+): each 2 MiB
  of heap is one entry to copy at fork. A run's write into such a page still copies only
  4 KiB (the kernel splits the mapping first). Where the kernel refuses, nothing changes.

A fork still pays a page fault (4-6 us on this VM) on its first write to each page it shares with its
parent, and a pandas run writes some 4000 of them. :class:`Prefault` pays most of them ahead, off the run's
critical path: the zygote learns which pages runs write first from a rehearsal (our own workload, in a
throwaway fork), and a spare and its program process copy those pages (about 20 MB with pandas) while they
wait for their job, at the lowest priority. Copying every shared page instead (100+ MB) made back-to-back
runs slower: the copies and their teardown cost more than the faults they saved.

Nothing here changes what a program observes (beyond its speed); it is an optimisation only and never fails.

Holds:
    settle              freeze the worker's objects and back its heap with huge pages (best effort)
    Prefault            the pages a fork shares with this process, and copying them ahead while idle
    lowest_priority     nice 19 for a process (the spare and its program process, while they wait)
    can_raise_priority  may this process give a process its priority back (``CAP_SYS_NICE``)
"""

from __future__ import annotations

import array
import ctypes
import errno
import gc
import os
import re
import select
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from . import confine

__all__ = ["settle", "Prefault", "lowest_priority", "can_raise_priority"]

_MADV_HUGEPAGE = 14
_MADV_COLLAPSE = 25
_MADV_POPULATE_WRITE = 23  # Linux 5.14+
_HUGE = 1 << 21
_PAGE = os.sysconf("SC_PAGE_SIZE")
_CHUNK = 1 << 18  # 256 KiB: a fraction of a millisecond to copy, so a job never waits long for the last one
_LOWEST = 19
_CAP_SYS_NICE = 23
_PRESENT_AND_EXCLUSIVE = 1 << 63 | 1 << 56  # /proc/<pid>/pagemap: page present; mapped by this process only
IDLE_S = 0.05  # how long a spare waits for its job before it starts copying


def settle() -> int:
    """Freeze the garbage collector's view of this process and collapse its heap into huge pages.

    Returns the bytes now backed by huge pages (0 where the kernel does not do it).
    """
    gc.collect()
    gc.freeze()
    collapsed = 0
    for start, end in _heap_ranges():
        if _advise(start, end - start, _MADV_HUGEPAGE) and _advise(start, end - start, _MADV_COLLAPSE):
            collapsed += end - start
    return collapsed


@dataclass(frozen=True)
class Prefault:
    """The pages a run forked from this process is likely to write first: those a throwaway fork of it wrote while
    it ran our own rehearsal workload (:meth:`rehearsed`), as address ranges of at most 256 KiB.

    Made in the zygote (after each import; it has never held a job, and the rehearsal is never a job) and
    inherited by every spare, which copies them ahead while it waits (:meth:`while_idle`). Addresses only: no
    memory's content is read or passed on, and nothing a run does ever changes them.
    """

    chunks: tuple[tuple[int, int], ...] = ()

    @classmethod
    def rehearsed(cls, rehearse: Callable[[], object]) -> Prefault:
        """Fork a child that runs ``rehearse`` and then reads (``/proc/self/pagemap``) which of the resident pages
        it shared with this process it now holds a copy of: those pages. Empty where fork or ``/proc`` fail."""
        shared = [run for low, high, _ in _private_writable() for run in _resident(low, high)]
        read_fd, write_fd = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(read_fd)
            os.close(write_fd)
            return cls()
        if pid == 0:  # the rehearsal: nothing of it may reach the caller but page numbers
            try:
                os.close(read_fd)
                null = os.open(os.devnull, os.O_RDWR)
                os.dup2(null, 1)
                os.dup2(null, 2)
                rehearse()
                with os.fdopen(write_fd, "wb") as out:
                    out.write(array.array("Q", _copied_pages(shared)).tobytes())
            finally:
                os._exit(0)
        os.close(write_fd)
        with os.fdopen(read_fd, "rb") as answer:
            data = answer.read()
        os.waitpid(pid, 0)
        pages = array.array("Q")
        pages.frombytes(data[: len(data) // 8 * 8])
        return cls(tuple(_chunks(sorted(pages))))

    def while_idle(self, *fds: int, after_s: float = IDLE_S) -> int:
        """Once ``fds`` have stayed unreadable for ``after_s`` (the machine is between jobs, not busy with one after
        another), copy the chunks into this process (``MADV_POPULATE_WRITE``: each page's copy-on-write done
        now), one at a time, until one of ``fds`` is readable or hung up (the job, or an end, has come) or all are
        done. Returns the bytes copied. Run it at a low priority (see :func:`lowest_priority`); never fails.

        The wait leaves jobs that come one after another alone: a spare whose job comes soon has no idle time to
        spend, and copying would then compete with the runs for the machine."""
        if not self.chunks:
            return 0
        try:
            waiting = select.poll()
            for fd in fds:
                waiting.register(fd, select.POLLIN | select.POLLHUP)
            madvise = confine.libc().madvise
            if waiting.poll(int(after_s * 1000)):
                return 0
        except (OSError, ValueError, AttributeError):
            return 0
        copied = 0
        for start, length in self.chunks:
            if waiting.poll(0):
                break
            if madvise(start, length, _MADV_POPULATE_WRITE) == 0:
                copied += length
            elif not copied and ctypes.get_errno() == errno.EINVAL:  # a kernel before 5.14
                break
        return copied


def lowest_priority(pid: int = 0) -> None:
    """Give process ``pid`` (0: this one) the lowest priority (nice 19), so that its prefaulting yields to runs.
    Only a process with ``CAP_SYS_NICE`` (:func:`can_raise_priority`) can give it back; best effort."""
    try:
        os.setpriority(os.PRIO_PROCESS, pid, _LOWEST)
    except OSError:
        pass


def can_raise_priority() -> bool:
    """Can this process raise another's priority (``CAP_SYS_NICE`` in its effective set)?"""
    try:
        with open("/proc/self/status") as fh:
            caps = next(line for line in fh if line.startswith("CapEff:"))
        return bool(int(caps.split()[1], 16) >> _CAP_SYS_NICE & 1)
    except (OSError, StopIteration, ValueError, IndexError):
        return False


def _copied_pages(shared: list[tuple[int, int]]) -> Iterator[int]:
    """The page numbers in ``shared`` that this process holds a copy of (present, and mapped by it alone)."""
    try:
        with open("/proc/self/pagemap", "rb") as pagemap:
            for start, end in shared:
                pagemap.seek(start // _PAGE * 8)
                entries = array.array("Q")
                entries.frombytes(pagemap.read((end - start) // _PAGE * 8))
                first = start // _PAGE
                yield from (first + i for i, entry in enumerate(entries)
                            if entry & _PRESENT_AND_EXCLUSIVE == _PRESENT_AND_EXCLUSIVE)
    except (OSError, ValueError):
        return


def _chunks(pages: list[int]) -> Iterator[tuple[int, int]]:
    """Sorted page numbers as (address, length) runs of consecutive pages, each at most ``_CHUNK`` bytes."""
    per_chunk = _CHUNK // _PAGE
    i = 0
    while i < len(pages):
        j = i + 1
        while j < len(pages) and pages[j] == pages[j - 1] + 1 and j - i < per_chunk:
            j += 1
        yield pages[i] * _PAGE, (j - i) * _PAGE
        i = j


def _mappings() -> Iterator[tuple[int, int, str, str]]:
    """This process's mappings: (start, end, permissions, name)."""
    try:
        with open("/proc/self/maps") as fh:
            lines = fh.readlines()
    except OSError:
        return
    for line in lines:
        fields = line.split()
        low, high = (int(x, 16) for x in fields[0].split("-"))
        yield low, high, fields[1], (fields[5] if len(fields) > 5 else "")


def _private_writable() -> Iterator[tuple[int, int, str]]:
    """Private, writable mappings (start, end, name), the kernel's own (``[vvar]``, ``[vdso]``) and the stack left out."""
    for low, high, perms, name in _mappings():
        if perms.startswith("rw") and perms.endswith("p") and not name.startswith(("[v", "[stack")):
            yield low, high, name


def _resident(low: int, high: int) -> Iterator[tuple[int, int]]:
    """The runs of resident pages in ``[low, high)`` (``mincore``); nothing where it fails."""
    vector = (ctypes.c_ubyte * ((high - low) // _PAGE))()
    try:
        if confine.libc().mincore(low, high - low, vector) != 0:
            return
    except (OSError, AttributeError):
        return
    for run in re.finditer(rb"\x01+", bytes(vector).translate(_RESIDENT_BIT)):
        yield low + run.start() * _PAGE, low + run.end() * _PAGE


_RESIDENT_BIT = bytes(i & 1 for i in range(256))  # mincore's other bits are reserved


def _heap_ranges() -> Iterator[tuple[int, int]]:
    """The 2 MiB-aligned parts of this process's private, writable, anonymous mappings (and ``[heap]``)."""
    for low, high, name in _private_writable():
        if name not in ("", "[heap]"):
            continue
        start, end = (low + _HUGE - 1) & ~(_HUGE - 1), high & ~(_HUGE - 1)
        if end > start:
            yield start, end


def _advise(start: int, length: int, advice: int) -> bool:
    try:
        return confine.libc().madvise(start, length, advice) == 0
    except (OSError, AttributeError):
        return False
