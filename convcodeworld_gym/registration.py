"""Registering the Gymnasium ids: ``ConvCodeWorld-<combination>-v0`` for the 9 combinations.

Each id takes the env's kwargs (``dataset=``, ``max_turns=``, ``executor=``, ...) through
``gymnasium.make``; ``gymnasium.make_vec(id, n)`` without a mode builds a
:class:`~convcodeworld_gym.vector.ThreadedVectorEnv` whose envs share one executor.

Holds:
    env_id         the id of a combination
    LIVE_IDS       the 9 ids, in the paper's order
    register_envs  register them (idempotent; importing the package calls it)
"""

from __future__ import annotations

import gymnasium as gym

from .combos import ALL_CONFIGS, FeedbackConfig

__all__ = ["env_id", "LIVE_IDS", "register_envs", "ENV_PREFIX"]

ENV_PREFIX = "ConvCodeWorld"


def env_id(config: FeedbackConfig | str, prefix: str = ENV_PREFIX) -> str:
    """``ConvCodeWorld-CF-EF_full-SNF-v0`` for ``FeedbackConfig("full", "novice")``."""
    return f"{prefix}-{FeedbackConfig.parse(config).name}-v0"


LIVE_IDS: tuple[str, ...] = tuple(env_id(c) for c in ALL_CONFIGS)


def register_envs() -> None:
    """Register the 9 live ids with Gymnasium. Safe to call more than once."""
    for config in ALL_CONFIGS:
        name = env_id(config)
        if name in gym.registry:
            continue
        gym.register(
            id=name,
            entry_point="convcodeworld_gym.env:ConvCodeWorldEnv",
            kwargs={"feedback": config.name},
            vector_entry_point="convcodeworld_gym.vector:make_threaded_vector_env",
        )
