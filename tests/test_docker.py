"""The Docker executor on a real engine: canonical solutions pass, hostile programs are contained.

Needs a running dockerd (``.ci/start-dockerd``) and the ``docker`` package; otherwise every
test here skips with the reason. The image is assembled offline from the host's Python
(:mod:`convcodeworld_gym.testing.docker_image`).
"""

from __future__ import annotations

import os
import re
import time

import pytest

from convcodeworld_gym.sandbox import Limits, LocalExecutor, Outcome
from convcodeworld_gym.sandbox.docker import DockerExecutor, DockerUnavailable
from convcodeworld_gym.tasks import Task

pytestmark = pytest.mark.docker

PIDS, MEMORY = 128, "512m"
PROBE_TEST = """
import unittest

class TestCases(unittest.TestCase):
    def test_probe(self):
        self.assertEqual(probe(), "contained")
"""


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
def docker_executor(docker_client):
    from convcodeworld_gym.testing.docker_image import build_host_python_image

    image = build_host_python_image(docker_client)
    limits = Limits(suite_timeout_s=8.0, test_timeout_s=4.0)
    with DockerExecutor(image.tag, limits=limits, slots=2, python=image.python, volumes=image.volumes, memory=MEMORY, pids=PIDS) as ex:
        yield ex


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
    with LocalExecutor() as local:
        expected = local.run_many(jobs)
    assert [r.passed for r in results] == [True] * 6 + [False]
    assert results == expected
    assert results[0].details["backend"] == "docker" and results[0].details["confinement"]["level"] == "container"


def test_infinite_loop_times_out_and_the_slot_recovers(docker_executor) -> None:
    task = probe_task("loop")
    started = time.monotonic()
    result = docker_executor.run(task, "def probe():\n    while True:\n        pass\n")
    assert time.monotonic() - started < 30
    assert not result.passed and result.tests[0].outcome is Outcome.TIMEOUT and result.limits_hit == ("test_timeout",)
    assert all(r.passed for r in docker_executor.run_many([(task, task.ground_truth)] * 2))


def test_fork_bomb_is_bounded_and_cleaned_up(docker_executor) -> None:
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
    result = docker_executor.run(task, bomb)
    assert not result.passed
    forked = int(re.search(r"forked (\d+)", result.tests[0].traceback).group(1))
    assert 0 < forked < PIDS, f"the pids limit did not hold: {forked} forks"
    counter = (
        "import os\n"
        "def probe():\n"
        "    mine = [p for p in os.listdir('/proc') if p.isdigit() and os.stat('/proc/' + p).st_uid == os.getuid()]\n"
        "    return 'contained' if len(mine) <= 4 else f'{len(mine)} processes left'\n"
    )
    assert all(r.passed for r in docker_executor.run_many([(task, counter)] * 2)), "processes of an earlier run survived"


def test_memory_bomb_is_bounded(docker_executor) -> None:
    task = probe_task("memory")
    bomb = "def probe():\n    blocks = [b'x' * (100 << 20) for _ in range(80)]\n    return f'allocated {len(blocks) * 100} MB'\n"
    result = docker_executor.run(task, bomb)
    assert not result.passed and result.tests[0].outcome is not Outcome.PASSED
    assert "allocated 8000 MB" not in result.tests[0].traceback
    assert docker_executor.run(task, task.ground_truth).passed


