"""A client of the episode server is a stranger: what a step's ``metadata["info"]`` sends it holds nothing of the
tests the step's feedback did not cover (``convcodeworld serve --info shown``, the default: no traceback, outcome,
count or time of a hidden test), and all of the info under ``--info full``. A real server (a process of its own, on 127.0.0.1), real WebSockets, the real sandbox."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

from server_helpers import INSTALL, run

pytest.importorskip("openenv", reason=f"the episode server's tests need the 'openenv' extra: {INSTALL}")

import convcodeworld_gym  # noqa: E402,F401 - registers the ids
from convcodeworld_gym.service import ConvCodeWorldClient  # noqa: E402
from convcodeworld_gym.testing.episode_server import EpisodeServer  # noqa: E402

pytestmark = pytest.mark.openenv

TASK = "HumanEval/13"  # 4 tests: test_4 (144, 60) is hidden under partial EF
HIDDEN = "(144, 60)"
#: Right on every call it is given, until its fourth: then it raises every input it has seen (a hidden test's too).
ECHO = '''```python
import math
calls = []
def greatest_common_divisor(a, b):
    calls.append((a, b))
    if len(calls) > 3:
        raise ValueError("seen: " + repr(calls))
    return math.gcd(a, b)
```'''


def _served_info(base_url: str, gym_id: str) -> dict:
    async def episode() -> dict:
        async with ConvCodeWorldClient(base_url=base_url) as client:
            await client.reset(env_id=gym_id, task_id=TASK)
            result = await client.step(ECHO)
            assert result.reward == 0.0
            return dict(result.observation.metadata["info"])

    return run(episode())


def _local_info(humaneval, executor, gym_id: str) -> dict:
    env = gym.make(gym_id, dataset=humaneval, executor=executor)
    try:
        env.reset(options={"task_id": TASK})
        return env.step(ECHO)[4]
    finally:
        env.close()


@pytest.mark.parametrize("gym_id", ["ConvCodeWorld-CF-EF_partial-v0", "ConvCodeWorld-CF-v0",
                                    "ConvCodeWorld-CF-EF_partial-SNF-v0"])
def test_a_hidden_tests_input_never_reaches_a_client_where_the_feedback_did_not_show_it(server, humaneval, executor, gym_id):
    local = _local_info(humaneval, executor, gym_id)
    assert HIDDEN in json.dumps(local, default=str)  # the runner's own info has it: the attack works on the program side
    served = _served_info(server.base_url, gym_id)
    assert HIDDEN not in json.dumps(served)
    partial = "EF_partial" in gym_id
    assert [t["name"] for t in served["tests"]] == (["test_1", "test_2", "test_3"] if partial else [])
    assert [t["outcome"] for t in served["tests"]] == [t["outcome"] for t in local["tests"][:len(served["tests"])]]
    assert local["pass_fraction"] == 0.75 and served["pass_fraction"] is None and served["hidden_pass_fraction"] is None
    assert served["public_pass_fraction"] == (1.0 if partial else None)
    assert served["timings"]["execute_s"] is None and served["timings"]["compile_s"] >= 0


def test_full_ef_shows_the_hidden_test_so_its_traceback_is_sent(server):
    served = _served_info(server.base_url, "ConvCodeWorld-CF-EF_full-v0")
    assert HIDDEN in served["tests"][3]["traceback"]


def test_info_full_sends_the_hidden_tests_traceback_to_a_trusted_client():
    with EpisodeServer(["CF-EF_partial", "--dataset", "humaneval", "--info", "full"]) as trusted:
        served = _served_info(trusted.base_url, "ConvCodeWorld-CF-EF_partial-v0")
    assert HIDDEN in served["tests"][3]["traceback"]


def test_a_client_cannot_ask_for_the_full_info(server):
    """A hostile client names the operator's setting in its reset (``info="full"``, ``scope="full"``): refused by name,
    and the same session's next episode still gets the shown info only."""
    from convcodeworld_gym.errors import ServerError

    async def session() -> tuple[list[str], dict]:
        refusals = []
        async with ConvCodeWorldClient(base_url=server.base_url) as client:
            for extra in ({"info": "full"}, {"scope": "full"}):
                try:
                    await client.reset(env_id="ConvCodeWorld-CF-EF_partial-v0", task_id=TASK, **extra)
                except ServerError as exc:
                    refusals.append(str(exc))
            await client.reset(env_id="ConvCodeWorld-CF-EF_partial-v0", task_id=TASK)
            result = await client.step(ECHO)
            return refusals, dict(result.observation.metadata["info"])

    refusals, info = run(session())
    assert len(refusals) == 2 and all("unknown reset argument" in r for r in refusals), refusals
    assert HIDDEN not in json.dumps(info) and [t["name"] for t in info["tests"]] == ["test_1", "test_2", "test_3"]
