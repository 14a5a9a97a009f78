"""The Docker executor on a real engine: canonical solutions pass, hostile programs are contained.

The worker in each container is the local sandbox's, so the split judge holds here too: the forge
cases of the sandbox's hostile tests (:mod:`hostile_programs`) get no pass. Needs a running
dockerd (``.ci/start-dockerd``) and the ``docker`` package; otherwise every test here skips with
the reason. The image is assembled offline from the host's Python
(:mod:`convcodeworld_gym.testing.docker_image`). Every bomb is bounded (forks by the pids limit,
memory by the container's limit).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import uuid

import pytest

from convcodeworld_gym.errors import ExecutorError
from convcodeworld_gym.sandbox import Limits, LocalExecutor, Outcome, SandboxExecutor, TimePolicy
from convcodeworld_gym.sandbox.backends.docker import (CONTAINER_FEATURES, OWNER_LABEL, DockerExecutor,
                                                       DockerUnavailable, remove_orphans)
from convcodeworld_gym.tasks import Task
from convcodeworld_gym.testing.infra import WorkerKiller, marked, next_marked

from hostile_programs import EXIT_CALLS, FORGE_REJECTED, FORGES, MOCKED, SQUARE, assert_rejected, succeed_if, texts

pytestmark = pytest.mark.docker

PIDS, MEMORY = 128, "512m"
SECRET = f"s3cret-{uuid.uuid4().hex}"
PROBE_TEST = """
import unittest

class TestCases(unittest.TestCase):
    def test_probe(self):
        self.assertEqual(probe(), "contained")
"""
# Processes of the slot uid a run may see of itself: its judge and its program process.
OWN_RUN = 2


def probe_task(name: str) -> Task:
    return Task(task_id=f"probe/{name}", prompt="probe", code_prompt="def probe():\n", entry_point="probe", canonical_solution="    return 'contained'\n", test=PROBE_TEST)


@pytest.fixture(scope="module")
def docker_client():
    try:
        import docker

        client = docker.from_env(version="auto")
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any reason to skip is reported
        pytest.skip(f"no Docker engine reachable ({exc}); run .ci/start-dockerd as root")
    return client


@pytest.fixture(scope="module")
def image(docker_client):
    from convcodeworld_gym.testing.docker_image import build_host_python_image

    return build_host_python_image(docker_client)


def make_executor(image, **kwargs) -> DockerExecutor:
    """A small executor on the test image: short time limits, no result cache (every attack really runs)."""
    options = {"limits": Limits(suite_timeout_s=8.0, test_timeout_s=4.0), "time_policy": TimePolicy(floor_s=3.0, cap_s=8.0),
               "memory": MEMORY, "pids": PIDS, "cache": False, **kwargs}
    return DockerExecutor(image.tag, python=image.python, volumes=image.volumes, **options)


@pytest.fixture(scope="module")
def docker_executor(image):
    with make_executor(image, slots=2, environment={"CCW_CONTAINER_SECRET": SECRET}) as ex:
        yield ex


@pytest.fixture(scope="module")
def one_slot(image):
    """One container: successive runs are sure to share it."""
    with make_executor(image, slots=1) as ex:
        yield ex


def uid_processes_left(exclude_own_run: bool) -> str:
    """Program lines that count the other live processes of the run's uid (``left`` is their number)."""
    own = "(os.getpid(), os.getppid())" if exclude_own_run else "()"
    return (
        "    left = 0\n"
        "    for p in os.listdir('/proc'):\n"
        f"        if p.isdigit() and int(p) not in {own}:\n"
        "            try:\n"
        "                st = open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()\n"
        "                left += os.stat(f'/proc/{p}').st_uid == os.getuid() and st[0] != 'Z'\n"
        "            except OSError:\n"
        "                pass\n"
    )


def test_no_engine_is_a_clear_error() -> None:
    with pytest.raises(DockerUnavailable, match="dockerd|docker package"):
        DockerExecutor("any-image", base_url="unix:///nonexistent/docker.sock")


