"""The episode server's canary: ``convcodeworld serve --canary`` mixes twins into its task set, a twin's reward is 0.0
whatever passes, and ``GET /episodes`` reports the twins' pass rate beside the reward (issue 40). A real server (a
process of its own, on 127.0.0.1), real WebSockets, the real sandbox, HumanEval."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from server_helpers import INSTALL, run, wrong_program

pytest.importorskip("openenv", reason=f"the episode server's tests need the 'openenv' extra: {INSTALL}")

import httpx  # noqa: E402 - OpenEnv's dependency

from convcodeworld_gym.observation import OBSERVATION_KEYS  # noqa: E402
from convcodeworld_gym.service import ConvCodeWorldClient  # noqa: E402
from convcodeworld_gym.tasks import load_tasks, with_canaries  # noqa: E402
from convcodeworld_gym.testing.episode_server import EpisodeServer  # noqa: E402
from convcodeworld_gym.testing.test_fitter import TestFitterPolicy  # noqa: E402

pytestmark = pytest.mark.openenv

ID = "ConvCodeWorld-CF-EF_full-v0"


@pytest.fixture(scope="module")
def canary_server() -> Iterator[EpisodeServer]:
    """HumanEval/0-3 and, by ``--canary 0.5``, as many twins (a half of the 8 played): rich feedback, 2 turns."""
    with EpisodeServer(["CF-EF_full", "--dataset", "humaneval", "--limit", "4", "--canary", "0.5",
                        "--feedback-style", "rich", "--max-turns", "2"]) as running:
        yield running


def _episodes(server: EpisodeServer) -> dict:
    return httpx.get(f"{server.base_url}/episodes", timeout=30).json()


def _play(server: EpisodeServer, task_id: str, replies: list) -> list:
    """One episode over the WebSocket: each reply is a text, or a callable of the last observation (a dict)."""

    async def episode() -> list:
        async with ConvCodeWorldClient(base_url=server.base_url) as client:
            results = [await client.reset(env_id=ID, task_id=task_id)]
            for reply in replies:
                if results[-1].done:
                    break
                obs = {key: getattr(results[-1].observation, key) for key in OBSERVATION_KEYS}
                results.append(await client.step(reply(obs) if callable(reply) else reply))
            return results

    return run(episode())


def test_a_twin_pays_nothing_and_get_episodes_reports_its_pass_rate_beside_the_reward(canary_server):
    described = httpx.get(f"{canary_server.base_url}/metadata", timeout=30).json()
    assert "8 tasks" in described["description"]
    assert _episodes(canary_server) == {"ids": {}, "all": {"episodes": 0, "reward_mean": None, "regressed_share": None,
                                                           "lost": 0, "canary": {"episodes": 0, "passed": 0,
                                                                                 "pass_rate": None}}}
    twin = with_canaries(load_tasks("humaneval", task_ids=["HumanEval/2"]), ["HumanEval/2"])["HumanEval/2/canary"]
    fitter = TestFitterPolicy().start(twin, feedback="CF-EF_full", seed=0)

    fitted = _play(canary_server, twin.task_id, [twin.ground_truth, lambda obs: fitter.act(obs).text])
    info = fitted[-1].observation.metadata["info"]
    assert (fitted[-1].done, fitted[-1].reward, info["canary"], info["passed"]) == (True, 0.0, True, True)

    honest = _play(canary_server, twin.task_id, [twin.ground_truth] * 3)
    info = honest[-1].observation.metadata["info"]
    assert (honest[-1].done, honest[-1].reward, info["canary"], info["passed"]) == (True, 0.0, True, False)

    task = load_tasks("humaneval", task_ids=["HumanEval/2"])["HumanEval/2"]
    solved = _play(canary_server, task.task_id, [wrong_program(task), task.ground_truth])
    assert (solved[-1].reward, solved[-1].observation.metadata["info"]["canary"]) == (1.0, False)
    unsolved = _play(canary_server, task.task_id, [wrong_program(task)] * 3)
    assert (unsolved[-1].done, unsolved[-1].reward) == (True, 0.0)

    tally = _episodes(canary_server)
    expected = {"episodes": 2, "reward_mean": 0.5, "regressed_share": 0.0, "lost": 0,
                "canary": {"episodes": 2, "passed": 1, "pass_rate": 0.5}}
    assert tally == {"ids": {ID: expected}, "all": expected}


def test_an_episode_that_has_not_ended_is_not_counted(canary_server):
    before = _episodes(canary_server)["all"]
    task = load_tasks("humaneval", task_ids=["HumanEval/3"])["HumanEval/3"]
    _play(canary_server, "HumanEval/3/canary", [wrong_program(task)])  # one turn of three, then the client leaves
    assert _episodes(canary_server)["all"] == before


def test_a_share_outside_0_1_is_refused_naming_the_flag():
    with pytest.raises(RuntimeError, match=r"--canary"):
        with EpisodeServer(["CF-EF_full", "--dataset", "humaneval", "--canary", "1.5"]):
            pass
