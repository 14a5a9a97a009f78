"""Contextual-bandit learning from logged trajectories, as Cobalt does it (arXiv 2602.03806).

A reference model plays many trajectories per task (``convcodeworld evaluate --samples 16``); each is cut into
partial trajectories (:mod:`.contexts`: the task, the programs so far and the feedback shown on each, the best pass
rates so far), filtered as the research filters them, and written as a ``datasets.Dataset`` (or parquet) that TRL's
``GRPOTrainer`` and verl train on as they are. The policy writes one program per context, and a batch of
(context, completion) pairs is scored in one call, blocking or awaited, through the shared executor and its result
cache (:mod:`.scoring`: binary, pass-fraction or shaped rewards); :mod:`.doors` holds the reward function TRL calls
and the ``compute_score`` verl calls. Contexts cut from trajectories played on perturbed public tests
(``perturb="swap_public_outputs"``, :mod:`~convcodeworld_gym.tasks.perturb`) report the share of programs that follow
the swapped expectations beside the reward, never in it.

In a program (``training/grpo_bandit.py`` is one)::

    contexts = bandit_contexts("runs/reference", "humaneval", feedback="CF-EF_partial")
    GRPOTrainer(model, reward_funcs=reward_function(reward="shaped"), train_dataset=contexts.dataset())

Holds (see each module): Context, ContextSet, ContextCounts, LoggedTrajectory, bandit_contexts, pass_rates,
TEMPLATES; Scorer, Score, BatchSummary, REWARDS, shaped_reward; reward_function, follow_line, compute_score,
BANDIT_METRICS.
"""

from .contexts import TEMPLATES, Context, ContextCounts, ContextSet, LoggedTrajectory, bandit_contexts, pass_rates
from .doors import BANDIT_METRICS, compute_score, follow_line, reward_function
from .scoring import REWARDS, BatchSummary, Score, Scorer, shaped_reward

__all__ = ["TEMPLATES", "Context", "ContextCounts", "ContextSet", "LoggedTrajectory", "bandit_contexts", "pass_rates",
           "REWARDS", "BatchSummary", "Score", "Scorer", "shaped_reward", "BANDIT_METRICS", "compute_score",
           "follow_line", "reward_function"]
