"""``await env.areset`` / ``await env.astep``: exactly the results of ``reset`` / ``step`` on every live and
ConvCodeBench id (real sandbox runs, its result cache off so both paths really execute; the offline simulated
user, and the LLM user over the real async ``openai`` client and a real local server), through the package's
wrappers too; and what a caller that awaits needs to know."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import openai
import pytest

import convcodeworld_gym  # noqa: F401 - registers the ids
from convcodeworld_gym import BENCH_IDS, LIVE_IDS, ConvCodeWorldEnv, RecordEpisodes
from convcodeworld_gym.policies import OpenAIPolicy
from convcodeworld_gym.protocol import ReferenceProtocol
from convcodeworld_gym.records import read_turns
from convcodeworld_gym.registration import env_id
from convcodeworld_gym.sandbox import SandboxExecutor
from convcodeworld_gym.sandbox.runtimes.needs import RuntimeProbe
from convcodeworld_gym.selection import select_tasks
from convcodeworld_gym.tasks import load_tasks
from convcodeworld_gym.testing import ScriptedOpenAIServer

TASKS = ("HumanEval/0", "HumanEval/2")
MAX_TURNS = 2
LLM_REPLY = "Reasoning: the loop is wrong.\nUser Feedback: Compare every pair of numbers, not only neighbours."


def _actions(task) -> list[str]:
    """A reply that does not compile, a wrong program, the right one."""
    return [f"```python\n{task.code_prompt}    return (\n```", f"{task.code_prompt}    return None\n", task.ground_truth]


@pytest.fixture(scope="module")
def uncached():
    """The sandbox without its result cache: the awaited path runs every program itself, never reads the blocking
    path's answer."""
    with SandboxExecutor(cache=False) as ex:
        yield ex


@pytest.fixture(scope="module")
def reference_logs(tmp_path_factory, uncached) -> dict[str, Path]:
    """A recorded live run of every combination (wrong programs, never passing) for the ConvCodeBench ids."""
    logs = {}
    for live in LIVE_IDS:
        combination = live.split("-", 1)[1].rsplit("-v", 1)[0]
        where = tmp_path_factory.mktemp(combination)
        env = RecordEpisodes(gym.make(live, dataset="humaneval", task_ids=TASKS, max_turns=MAX_TURNS, executor=uncached),
                             where, policy="wrong")
        for task_id in TASKS:
            env.reset(options={"task_id": task_id})
            task, done, turn = env.unwrapped.task, False, 0
            while not done:
                body = "return (" if turn == 1 else f"return {turn}"  # a compile error in the middle
                *_, terminated, truncated, _ = env.step(f"{task.code_prompt}    {body}\n")
                done, turn = terminated or truncated, turn + 1
        env.close()
        logs[combination] = where
    return logs


def _make(env_name: str, executor, logs) -> gym.Env:
    extra = {"log": logs[env_name.split("-", 1)[1].rsplit("-v", 1)[0]]} if env_name.startswith("ConvCodeBench-") else {}
    return gym.make(env_name, dataset="humaneval", task_ids=TASKS, max_turns=MAX_TURNS, executor=executor, **extra)


def _blocking(env: gym.Env) -> list:
    trace = []
    for seed, task_id in enumerate(TASKS):
        trace.append(env.reset(seed=seed, options={"task_id": task_id}))
        for action in _actions(env.unwrapped.task):
            trace.append(env.step(action))
            if trace[-1][2] or trace[-1][3]:
                break
    return trace


async def _awaited(env: gym.Env) -> list:
    trace = []
    for seed, task_id in enumerate(TASKS):
        trace.append(await env.areset(seed=seed, options={"task_id": task_id}))
        for action in _actions(env.unwrapped.task):
            trace.append(await env.astep(action))
            if trace[-1][2] or trace[-1][3]:
                break
    return trace


@pytest.mark.parametrize("env_name", LIVE_IDS + BENCH_IDS)
def test_astep_gives_exactly_what_step_gives_on_every_id(env_name, uncached, reference_logs):
    blocking_env, awaited_env = _make(env_name, uncached, reference_logs), _make(env_name, uncached, reference_logs)
    assert type(blocking_env) is type(blocking_env.unwrapped)  # gym.make gives the env itself: its astep is there
    blocking = _blocking(blocking_env)
    awaited = asyncio.run(_awaited(awaited_env))
    blocking_env.close(), awaited_env.close()
    assert len(blocking) >= 4 and awaited == blocking  # every field but the timings (measurements)
    steps = [entry for entry in blocking if len(entry) == 5]
    assert any(info["compile_ok"] is False for *_, info in steps) and any(reward == 1.0 for _, reward, *_ in steps) \
        or env_name.startswith("ConvCodeBench-")
    if "SNF" in env_name or "SEF" in env_name:  # the simulated user spoke on both paths
        assert any(obs["verbal_feedback"] for obs, *_ in steps)


