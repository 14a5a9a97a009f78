"""Keeping a warm worker cheap to fork: its memory after the heavy imports, arranged once.

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

Nothing here changes what a program observes; it is an optimisation only and never fails.

Holds:
    settle   freeze the worker's objects and back its heap with huge pages (best effort)
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

from . import confine

__all__ = ["settle"]

_MADV_HUGEPAGE = 14
_MADV_COLLAPSE = 25
_HUGE = 1 << 21


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


def _heap_ranges() -> Iterator[tuple[int, int]]:
    """The 2 MiB-aligned parts of this process's private, writable, anonymous mappings (and ``[heap]``)."""
    try:
        with open("/proc/self/maps") as fh:
            lines = fh.readlines()
    except OSError:
        return
    for line in lines:
        fields = line.split()
        perms, name = fields[1], (fields[5] if len(fields) > 5 else "")
        if not (perms.startswith("rw") and perms.endswith("p")) or name not in ("", "[heap]"):
            continue
        low, high = (int(x, 16) for x in fields[0].split("-"))
        start, end = (low + _HUGE - 1) & ~(_HUGE - 1), high & ~(_HUGE - 1)
        if end > start:
            yield start, end


def _advise(start: int, length: int, advice: int) -> bool:
    try:
        return confine.libc().madvise(start, length, advice) == 0
    except (OSError, AttributeError):
        return False
