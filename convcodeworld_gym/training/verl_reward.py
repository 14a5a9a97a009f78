"""The file verl is given as its custom reward function: ``custom_reward_function.path`` names this file,
``custom_reward_function.name`` is ``compute_score`` (:func:`convcodeworld_gym.bandit.doors.compute_score`).

verl loads a reward function from a file path (as a module of its own, outside any package), so this module imports
only by absolute name. Choose the reward with ``custom_reward_function.reward_kwargs.reward=shaped`` (binary by
default), and the ``batch`` reward manager (``reward_model.reward_manager=batch``) to score each batch together.

Holds:
    compute_score  verl's reward function
"""

from convcodeworld_gym.bandit.doors import compute_score

__all__ = ["compute_score"]
