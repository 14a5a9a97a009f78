"""The rollout driver: many episodes in flight on one event loop, none waiting on another.

An episode is one task played by a policy (any :class:`~.policies.Policy`; for an OpenAI-compatible endpoint,
vLLM, SGLang or a hosted API: :class:`~.policies.OpenAIPolicy`) under the reference's turn protocol
(:mod:`.protocol`: a call only where the reference calls its model) or one call per turn (``"always"``).
:func:`iter_rollouts` keeps ``concurrency`` episodes in flight: each awaits its own model call
(``PolicyEpisode.aact``) and its own env step (``astep``: the sandbox run in the executor's pool, the simulated
user through its async client), so a slow model reply or a slow program holds its own episode only; the envs
share one executor. Each episode gives a :class:`Trajectory`: its log rows (code, feedback, reward per turn),
every model call (messages, reply, token usage, the sampled token ids and logprobs where the server
returned them, and the reasoning an endpoint returned apart from the reply), and the model-call count. Only the
reply is stepped: a separate reasoning field is kept (``ModelCall.reasoning``, the row's ``reasoning``) and never
judged, and a thought inside the reply is the env's to remove (its ``reasoning=`` option).

An episode the infrastructure lost a run of (``info["infra_error"]``; the env ends it there) is played once more
from its start; lost again, its trajectory says so (``infra_error``, ``reward`` None): it is no 0, and callers
leave it out (``convcodeworld evaluate`` logs it and the metrics skip it; trainers raise or drop it).

Holds:
    EpisodeJob      one episode to play: task id, seed, a turn-0 sample
    ModelCall       one model call of an episode: messages, reply, usage, sampled tokens
    Trajectory      what one episode gave
    episode_plan    one episode as a plan (:mod:`.aio`), blocking or awaited
    play            one episode, blocking, played again once if the infrastructure lost a run of it
    aplay           the same, awaited
    iter_rollouts   many episodes on one loop, ``concurrency`` in flight; trajectories in job order
    rollouts        the same, from blocking code: the list of trajectories
    canary_rate     the canary pass rate of trajectories: passed canary twins / canary twins with a verdict

>>> import gymnasium as gym, convcodeworld_gym
>>> from convcodeworld_gym.policies import OraclePolicy
>>> from convcodeworld_gym.testing import FakeExecutor
>>> make_env = lambda: gym.make("ConvCodeWorld-CF-v0", dataset="humaneval", executor=FakeExecutor())
>>> done = rollouts([EpisodeJob("HumanEval/0"), EpisodeJob("HumanEval/1")], make_env, OraclePolicy(), concurrency=2)
>>> [(t.task_id, t.reward, t.model_calls) for t in done]
[('HumanEval/0', 1.0, 1), ('HumanEval/1', 1.0, 1)]
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import gymnasium as gym

from .aio import Call, Plan, method_call, run_awaited, run_blocking, run_sync
from .policies.base import Policy, PolicyReply, SampledTokens
from .protocol import PROTOCOLS, ReferenceProtocol, retrim_plan
from .records import TurnRecord, turn_record
from .tasks.canary import CanaryRate

__all__ = ["EpisodeJob", "ModelCall", "Trajectory", "episode_plan", "play", "aplay", "iter_rollouts", "rollouts",
           "canary_rate"]


@dataclass(frozen=True)
class EpisodeJob:
    """One episode to play.

    Attributes:
        task_id: the task (the env's ``reset(options={"task_id": ...})``).
        seed: given to the policy (offline policies are deterministic given it).
        turn0: the task's turn-0 program (a BigCodeBench sample), judged without a model call; None: the policy
            writes turn 0.
        sample: which of the task's trajectories this episode is (its rows' ``sample``: a run of N trajectories per
            task plays samples 0..N-1; give each its own ``seed`` so that an offline policy differs between them).
    """

    task_id: str
    seed: int = 0
    turn0: str | None = None
    sample: int = 0


@dataclass(frozen=True)
class ModelCall:
    """One call of the model in an episode.

    Attributes:
        turn: the env turn whose program the call wrote (several calls write one turn under the reference
            protocol's compile fixes).
        messages: the chat messages sent (``()`` for offline policies).
        reply: the model's reply text.
        usage: its token counts (``prompt_tokens``, ``completion_tokens``, ``total_tokens``).
        latency_s: seconds the call took (a measurement: not part of equality).
        sampled: the sampled token ids and logprobs where the server returned them (vLLM can), else None.
        reasoning: the reasoning the endpoint returned apart from the reply (``reasoning_content``), kept and never
            judged; None when it returned none.
    """

    turn: int
    messages: tuple[Mapping[str, str], ...]
    reply: str
    usage: Mapping[str, float] = field(default_factory=dict)
    latency_s: float = field(default=0.0, compare=False)
    sampled: SampledTokens | None = None
    reasoning: str | None = None

    @classmethod
    def of(cls, reply: PolicyReply, turn: int) -> ModelCall:
        return cls(turn, tuple(reply.messages), reply.text, dict(reply.usage), reply.latency_s, reply.sampled,
                   reply.reasoning)


@dataclass(frozen=True)
class Trajectory:
    """What one episode gave.

    Attributes:
        task_id, feedback: the task and the combination (``CF-EF_full``); ``sample``: which of the task's
            trajectories (:attr:`EpisodeJob.sample`).
        rows: one log row per env turn, turn 0 first (code, feedback texts, per-test outcomes, reward,
            ``model_calls``, ``usage``): the :mod:`.records` schema ``convcodeworld evaluate`` writes.
        calls: every model call, in order.
        replay_of: the first play of this episode when the infrastructure lost one of its runs (this is the
            second play), else None.

    ``reward`` and ``passed`` are None when the infrastructure lost a run of this play too (``infra_error``
    says why): such an episode has no verdict, never a 0.

    A canary twin's episode (``canary``: :mod:`~convcodeworld_gym.tasks.canary`) has reward 0.0 whatever its programs
    did; ``canary_passed`` says whether one passed the twin's tests (the canary), which :func:`canary_rate` counts.
    On a perturbed task, ``follows`` says for each program whether it followed the perturbation.
    """

    task_id: str
    feedback: str
    rows: tuple[TurnRecord, ...]
    calls: tuple[ModelCall, ...]
    replay_of: Trajectory | None = None
    sample: int = 0

    @property
    def infra_error(self) -> str | None:
        """Why the infrastructure lost a run of this play (its last row's reason), or None."""
        return next((row.infra_error for row in self.rows if row.infra_error), None)

    @property
    def passed(self) -> bool | None:
        """Whether a program of the episode passed every test; None without a verdict (``infra_error``)."""
        return None if self.infra_error is not None else any(row.passed for row in self.rows)

    @property
    def reward(self) -> float | None:
        """1.0 when a program passed, else 0.0 (always 0.0 for a canary twin); None without a verdict (``infra_error``)."""
        passed = self.passed
        return None if passed is None else 0.0 if self.canary else float(passed)

    @property
    def canary(self) -> bool:
        """Whether the task played is a canary twin (its rows say so: ``info["canary"]``)."""
        return any(row.canary for row in self.rows)

    @property
    def canary_passed(self) -> bool | None:
        """For a canary twin's episode with a verdict, whether a program passed the twin's tests; else None."""
        return self.passed if self.canary else None

    @property
    def follows(self) -> tuple[bool | None, ...]:
        """Per program judged on a perturbed task (``perturb=``: :mod:`~convcodeworld_gym.tasks.perturb`), whether it
        followed the perturbation (None: no verdict); ``()`` on a task played as it is. Counted beside the reward
        (:class:`~convcodeworld_gym.tasks.perturb.FollowRate`), never in it."""
        return tuple(row.perturbation.get("followed") for row in self.rows if row.perturbation)

    @property
    def model_calls(self) -> int:
        """Calls of the model in this play."""
        return len(self.calls)

    @property
    def usage(self) -> dict[str, float]:
        """Token counts of this play's calls, summed."""
        return _summed_usage(call.usage for call in self.calls)

    @property
    def messages(self) -> list[dict[str, str]]:
        """The conversation as the model saw it: the first call's system message, then each call's last message
        (the prompt of that call) and its reply. With a policy that sends the whole history this is exactly the
        last call's messages and reply; the reference's way sends the task, the previous code and this turn's
        feedback each time, and these are those prompts in order."""
        conversation: list[dict[str, str]] = []
        for call in self.calls:
            if not conversation and call.messages and call.messages[0].get("role") == "system":
                conversation.append(dict(call.messages[0]))
            if call.messages and call.messages[-1].get("role") != "system":
                conversation.append(dict(call.messages[-1]))
            conversation.append({"role": "assistant", "content": call.reply})
        return conversation


def _summed_usage(usages: Any) -> dict[str, float]:
    total: dict[str, float] = {}
    for usage in usages:
        for key, value in usage.items():
            total[key] = total.get(key, 0.0) + float(value)
    return total


def episode_plan(
    env: gym.Env,
    policy: Policy,
    task_id: str,
    *,
    seed: int = 0,
    protocol: str = "reference",
    turn0: str | None = None,
    sample: int = 0,
) -> Plan[Trajectory]:
    """One episode of ``task_id`` as a plan (:mod:`.aio`): :func:`~.aio.run_blocking` plays it with ``env.step`` and
    ``PolicyEpisode.act``, :func:`~.aio.run_awaited` with ``astep`` and ``aact``; the same trajectory either way.

    ``protocol="always"``: the policy answers each observation (``reset``'s, then each ``step``'s).
    ``"reference"``: the env is wrapped in :class:`~.protocol.ReferenceProtocol`, so the policy is asked only when
    the reference would call its model, and each row counts the calls that wrote it. Either way a call whose
    prompt overflows the model's context is retried with shorter execution feedback. The episode ends when the
    env says terminated (a pass) or truncated (turn limit, or a run lost to the infrastructure).

    ``turn0``: the task's BigCodeBench sample, judged as turn 0 without a policy call (row ``model_calls`` 0). A
    static replay starts at turn 1: its env judges the sample apart (``judge_own_turn0``) and the row is first.
    ``sample``: the rows' and the trajectory's sample index (which of the task's trajectories this is).

    Raises:
        ValueError: ``protocol`` is not one of :data:`~.protocol.PROTOCOLS`.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    base = env.unwrapped
    config = getattr(base, "config", None)
    if config is None:
        raise TypeError(f"episodes are played on convcodeworld-gym envs (with a feedback config), got {type(base).__name__}")
    feedback: str = config.name
    played = ReferenceProtocol(env) if protocol == "reference" else env
    obs, info = yield method_call(played, "reset", options={"task_id": task_id})
    task = base.task if hasattr(base, "task") else base.tasks[task_id]
    episode = policy.start(task, feedback=feedback, seed=seed)
    rows: list[TurnRecord] = []
    calls: list[ModelCall] = []
    pending: list[PolicyReply] = []  # the calls that write the next env turn

    def record(turns: Sequence[Mapping[str, Any]]) -> bool:
        """Rows for the env turns just played (the pending calls wrote the first); True at the end."""
        for turn in turns:
            made = list(pending) if turn["model_calls"] else []
            pending.clear()
            rows.append(turn_record(
                feedback=feedback, reply=str(turn["action"]), obs=turn["obs"], reward=float(turn["reward"]),
                info=turn["info"], policy=policy.name, usage=_summed_usage(r.usage for r in made),
                policy_s=sum(r.latency_s for r in made) if made else None, model_calls=len(made),
                reasoning=made[-1].reasoning if made else None,  # the call whose reply was judged: kept, not judged
                sample=sample,
            ))
            calls.extend(ModelCall.of(reply, int(turn["info"]["turn"])) for reply in made)
            if turn["terminated"] or turn["truncated"]:
                return True
        return False

    def act(shown: Mapping[str, Any]) -> Call[PolicyReply]:
        return Call(episode.act, episode.aact, (shown,))

    try:
        if turn0 is not None and hasattr(base, "judge_own_turn0"):  # static: turn 0 is no step of the replay
            judged, reward0, info0 = yield method_call(base, "judge_own_turn0", turn0)
            record([{"action": turn0, "obs": judged, "reward": reward0, "terminated": False, "truncated": False,
                     "info": info0, "model_calls": 0}])
            turn0 = None
        ended = record(info.get("turns", []))
        while not ended:
            if turn0 is not None:  # the sample is turn 0's program: no call
                action, turn0 = turn0, None
            else:
                reply = yield from retrim_plan(act, obs, info.get("untrimmed_execution_feedback") or None)
                pending.append(reply)
                action = reply.text
            obs, reward, terminated, truncated, info = yield method_call(played, "step", action)
            ended = record(info["turns"] if protocol == "reference" else [
                {"action": action, "obs": obs, "reward": reward, "terminated": terminated, "truncated": truncated,
                 "info": info, "model_calls": 1}
            ])
    finally:
        episode.close()
    return Trajectory(task_id, feedback, tuple(rows), tuple(calls), sample=sample)


def _played_again_if_lost(make_plan: Callable[[], Plan[Trajectory]]) -> Plan[Trajectory]:
    """Play; if the infrastructure lost a run, play once more (the first play is kept as ``replay_of``)."""
    first = yield from make_plan()
    if first.infra_error is None:
        return first
    second = yield from make_plan()
    return replace(second, replay_of=first)


def play(env: gym.Env, policy: Policy, job: EpisodeJob, *, protocol: str = "reference") -> Trajectory:
    """One episode, blocking (:func:`episode_plan`), played once more if the infrastructure lost a run of it."""
    return run_blocking(_played_again_if_lost(
        lambda: episode_plan(env, policy, job.task_id, seed=job.seed, protocol=protocol, turn0=job.turn0,
                             sample=job.sample)))


async def aplay(env: gym.Env, policy: Policy, job: EpisodeJob, *, protocol: str = "reference") -> Trajectory:
    """:func:`play`, awaited: the env's ``areset``/``astep`` and the policy's ``aact``; the same trajectory."""
    return await run_awaited(_played_again_if_lost(
        lambda: episode_plan(env, policy, job.task_id, seed=job.seed, protocol=protocol, turn0=job.turn0,
                             sample=job.sample)))


class _EnvPool:
    """Envs for the episodes in flight: a free one is reused, else one is made (in a thread: making one reads the
    task set); all are closed at the end. At most as many as episodes in flight."""

    def __init__(self, make_env: Callable[[], gym.Env], ready: Sequence[gym.Env] = ()) -> None:
        self._make = make_env
        self._free: list[gym.Env] = list(ready)
        self._all: list[gym.Env] = list(ready)

    async def take(self) -> gym.Env:
        if self._free:
            return self._free.pop()
        env = await asyncio.to_thread(self._make)
        self._all.append(env)
        return env

    def give(self, env: gym.Env) -> None:
        self._free.append(env)

    def close(self) -> None:
        for env in self._all:
            env.close()
        self._all, self._free = [], []


async def iter_rollouts(
    jobs: Sequence[EpisodeJob],
    make_env: Callable[[], gym.Env],
    policy: Policy,
    *,
    concurrency: int,
    protocol: str = "reference",
    envs: Sequence[gym.Env] = (),
) -> AsyncIterator[Trajectory]:
    """Play ``jobs`` with ``concurrency`` episodes in flight on the running loop; yield their trajectories in job
    order, each as soon as it and every one before it are done.

    Episodes start in job order as places free up (first come, first served). Each holds an env of its own while
    it plays: ``envs`` first, then envs made by ``make_env`` (give them one shared executor: its pool queues every
    run fairly, and a slow run holds only its own slot). The envs are closed at the end (``envs`` too). The first
    episode that raises (an endpoint that failed for good) cancels the others, and its error is raised.

    Raises:
        ValueError: ``concurrency`` < 1, or an unknown ``protocol``.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1 (episodes in flight), got {concurrency!r}")
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    pool = _EnvPool(make_env, envs)
    places = asyncio.Semaphore(concurrency)

    async def one(job: EpisodeJob) -> Trajectory:
        async with places:
            env = await pool.take()
            try:
                return await aplay(env, policy, job, protocol=protocol)
            finally:
                pool.give(env)

    tasks = [asyncio.ensure_future(one(job)) for job in jobs]
    try:
        waiting = set(tasks)
        for task in tasks:
            while not task.done():
                done, waiting = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                for finished in done:
                    if not finished.cancelled() and finished.exception() is not None:
                        raise finished.exception()  # type: ignore[misc]
            waiting.discard(task)
            yield task.result()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        pool.close()


def rollouts(
    jobs: Sequence[EpisodeJob],
    make_env: Callable[[], gym.Env],
    policy: Policy,
    *,
    concurrency: int,
    protocol: str = "reference",
) -> list[Trajectory]:
    """:func:`iter_rollouts` from blocking code, on an event loop of its own: every trajectory, in job order. The
    policy's clients of that loop are closed at the end (``policy.aclose()``)."""

    async def all_of_them() -> list[Trajectory]:
        try:
            return [trajectory async for trajectory in iter_rollouts(jobs, make_env, policy, concurrency=concurrency,
                                                                     protocol=protocol)]
        finally:
            await policy.aclose()

    return run_sync(all_of_them())


def canary_rate(trajectories: Iterable[Trajectory]) -> tuple[float | None, int]:
    """``(rate, twins)``: the share of the canary twins' episodes among ``trajectories`` (those with a verdict) whose
    program passed the twin's tests, and how many there were; the rate is None without any. Report it beside the
    reward, never in it: an honest policy's is 0, and a rising one means the policy fits its programs to the tests
    (docs/canary.md).

    >>> canary_rate([])
    (None, 0)
    """
    canary = CanaryRate.of(t.canary_passed for t in trajectories)  # None but on a twin's episode with a verdict
    return canary.rate, canary.episodes