def test_missing_image_is_a_clear_error(docker_client) -> None:
    with pytest.raises(DockerUnavailable, match="build it first"):
        DockerExecutor("convcodeworld-no-such-image:0")


def test_canonical_solutions_match_local(docker_executor, humaneval) -> None:
    tasks = [humaneval[f"HumanEval/{i}"] for i in range(6)]
    jobs = [(t, t.ground_truth) for t in tasks] + [(tasks[0], "def has_close_elements(a, b):\n    return 1 / 0\n")]
    results = docker_executor.run_many(jobs)
    with SandboxExecutor(workers=1, preload=(), cache=False) as sandbox, LocalExecutor() as local:
        expected, unconfined = sandbox.run_many(jobs), local.run_many(jobs)
    assert [r.passed for r in results] == [r.passed for r in unconfined] == [True] * 6 + [False]
    assert results == expected  # test by test, tracebacks included: the same worker and judge as the local sandbox
    details = results[0].details
    assert details["backend"] == "docker" and details["judge"] == "split" and details["image"] == docker_executor.image


def test_confinement_is_reported_truthfully(docker_executor) -> None:
    conf = docker_executor.run(SQUARE, SQUARE.ground_truth).details["confinement"]
    assert set(conf) == {"level", "uid", "features", "missing", "network", "cpu_bound"} and conf["network"] == "none"
    assert conf["cpu_bound"] == {"kind": "container", "cpus": 1.0, "pids": PIDS}, conf  # the container's --cpus, --pids-limit
    # root in the container drops each run to the slot's uid; no CAP_SYS_ADMIN, so no namespaces per run
    assert conf["level"] == "uid" and conf["uid"] >= 61000, conf
    assert {"non_root_uid", "rlimits", "not_dumpable", *CONTAINER_FEATURES} <= set(conf["features"]), conf
    assert any(m.startswith("namespaces:") and "CAP_SYS_ADMIN" in m for m in conf["missing"]), conf
    assert not any("split judge" in m for m in conf["missing"]), conf
    for layer in ("seccomp", "landlock"):  # achieved, or said missing with the reason
        assert any(f.startswith(layer) for f in conf["features"]) or any(m.startswith(layer) for m in conf["missing"]), conf


@pytest.mark.parametrize("program", list(FORGES.values()) + list(EXIT_CALLS.values()), ids=list(FORGES) + list(EXIT_CALLS))
def test_forging_a_pass_fails_under_the_split_judge(docker_executor, program) -> None:
    result = assert_rejected(docker_executor, program, *FORGE_REJECTED)
    assert result.details["judge"] == "split" and result.details["backend"] == "docker"


def test_infinite_loop_times_out_and_the_slot_recovers(docker_executor) -> None:
    task = probe_task("loop")
    started = time.monotonic()
    result = docker_executor.run(task, "def probe():\n    while True:\n        pass\n")
    assert time.monotonic() - started < 30
    assert not result.passed and result.tests[0].outcome is Outcome.TIMEOUT and result.timed_out
    assert all(r.passed for r in docker_executor.run_many([(task, task.ground_truth)] * 2))


def test_fork_bomb_is_bounded_and_cleaned_up(one_slot) -> None:
    task = probe_task("fork")
    bomb = (
        "import os, time\n"
        "def probe():\n"
        "    n = 0\n"
        "    try:\n"
        "        for _ in range(5000):\n"
        "            if os.fork() == 0:\n"
        "                time.sleep(60)\n"
        "                os._exit(0)\n"
        "            n += 1\n"
        "    except OSError:\n"
        "        pass\n"
        "    return f'forked {n}'\n"
    )
    result = one_slot.run(task, bomb)
    assert not result.passed
    forked = int(re.search(r"forked (\d+)", result.tests[0].traceback).group(1))
    assert 0 < forked < PIDS, f"the pids limit did not hold: {forked} forks"
    counter = "import os\ndef probe():\n" + uid_processes_left(True) + "    return 'contained' if not left else f'{left} processes left'\n"
    result = one_slot.run(task, counter)
    assert result.passed, texts(result)


