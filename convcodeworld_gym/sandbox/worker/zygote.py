"""Runs in the warm worker and its zygote: the warm process every run's spare is forked from, which never holds a job.

A forked process starts with a copy of its parent's memory, freed memory included. The worker reads each
job (the program, the hidden tests; for a calibration, the canonical solution), so a spare forked from the
worker would carry earlier jobs into the next run, where a program could read them (walking its frames, or
scanning its own heap). The worker therefore forks, once, before it reads any job, a zygote, and asks it
for every spare. The zygote is told module names, networks and modes only: its memory holds no job, and
neither does any spare's, nor the program process a split spare forks before its job comes.

The zygote is also each spare's parent, so it alone signals and reaps them (:mod:`..children`: a pid is signalled
only while it is our unreaped child); the worker asks it to, over a ``SOCK_SEQPACKET`` socket, one JSON
message a request and a reply, a spare's descriptors travelling beside its reply (``SCM_RIGHTS``). The
zygote ends when the worker closes the socket (killing and reaping what it still has), and by its parent
death signal when the worker dies; a spare dies with the zygote the same way.

Holds:
    Zygote       the worker's handle: start one, import into it, ask it for a spare, poll and reap spares
    Spare        a spare as the worker holds it: its descriptors, stage times, exit (through the zygote)
    ZygoteGone   the zygote stopped answering (the worker cannot make runs any more)
"""

from __future__ import annotations

import json
import os
import select
import socket
import struct
import traceback
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from ..children import has_exited, kill_group
from ..confinement import confine, memory
from ..messages import Mode
from .spare import SpareFacts, SpareMaker
from .warm import import_quietly, rehearse

__all__ = ["Zygote", "Spare", "ZygoteGone"]

_MAX_MESSAGE = 1 << 20
_FDS_PER_SPARE = 3


class ZygoteGone(RuntimeError):
    """The zygote ended or answered nonsense: no more spares can be made (the pool replaces such a worker)."""


class Zygote:
    """The worker's handle on its zygote. Not thread-safe; one request at a time."""

    def __init__(self, pid: int, sock: socket.socket) -> None:
        self.pid = pid
        self._sock = sock

    @classmethod
    def start(cls, maker: SpareMaker, preload: Sequence[str], close: Iterable[int] = ()) -> Zygote:
        """Fork the zygote (closing ``close`` in it: the worker's protocol descriptors), let it import ``preload``,
        and return once it is ready. Call it before any job is read. Raises ZygoteGone if it fails to start."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            try:
                ours.close()
                for fd in close:
                    os.close(fd)
                confine.set_parent_death_signal()
                _serve(theirs, maker, preload)
            except BaseException:  # noqa: BLE001 - never back into the worker's code; say why on stderr
                traceback.print_exc()
                os._exit(1)
        theirs.close()
        zygote = cls(pid, ours)
        zygote._receive()  # {"ready": true}, once the preload is imported
        return zygote

    def import_modules(self, names: Sequence[str]) -> None:
        """Import ``names`` into the zygote (failures are left to the runs that need them); spares made later have them."""
        self._ask({"op": "import", "names": list(names)})

    def spare(self, counter: int, network: str, mode: Mode, prefault: bool = False) -> Spare:
        """A new spare for a run with ``network`` in ``mode`` (with ``prefault``: one that copies the zygote's pages
        at the lowest priority while it waits; see :meth:`Spare.restore_priority`). Raises OSError when the fork or
        the namespace is refused."""
        self._send({"op": "spare", "counter": counter, "network": network, "mode": mode.value, "prefault": prefault})
        reply, fds = self._receive(_FDS_PER_SPARE)
        if "error" in reply:
            for fd in fds:
                os.close(fd)
            errno = reply.get("errno")
            raise OSError(errno, reply["error"]) if errno else OSError(reply["error"])  # EAGAIN: a BlockingIOError again
        if len(fds) != _FDS_PER_SPARE:
            for fd in fds:
                os.close(fd)
            raise ZygoteGone(f"the zygote sent {len(fds)} descriptors with a spare, not {_FDS_PER_SPARE}")
        job_w, result_r, ready_r = fds
        return Spare(SpareFacts.from_data(reply["spare"]), self, job_w, result_r, ready_r)

    def poll(self, child: int) -> int | None:
        """If the zygote's child ``child`` has ended: kill what is left of its group, reap it, its wait status; else None."""
        return self._ask({"op": "poll", "child": child})["status"]

    def reap(self, child: int) -> int:
        """Kill ``child``'s group (its whole PID namespace when namespaced) and reap it: its wait status."""
        return self._ask({"op": "reap", "child": child})["status"]

    def close(self) -> None:
        """End the zygote (it kills and reaps what it still has) and reap it."""
        self._sock.close()
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        self._send(request)
        reply, fds = self._receive()
        for fd in fds:
            os.close(fd)
        if "error" in reply:
            raise ZygoteGone(f"the zygote refused {request['op']!r}: {reply['error']}")
        return reply

    def _send(self, request: dict[str, Any]) -> None:
        try:
            self._sock.send(json.dumps(request).encode())
        except OSError as exc:
            raise ZygoteGone(f"the zygote is gone ({exc})") from exc

    def _receive(self, max_fds: int = 0) -> tuple[dict[str, Any], list[int]]:
        try:
            data, fds, _flags, _addr = socket.recv_fds(self._sock, _MAX_MESSAGE, max(max_fds, 1))
        except OSError as exc:
            raise ZygoteGone(f"the zygote is gone ({exc})") from exc
        if not data:
            raise ZygoteGone("the zygote ended")
        try:
            reply = json.loads(data)
        except ValueError as exc:
            raise ZygoteGone(f"the zygote answered nonsense ({exc})") from exc
        return reply, list(fds)


