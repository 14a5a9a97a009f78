"""The rollout driver: awaited episodes equal blocking ones; a trajectory holds what a trainer needs (messages,
calls, usage, the sampled tokens); the event loop keeps ticking while 64 episodes run; a slow program holds only
its own episode; ``concurrency`` episodes in flight; a failing endpoint stops the rollout. Real parts: the sandbox,
the real ``openai`` client (async) over 127.0.0.1 to the scripted server, in this process or one of its own."""

from __future__ import annotations

import asyncio
import time

import gymnasium as gym
import pytest

import convcodeworld_gym  # noqa: F401 - registers the ids
from convcodeworld_gym.policies import LLMError, OpenAIPolicy, Policy, PolicyEpisode, PolicyReply, SyntheticCoder
from convcodeworld_gym.policies.prompts import SYSTEM_PROMPT, initial_prompt
from convcodeworld_gym.registration import env_id
from convcodeworld_gym.rollouts import EpisodeJob, Trajectory, aplay, iter_rollouts, play, rollouts
from convcodeworld_gym.testing import CoderScript, CoderServer, Reply, ScriptedOpenAIServer
from convcodeworld_gym.testing.openai_server import fake_logprob, fake_token_id, fake_tokens

HEARTBEAT_S = 0.005


@pytest.mark.parametrize("combination", ["CF", "CF-EF_partial-SNF", "CF-EF_full-SEF"])
@pytest.mark.parametrize("protocol", ["reference", "always"])
def test_an_awaited_episode_is_the_blocking_one(combination, protocol, humaneval, executor):
    """The SYNTHETIC coder (its bugs include missing colons: compile fixes inside a turn, the expert's words on the
    fixed code) on the same tasks and seeds, played blocking and awaited."""
    make = lambda: gym.make(env_id(combination), dataset=humaneval, max_turns=4, executor=executor)  # noqa: E731
    jobs = [EpisodeJob(f"HumanEval/{i}", seed=i) for i in range(6)]
    coder = SyntheticCoder(0.3)
    env = make()
    blocking = [play(env, coder, job, protocol=protocol) for job in jobs]

    async def awaited() -> list[Trajectory]:
        return [await aplay(env, coder, job, protocol=protocol) for job in jobs]

    assert asyncio.run(awaited()) == blocking
    assert rollouts(jobs, make, coder, concurrency=3, protocol=protocol) == blocking
    env.close()
    assert sum(t.model_calls for t in blocking) > len(jobs)  # more than one call an episode somewhere