def test_memory_bomb_is_bounded(docker_executor) -> None:
    task = probe_task("memory")
    bomb = "def probe():\n    blocks = [b'x' * (100 << 20) for _ in range(80)]\n    return f'allocated {len(blocks) * 100} MB'\n"
    result = docker_executor.run(task, bomb)
    assert not result.passed and result.tests[0].outcome is not Outcome.PASSED
    assert "allocated 8000 MB" not in texts(result)
    # The container's limit (far below the 6 GB address-space rlimit) ended it: the result says so.
    assert "memory_limit" in result.limits_hit and result.details["oom_kills"] >= 1, (result.limits_hit, texts(result))
    assert "killed by signal SIGKILL by the kernel's out-of-memory killer" in texts(result), texts(result)
    again = docker_executor.run(task, task.ground_truth)
    assert again.passed and again.limits_hit == () and "oom_kills" not in again.details


def test_writes_outside_the_work_dir_fail(docker_executor) -> None:
    task = probe_task("write")
    program = (
        "import os\n"
        "def probe():\n"
        "    wrote = []\n"
        "    for path in ['/etc/ccw_probe', '/usr/ccw_probe', '/ccw/ccw_probe', '/ccw/convcodeworld_gym/x.py',\n"
        "                 '/ccw_probe', '/root/ccw_probe', '/dev/shm/../ccw_probe']:\n"
        "        try:\n"
        "            with open(path, 'w') as handle:\n"
        "                handle.write('x')\n"
        "            wrote.append(path)\n"
        "        except OSError:\n"
        "            pass\n"
        "    with open('inside.txt', 'w') as handle:\n"
        "        handle.write('the work dir is writable')\n"
        "    return 'contained' if not wrote else f'wrote {wrote}'\n"
    )
    result = docker_executor.run(task, program)
    assert result.passed, texts(result)
    assert not os.path.exists("/usr/ccw_probe")


def test_no_network_and_no_secrets(docker_executor, monkeypatch) -> None:
    monkeypatch.setenv("CCW_TEST_SECRET", SECRET)  # in this process, and (environment=) in every worker
    task = probe_task("network")
    program = (
        "import os, socket\n"
        "def probe():\n"
        "    ifaces = [line.split(':')[0].strip() for line in open('/proc/net/dev').read().splitlines()[2:]]\n"
        "    reached = []\n"
        "    for host, port in [('1.1.1.1', 53), ('10.0.0.1', 80), ('172.17.0.1', 2375)]:\n"
        "        try:\n"  # no IP socket at all under the worker's seccomp filter; no route without it
        "            socket.create_connection((host, port), timeout=2).close()\n"
        "            reached.append(host)\n"
        "        except OSError:\n"
        "            pass\n"
        "    leaked = [k for k, v in os.environ.items() if 's3cret' in v]\n"
        "    for pid in os.listdir('/proc'):\n"
        "        try:\n"
        "            if b's3cret' in open(f'/proc/{pid}/environ', 'rb').read():\n"
        "                leaked.append(pid)\n"
        "        except OSError:\n"
        "            pass\n"
        "    return 'contained' if ifaces == ['lo'] and not reached and not leaked else f'{ifaces} {reached} {leaked}'\n"
    )
    result = docker_executor.run(task, program)
    assert result.passed, texts(result)
    # the attack is real: the worker (a process the run can list) holds the secret in its environment
    worker = docker_executor._workers[result.details["worker"]].proc.container  # noqa: SLF001
    assert SECRET.encode() in worker.exec_run(["/bin/sh", "-c", "cat /proc/[0-9]*/environ"], user="0").output