def test_the_llm_user_is_awaited_through_the_async_client_and_says_the_same(tmp_path, uncached):
    with ScriptedOpenAIServer(lambda body: LLM_REPLY) as server:
        def make(cache: str) -> ConvCodeWorldEnv:
            return ConvCodeWorldEnv("CF-EF_full-SEF", dataset="humaneval", task_ids=TASKS, max_turns=MAX_TURNS,
                                    executor=uncached, simulator_kwargs={
                                        "backend": "llm", "base_url": server.base_url, "api_key": "k",
                                        "cache_path": str(tmp_path / cache), "model": "sim"})

        blocking_env, awaited_env = make("blocking.sqlite"), make("awaited.sqlite")  # two caches: both ask the server
        blocking = _blocking(blocking_env)
        asked = len(server.chat_requests)
        awaited = asyncio.run(_awaited(awaited_env))
        blocking_env.close(), awaited_env.close()
    assert awaited == blocking
    assert asked >= 2 and len(server.chat_requests) == 2 * asked  # the awaited path asked the server as often
    words = [obs["verbal_feedback"] for obs, *_ in (e for e in awaited if len(e) == 5) if obs["verbal_feedback"]]
    assert words and all(w == "Compare every pair of numbers, not only neighbours." for w in words)


def test_the_protocol_and_the_recorder_await_the_same_episode(tmp_path, uncached):
    """ReferenceProtocol (compile fixes and the expert's words inside a turn) and RecordEpisodes, awaited."""
    def make(where: str) -> gym.Env:
        inner = gym.make(env_id("CF-EF_full-SEF"), dataset="humaneval", task_ids=TASKS, max_turns=MAX_TURNS, executor=uncached)
        return ReferenceProtocol(RecordEpisodes(inner, tmp_path / where, policy="p"))

    blocking_env, awaited_env = make("blocking"), make("awaited")
    blocking, awaited = _blocking(blocking_env), asyncio.run(_awaited(awaited_env))
    blocking_env.close(), awaited_env.close()
    assert awaited == blocking
    assert read_turns(tmp_path / "awaited") == read_turns(tmp_path / "blocking") != []


@pytest.mark.parametrize("combination", ["CF-EF_full-SEF", "CF-EF_partial-SNF"])
def test_the_protocol_awaits_a_convcodebench_replay_as_it_steps_it(combination, uncached, reference_logs):
    """ReferenceProtocol over a ConvCodeBench id: the user's words are the logged ones, awaited as read."""
    def make() -> gym.Env:
        return ReferenceProtocol(_make(f"ConvCodeBench-{combination}-v0", uncached, reference_logs))

    blocking_env, awaited_env = make(), make()
    blocking, awaited = _blocking(blocking_env), asyncio.run(_awaited(awaited_env))
    blocking_env.close(), awaited_env.close()
    assert awaited == blocking
    assert any(obs["verbal_feedback"] for obs, *_ in (e for e in blocking if len(e) == 5))


def test_an_env_takes_one_call_at_a_time_and_names_what_cannot_be_awaited(uncached):
    env = gym.make(env_id("CF-EF_full"), dataset="humaneval", task_ids=TASKS, executor=uncached)

    async def two_steps_at_once() -> None:
        await env.areset(options={"task_id": TASKS[0]})
        program = "import time\ntime.sleep(1)\n" + env.unwrapped.task.code_prompt + "    return None\n"
        await asyncio.gather(env.astep(program), env.astep(program))

    with pytest.raises(RuntimeError, match="one episode at a time"):
        asyncio.run(two_steps_at_once())
    env.close()
    checked = ReferenceProtocol(gym.make(env_id("CF"), dataset="humaneval", task_ids=TASKS, executor=uncached,
                                         disable_env_checker=False))  # Gymnasium's checker: blocking only
    with pytest.raises(TypeError, match="PassiveEnvChecker has no async path"):
        asyncio.run(checked.areset(options={"task_id": TASKS[0]}))
    assert checked.reset(options={"task_id": TASKS[0]})[1]["task_id"] == TASKS[0]  # blocking use is unchanged
    checked.close()


@contextlib.contextmanager
def _calls_on_this_thread(*functions) -> Iterator[list[str]]:
    """The names of ``functions`` called on this thread (the event loop's) while the block runs: Python's profiler
    hook, set for this thread only, sees each call; calls in other threads are not seen."""
    codes = {f.__code__: f.__qualname__ for f in functions}
    seen: list[str] = []

    def profile(frame, event, arg) -> None:
        if event == "call" and frame.f_code in codes:
            seen.append(codes[frame.f_code])

    sys.setprofile(profile)
    try:
        yield seen
    finally:
        sys.setprofile(None)


