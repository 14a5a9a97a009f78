"""256 sessions at once, each playing an episode against the scripted model: all finish, with the rewards the
in-process env gives. A real server, 256 real WebSockets from one client process (the rollout driver over
``RemoteEnv``), the scripted OpenAI-compatible coder in a process of its own, the real sandbox. The throughput
against the same episodes in-process is measured by benchmarks/server_throughput.py (docs/benchmarks.md)."""

from __future__ import annotations

import threading
import time

import pytest

from server_helpers import INSTALL, run

pytest.importorskip("openenv", reason=f"the episode server's tests need the 'openenv' extra: {INSTALL}")

from convcodeworld_gym.policies import OpenAIPolicy  # noqa: E402
from convcodeworld_gym.rollouts import EpisodeJob, iter_rollouts  # noqa: E402
from convcodeworld_gym.service.remote import RemoteEnvs  # noqa: E402
from convcodeworld_gym.testing import CoderServer  # noqa: E402
from convcodeworld_gym.testing.episode_server import EpisodeServer  # noqa: E402

pytestmark = pytest.mark.openenv

SESSIONS = 256


class _Peak(threading.Thread):
    """Samples the server's open sessions every 0.1 s; ``peak`` is the most seen."""

    def __init__(self, server: EpisodeServer) -> None:
        super().__init__(daemon=True)
        self.server, self.peak, self.stop = server, 0, threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.peak = max(self.peak, self.server.sessions()["active_sessions"])
            self.stop.wait(0.1)


def test_256_sessions_at_once_each_play_an_episode_against_the_scripted_model(humaneval):
    jobs = [EpisodeJob(humaneval[i % len(humaneval)].task_id, seed=i) for i in range(SESSIONS)]
    with CoderServer("humaneval", wrong_turns=1, latency_s=0.5) as coder, \
            EpisodeServer(["CF-EF_full", "--dataset", "humaneval", "--max-turns", "3"]) as server:
        make_env = RemoteEnvs(server.base_url, "CF-EF_full", tasks=humaneval)
        peak = _Peak(server)

        async def play():
            policy = OpenAIPolicy("coder", base_url=coder.base_url, api_key="EMPTY")
            try:
                return [t async for t in iter_rollouts(jobs, make_env, policy, concurrency=SESSIONS, protocol="always")]
            finally:
                await make_env.aclose()
                await policy.aclose()

        peak.start()
        started = time.monotonic()
        trajectories = run(play())
        seconds = time.monotonic() - started
        peak.stop.set()
        peak.join()
        for _ in range(50):  # every session ended
            if server.sessions()["active_sessions"] == 0:
                break
            time.sleep(0.1)
        left = server.sessions()

    print(f"{SESSIONS} episodes, {SESSIONS} sessions at once: {seconds:.1f} s ({60 * SESSIONS / seconds:.0f} episodes/min)")
    assert peak.peak == SESSIONS, peak.peak  # all at once
    assert [t.task_id for t in trajectories] == [job.task_id for job in jobs]
    assert all(t.infra_error is None and t.reward == 1.0 for t in trajectories)
    assert all([row.reward for row in t.rows] == [0.0, 1.0] for t in trajectories)  # wrong, then the canonical one
    assert all(t.rows[0].execution_feedback and t.rows[1].execution_feedback == "Passed all test runs" for t in trajectories)
    assert left == {"active_sessions": 0, "max_sessions": 256, "live_episodes": 0}
