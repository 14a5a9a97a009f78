"""An input/output task through the episode server (issue 49, item 5): ``convcodeworld serve --dataset <a
LiveCodeBench file>`` plays it over a real WebSocket, a wrong program scores 0.0 with the feedback of its public test
only (partial EF), a right one 1.0. A real server (a process of its own, on 127.0.0.1), the real sandbox, the fixture
of ``tests/fixtures/io``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from server_helpers import INSTALL, run

pytest.importorskip("openenv", reason=f"the episode server's tests need the 'openenv' extra: {INSTALL}")

from convcodeworld_gym.service import ConvCodeWorldClient  # noqa: E402
from convcodeworld_gym.tasks import load_tasks  # noqa: E402
from convcodeworld_gym.testing.episode_server import EpisodeServer  # noqa: E402

pytestmark = pytest.mark.openenv

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "io"
LCB = str(FIXTURES / "livecodebench.jsonl")
ID = "ConvCodeWorld-CF-EF_partial-v0"


@pytest.fixture(scope="module")
def io_server() -> Iterator[EpisodeServer]:
    with EpisodeServer(["CF-EF_partial", "--dataset", LCB, "--max-turns", "2"]) as running:
        yield running


def test_an_io_task_plays_over_the_websocket(io_server):
    programs = json.loads((FIXTURES / "programs.json").read_text())["livecodebench.jsonl"]["abc900_a"]
    task = load_tasks(LCB)["abc900_a"]
    hidden = [text.strip() for case in task.cases[task.public_count:] for text in (case.input, case.output)
              if len(text.strip()) >= 3]  # "0" is everywhere
    assert "999999999999 1" in hidden and "1000000000000" in hidden

    async def episode() -> list:
        async with ConvCodeWorldClient(base_url=io_server.base_url) as client:
            results = [await client.reset(env_id=ID, task_id="abc900_a")]
            results.append(await client.step(f"```python\n{programs['wrong'][0]}```"))
            results.append(await client.step(f"```python\n{programs['right'][0]}```"))
            return results

    reset, wrong, right = run(episode())
    assert "Print A + B" in reset.observation.task
    feedback = wrong.observation.execution_feedback
    assert (wrong.reward, wrong.done) == (0.0, False) and "Input:\n3 5" in feedback and "Expected output:\n8" in feedback
    assert not [value for value in hidden if value in feedback]  # partial EF: the public test only
    info = wrong.observation.metadata["info"]
    assert info["public_pass_fraction"] == 0.0 and info["hidden_pass_fraction"] is None  # no count of hidden tests
    assert not [value for value in hidden if value in json.dumps(info)]  # nor in the info a client gets (--info shown)
    assert (right.reward, right.done) == (1.0, True)
