"""Wrappers that compose with any convcodeworld-gym env (live or static).

Holds:
    RecordEpisodes  write every finished episode of your own loop to a :mod:`.records` log
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import replace
from typing import Any

import gymnasium as gym

from .aio import async_twin
from .records import EpisodeKey, EpisodeLogWriter, TurnRecord, episode_key, turn_record

__all__ = ["RecordEpisodes"]


class RecordEpisodes(gym.Wrapper[dict[str, Any], str, dict[str, Any], str]):
    """Log each turn (the action is the reply; code, feedback and pass come from obs and info)
    and append each *finished* episode to ``<run_dir>/turns.jsonl``.

    The log is the one schema of :mod:`convcodeworld_gym.records`: a live run recorded this
    way is a reference log for ``ConvCodeBench-<combination>-v0``. An episode that is reset or
    closed before it ends is not written; one a wrapper around the env ends (a ``TimeLimit``) gets
    ``episode_end`` ``"truncated"`` (or ``"terminated"``) on its last row, so that it counts as finished
    (:func:`~convcodeworld_gym.records.episode_finished`). While it is open, the wrapper's process holds the
    folder (:class:`~convcodeworld_gym.records.RunFolderLock`): give each process its own folder. Reopening a run directory appends; ``done`` says
    which ``(feedback, task_id, sample)`` episodes it already holds, so a loop can skip them.

    Each episode of a task is its own trajectory (``sample`` in its rows): the first of a task is sample 0, the next
    one the log does not hold yet is 1, and so on; ``reset(options={"sample": n, ...})`` names it instead (the option
    is the wrapper's: the env never sees it).
    ``await areset(...)`` / ``await astep(reply)`` record the same way around the env's own.

    Args:
        env: a ConvCodeWorld or ConvCodeBench env (``env.unwrapped.config`` names the combination).
        run_dir: the run directory (created if needed).
        policy: the policy's name, stored in every row.

    >>> import tempfile, gymnasium as gym, convcodeworld_gym
    >>> from convcodeworld_gym.records import read_turns
    >>> run_dir = tempfile.mkdtemp()
    >>> env = RecordEpisodes(gym.make("ConvCodeWorld-CF-v0", dataset="humaneval"), run_dir, policy="oracle")
    >>> obs, info = env.reset(options={"task_id": "HumanEval/0"})
    >>> _ = env.step(env.unwrapped.task.ground_truth)
    >>> env.close()
    >>> [(r.task_id, r.turn, r.passed, r.policy) for r in read_turns(run_dir)]
    [('HumanEval/0', 0, True, 'oracle')]
    >>> env = RecordEpisodes(gym.make("ConvCodeWorld-CF-v0", dataset="humaneval"), run_dir, policy="oracle")
    >>> _ = env.reset(options={"task_id": "HumanEval/0"})  # the task again: its second trajectory
    >>> _ = env.step(env.unwrapped.task.ground_truth)
    >>> env.close()
    >>> [(r.task_id, r.sample) for r in read_turns(run_dir)]
    [('HumanEval/0', 0), ('HumanEval/0', 1)]
    """

    def __init__(self, env: gym.Env[dict[str, Any], str], run_dir: str | os.PathLike[str], *, policy: str = "") -> None:
        super().__init__(env)
        config = getattr(env.unwrapped, "config", None)
        if config is None:
            raise TypeError(
                f"RecordEpisodes needs a convcodeworld-gym env (with a feedback config), got {type(env.unwrapped).__name__}"
            )
        self.feedback: str = config.name
        self.policy = policy
        self.writer = EpisodeLogWriter(run_dir)
        self._rows: list[TurnRecord] = []
        self._sample = 0

    @property
    def done(self) -> set[EpisodeKey]:
        """``(feedback, task_id, sample)`` of every episode the log holds."""
        return self.writer.done

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        options, sample = self._split(options)
        result = super().reset(seed=seed, options=options)
        self._start(result[1], sample)
        return result

    async def areset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """:meth:`reset`, awaited through the env's ``areset``."""
        options, sample = self._split(options)
        result = await async_twin(self.env, "reset")(seed=seed, options=options)
        self._start(result[1], sample)
        return result  # type: ignore[no-any-return]

    @staticmethod
    def _split(options: dict[str, Any] | None) -> tuple[dict[str, Any] | None, int | None]:
        """The env's options, and the sample the caller named (None: the next the log does not hold)."""
        if not options or "sample" not in options:
            return options, None
        rest = {k: v for k, v in options.items() if k != "sample"}
        sample = options["sample"]
        if not isinstance(sample, int) or isinstance(sample, bool) or sample < 0:
            raise ValueError(f"reset option sample must be an int >= 0 (which trajectory of the task), got {sample!r}")
        return rest, sample

    def _start(self, info: dict[str, Any], sample: int | None) -> None:
        self._rows = []
        if sample is None:
            task_id, sample = str(info["task_id"]), 0
            while episode_key(self.feedback, task_id, sample) in self.writer.done:
                sample += 1
        self._sample = sample

    def step(self, action: str) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        result = super().step(action)
        if (ended := self._record(action, result)) is not None:
            self.writer.write_episode(ended)
        return result

    async def astep(self, action: str) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """:meth:`step`, awaited through the env's ``astep``; the row is recorded the same way (the log is
        written in a thread)."""
        result = await async_twin(self.env, "step")(action)
        if (ended := self._record(action, result)) is not None:
            await asyncio.to_thread(self.writer.write_episode, ended)
        return result  # type: ignore[no-any-return]

    def _record(self, action: str, result: tuple[dict[str, Any], float, bool, bool, dict[str, Any]]) -> list[TurnRecord] | None:
        """Append the row of one step; the episode's rows once it ended (to be written), else None."""
        obs, reward, terminated, truncated, info = result
        self._rows.append(
            turn_record(feedback=self.feedback, reply=action, obs=obs, reward=float(reward), info=info, policy=self.policy,
                        sample=self._sample)
        )
        if not (terminated or truncated):
            return None
        ended, self._rows = self._rows, []
        if not ended[-1].episode_end:  # ended by a wrapper around the env (a TimeLimit): said, so that it is finished
            ended[-1] = replace(ended[-1], episode_end="truncated" if truncated else "terminated")
        return ended

    def close(self) -> None:
        self.writer.close()
        super().close()
