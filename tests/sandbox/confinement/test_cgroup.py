"""Finding and reading the ``oom_kill`` counter of a worker's memory cgroup (:mod:`convcodeworld_gym.sandbox.confinement.cgroup`).

The layouts are written to a temporary tree as the kernel shows them; the end-to-end check (a run
that outgrows its container is reported as ``memory_limit``) is in test_docker.py.
"""

from __future__ import annotations

from pathlib import Path

from convcodeworld_gym.runs.selfcheck import classify_failure
from convcodeworld_gym.sandbox.confinement.cgroup import OomCounter, find_oom_counter
from convcodeworld_gym.sandbox.host.executor import ExecutionResult

V2_EVENTS = "low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n"
V1_CONTROL = "oom_kill_disable 0\nunder_oom 0\noom_kill 5\n"


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_v2_under_the_named_path_first(tmp_path) -> None:
    proc = _write(tmp_path / "cgroup", "0::/system.slice/worker.scope\n")
    named = _write(tmp_path / "fs/system.slice/worker.scope/memory.events", V2_EVENTS)
    _write(tmp_path / "fs/memory.events", "oom_kill 99\n")
    counter = find_oom_counter(str(proc), str(tmp_path / "fs"))
    assert counter == OomCounter(str(named)) and counter.count() == 2


def test_a_container_shows_its_own_cgroup_at_the_root(tmp_path) -> None:
    # v2 with the host's path in /proc/self/cgroup but the container's cgroup mounted at the root
    proc = _write(tmp_path / "cgroup", "0::/docker/0123abcd\n")
    _write(tmp_path / "fs/memory.events", V2_EVENTS)
    assert find_oom_counter(str(proc), str(tmp_path / "fs")).count() == 2
    # v1: the memory controller's line, its file at the memory mount's root
    proc = _write(tmp_path / "cgroup1", "9:pids:/docker/x\n4:memory:/docker/0123abcd\n0::/\n")
    root = tmp_path / "fs1"
    _write(root / "memory/memory.oom_control", V1_CONTROL)
    counter = find_oom_counter(str(proc), str(root))
    assert counter.path == str(root / "memory/memory.oom_control") and counter.count() == 5


def test_none_without_a_counter_and_minus_one_once_unreadable(tmp_path) -> None:
    proc = _write(tmp_path / "cgroup", "4:memory:/a\n0::/\n")
    assert find_oom_counter(str(proc), str(tmp_path / "empty")) is None
    assert find_oom_counter(str(tmp_path / "no-such-file"), str(tmp_path)) is None
    _write(tmp_path / "fs/memory.events", "low 0\n")  # an old kernel's file without the line
    assert find_oom_counter(str(proc), str(tmp_path / "fs")) is None
    gone = _write(tmp_path / "fs/memory/a/memory.oom_control", V1_CONTROL)
    counter = find_oom_counter(str(proc), str(tmp_path / "fs"))
    assert counter.count() == 5
    gone.unlink()
    assert counter.count() == -1


def test_this_process_has_one_where_the_kernel_shows_it() -> None:
    counter = find_oom_counter()
    if counter is not None:  # a machine without a memory cgroup mounted has none, which is allowed
        assert counter.count() >= 0 and "/sys/fs/cgroup" in counter.path


def test_selfcheck_names_a_memory_limit() -> None:
    result = ExecutionResult(tests=(), crash="The test process was killed by signal SIGKILL", limits_hit=("memory_limit",))
    kind, detail = classify_failure(result)
    assert kind == "memory" and "memory=" in detail