def test_nothing_survives_into_the_next_run(one_slot) -> None:
    task = probe_task("leftovers")
    writer = (
        "import os, time\n"
        "def probe():\n"
        "    for path in ('/dev/shm/ccw_left', '/tmp/ccw_left', 'left.txt'):\n"
        "        with open(path, 'w') as handle:\n"
        "            handle.write('x')\n"
        "    if os.fork() == 0:\n"  # a daemon: out of the run's process group and session
        "        os.setsid()\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(60)\n"
        "        os._exit(0)\n"
        "    time.sleep(0.2)\n"
        "    return 'contained'\n"
    )
    reader = (
        "import os\n"
        "def probe():\n"
        "    files = [p for p in ('/dev/shm/ccw_left', 'left.txt') if os.path.exists(p)]\n"
        "    files += [d for d in os.listdir('/tmp') if os.stat(os.path.join('/tmp', d)).st_uid == os.getuid()\n"
        "              and os.path.join('/tmp', d) != os.getcwd()]\n"  # /tmp/ccw_left, earlier work dirs
        + uid_processes_left(True)
        + "    return 'contained' if not files and not left else f'left over: {files}, {left} processes'\n"
    )
    for _ in range(2):
        assert one_slot.run(task, writer).passed
        result = one_slot.run(task, reader)
        assert result.passed, texts(result)


def test_a_killed_container_is_replaced_like_a_dead_worker(one_slot, docker_client) -> None:
    task = probe_task("killed")
    assert one_slot.run(task, task.ground_truth).passed
    replaced = one_slot.replaced_workers
    slot = one_slot._workers[0]  # noqa: SLF001 - the test kills the real container
    slot.proc.container.kill()  # between runs
    deadline = time.monotonic() + 20
    while slot.alive:
        assert time.monotonic() < deadline, "the killed container's worker still looks alive"
        time.sleep(0.05)
    assert one_slot.run(task, task.ground_truth).passed and one_slot.replaced_workers == replaced + 1
    # Mid-run: the run is lost with its container and retried in a fresh one (before issue 34 it failed: a correct
    # program's 0 for the machine's doing).
    out: list = []
    runner = threading.Thread(target=lambda: out.append(one_slot.run(task, marked(task.ground_truth, sleep_s=1.0))))
    runner.start()
    next_marked(set(), timeout_s=30)
    slot.proc.container.kill()
    runner.join(timeout=60)
    assert not runner.is_alive(), "the run hung after its container was killed"
    assert out[0].passed and "sandbox worker" in out[0].details["retried"]["lost"], (texts(out[0]), out[0].details)
    assert one_slot.run(task, task.ground_truth).passed and one_slot.replaced_workers == replaced + 2
    assert len(docker_client.containers.list(all=True, filters={"label": f"convcodeworld={one_slot._label}"})) == 1  # noqa: SLF001


def test_a_worker_killed_mid_run_of_a_correct_program_is_retried_and_killed_twice_has_no_verdict(one_slot) -> None:
    """The worker process in the container SIGKILLed from outside while a correct program runs: the run is retried
    in a fresh container and passes; killed again on its retry, it has no verdict (``infra_error``)."""
    task = probe_task("worker-killed")
    program = marked(task.ground_truth, sleep_s=1.0)
    assert one_slot.run(task, program).passed  # undisturbed, the marked program is correct
    with WorkerKiller(times=1) as killer:
        retried = one_slot.run(task, program)
    assert len(killer.killed) == 1, "the killer never saw the run in the container"
    assert retried.passed and "killed by signal SIGKILL" in retried.details["retried"]["lost"], (texts(retried), retried.details)
    with WorkerKiller(times=2) as killer:
        lost = one_slot.run(task, program)
    assert len(killer.killed) == 2
    assert not lost.passed and "killed by signal SIGKILL" in (lost.infra_error or ""), texts(lost)
    assert one_slot.run(task, program).passed  # nothing cached of the lost run; the slot works


