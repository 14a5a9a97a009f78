"""Registering the Gymnasium ids: ``ConvCodeWorld-<combination>-v0`` (live) and
``ConvCodeBench-<combination>-v0`` (static replay of a reference log) for the 9 combinations.

Each id takes the env's kwargs (``dataset=``, ``max_turns=``, ``executor=``, ...) through
``gymnasium.make``; ``gymnasium.make_vec(id, n)`` without a mode builds a
:class:`~convcodeworld_gym.vector.ThreadedVectorEnv` whose envs share one executor."""

from __future__ import annotations

import gymnasium as gym

from .combos import ALL_CONFIGS, FeedbackConfig

__all__ = ["env_id", "LIVE_IDS", "BENCH_IDS", "PAPER_BENCH_IDS", "register_envs", "ENV_PREFIX", "BENCH_PREFIX"]

ENV_PREFIX = "ConvCodeWorld"
BENCH_PREFIX = "ConvCodeBench"


def env_id(config: FeedbackConfig | str, prefix: str = ENV_PREFIX) -> str:
    """``ConvCodeWorld-CF-EF_full-SNF-v0`` for ``FeedbackConfig("full", "novice")``."""
    return f"{prefix}-{FeedbackConfig.parse(config).name}-v0"


LIVE_IDS: tuple[str, ...] = tuple(env_id(c) for c in ALL_CONFIGS)
BENCH_IDS: tuple[str, ...] = tuple(env_id(c, BENCH_PREFIX) for c in ALL_CONFIGS)
#: The paper's ConvCodeBench: the 5 combinations with verbal feedback other than CF SNF (whose
#: novice user speaks only on code that does not compile, so it barely differs from CF).
PAPER_BENCH_IDS: tuple[str, ...] = tuple(
    env_id(c, BENCH_PREFIX) for c in ALL_CONFIGS if c.verbal != "none" and (c.execution, c.verbal) != ("none", "novice")
)


def register_envs() -> None:
    """Register the 9 live and the 9 ConvCodeBench ids with Gymnasium. Safe to call more than once.

    ``gymnasium.make_vec`` on a live id without a mode builds a threaded vector env whose
    envs share one executor.

    ``gymnasium.make`` returns the env itself, without Gymnasium's ``OrderEnforcing`` and ``PassiveEnvChecker``
    wrappers, so that its ``areset`` / ``astep`` can be awaited (those wrappers have no async path). Nothing is
    lost: the envs refuse a step before ``reset`` themselves (:class:`~.errors.ResetNeeded`), and the tests run
    Gymnasium's ``check_env`` on every id. ``gymnasium.make(id, disable_env_checker=False)`` adds the checker
    back, for blocking use.
    """
    entry_points = {ENV_PREFIX: "convcodeworld_gym.env:ConvCodeWorldEnv", BENCH_PREFIX: "convcodeworld_gym.static:StaticReplay"}
    for prefix, entry_point in entry_points.items():
        vector = "convcodeworld_gym.vector:make_threaded_vector_env" if prefix == ENV_PREFIX else None
        for config in ALL_CONFIGS:
            name = env_id(config, prefix)
            if name not in gym.registry:
                gym.register(id=name, entry_point=entry_point, kwargs={"feedback": config.name}, vector_entry_point=vector,
                             order_enforce=False, disable_env_checker=True)
