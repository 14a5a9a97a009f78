"""The Ray executor through Ray's client mode (``--ray ray://head:10001``), the address users give for a remote
cluster: a real head node (``ray start --head --block`` in a process group of its own, on free ports of this machine),
a real client connection, verdicts equal to the local sandbox's, and a connection that fails naming what to check.

The head runs with token authentication (``RAY_AUTH_MODE=token``, a token of this test's: Ray 2.59 and later turn it
on for the clusters ``ray start`` makes where a token is at hand), so a client needs ``RAY_AUTH_MODE=token`` and the
token; one without them is told so."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.slow]
pytest.importorskip("ray", reason="ray is not installed: pip install 'convcodeworld-gym[ray]'")
pytest.importorskip("grpc", reason="Ray's client mode needs grpcio: pip install 'convcodeworld-gym[ray]'")

RAY = str(Path(sys.executable).with_name("ray"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


#: The head's token (RAY_AUTH_TOKEN): what a client must present.
TOKEN = secrets.token_hex(32)
AUTH = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": TOKEN}


@pytest.fixture(scope="module")
def head() -> Iterator[str]:
    """A head node of 2 CPUs with token authentication, reached at the ``ray://`` address yielded; stopped with its
    whole process group."""
    gcs_port, client_port = _free_port(), _free_port()
    env = {**_without_auth(), "RAY_USAGE_STATS_ENABLED": "0", **AUTH}
    with tempfile.TemporaryDirectory(prefix="ccw-ray-client-") as temp:
        command = [RAY, "start", "--head", "--block", f"--port={gcs_port}", f"--ray-client-server-port={client_port}",
                   f"--runtime-env-agent-port={_free_port()}", "--num-cpus=2", "--include-dashboard=false",
                   f"--temp-dir={temp}", "--disable-usage-stats"]
        process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        try:
            # The client server listens before the cluster serves: a client let in then waits on a per-client
            # server that never answers. Ready is when `ray status` answers (a few seconds after the start).
            deadline = time.monotonic() + 120
            status = [RAY, "status", f"--address=127.0.0.1:{gcs_port}"]
            while subprocess.run(status, env=env, capture_output=True, timeout=60).returncode:
                assert process.poll() is None, f"ray start exited with {process.returncode}"
                if time.monotonic() > deadline:
                    pytest.fail("the head did not answer `ray status` within 120 s")
                time.sleep(1)
            yield f"ray://127.0.0.1:{client_port}"
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


#: A user's process: connect by ``ray://``, judge right and wrong programs, print the verdicts (or the error) as JSON.
CLIENT = """
import json, sys
import ray
from convcodeworld_gym.sandbox import Limits
from convcodeworld_gym.sandbox.backends.ray import RayUnavailable, make_ray_executor
from convcodeworld_gym.tasks import load_tasks

tasks = [load_tasks("humaneval")[f"HumanEval/{i}"] for i in range(3)]
jobs = [(t, t.ground_truth) for t in tasks] + [(t, t.code_prompt + "    return None\\n") for t in tasks]
try:
    remote = make_ray_executor(sys.argv[1], Limits(), slots=2)
except RayUnavailable as exc:
    print(json.dumps({"error": str(exc)}))
    raise SystemExit(0)
try:
    results = remote.run_many(jobs)
finally:
    remote.close()
print(json.dumps({"passed": [r.passed for r in results], "lost": [r.infra_error for r in results],
                  "nodes": [r.details.get("ray_node") for r in results], "still_connected": ray.is_initialized()}))
"""


def _without_auth() -> dict[str, str]:
    """This process's environment without Ray's authentication settings."""
    return {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}


def _client(address: str, **env: str) -> dict:
    """Run :data:`CLIENT` in a process of its own (Ray reads ``RAY_AUTH_MODE`` as it starts) with ``env`` added."""
    done = subprocess.run([sys.executable, "-c", CLIENT, address], env={**_without_auth(), **env}, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_cluster_reached_by_ray_url_judges_as_the_local_sandbox(head, humaneval, executor):
    out = _client(head, **AUTH)
    if "error" in out:  # a head that answers `ray status` may still fail a first client on a loaded machine: once more
        out = _client(head, **AUTH)
    tasks = [humaneval[f"HumanEval/{i}"] for i in range(3)]
    local = executor.run_many([(t, t.ground_truth) for t in tasks] + [(t, t.code_prompt + "    return None\n") for t in tasks])
    assert out.get("passed") == [r.passed for r in local] == [True] * 3 + [False] * 3, out
    assert out["lost"] == [None] * 6 and all(out["nodes"]) and not out["still_connected"]  # close() ended the session


def test_a_client_without_the_clusters_token_is_told_what_to_check(head):
    out = _client(head)
    assert "could not connect to the Ray cluster" in out["error"] and "RAY_AUTH_MODE=token" in out["error"], out
