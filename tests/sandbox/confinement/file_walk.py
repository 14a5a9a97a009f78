"""Runs inside a sandboxed run, as the code of a test's program (its source is pasted into the program): walk every
file the run can read and look for byte fragments in them, archives and compressed files opened too.

Standard library only: the run's interpreter may be a runtime with nothing of this project or of pytest.

Holds:
    walk    list every regular file readable beneath some seed paths, read them smallest first until a time budget
            is spent, and report which fragments were found where (a JSON-ready dict)
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import stat
import tarfile
import time
import zipfile
from collections.abc import Callable, Iterable
from typing import Any, BinaryIO

CHUNK = 8 << 20
#: The largest archive member, or compressed file's content, read into memory to be searched and opened in turn.
MEMBER_CAP = 256 << 20
#: How deep archives inside archives are opened (a wheel in a tarball in a gzip file: 3).
MAX_DEPTH = 4
_MAGIC = ((b"\x1f\x8b", "gz"), (b"BZh", "bz2"), (b"\xfd7zXZ\x00", "xz"), (b"PK\x03\x04", "zip"), (b"PK\x05\x06", "zip"))
_DECOMPRESS: dict[str, Callable[[BinaryIO], BinaryIO]] = {
    "gz": lambda fh: gzip.GzipFile(fileobj=fh), "bz2": lambda fh: bz2.BZ2File(fh), "xz": lambda fh: lzma.LZMAFile(fh)}


class _OutOfTime(Exception):
    pass


def _kind(head: bytes) -> str | None:
    """What ``head`` (a file's first 512 bytes) opens as: ``gz``, ``bz2``, ``xz``, ``zip``, ``tar`` or None."""
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    return "tar" if head[257:262] == b"ustar" else None


class _Walk:
    """One walk's needles, clock and tallies (see :func:`walk`)."""

    def __init__(self, needles: dict[str, list[bytes]], deadline: float) -> None:
        self.needles = needles
        self.overlap = max((len(n) for forms in needles.values() for n in forms), default=1)
        self.deadline = deadline
        self.hits: dict[str, list[str]] = {}
        self.files_read = self.bytes_read = self.members_read = self.archives_opened = 0
        self.errors: list[str] = []
        self.error_count = 0

    def _search(self, data: bytes, where: str) -> None:
        for label, forms in self.needles.items():
            if any(form in data for form in forms):
                found = self.hits.setdefault(label, [])
                if where not in found and len(found) < 20:
                    found.append(where)

    def scan_stream(self, read: Callable[[int], bytes], where: str) -> None:
        """Search what ``read`` yields, chunk by chunk (each chunk with the tail of the one before)."""
        tail = b""
        while True:
            if time.monotonic() > self.deadline:
                raise _OutOfTime
            chunk = read(CHUNK)
            if not chunk:
                return
            self.bytes_read += len(chunk)
            data = tail + chunk
            self._search(data, where)
            tail = data[-self.overlap:]

    def scan(self, fh: BinaryIO, where: str, size: int, depth: int, searched: bool = False) -> None:
        """Search ``fh`` (seekable) raw (unless ``searched``), then open it as the archive or compressed file it is, and
        search inside."""
        head = fh.read(512)
        fh.seek(0)
        if not searched:
            self.scan_stream(fh.read, where)
        kind = _kind(head)
        if kind is None or depth >= MAX_DEPTH:
            return
        fh.seek(0)
        try:
            if kind in _DECOMPRESS:
                self.archives_opened += 1
                inner = _DECOMPRESS[kind](fh)
                if size <= MEMBER_CAP // 4:  # small: decompress whole, so that an archive inside is opened too
                    data = inner.read(MEMBER_CAP)
                    self.scan(io.BytesIO(data), f"{where}!{kind}", len(data), depth + 1)
                else:
                    self.scan_stream(inner.read, f"{where}!{kind}")
            elif kind == "zip":
                self.archives_opened += 1
                with zipfile.ZipFile(fh) as archive:
                    for info in archive.infolist():
                        if not info.is_dir():
                            self._member(lambda info=info: archive.open(info), f"{where}!{info.filename}", info.file_size,
                                         depth)
            elif kind == "tar":
                self.archives_opened += 1
                with tarfile.open(fileobj=fh) as archive:
                    for member in archive:
                        if member.isfile():
                            self._member(lambda m=member: archive.extractfile(m), f"{where}!{member.name}", member.size,
                                         depth)
        except _OutOfTime:
            raise
        except Exception as exc:  # noqa: BLE001 - a damaged or unusual archive: its raw bytes were searched
            self._error(where, exc)

    def _member(self, opener: Callable[[], Any], where: str, size: int, depth: int) -> None:
        self.members_read += 1
        with opener() as member:
            if size <= MEMBER_CAP:
                data = member.read(MEMBER_CAP)
                self.scan(io.BytesIO(data), where, len(data), depth + 1)
            else:
                self.scan_stream(member.read, where)

    def _error(self, where: str, exc: BaseException) -> None:
        self.error_count += 1
        if len(self.errors) < 10:
            self.errors.append(f"{where}: {type(exc).__name__}: {exc}"[:300])

    def read_file(self, path: str, size: int) -> None:
        try:
            if size <= CHUNK:  # most files: one read, searched at once, opened only when an archive
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                try:
                    data = os.read(fd, CHUNK)
                finally:
                    os.close(fd)
                self.bytes_read += len(data)
                self._search(data, path)
                if _kind(data[:512]) is not None:
                    self.scan(io.BytesIO(data), path, len(data), 0, searched=True)
            else:
                with open(path, "rb") as fh:
                    self.scan(fh, path, size, 0)
            self.files_read += 1
        except _OutOfTime:
            raise
        except OSError as exc:
            self._error(path, exc)


def _listing(seeds: Iterable[str], skip: tuple[str, ...], deadline: float) -> tuple[list[tuple[int, str]], dict[str, int]]:
    """Every regular file beneath ``seeds`` (symbolic links followed, each file and dir once), as (size, path)."""
    seen: set[tuple[int, int]] = set()
    files: list[tuple[int, str]] = []
    tally = {"dirs_listed": 0, "dirs_refused": 0, "seeds_missing": 0}
    for seed in seeds:
        stack = [seed]
        while stack and time.monotonic() < deadline:
            path = stack.pop()
            if path in skip or path.startswith(tuple(s + "/" for s in skip)):
                continue
            try:
                info = os.stat(path)
            except OSError:
                if path == seed:
                    tally["seeds_missing"] += 1
                continue
            key = (info.st_dev, info.st_ino)
            if key in seen:
                continue
            seen.add(key)
            if stat.S_ISREG(info.st_mode):
                files.append((info.st_size, path))
            elif stat.S_ISDIR(info.st_mode):
                try:
                    names = os.listdir(path)
                except OSError:
                    tally["dirs_refused"] += 1
                    continue
                tally["dirs_listed"] += 1
                stack.extend(os.path.join(path, name) for name in names)
    return files, tally


#: Dirs the system's package manager fills; files beneath them (but not in a site-packages) are read last.
SYSTEM_DIRS = ("/usr", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin")


def _system(path: str) -> bool:
    """Is ``path`` one of the system's own files (beneath a system dir, not in a Python install dir)?"""
    installed = "/site-packages/" in path or "/dist-packages/" in path
    return path.startswith(tuple(d + "/" for d in SYSTEM_DIRS)) and not installed


def _order(files: list[tuple[int, str]], first: tuple[str, ...]) -> list[tuple[int, str]]:
    """Files in reading order: ``first``, then what lies outside the system's dirs or in a Python install dir (where
    pip, caches, checkouts and data sets put files), then the rest; smallest first within each."""
    return sorted(files, key=lambda item: (0 if item[1] in first else 2 if _system(item[1]) else 1, item[0]))


def _read_share(state: _Walk, files: list[tuple[int, str]]) -> int | None:
    """Read ``files`` in order; the index of the first one left unread when the time ran out, else None."""
    for index, (size, path) in enumerate(files):
        try:
            state.read_file(path, size)
        except _OutOfTime:
            return index
    return None


def _tallies(state: _Walk, unread: list[tuple[int, str]]) -> dict[str, Any]:
    return {"files_read": state.files_read, "bytes_read": state.bytes_read, "archives_opened": state.archives_opened,
            "members_read": state.members_read, "errors": state.error_count, "error_samples": state.errors,
            "hits": state.hits, "unread": len(unread), "smallest_unread": min((s for s, _ in unread), default=None),
            "unread_outside_system": sum(not _system(path) for _, path in unread)}


def _in_children(shares: list[list[tuple[int, str]]], needles: dict[str, list[bytes]], deadline: float
                 ) -> list[dict[str, Any]]:
    """Each share read by a forked child of its own; their tallies (a child that failed reports what it could)."""
    import json

    children = []
    for share in shares:
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            state = _Walk(needles, deadline)
            stopped = _read_share(state, share)
            data = json.dumps(_tallies(state, share[stopped:] if stopped is not None else [])).encode()
            while data:
                data = data[os.write(write_fd, data):]
            os._exit(0)
        os.close(write_fd)
        children.append((pid, read_fd))
    reports = []
    for pid, read_fd in children:
        with os.fdopen(read_fd, "rb") as fh:
            data = fh.read()
        os.waitpid(pid, 0)
        reports.append(json.loads(data) if data else {"files_read": 0, "unread": -1, "errors": 1,
                                                       "error_samples": ["a reading child died"], "hits": {}})
    return reports


def walk(seeds: list[str], needles_hex: dict[str, list[str]], budget_s: float, first: tuple[str, ...] = (),
         processes: int = 1, skip: tuple[str, ...] = ("/proc", "/sys", "/dev")) -> dict[str, Any]:
    """List every regular file readable beneath ``seeds`` (what cannot be listed is walked from the seeds beneath
    it), then read them (in ``processes`` forked children, when more than one), archives and compressed files
    opened, until ``budget_s`` is spent: ``first`` first, then files outside the system's dirs or in a Python install
    dir, then the rest, smallest first within each.

    ``needles_hex``: label -> the hex of each byte form of one fragment. Returns the tallies, whether every listed
    file was read (``complete``), how many were not (``unread``; ``unread_outside_system``: of those outside the
    system's own files) and the smallest of them, and ``hits``: label -> where found (``path`` or
    ``path!member!...``)."""
    started = time.monotonic()
    deadline = started + budget_s
    files, tally = _listing(seeds, skip, deadline)
    listed_s = time.monotonic() - started
    files = _order(files, first)
    needles = {label: [bytes.fromhex(h) for h in forms] for label, forms in needles_hex.items()}
    if processes > 1:
        reports = _in_children([files[i::processes] for i in range(processes)], needles, deadline)
    else:
        state = _Walk(needles, deadline)
        stopped = _read_share(state, files)
        reports = [_tallies(state, files[stopped:] if stopped is not None else [])]
    merged: dict[str, Any] = {"hits": {}}
    for report in reports:
        for key in ("files_read", "bytes_read", "archives_opened", "members_read", "errors", "unread",
                    "unread_outside_system"):
            merged[key] = merged.get(key, 0) + report.get(key, 0)
        merged["error_samples"] = [*merged.get("error_samples", []), *report.get("error_samples", [])][:10]
        for label, where in report["hits"].items():
            merged["hits"].setdefault(label, []).extend(where)
    unread_sizes = [r["smallest_unread"] for r in reports if r.get("smallest_unread") is not None]
    return {
        **tally, **merged,
        "files_listed": len(files),
        "bytes_listed": sum(size for size, _ in files),
        "complete": all(r.get("unread") == 0 for r in reports),
        "smallest_unread": min(unread_sizes, default=None),
        "listed_s": round(listed_s, 2),
        "walk_s": round(time.monotonic() - started, 2),
    }
