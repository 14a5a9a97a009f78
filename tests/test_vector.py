"""Vector envs on every id: Sync and Async, 4 envs, 50 steps, autoreset, batched-space membership.

Cheap on purpose: one HumanEval task, most actions do not compile (no execution), every
seventh action is the ground truth (a real execution that passes and autoresets), and
``max_turns=3`` truncates the rest.
"""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array

import convcodeworld_gym  # noqa: F401  (registers the ids)
from convcodeworld_gym import LIVE_IDS, extract_code
from convcodeworld_gym.feedback.context import TurnContext
from convcodeworld_gym.sandbox import LocalExecutor, SandboxExecutor
from convcodeworld_gym.spaces import SHARED_INLINE_BYTES, SharedTextBuffer, SharedTextView, UnicodeText
from convcodeworld_gym.tasks import load_tasks
from convcodeworld_gym.testing.executor import FakeExecutor

TASK_ID = "HumanEval/0"
NUM_ENVS, STEPS = 4, 50


class EchoUser:
    """A tiny deterministic verbal-feedback provider: names the turn and whether the code compiled."""

    source = "test-echo"

    def __init__(self, expertise: str) -> None:
        self.expertise = expertise

    def __call__(self, context: TurnContext) -> str | None:
        return f"{self.expertise} user, turn {context.turn}: {'compiles' if context.compile_ok else 'does not compile'} ✓"


def env_kwargs(env_id: str) -> dict:
    kwargs: dict = {"dataset": "humaneval", "task_ids": (TASK_ID,), "max_turns": 3}
    if "-SNF-" in env_id or "-SEF-" in env_id:
        kwargs["verbal_feedback"] = EchoUser("novice" if "-SNF-" in env_id else "expert")
    return kwargs


def test_unicode_text_batches() -> None:
    space = UnicodeText(50)
    batched = batch_space(space, 3)
    assert isinstance(batched, gym.spaces.Tuple) and all(isinstance(s, UnicodeText) for s in batched.spaces)
    items = ["def f():\n\treturn 'π'", "\x00🙂中文", ""]
    out = concatenate(space, items, create_empty_array(space, 3))
    assert out == tuple(items) and out in batched
    assert ("x" * 51, "", "") not in batched


def test_shared_text_buffer_inline_and_spill() -> None:
    buffer = SharedTextBuffer(3, inline_bytes=16)
    long = "é" * 40 + "\udcff"  # over the inline size, with a lone surrogate
    for i, text in enumerate(["short π", long, ""]):
        buffer.write(i, text)
    view = SharedTextView(buffer)
    assert copy.deepcopy(view) == ("short π", long, "")
    buffer.write(0, "next")  # the view is live
    assert view[0] == "next" and view[-2] == long and len(view) == 3
    assert SHARED_INLINE_BYTES >= 1 << 16


@pytest.mark.parametrize("env_id", LIVE_IDS)
def test_check_env_every_id(env_id: str) -> None:
    env = gym.make(env_id, **env_kwargs(env_id))
    check_env(env.unwrapped)
    env.close()


@pytest.mark.parametrize("mode", ["sync", "async", None])  # None: the ids' ThreadedVectorEnv
@pytest.mark.parametrize("env_id", LIVE_IDS)
def test_vector_env_every_id(env_id: str, mode: str, executor: SandboxExecutor) -> None:
    truth = load_tasks("humaneval")[TASK_ID].ground_truth
    kwargs = env_kwargs(env_id)
    if mode in ("sync", None):
        kwargs["executor"] = executor  # the session's SandboxExecutor, shared by all envs of the process
        achieved = executor.confinement["level"]
    else:  # each worker process owns a FakeExecutor (the vector mechanics are tested here; a real
        # SandboxExecutor per async worker: test_default_executor_in_async_and_threaded_vector_envs)
        kwargs["executor"] = FakeExecutor
        achieved = "none"
    envs = gym.make_vec(env_id, num_envs=NUM_ENVS, vectorization_mode=mode, **kwargs)
    if mode is None:
        subenvs = envs.unwrapped.envs
        assert type(envs.unwrapped).__name__ == "ThreadedVectorEnv"
        assert len({id(e.unwrapped.executor) for e in subenvs}) == 1  # one shared executor
    try:
        assert envs.observation_space == batch_space(envs.single_observation_space, NUM_ENVS)
        obs, _ = envs.reset(seed=0)
        assert obs in envs.observation_space
        ended = autoresets = passes = 0
        done_before = np.zeros(NUM_ENVS, dtype=bool)
        for step in range(STEPS):
            actions = tuple(truth if (step + i) % 7 == 0 else "def broken(:\n    pass" for i in range(NUM_ENVS))
            obs, rewards, terminated, truncated, info = envs.step(actions)
            assert obs in envs.observation_space, f"step {step}: observation outside the batched space"
            ran = [not done_before[i] and actions[i] == truth for i in range(NUM_ENVS)]
            if any(ran):  # executed and unexecuted steps batch into one info (confinement: a dict, {} when not run)
                assert info["confinement"]["_level"].tolist() == ran
                assert set(info["confinement"]["level"][np.array(ran)]) == {achieved}  # what the sandbox reaches here
            for i in range(NUM_ENVS):
                if done_before[i]:  # next-step autoreset: this step was a reset
                    autoresets += 1
                    assert obs["turn"][i] == 0 and obs["code"][i] == "" and rewards[i] == 0.0
                elif actions[i] == truth:
                    passes += 1
                    assert rewards[i] == 1.0 and terminated[i] and obs["execution_feedback"][i] in ("", "Passed all test runs")
                else:
                    assert rewards[i] == 0.0 and not terminated[i]
                    assert "SyntaxError" in obs["compilation_feedback"][i]
                    if "-SNF" in env_id or "-SEF" in env_id:
                        assert obs["verbal_feedback"][i].endswith("does not compile ✓")
            done_before = terminated | truncated
            ended += int(done_before.sum())
        assert passes > 0 and ended > 0 and autoresets > 0
    finally:
        envs.close()


