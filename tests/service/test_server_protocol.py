"""The episode server speaks OpenEnv: ``openenv validate`` passes, a WebSocket episode through the typed client gives
exactly what the in-process env gives, and bad requests get clear errors. A real server (``convcodeworld serve`` in a
process of its own, on 127.0.0.1), real WebSockets, the real sandbox."""

from __future__ import annotations

import json
import subprocess

import gymnasium as gym
import pytest

from server_helpers import INSTALL, openenv_cli, run, wrong_program

pytest.importorskip("openenv", reason=f"the episode server's tests need the 'openenv' extra: {INSTALL}")

import httpx  # noqa: E402 - OpenEnv's dependency

import convcodeworld_gym  # noqa: E402,F401 - registers the ids
from convcodeworld_gym.errors import ServerError  # noqa: E402
from convcodeworld_gym.feedback.shown import shown_info  # noqa: E402
from convcodeworld_gym.observation import OBSERVATION_KEYS  # noqa: E402
from convcodeworld_gym.service import CodeAction, ConvCodeWorldClient  # noqa: E402

pytestmark = pytest.mark.openenv


def test_openenv_validate_passes_against_the_running_server(server):
    done = subprocess.run([openenv_cli(), "validate", "--url", server.base_url, "--json"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["passed"] and report["mode"] == "simulation", report
    assert report["standard_profile"] == "openenv-http/1.x", report
    assert {c["id"]: c["passed"] for c in report["criteria"]} == dict.fromkeys(
        ["openapi_version_available", "health_endpoint", "metadata_endpoint", "schema_endpoint", "mcp_endpoint",
         "mode_endpoint_consistency"], True)


@pytest.mark.parametrize("gym_id", ["ConvCodeWorld-CF-EF_full-v0", "ConvCodeWorld-CF-EF_partial-SNF-v0", "ConvCodeWorld-CF-v0"])
def test_a_websocket_episode_wrong_then_canonical_gives_the_feedback_of_that_id(server, humaneval, executor, gym_id):
    """Served: a wrong program scores 0 with the feedback the id shows (equal to the in-process env's, text for text),
    then the canonical solution 1.0 and done."""
    task = humaneval["HumanEval/2"]
    replies = [wrong_program(task), task.ground_truth]
    local = gym.make(gym_id, dataset=humaneval, executor=executor)
    expected = [local.reset(options={"task_id": task.task_id})]
    expected += [local.step(reply) for reply in replies]
    local.close()

    async def episode():
        async with ConvCodeWorldClient(base_url=server.base_url) as client:
            results = [await client.reset(env_id=gym_id, task_id=task.task_id)]
            results += [await client.step(CodeAction(reply=replies[0])), await client.step(replies[1])]
            return results, await client.state()

    (reset, wrong, right), state = run(episode())
    assert reset.reward is None and not reset.done and reset.observation.turn == 0
    assert {k: getattr(reset.observation, k) for k in OBSERVATION_KEYS} == expected[0][0]

    obs, reward, terminated, truncated, info = expected[1]
    assert (wrong.reward, wrong.done, reward) == (0.0, False, 0.0)
    assert {k: getattr(wrong.observation, k) for k in OBSERVATION_KEYS} == obs  # the id's feedback, as in-process
    assert wrong.observation.compilation_feedback and (wrong.observation.execution_feedback != "") == ("EF" in gym_id)
    served_info = wrong.observation.metadata["info"]
    shown = shown_info(info, task.public_tests)  # what the feedback covers (serve --info shown, the default)
    assert served_info["pass_fraction"] == shown["pass_fraction"] == (0.0 if "EF_full" in gym_id else None)
    assert [t["outcome"] for t in served_info["tests"]] == [t["outcome"] for t in shown["tests"]]
    assert served_info["feedback_shown"] == info["feedback_shown"]

    obs, reward, terminated, truncated, info = expected[2]
    assert (right.reward, right.done, right.observation.metadata["terminated"]) == (1.0, True, True) == (reward, terminated, terminated)
    assert {k: getattr(right.observation, k) for k in OBSERVATION_KEYS} == obs
    assert right.observation.metadata["info"]["episode_end"] == "passed"
    assert (state.env_id, state.task_id, state.turn, state.step_count, state.done) == (gym_id, task.task_id, 2, 2, True)


def test_bad_requests_get_clear_errors_and_the_session_goes_on(server, humaneval):
    async def session():
        errors = {}
        async with ConvCodeWorldClient(base_url=server.base_url) as client:
            for name, call in [
                ("step before reset", lambda: client.step("x")),
                ("unknown id", lambda: client.reset(env_id="CF-EF_everything")),
                ("unknown task", lambda: client.reset(task_id="HumanEval/9999")),
                ("unknown argument", lambda: client.reset(task="HumanEval/0")),
                ("both task_id and task_index", lambda: client.reset(task_id="HumanEval/0", task_index=1)),
                ("task_index out of range", lambda: client.reset(task_index=500)),
            ]:
                with pytest.raises(ServerError) as caught:
                    await call()
                errors[name] = caught.value
            played = await client.reset(task_id="HumanEval/0")  # the session still works
            done = await client.step(humaneval["HumanEval/0"].ground_truth)
            with pytest.raises(ServerError) as caught:
                await client.step("x")
            errors["step after the end"] = caught.value
        return errors, played, done

    errors, played, done = run(session())
    assert played.observation.task_id == "HumanEval/0" and done.reward == 1.0
    kinds = {name: (e.kind, e.code) for name, e in errors.items()}
    assert kinds == {  # the caller's mistakes: OpenEnv's VALIDATION_ERROR (issue 39)
        "step before reset": ("ResetNeeded", "VALIDATION_ERROR"),
        "unknown id": ("ValueError", "VALIDATION_ERROR"),
        "unknown task": ("UnknownTaskError", "VALIDATION_ERROR"),
        "unknown argument": ("ValueError", "VALIDATION_ERROR"),
        "both task_id and task_index": ("ValueError", "VALIDATION_ERROR"),
        "task_index out of range": ("ValueError", "VALIDATION_ERROR"),
        "step after the end": ("ResetNeeded", "VALIDATION_ERROR"),
    }
    assert "send reset first" in str(errors["step before reset"])
    assert "ConvCodeWorld-CF-EF_full-SEF-v0" in str(errors["unknown id"])  # lists what is played
    assert "HumanEval/9999" in str(errors["unknown task"])
    assert "['task']" in str(errors["unknown argument"]) and "task_id" in str(errors["unknown argument"])
    assert "[0, 164)" in str(errors["task_index out of range"])
    assert "is over" in str(errors["step after the end"])


def test_a_malformed_action_and_the_stateless_http_routes_say_what_is_wrong(server):
    from openenv.core.generic_client import GenericEnvClient

    async def malformed():
        async with GenericEnvClient(base_url=server.base_url) as client:
            await client.reset()
            with pytest.raises(RuntimeError) as caught:
                await client.step({"code": "def f(): pass"})  # the field is `reply`
            return str(caught.value)

    message = run(malformed())
    assert "VALIDATION_ERROR" in message
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        step = http.post("/step", json={"action": {"reply": "def f(): pass"}})
        reset = http.post("/reset", json={"env_id": "nope"})
        ok = http.post("/reset", json={"task_id": "HumanEval/3", "env_id": "CF"})
    assert step.status_code == 400 and step.json()["kind"] == "ResetNeeded", step.text
    assert step.json()["code"] == "VALIDATION_ERROR", step.text
    assert "/ws WebSocket" in step.json()["detail"]  # HTTP /step is stateless: it says where episodes are played
    assert reset.status_code == 400 and reset.json()["detail"].startswith("ValueError: env_id 'nope' is not played here")
    assert ok.status_code == 200 and ok.json()["observation"]["task_id"] == "HumanEval/3"
    assert ok.json()["observation"]["env_id"] == "ConvCodeWorld-CF-v0"


def test_the_server_binds_127_0_0_1_by_default(server):
    assert server.base_url.startswith("http://127.0.0.1:")
    port = int(server.base_url.rsplit(":", 1)[1])
    listening = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as fh:
            for line in fh.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                address, hex_port = local.rsplit(":", 1)
                if state == "0A" and int(hex_port, 16) == port:  # LISTEN
                    listening.add(address)
    assert listening == {"0100007F"}, listening  # 127.0.0.1 only


def test_a_served_step_judges_the_replys_answer_and_never_its_thought(server, humaneval):
    """A reasoning reply (a wrong draft in its thought, the canonical solution as its answer) scores 1.0 on the server's
    default reading; a thought sent apart (``reasoning``, or ``reasoning_content`` as an endpoint names it) holding the
    canonical solution beside a wrong reply scores 0.0 and comes back in ``metadata["reasoning"]``. A server started
    with ``--reasoning keep`` judges the draft, as the reference did."""
    from convcodeworld_gym.testing.episode_server import EpisodeServer
    from convcodeworld_gym.training.smoke import reasoning_reply, smoke_programs

    task = humaneval["HumanEval/2"]
    right, wrong = smoke_programs(task)

    async def steps(base_url, actions):
        results = []
        async with ConvCodeWorldClient(base_url=base_url) as client:
            for action in actions:
                await client.reset(env_id="CF", task_id=task.task_id)
                results.append(await client.step(action))
        return results

    drafted, apart, named = run(steps(server.base_url, [
        CodeAction(reply=reasoning_reply(wrong, right)),
        CodeAction(reply=f"```python\n{wrong}```", reasoning=f"```python\n{right}```"),
        CodeAction.model_validate({"reply": f"```python\n{wrong}```", "reasoning_content": "a thought"}),
    ]))
    assert drafted.reward == 1.0 and drafted.observation.metadata["info"]["reasoning"]["answered"]
    assert "reasoning" not in drafted.observation.metadata
    assert (apart.reward, apart.observation.metadata["reasoning"]) == (0.0, f"```python\n{right}```")
    assert (named.reward, named.observation.metadata["reasoning"]) == (0.0, "a thought")
    with EpisodeServer(["CF", "--dataset", "humaneval", "--reasoning", "keep"]) as keeping:
        (kept,) = run(steps(keeping.base_url, [CodeAction(reply=reasoning_reply(wrong, right))]))
    assert kept.reward == 0.0 and kept.observation.metadata["info"]["reasoning"]["mode"] == "keep"