def test_a_trajectory_holds_messages_calls_usage_and_the_sampled_tokens(humaneval, executor):
    task = humaneval["HumanEval/2"]
    with ScriptedOpenAIServer(CoderScript(humaneval, wrong_turns=1)) as server:
        policy = OpenAIPolicy("coder", base_url=server.base_url, api_key="k", logprobs=True, return_token_ids=True)
        (trajectory,) = rollouts([EpisodeJob(task.task_id)], lambda: gym.make(env_id("CF-EF_full"), dataset=humaneval,
                                 executor=executor), policy, concurrency=1)
        policy.close()
    assert trajectory.reward == 1.0 and trajectory.passed and trajectory.infra_error is None
    assert [row.turn for row in trajectory.rows] == [0, 1] and [row.passed for row in trajectory.rows] == [False, True]
    first, second = trajectory.calls
    assert trajectory.model_calls == 2 and (first.turn, second.turn) == (0, 1)
    assert list(first.messages) == [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": initial_prompt(task.prompt)}]
    assert "Previous code" in second.messages[-1]["content"] and "TEST_" in second.messages[-1]["content"]
    assert trajectory.messages == [dict(first.messages[0]), dict(first.messages[1]), {"role": "assistant", "content": first.reply},
                                   dict(second.messages[1]), {"role": "assistant", "content": second.reply}]
    for call in trajectory.calls:  # the tokens the server said it sampled, as it said them
        tokens = fake_tokens(call.reply)
        assert call.sampled.tokens == tuple(tokens)
        assert call.sampled.token_ids == tuple(fake_token_id(t) for t in tokens)
        assert call.sampled.logprobs == tuple(fake_logprob(t) for t in tokens)
        prompt = "".join(m["content"] for m in call.messages)
        assert call.sampled.prompt_token_ids == tuple(fake_token_id(t) for t in fake_tokens(prompt))
        assert call.usage["total_tokens"] > 0
    assert trajectory.usage["total_tokens"] == first.usage["total_tokens"] + second.usage["total_tokens"]
    assert [row.model_calls for row in trajectory.rows] == [1, 1] and trajectory.rows[1].usage == second.usage


async def _heartbeat(lags: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        await asyncio.sleep(HEARTBEAT_S)
        lags.append(time.perf_counter() - started - HEARTBEAT_S)


def test_the_event_loop_keeps_ticking_while_64_episodes_run(humaneval, executor):
    """64 episodes in flight against a model server in a process of its own; 8 tasks' programs sleep 1 s each
    run, so a sandbox run on the loop would stall it for a second. The heartbeat's worst lag stays far below."""
    tasks = humaneval.subset(limit=64)
    sleepy = {t.task_id: 1.0 for t in list(tasks)[:8]}
    lags: list[float] = []

    async def run(base_url: str) -> tuple[list[Trajectory], float]:
        stop = asyncio.Event()
        beat = asyncio.create_task(_heartbeat(lags, stop))
        policy = OpenAIPolicy("coder", base_url=base_url, api_key="k")
        started = time.perf_counter()
        done = [t async for t in iter_rollouts([EpisodeJob(t.task_id) for t in tasks],
                                               lambda: gym.make(env_id("CF-EF_full"), dataset=tasks, executor=executor),
                                               policy, concurrency=64)]
        elapsed = time.perf_counter() - started
        stop.set()
        await beat
        await policy.aclose()
        return done, elapsed

    with CoderServer("humaneval", wrong_turns=1, latency_s=0.2, sleepy=sleepy) as server:
        done, elapsed = asyncio.run(run(server.base_url))
    assert [t.reward for t in done] == [1.0] * 64 and sum(t.model_calls for t in done) == 128
    assert elapsed > 4.0  # the sleeping runs took their time (8 s of them on the executor's slots)
    worst = max(lags)
    assert worst < 0.5, f"the loop stalled {worst:.3f} s (a sleeping run on the loop would stall it >= 1 s)"
    assert len(lags) > elapsed / 0.1  # it ticked all along


def test_a_slow_program_holds_only_its_own_episode(humaneval, executor):
    """One episode whose first program sleeps 4 s, among 11 quick ones (listed last, so that the ordered results do
    not wait on it): every other episode is done before that run ends."""
    tasks = humaneval.subset(limit=12)
    slow = list(tasks)[0].task_id
    jobs = [EpisodeJob(t.task_id) for t in list(tasks)[1:]] + [EpisodeJob(slow)]
    finished: dict[str, float] = {}

    async def run() -> None:
        with ScriptedOpenAIServer(CoderScript(tasks, wrong_turns=1, latency_s=0.05, sleepy={slow: 4.0})) as server:
            policy = OpenAIPolicy("coder", base_url=server.base_url, api_key="k")
            started = time.perf_counter()
            async for trajectory in iter_rollouts(jobs, lambda: gym.make(env_id("CF-EF_full"), dataset=tasks, executor=executor),
                                                  policy, concurrency=len(jobs)):
                assert trajectory.reward == 1.0
                finished[trajectory.task_id] = time.perf_counter() - started
            await policy.aclose()

    asyncio.run(run())
    others = [seconds for task_id, seconds in finished.items() if task_id != slow]
    assert len(others) == 11 and max(others) < 4.0 <= finished[slow], finished


class _Counting(Policy):
    """Replies with the canonical solution after 0.2 s, counting the calls in flight."""

    name = "counting"

    def __init__(self) -> None:
        self.in_flight = self.most = 0

    def start(self, task, *, feedback, seed) -> PolicyEpisode:
        policy = self

        class Episode(PolicyEpisode):
            def act(self, observation) -> PolicyReply:
                raise AssertionError("the driver awaits aact")

            async def aact(self, observation) -> PolicyReply:
                policy.in_flight += 1
                policy.most = max(policy.most, policy.in_flight)
                await asyncio.sleep(0.2)
                policy.in_flight -= 1
                return PolicyReply(task.ground_truth)

        return Episode()


def test_concurrency_is_the_number_of_episodes_in_flight_and_each_holds_an_env(humaneval, executor):
    made: list[gym.Env] = []

    def make() -> gym.Env:
        made.append(gym.make(env_id("CF"), dataset=humaneval, executor=executor))
        return made[-1]

    policy = _Counting()
    done = rollouts([EpisodeJob(f"HumanEval/{i}") for i in range(12)], make, policy, concurrency=4)
    assert [t.task_id for t in done] == [f"HumanEval/{i}" for i in range(12)] and all(t.reward == 1.0 for t in done)
    assert policy.most == 4 and len(made) == 4
    with pytest.raises(ValueError, match="concurrency must be >= 1"):
        rollouts([EpisodeJob("HumanEval/0")], make, policy, concurrency=0)


def test_an_endpoint_that_fails_for_good_stops_the_rollout(humaneval, executor):
    with ScriptedOpenAIServer([], fallback=Reply(status=401, content="bad key")) as server:
        policy = OpenAIPolicy("coder", base_url=server.base_url, api_key="k")
        with pytest.raises(LLMError, match="HTTP 401"):
            rollouts([EpisodeJob(f"HumanEval/{i}") for i in range(8)],
                     lambda: gym.make(env_id("CF"), dataset=humaneval, executor=executor), policy, concurrency=8)