@dataclass
class Spare:
    """A spare as the worker holds it: it waits on ``job_w`` and streams events to ``result_r``.

    Its process is the zygote's child, so its exit is observed and it is killed and reaped through the
    zygote; ``status`` holds its wait status once reaped."""

    facts: SpareFacts
    zygote: Zygote
    job_w: int
    result_r: int
    ready_r: int = -1  # the child's confinement times (:func:`.spare.run_child`)
    status: int | None = None
    was_ready: bool = False  # read by stages(): the child reported itself ready (confined) before its job

    @property
    def token(self) -> str:
        return self.facts.token

    @property
    def network(self) -> str:
        return self.facts.network

    @property
    def mode(self) -> Mode:
        return Mode(self.facts.mode)

    def stages(self) -> dict[str, float]:
        """Fork (in the zygote) and confinement (in the child, until it waits for its job; ``program_fork_s``:
        the split judge's program process) times, in seconds; read once the child reported them.

        Read once, after the run: it also sets :attr:`was_ready`. The child writes its times before it reads its
        job, so a child that ran any of the job's code had written them by then; one that had not (it refused,
        or died, while it confined itself) never ran the program."""
        times = {"fork_s": self.facts.forked - self.facts.started}
        if self.ready_r >= 0:
            try:
                data = os.read(self.ready_r, 16) if select.select([self.ready_r], [], [], 0)[0] else b""
            except OSError:
                data = b""
            os.close(self.ready_r)
            self.ready_r = -1
            if len(data) == 16:
                self.was_ready = True
                confined, program = struct.unpack("dd", data)
                times |= {"confine_s": confined - self.facts.forked, "program_fork_s": program - confined}
        return times

    def gone(self) -> bool:
        """Has this spare ended (or refused) before its job? Until its job comes, the spare alone holds the write
        end of ``result_r`` (its program process closed its copy) and writes nothing there but a refusal, so that end
        is readable now only if it ended (EOF) or refused. A spare killed while it waits (the OOM killer, a person)
        is then discarded instead of being handed a job it would fail. Never blocks."""
        try:
            return self.result_r < 0 or bool(select.select([self.result_r], [], [], 0)[0])
        except (OSError, ValueError):
            return True

    def restore_priority(self, nice: int, wait_s: float = 10.0) -> bool:
        """For a ``lowered`` spare: wait until it is ready (it and its program process are at the lowest priority
        by then, waiting for the job), then give its process group the priority ``nice``. True if done (or the
        spare was never lowered); False if it was not ready within ``wait_s`` or the priority could not be restored:
        then no job may run on it."""
        if not self.facts.lowered:
            return True
        # Readable once it is ready (or at its end, EOF). Not ready yet, it may still lower itself after a raise.
        if self.ready_r < 0 or not select.select([self.ready_r], [], [], wait_s)[0]:
            return False
        try:
            os.setpriority(os.PRIO_PGRP, self.facts.child, nice)  # the child is its group's leader (setsid)
        except OSError:
            return False
        return True

    def exited(self) -> bool:
        """Has the child ended? If so, what is left of its group is killed and it is reaped (once)."""
        if self.status is None:
            self.status = self.zygote.poll(self.facts.child)
        return self.status is not None

    def reap(self) -> int:
        """Kill the child's group (its whole PID namespace when namespaced), reap it; its wait status."""
        if self.status is None:
            self.status = self.zygote.reap(self.facts.child)
        return self.status

    def close(self) -> None:
        """Close the worker's descriptors of this spare (a spare whose job end was never written then exits)."""
        for name in ("job_w", "result_r", "ready_r"):
            fd = getattr(self, name)
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
                setattr(self, name, -1)


def _serve(sock: socket.socket, maker: SpareMaker, preload: Sequence[str]) -> NoReturn:
    """The zygote's loop: import ``preload``, say ready, then answer the worker's requests until it hangs up."""
    children: set[int] = set()
    plan: memory.Prefault | None = None  # the pages spares may copy ahead; made when first asked, after each import
    import_quietly(preload)
    sock.send(b'{"ready": true}')
    while data := sock.recv(_MAX_MESSAGE):
        request = json.loads(data)
        fds: tuple[int, ...] = ()
        reply: dict[str, Any]
        op = request.get("op")
        if op == "spare":
            wanted = memory.Prefault()
            if request.get("prefault") is True:
                plan = plan if plan is not None else memory.Prefault.rehearsed(rehearse)
                wanted = plan
            try:
                facts, fds = maker.make(int(request["counter"]), str(request["network"]), Mode(request["mode"]), wanted)
            except OSError as exc:
                reply = {"error": exc.strerror or str(exc), "errno": exc.errno}
            else:
                children.add(facts.child)
                reply = {"spare": facts.to_data()}
        elif op == "import":
            import_quietly(request["names"])
            plan = None
            reply = {}
        elif op in ("poll", "reap") and request.get("child") in children:
            child = request["child"]
            done = op == "reap" or has_exited(child)
            reply = {"status": _reap(child) if done else None}
            if done:
                children.discard(child)
        else:
            reply = {"error": f"not a request for this zygote: {op!r}, child {request.get('child')!r}"}
        socket.send_fds(sock, [json.dumps(reply).encode()], list(fds))
        for fd in fds:
            os.close(fd)
    for child in children:
        _reap(child)
    os._exit(0)


def _reap(child: int) -> int:
    """Kill our unreaped child ``child`` and its group, reap it: its wait status."""
    kill_group(child)
    return os.waitpid(child, 0)[1]
