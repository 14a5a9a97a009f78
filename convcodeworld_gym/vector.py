"""A vector env whose envs step in threads of one process and share one executor.

Gymnasium's ``SyncVectorEnv`` steps its envs one after the other, so with ConvCodeWorld
(where a step is mostly waiting for a sandboxed test run) it uses one core whatever the
number of envs. ``AsyncVectorEnv`` uses one process per env. :class:`ThreadedVectorEnv`
sits between: one process, one shared executor, and the envs' steps run concurrently in a
thread pool, so the executor's children keep every core busy. It is the ids'
``vector_entry_point``: ``gymnasium.make_vec(id, n)`` (no ``vectorization_mode``) builds it.

Holds:
    ThreadedVectorEnv          SyncVectorEnv with concurrent sub-env steps
    make_threaded_vector_env   the ids' vector entry point (one shared executor for all envs)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium as gym
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.vector.utils import iterate

from .sandbox import Executor, SandboxExecutor

__all__ = ["ThreadedVectorEnv", "make_threaded_vector_env"]


class _Prestepped(gym.Wrapper):
    """Returns a step result computed ahead (in a worker thread) when there is one."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.pending: tuple | None = None

    def step(self, action: Any) -> tuple:
        if self.pending is not None:
            result, self.pending = self.pending, None
            return result
        return self.env.step(action)


class ThreadedVectorEnv(SyncVectorEnv):
    """A :class:`~gymnasium.vector.SyncVectorEnv` whose sub-envs' ``step`` calls run concurrently.

    Same results as ``SyncVectorEnv`` (same autoreset modes, same batching); only the steps
    of the sub-envs overlap in time. Sub-envs must be safe to step from different threads
    at once: ConvCodeWorld envs are, and so are the package's executors, so they may share
    one. ``owned`` objects (e.g. a shared executor) are closed with the vector env.

    >>> import convcodeworld_gym
    >>> envs = gym.make_vec("ConvCodeWorld-CF-v0", num_envs=2, dataset="humaneval")
    >>> type(envs).__name__, envs.unwrapped.envs[0].unwrapped.executor is envs.unwrapped.envs[1].unwrapped.executor
    ('ThreadedVectorEnv', True)
    >>> envs.close()
    """

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], *, max_threads: int | None = None, owned: Sequence[Any] = (), **kwargs: Any) -> None:
        super().__init__([lambda fn=fn: _Prestepped(fn()) for fn in env_fns], **kwargs)
        self._pool = ThreadPoolExecutor(max_workers=max_threads or len(self.envs), thread_name_prefix="ccw-env")
        self._owned = list(owned)

    def step(self, actions: Any) -> tuple:
        actions = tuple(iterate(self.action_space, actions))
        stepping = [
            i for i in range(self.num_envs)
            if not (self.autoreset_mode == AutoresetMode.NEXT_STEP and self._autoreset_envs[i])
        ]
        results = list(self._pool.map(lambda i: self.envs[i].env.step(actions[i]), stepping))
        for i, result in zip(stepping, results):
            self.envs[i].pending = result
        return super().step(actions)

    def close_extras(self, **kwargs: Any) -> None:
        super().close_extras(**kwargs)
        self._pool.shutdown(wait=True)
        for thing in self._owned:
            thing.close()
        self._owned = []


def make_threaded_vector_env(
    num_envs: int = 1,
    *,
    executor: Executor | Callable[[], Executor] | None = None,
    max_threads: int | None = None,
    autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
    **env_kwargs: Any,
) -> ThreadedVectorEnv:
    """Build ``num_envs`` :class:`~convcodeworld_gym.env.ConvCodeWorldEnv` sharing ONE executor.

    ``executor``: an Executor to share (not closed here), a factory called once (the result
    is shared and closed with the vector env), or ``None`` for one shared
    :class:`~convcodeworld_gym.sandbox.SandboxExecutor` (the envs' own default).
    Other keyword arguments go to every env (``feedback=`` comes from the id).
    """
    from .env import ConvCodeWorldEnv

    if not isinstance(num_envs, int) or num_envs < 1:
        raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
    owned: list[Executor] = []
    if not isinstance(executor, Executor):
        executor = (executor or SandboxExecutor)()
        owned.append(executor)
    shared = executor
    return ThreadedVectorEnv(
        [lambda: ConvCodeWorldEnv(executor=shared, **env_kwargs) for _ in range(num_envs)],
        max_threads=max_threads, owned=owned, autoreset_mode=AutoresetMode(autoreset_mode),
    )