# openai.AsyncOpenAI.post: a request's building, sending and reply parsing (several ms of CPU each; tens of them
# ready in one turn held the loop 0.2-1 s with 64 episodes in flight): sent from the network loop's thread instead
_SLOW_ON_A_LOOP = (openai.AsyncOpenAI.__init__, openai.AsyncOpenAI.post, load_tasks, select_tasks, RuntimeProbe._ask)


def test_the_first_awaited_calls_do_no_slow_setup_on_the_loop(tmp_path, uncached):
    """The first areset, astep (with the LLM user) and policy call of a loop: no HTTP client is made on the loop (it
    loads the TLS certificates: 0.3-0.7 s here, once per env's user), no request is built or its reply parsed there
    (the network loop's thread does it: :func:`~convcodeworld_gym.aio.network_loop`), no task set is loaded and no
    runtime asked."""
    with ScriptedOpenAIServer(lambda body: LLM_REPLY) as server:
        env = ConvCodeWorldEnv("CF-EF_full-SEF", dataset="humaneval", task_ids=TASKS, max_turns=MAX_TURNS,
                               executor=uncached, simulator_kwargs={
                                   "backend": "llm", "base_url": server.base_url, "api_key": "k",
                                   "cache_path": str(tmp_path / "user.sqlite"), "model": "sim"})
        policy = OpenAIPolicy("coder", base_url=server.base_url, api_key="k")

        async def first_calls() -> tuple[list[str], int, float]:
            loop_thread = threading.get_ident()
            with _calls_on_this_thread(*_SLOW_ON_A_LOOP) as seen:
                obs, _ = await env.areset(options={"task_id": TASKS[0]})
                *_, info = await env.astep(f"{env.task.code_prompt}    return None\n")  # wrong: the user speaks
                reply = await policy.start(env.task, feedback="CF-EF_full-SEF", seed=0).aact(obs)
            await policy.aclose()
            assert threading.get_ident() == loop_thread and reply.text
            return seen, len(server.chat_requests), info["timings"].verbal_s

        seen, requests, verbal_s = asyncio.run(first_calls())
        env.close(), policy.close()
    assert requests == 2 and verbal_s > 0  # the user and the policy each asked the server, through their async clients
    assert seen == []  # before 0df309d: two AsyncOpenAI.__init__; before issue 51: two AsyncAPIClient.post


def test_no_blocking_client_is_made_until_a_blocking_call_needs_one(tmp_path, uncached, monkeypatch):
    """Making an env with the LLM user, or an LLM policy, loads no TLS store (an ``openai.OpenAI`` client: 25 ms here,
    0.3-0.7 s on a busy machine; 64 envs made at once took 1.6 s): the blocking client is made on the first blocking
    request, and an awaited episode never makes one."""
    made: list[str] = []
    real_init = openai.OpenAI.__init__

    def counting(self, *args, **kwargs):
        made.append(str(kwargs.get("base_url")))
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(openai.OpenAI, "__init__", counting)
    with ScriptedOpenAIServer(lambda body: LLM_REPLY) as server:
        def make(name: str) -> ConvCodeWorldEnv:
            return ConvCodeWorldEnv("CF-EF_full-SEF", dataset="humaneval", task_ids=TASKS, max_turns=MAX_TURNS,
                                    executor=uncached, simulator_kwargs={
                                        "backend": "llm", "base_url": server.base_url, "api_key": "k",
                                        "cache_path": str(tmp_path / f"{name}.sqlite"), "model": "sim"})

        awaited_env, blocking_env = make("awaited"), make("blocking")
        policy = OpenAIPolicy("coder", base_url=server.base_url, api_key="k")
        assert made == []

        async def awaited_episode() -> None:
            obs, _ = await awaited_env.areset(options={"task_id": TASKS[0]})
            await awaited_env.astep(f"{awaited_env.task.code_prompt}    return None\n")  # wrong: the user speaks
            await policy.start(awaited_env.task, feedback="CF-EF_full-SEF", seed=0).aact(obs)
            await policy.aclose()

        asyncio.run(awaited_episode())
        assert made == [] and len(server.chat_requests) == 2
        blocking_env.reset(options={"task_id": TASKS[0]})
        blocking_env.step(f"{blocking_env.task.code_prompt}    return None\n")
        assert made == [server.base_url] and len(server.chat_requests) == 3  # the user's first blocking request
        awaited_env.close(), blocking_env.close(), policy.close()