def test_writes_outside_the_work_dir_fail(docker_executor) -> None:
    task = probe_task("write")
    program = (
        "import os\n"
        "def probe():\n"
        "    wrote = []\n"
        "    for path in ['/etc/ccw_probe', '/tmp/ccw_probe', '/usr/ccw_probe', '/ccw/ccw_probe', '/ccw_probe', '/root/ccw_probe', '/dev/shm/../ccw_probe']:\n"
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
    assert result.passed, result.tests[0].traceback
    assert not os.path.exists("/usr/ccw_probe")


def test_no_network_and_no_secrets(docker_executor, monkeypatch) -> None:
    monkeypatch.setenv("CCW_TEST_SECRET", "s3cret-token")
    task = probe_task("network")
    program = (
        "import os, socket\n"
        "def probe():\n"
        "    ifaces = [line.split(':')[0].strip() for line in open('/proc/net/dev').read().splitlines()[2:]]\n"
        "    reached = []\n"
        "    for host, port in [('1.1.1.1', 53), ('10.0.0.1', 80), ('172.17.0.1', 2375)]:\n"
        "        s = socket.socket()\n"
        "        s.settimeout(2)\n"
        "        try:\n"
        "            s.connect((host, port))\n"
        "            reached.append(host)\n"
        "        except OSError:\n"
        "            pass\n"
        "        finally:\n"
        "            s.close()\n"
        "    leaked = [k for k, v in os.environ.items() if 's3cret' in v]\n"
        "    return 'contained' if ifaces == ['lo'] and not reached and not leaked else f'{ifaces} {reached} {leaked}'\n"
    )
    result = docker_executor.run(task, program)
    assert result.passed, result.tests[0].traceback


def test_close_removes_every_container(docker_client) -> None:
    from convcodeworld_gym.testing.docker_image import build_host_python_image

    image = build_host_python_image(docker_client)
    task = probe_task("teardown")
    ex = DockerExecutor(image.tag, slots=2, python=image.python, volumes=image.volumes)
    assert all(r.passed for r in ex.run_many([(task, task.ground_truth)] * 4))
    label = {"label": f"convcodeworld={ex._label}"}
    assert len(docker_client.containers.list(all=True, filters=label)) == 2
    ex.close()
    ex.close()
    assert docker_client.containers.list(all=True, filters=label) == []


def test_async_vector_env_with_a_docker_executor_per_worker(docker_client) -> None:
    import functools

    import gymnasium as gym

    from convcodeworld_gym.testing.docker_image import build_host_python_image

    image = build_host_python_image(docker_client)
    ours = {"label": "convcodeworld"}
    before = len(docker_client.containers.list(all=True, filters=ours))
    factory = functools.partial(DockerExecutor, image.tag, slots=1, python=image.python, volumes=image.volumes)
    envs = gym.make_vec("ConvCodeWorld-CF-EF_full-v0", num_envs=2, vectorization_mode="async",
                        dataset="humaneval", task_ids=("HumanEval/0",), executor=factory)
    try:
        envs.reset(seed=0)
        truth = envs.unwrapped.call("task")[0].ground_truth
        obs, rewards, terminated, _, _ = envs.step((truth, "def has_close_elements(a, b):\n    return False\n"))
        assert list(rewards) == [1.0, 0.0] and list(terminated) == [True, False]
        assert obs["execution_feedback"][0] == "Passed all test runs" and "TEST_" in obs["execution_feedback"][1]
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


def test_nothing_survives_into_the_next_run(docker_executor) -> None:
    task = probe_task("leftovers")
    writer = (
        "import os\n"
        "def probe():\n"
        "    for path in ('/dev/shm/ccw_left', 'left.txt'):\n"
        "        with open(path, 'w') as handle:\n"
        "            handle.write('x')\n"
        "    return 'contained'\n"
    )
    reader = (
        "import os\n"
        "def probe():\n"
        "    left = [p for p in ('/dev/shm/ccw_left', 'left.txt') if os.path.exists(p)]\n"
        "    return 'contained' if not left else f'left over: {left}'\n"
    )
    for _ in range(2):  # sequential runs reuse the most recently freed slot
        assert docker_executor.run(task, writer).passed
        result = docker_executor.run(task, reader)
        assert result.passed, result.tests[0].traceback


def test_a_container_killed_under_the_executor_is_an_executor_error_then_replaced(docker_client) -> None:
    from convcodeworld_gym.errors import ExecutorError
    from convcodeworld_gym.testing.docker_image import build_host_python_image

    image = build_host_python_image(docker_client)
    task = probe_task("engine")
    with DockerExecutor(image.tag, slots=1, python=image.python, volumes=image.volumes) as ex:
        assert ex.run(task, task.ground_truth).passed
        (container,) = docker_client.containers.list(filters={"label": f"convcodeworld={ex._label}"})
        container.kill()  # the engine side fails, not the program
        with pytest.raises(ExecutorError, match="could not start an execution"):
            ex.run(task, task.ground_truth)
        assert ex.run(task, task.ground_truth).passed  # a fresh container took the slot
