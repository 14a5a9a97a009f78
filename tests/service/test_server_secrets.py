"""No secret of the episode server (the simulated user's API key) goes on the wire or into its log, even when the
simulated user's endpoint echoes the key back in an error; and a client cannot point the server's user elsewhere. A
real server whose LLM user talks to the scripted OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import os

import pytest

from server_helpers import INSTALL, run, wrong_program

pytest.importorskip("openenv", reason=f"the episode server's tests need the 'openenv' extra: {INSTALL}")

import httpx  # noqa: E402 - OpenEnv's dependency

from convcodeworld_gym.errors import ServerError  # noqa: E402
from convcodeworld_gym.feedback.verbal import API_KEY_ENV, BASE_URL_ENV, CACHE_ENV, MODEL_ENV  # noqa: E402
from convcodeworld_gym.service import ConvCodeWorldClient  # noqa: E402
from convcodeworld_gym.testing import Reply, ScriptedOpenAIServer  # noqa: E402
from convcodeworld_gym.testing.episode_server import EpisodeServer  # noqa: E402

pytestmark = pytest.mark.openenv

KEY = "sk-ccw-test-0123456789abcdef"  # what the server holds; never what a caller should see


def test_the_simulators_key_never_reaches_a_caller_or_the_log(tmp_path, humaneval):
    task = humaneval["HumanEval/0"]
    # The endpoint refuses the key and quotes it back, as some do ("Incorrect API key provided: sk-...").
    script = lambda body: Reply(status=401, content=f"Incorrect API key provided: {KEY}. You can find your key at ...")  # noqa: E731
    with ScriptedOpenAIServer(script) as endpoint:
        env = {**os.environ, API_KEY_ENV: KEY, BASE_URL_ENV: endpoint.base_url, MODEL_ENV: "user-model",
               CACHE_ENV: str(tmp_path / "verbal.sqlite")}
        with EpisodeServer(["CF-EF_full-SEF", "--dataset", "humaneval", "--log-level", "debug"], env=env) as server:
            async def session():
                async with ConvCodeWorldClient(base_url=server.base_url) as client:
                    await client.reset(task_id=task.task_id)
                    with pytest.raises(ServerError) as failed:
                        await client.step(wrong_program(task))  # the expert speaks: its endpoint refuses
                    with pytest.raises(ServerError) as pointed:  # no request may choose the user's endpoint
                        await client.reset(task_id=task.task_id, simulator_kwargs={"base_url": "http://evil"})
                    state = await client.state()
                return failed.value, pointed.value, state

            failed, pointed, state = run(session())
            with httpx.Client(base_url=server.base_url, timeout=60) as http:
                bodies = [http.get(path).text for path in ("/metadata", "/state", "/schema", "/sessions")]
                bodies.append(http.post("/reset", json={"env_id": "CF-EF_full-SEF", "task_id": task.task_id}).text)
        sent = [request["headers"].get("authorization") for request in endpoint.requests]
        endpoint_url = endpoint.base_url

    assert sent and set(sent) == {f"Bearer {KEY}"}  # the key was in use, sent to its endpoint only
    assert failed.kind == "SimulatorError" and failed.code == "EXECUTION_ERROR", str(failed)
    assert "did not answer" in str(failed) and "ref " in str(failed), str(failed)  # what happened, and the log's line
    assert KEY not in str(failed) and "401" not in str(failed)  # the endpoint's answer stays in the log (issue 39)
    assert endpoint_url not in str(failed) and "user-model" not in str(failed)  # so do its URL and model
    assert pointed.kind == "ValueError" and "simulator_kwargs" in str(pointed)
    assert KEY not in state.model_dump_json() and not any(KEY in body for body in bodies)
    logs = server.logs()
    assert "step failed: SimulatorError" in logs and "*" * len(KEY) in logs  # logged, masked
    ref = str(failed).rsplit("ref ", 1)[1].rstrip(")")
    assert f"(ref {ref})" in logs and "HTTP 401" in logs  # the operator finds the whole cause by the reference
    assert KEY not in logs and "Logging error" not in logs