@pytest.mark.parametrize("mode", ["async", None])
def test_default_executor_in_async_and_threaded_vector_envs(mode: str | None, executor: SandboxExecutor) -> None:
    """No ``executor=``: async workers each build the env's default SandboxExecutor, the threaded env shares one.

    A step where one env executes and the other does not must batch (this once crashed ``AsyncVectorEnv``'s
    ``step_wait``, whose ``close`` then waited forever on pipes already read).
    """
    truth = load_tasks("humaneval")[TASK_ID].ground_truth
    envs = gym.make_vec("ConvCodeWorld-CF-EF_full-v0", num_envs=2, vectorization_mode=mode, **env_kwargs("CF"))
    try:
        envs.reset(seed=0)
        wrong = "def has_close_elements(numbers, threshold):\n    return False\n"
        obs, rewards, terminated, _, info = envs.step((truth, "def broken(:"))
        assert rewards.tolist() == [1.0, 0.0] and terminated.tolist() == [True, False]
        assert info["confinement"]["_level"].tolist() == [True, False]
        assert info["confinement"]["level"][0] == executor.confinement["level"]  # the level the sandbox reaches here
        obs, rewards, *_ = envs.step((truth, wrong))  # env 0 autoresets; env 1 runs a failing program
        assert rewards.tolist() == [0.0, 0.0] and obs["turn"].tolist() == [0, 2]
        assert "AssertionError" in obs["execution_feedback"][1]
    finally:
        envs.close()


def test_info_batches_whatever_the_executor_reports() -> None:
    """LocalExecutor reports its confinement as a string; the env's info holds a dict for every executor."""
    truth = load_tasks("humaneval")[TASK_ID].ground_truth
    with LocalExecutor() as local:
        envs = gym.make_vec("ConvCodeWorld-CF-v0", num_envs=2, vectorization_mode="sync", executor=local, **env_kwargs("CF"))
        envs.reset(seed=0)
        _, rewards, _, _, info = envs.step(("def broken(:", truth))
        envs.close()
    assert rewards.tolist() == [0.0, 1.0]
    assert info["confinement"]["_level"].tolist() == [False, True] and info["confinement"]["level"][1] == "process"


@pytest.mark.parametrize("shared_memory", [True, False])
def test_async_vector_env_long_observations(shared_memory: bool) -> None:
    """A reply longer than the inline shared-memory buffer comes back whole (spill file, or pipes)."""
    envs = gym.make_vec("ConvCodeWorld-CF-v0", num_envs=2, vectorization_mode="async",
                        vector_kwargs={"shared_memory": shared_memory}, **env_kwargs("ConvCodeWorld-CF-v0"))
    try:
        envs.reset(seed=1)
        long_code = "x = '" + "ж" * SHARED_INLINE_BYTES + "'\ndef broken(:\n"
        obs, *_ = envs.step((long_code, "def g(:"))
        assert obs["code"] == (extract_code(long_code), "def g(:")
        assert len(obs["code"][0].encode()) > SHARED_INLINE_BYTES
    finally:
        envs.close()


class ClosingSpy(LocalExecutor):
    """A real LocalExecutor that counts close() calls."""

    closed = 0

    def close(self) -> None:
        type(self).closed += 1


def test_shared_executor_is_not_closed_and_factory_executor_is_owned() -> None:
    from convcodeworld_gym import ConvCodeWorldEnv

    ClosingSpy.closed = 0
    shared = ClosingSpy()
    envs = [ConvCodeWorldEnv("CF", dataset="humaneval", executor=shared) for _ in range(2)]
    assert all(env.executor is shared for env in envs)
    for env in envs:
        env.close()
    assert ClosingSpy.closed == 0
    owned = ConvCodeWorldEnv("CF", dataset="humaneval", executor=ClosingSpy)
    assert isinstance(owned.executor, ClosingSpy) and owned.executor is not shared
    owned.close()
    assert ClosingSpy.closed == 1
    with pytest.raises(TypeError, match="executor must be an Executor"):
        ConvCodeWorldEnv("CF", dataset="humaneval", executor=lambda: 3)


def test_threaded_vector_env_gives_the_same_results_as_sync(executor: SandboxExecutor) -> None:
    humaneval = load_tasks("humaneval")
    ids = ("HumanEval/0", "HumanEval/2")
    kwargs = {"dataset": "humaneval", "task_ids": ids, "max_turns": 1, "executor": executor}
    runs = {}
    for mode in ("sync", None):
        envs = gym.make_vec("ConvCodeWorld-CF-EF_partial-v0", num_envs=3, vectorization_mode=mode, **kwargs)
        trace = []
        obs, _ = envs.reset(seed=7)
        for step in range(8):
            tasks = [next(humaneval[i] for i in ids if humaneval[i].prompt == prompt) for prompt in obs["task"]]
            actions = tuple(t.ground_truth if (step + k) % 4 == 0 else f"def {t.entry_point}(*a):\n    return None\n" for k, t in enumerate(tasks))
            obs, rewards, terminated, truncated, _ = envs.step(actions)
            plain = {k: v.tolist() if isinstance(v, np.ndarray) else tuple(v) for k, v in obs.items()}
            trace.append((plain, rewards.tolist(), terminated.tolist(), truncated.tolist()))
        envs.close()
        runs[mode] = trace
    assert runs["sync"] == runs[None]
    assert any(any(t[2]) for t in runs["sync"]) and any(any(t[3]) for t in runs["sync"])  # passes and truncations