def test_close_removes_every_container_and_results_are_cached(docker_client, image) -> None:
    task = probe_task("teardown")
    ex = make_executor(image, slots=2, cache=True, calibrate=False)
    programs = [task.ground_truth + f"# {i}\n" for i in range(4)]
    assert all(r.passed for r in ex.run_many([(task, p) for p in programs]))
    assert ex.run(task, programs[0]).details.get("cache") == "hit"
    label = {"label": f"convcodeworld={ex._label}"}  # noqa: SLF001
    assert len(docker_client.containers.list(all=True, filters=label)) == 2
    ex.close()
    ex.close()
    assert docker_client.containers.list(all=True, filters=label) == []
    with pytest.raises(ExecutorError, match="closed"):
        ex.run(task, programs[1] + "# after close\n")


def test_containers_of_an_owner_that_died_stop_and_are_removed(docker_client, image, one_slot) -> None:
    owner = (  # makes an executor with one container, runs a program, and dies without closing it
        "import json, os, signal, sys\n"
        "from convcodeworld_gym.sandbox.backends.docker import DockerExecutor\n"
        "from convcodeworld_gym.tasks import Task\n"
        "a = json.loads(sys.argv[1])\n"
        "ex = DockerExecutor(a['tag'], python=a['python'], volumes=a['volumes'], slots=1, cache=False)\n"
        "task = Task(**a['task'])\n"
        "assert ex.run(task, task.ground_truth).passed\n"
        "print(ex._label, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    task = probe_task("orphan")
    assert one_slot.run(task, task.ground_truth).passed  # a live owner's container exists, whatever ran before
    fields = {k: getattr(task, k) for k in ("task_id", "prompt", "code_prompt", "entry_point", "canonical_solution", "test")}
    args = json.dumps({"tag": image.tag, "python": image.python, "volumes": image.volumes, "task": fields})
    done = subprocess.run([sys.executable, "-c", owner, args], capture_output=True, text=True, timeout=120)
    assert done.returncode == -9 and done.stdout.strip().startswith("ccw-"), done.stderr[-2000:]
    filters = {"label": f"convcodeworld={done.stdout.strip()}"}
    [left] = docker_client.containers.list(all=True, filters=filters)
    host, boot, namespace, pid, started = left.labels[OWNER_LABEL].split()
    assert host == socket.gethostname() and pid.isdigit() and started.isdigit()
    assert (boot, namespace) == (open("/proc/sys/kernel/random/boot_id").read().strip(), os.readlink("/proc/self/ns/pid")[5:-1])
    deadline = time.monotonic() + 40  # its worker read EOF and ended; the keeper, alone 10 s, ends the container
    while left.status != "exited" and time.monotonic() < deadline:
        time.sleep(0.5)
        left.reload()
    assert left.status == "exited", f"the container of a dead owner is still {left.status}"
    ours = {"label": f"convcodeworld={one_slot._label}"}  # noqa: SLF001 - a live owner's container
    assert len(docker_client.containers.list(all=True, filters=ours)) == 1
    assert left.name in remove_orphans(docker_client)
    assert docker_client.containers.list(all=True, filters=filters) == []
    assert len(docker_client.containers.list(all=True, filters=ours)) == 1, "a live owner's container was removed"
    assert one_slot.run(task, task.ground_truth).passed


def test_async_vector_env_with_a_docker_executor_per_worker(docker_client, image) -> None:
    import functools

    import gymnasium as gym

    ours = {"label": "convcodeworld"}
    before = len(docker_client.containers.list(all=True, filters=ours))
    factory = functools.partial(DockerExecutor, image.tag, slots=1, python=image.python, volumes=image.volumes)
    envs = gym.make_vec("ConvCodeWorld-CF-EF_full-v0", num_envs=2, vectorization_mode="async",
                        dataset="humaneval", task_ids=("HumanEval/0",), executor=factory)
    try:
        envs.reset(seed=0)
        truth = envs.unwrapped.call("task")[0].ground_truth
        obs, rewards, terminated, _, info = envs.step((truth, "def has_close_elements(a, b):\n    return False\n"))
        assert list(rewards) == [1.0, 0.0] and list(terminated) == [True, False]
        assert obs["execution_feedback"][0] == "Passed all test runs" and "TEST_" in obs["execution_feedback"][1]
        assert list(info["confinement"]["level"]) == ["uid", "uid"]
        assert len(docker_client.containers.list(all=True, filters=ours)) == before + 2
    finally:
        envs.close()
    assert len(docker_client.containers.list(all=True, filters=ours)) == before


def test_a_forked_copy_refuses_to_run(docker_executor) -> None:
    import multiprocessing as mp

    def child(queue) -> None:
        try:
            docker_executor.run(probe_task("fork-copy"), "def probe():\n    return 'contained'\n")
            queue.put("ran")
        except Exception as exc:  # noqa: BLE001
            queue.put(f"{type(exc).__name__}: {exc}")

    queue = mp.get_context("fork").Queue()
    process = mp.get_context("fork").Process(target=child, args=(queue,))
    process.start()
    message = queue.get(timeout=30)
    process.join(10)
    assert message.startswith("ExecutorError") and "functools.partial" in message
    assert docker_executor.run(probe_task("after"), "def probe():\n    return 'contained'\n").passed


def test_the_other_hostile_classes_are_contained_too(docker_executor) -> None:
    """The rest of the sandbox's hostile cases, in a container: its parent and every process killed, a socket
    to the host's loopback, many files, a big file, huge output, deep recursion, forging where judged in-process."""
    killer = "import os, signal\ndef task_func(x):\n    os.kill(os.getppid(), signal.SIGKILL)\n    os.kill(-1, signal.SIGKILL)\n    return -1\n"
    # kill(-1) is safe here: the run is in the container's PID namespace, as a uid that owns nothing of the host.
    probe = succeed_if("ok = os.readlink('/proc/self/ns/pid') != " + repr(os.readlink("/proc/self/ns/pid")))
    assert docker_executor.run(SQUARE, probe).passed, "the run is not in the container's PID namespace"
    for task in (SQUARE, MOCKED):
        assert_rejected(docker_executor, killer, "AssertionError", "killed by signal SIGKILL", "No such process",
                        "Operation not permitted", task=task)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        attack = f"import socket\ns = socket.create_connection(('127.0.0.1', {server.getsockname()[1]}), timeout=2)\nok = True"
        assert_rejected(docker_executor, succeed_if(attack), "Permission denied", "Network is unreachable",
                        "Connection refused", "timed out")
    many = "for i in range(50000):\n    open(f'f{i}', 'w').close()\nok = True"
    assert_rejected(docker_executor, succeed_if(many), "No space left on device")
    big = "with open('big', 'wb') as fh:\n    for _ in range(300):\n        fh.write(b'x' * (1 << 20))\nok = True"
    assert_rejected(docker_executor, succeed_if(big), "File too large", "No space left on device", "SIGXFSZ")
    assert_rejected(docker_executor, "def task_func(x):\n    print('x' * (64 << 20))\n    return -1\n", "AssertionError",
                    "memory limit", "MemoryError")
    huge = assert_rejected(docker_executor, "def task_func(x):\n    raise ValueError('y' * (40 << 20))\n",
                           "OutputLimitExceeded", "characters cut", "memory limit", "MemoryError")
    assert len(texts(huge)) < 200_000
    recursion = "import sys\nsys.setrecursionlimit(10**7)\ndef f(n):\n    return f(n + 1) + 1\ndef task_func(x):\n    return f(0)\n"
    # A run that outgrows the container before its address-space rlimit is ended by the kernel (SIGKILL).
    assert_rejected(docker_executor, recursion, "SIGSEGV", "RecursionError", "MemoryError", "TimeoutError", "SIGKILL")
    for name in ("patch_unittest", "frame_walk", "forge_channel", "always_equal"):  # a mocked task is judged split too
        result = assert_rejected(docker_executor, FORGES[name], *FORGE_REJECTED, task=MOCKED)
        assert result.details["judge"] == "split" and result.details["forgeable"] is False
    assert docker_executor.run(SQUARE, SQUARE.ground_truth).passed
