"""PPO (Stable-Baselines3) picks one of K candidate programs per turn; compared with random choice.

The env is :class:`~convcodeworld_gym.training.choice.CandidateChoiceEnv` over a live ConvCodeWorld env
(every chosen program is executed by the real sandbox). Candidates come from the SYNTHETIC
offline pool :class:`~convcodeworld_gym.training.candidates.SyntheticCandidates` (repair / keep /
regress / garbage, shuffled), so the numbers say whether the agent learns to tell a repair
from the rest by the features; they are no claim about any model. PPO trains on the env's
reward plus a potential-based pass-fraction shaping (``--shaping``; 0 turns it off), which
leaves the optimal policy unchanged; every reported number is the env's own reward.

For each seed: train PPO for ``--timesteps``, then play ``--eval-episodes`` episodes (the
same episode seeds, never used in training) with the learned policy (deterministic) and with
uniformly random choice. Written to ``--out``: ``sb3_ppo.json`` (settings, per-seed means,
learning curves) and ``sb3_ppo.png`` (learning curve per seed against the random baseline).

    python training/sb3_ppo.py --smoke --out runs/sb3-smoke      # CI: 1 seed, 128 steps, 6 evaluation episodes
    python training/sb3_ppo.py --out runs/sb3                    # full: 3 seeds, 3072 steps each

``--canary SHARE`` (``--canary-seed N``) adds canary twins to the tasks (that share of the set played, as the env's
``canary=`` does; docs/canary.md): a twin's reward is 0.0, and the share of the twins' episodes whose chosen program
passed the twin's tests (``info["canary"]`` and ``info["passed"]`` at the episode's end) is the canary pass rate,
reported beside the reward for training and for each policy evaluated (``canary`` in ``sb3_ppo.json``, and printed).

Holds:
    make_env        CandidateChoiceEnv with the synthetic pool on a HumanEval subset
    PassFractionShaping  the training reward's potential-based shaping
    CanaryVerdicts  each episode's canary verdict, recorded at its end
    play            mean episode reward of an action function over fixed episode seeds
    learning_curve  (timestep, rolling mean episode reward) from Monitor's episode records
    run_seed        train and evaluate one seed
    main            command line
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

import convcodeworld_gym  # noqa: F401 - registers the ids
from convcodeworld_gym.training.candidates import SyntheticCandidates
from convcodeworld_gym.training.choice import CandidateChoiceEnv
from convcodeworld_gym.training.flags import canary_tasks
from convcodeworld_gym.training.grpo import canary_pass_rate
from convcodeworld_gym.registration import env_id
from convcodeworld_gym.sandbox import Executor, SandboxExecutor
from convcodeworld_gym.tasks import load_tasks

from common import base_parser, canary_text, pyplot, require_no_verbal, save_figure  # training/common.py (run as a script)

__all__ = ["make_env", "PassFractionShaping", "CanaryVerdicts", "play", "learning_curve", "run_seed", "build_parser", "main"]

EVAL_SEED_BASE = 1_000_000  # evaluation episodes use seeds from here; training never does
GAMMA = 0.9


def make_env(executor: Executor, *, tasks: int, k: int, max_turns: int, feedback: str, hash_dim: int = 8,
             candidate_hash_dim: int = 4, canary: float = 0.0, canary_seed: int = 0) -> CandidateChoiceEnv:
    """The choice env: the first ``tasks`` HumanEval tasks (and ``canary``'s share of canary twins of them, drawn by
    ``canary_seed``), ``k`` synthetic candidates a turn."""
    if tasks < 1 or k < 2 or max_turns < 1:
        raise ValueError(f"need --tasks >= 1, --k >= 2 and --max-turns >= 1, got {tasks}, {k}, {max_turns}")
    subset = canary_tasks(load_tasks("humaneval").subset(limit=tasks), canary, canary_seed)
    live = gym.make(env_id(feedback), dataset=subset, executor=executor, max_turns=max_turns)
    return CandidateChoiceEnv(live, SyntheticCandidates(), k=k, hash_dim=hash_dim, candidate_hash_dim=candidate_hash_dim)


class PassFractionShaping(gym.Wrapper):
    """Training reward plus potential-based shaping ``scale * (gamma * p' - p)``, ``p`` the pass
    fraction of the code judged last (0 before the first turn and after the episode ends).

    Potential-based shaping leaves the optimal policy unchanged (Ng, Harada and Russell, 1999);
    it only gives the learner a signal before the first pass. Evaluation uses the env's reward.
    """

    def __init__(self, env: gym.Env, scale: float, gamma: float) -> None:
        super().__init__(env)
        self.scale, self.gamma, self._potential = scale, gamma, 0.0

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self._potential = 0.0
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        potential = 0.0 if terminated or truncated else self.scale * float(info.get("pass_fraction", 0.0))
        shaped = float(reward) + self.gamma * potential - self._potential
        self._potential = potential
        return obs, shaped, terminated, truncated, info


class CanaryVerdicts(gym.Wrapper):
    """Records one entry per episode at its end in :attr:`verdicts`: on a canary twin (``info["canary"]``) whether a
    program passed the twin's tests (``info["passed"]``), None on a real task or without a verdict
    (``info["infra_error"]``); :func:`~convcodeworld_gym.training.grpo.canary_pass_rate` of them is the canary pass
    rate. Rewards and observations pass through unchanged."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.verdicts: list[bool | None] = []

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            canary = info.get("canary") and info.get("infra_error") is None
            self.verdicts.append(bool(info.get("passed")) if canary else None)
        return obs, reward, terminated, truncated, info


def play(env: gym.Env, act: Callable[[np.ndarray], int], seeds: Sequence[int]) -> list[float]:
    """The total reward of one episode per seed in ``seeds``, choosing actions with ``act``."""
    totals = []
    for seed in seeds:
        obs, _ = env.reset(seed=int(seed))
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(act(obs))
            total += float(reward)
            done = terminated or truncated
        totals.append(total)
    return totals


def learning_curve(rewards: Sequence[float], lengths: Sequence[int], window: int) -> list[tuple[int, float]]:
    """(timestep at the end of episode i, mean reward of episodes i-window+1..i) for every episode.

    >>> learning_curve([0.0, 1.0, 1.0], [2, 3, 1], window=2)
    [(2, 0.0), (5, 0.5), (6, 1.0)]
    """
    ends = np.cumsum(lengths)
    out = []
    for i in range(len(rewards)):
        lo = max(0, i - window + 1)
        out.append((int(ends[i]), float(np.mean(rewards[lo:i + 1]))))
    return out


def run_seed(args: argparse.Namespace, seed: int, executor: Executor) -> dict[str, Any]:
    """Train PPO with ``seed``; evaluate it and random choice on the same evaluation episodes."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.monitor import Monitor

    started = time.perf_counter()
    verdicts = CanaryVerdicts(make_env(executor, tasks=args.tasks, k=args.k, max_turns=args.max_turns,
                                       feedback=args.feedback, canary=args.canary, canary_seed=args.canary_seed))
    env = Monitor(verdicts)
    train_env = PassFractionShaping(env, args.shaping, GAMMA) if args.shaping else env  # Monitor sees the env's reward
    train_env.reset(seed=seed)
    model = PPO("MlpPolicy", train_env, n_steps=args.n_steps, batch_size=min(64, args.n_steps), learning_rate=1e-3,
                ent_coef=0.01, gamma=GAMMA, seed=seed, device="cpu", verbose=0)
    model.learn(total_timesteps=args.timesteps)
    curve = learning_curve(env.get_episode_rewards(), env.get_episode_lengths(), args.window)
    train_s = time.perf_counter() - started

    eval_seeds = [EVAL_SEED_BASE + 1000 * seed + i for i in range(args.eval_episodes)]
    trained = len(verdicts.verdicts)
    learned = play(env, lambda obs: int(model.predict(obs, deterministic=True)[0]), eval_seeds)
    rng = np.random.default_rng(seed)
    evaluated = len(verdicts.verdicts)
    random_choice = play(env, lambda obs: int(rng.integers(args.k)), eval_seeds)
    env.close()
    phases = {"training": verdicts.verdicts[:trained], "ppo": verdicts.verdicts[trained:evaluated],
              "random": verdicts.verdicts[evaluated:]}
    canary = {name: dict(zip(("rate", "twins"), canary_pass_rate(found))) for name, found in phases.items()}
    return {
        "seed": seed,
        "ppo_mean_episode_reward": float(np.mean(learned)),
        "random_mean_episode_reward": float(np.mean(random_choice)),
        "ppo_episode_rewards": learned,
        "random_episode_rewards": random_choice,
        "training_episodes": len(curve),
        # the env's reward of the training episodes (Monitor's): what PPO's rollouts earned, shaping left out
        "training_mean_episode_reward": float(np.mean(env.get_episode_rewards()[:len(curve)])) if curve else None,
        "learning_curve": curve,
        "seconds": round(time.perf_counter() - started, 1),
        "train_seconds": round(train_s, 1),
        "canary": canary,  # canary pass rate and twins' episodes of training and of each evaluated policy
    }


def _plot(results: list[dict[str, Any]], path: str, window: int) -> None:
    fig, ax = pyplot().subplots(figsize=(7, 4))
    for r in results:
        if r["learning_curve"]:
            steps, means = zip(*r["learning_curve"])
            ax.plot(steps, means, label=f"PPO seed {r['seed']} (training, {window}-episode mean)")
    baseline = float(np.mean([r["random_mean_episode_reward"] for r in results]))
    ax.axhline(baseline, color="gray", linestyle="--", label=f"random choice (evaluation) {baseline:.2f}")
    learned = float(np.mean([r["ppo_mean_episode_reward"] for r in results]))
    ax.axhline(learned, color="black", linestyle=":", label=f"PPO after training (evaluation) {learned:.2f}")
    ax.set_xlabel("timesteps (turns)")
    ax.set_ylabel("episode reward (1 = passed)")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title("CandidateChoiceEnv, SYNTHETIC candidate pool")
    ax.legend(fontsize=7, loc="lower right")
    save_figure(fig, path)


def _pooled(per_seed: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The canary pass rate over all seeds' twins' episodes, from each seed's ``{"rate", "twins"}``."""
    twins = sum(c["twins"] for c in per_seed)
    passed = sum(round(c["rate"] * c["twins"]) for c in per_seed if c["twins"])
    return {"rate": passed / twins if twins else None, "twins": twins}


def _mean(value: float | None) -> str:
    """A mean reward as printed: 3 decimals, ``-`` when there was no episode.

    >>> _mean(0.4), _mean(None)
    ('0.400', '-')
    """
    return "-" if value is None else f"{value:.3f}"


def _canaries(canary: dict[str, dict[str, Any]]) -> str:
    """The canary pass rates of training and of both evaluated policies, as one printed text."""
    return "canary pass rate " + ", ".join(f"{label} {canary_text(canary[name]['rate'], canary[name]['twins'])}"
                                           for name, label in (("training", "training"), ("ppo", "PPO"), ("random", "random")))


def build_parser() -> argparse.ArgumentParser:
    p = base_parser(__doc__, "CI size: 1 seed, 128 timesteps, 6 evaluation episodes", "runs/sb3_ppo")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="training seeds (default 0 1 2)")
    p.add_argument("--timesteps", type=int, default=3072, help="PPO timesteps (turns) per seed (default 3072)")
    p.add_argument("--n-steps", type=int, default=128, help="PPO rollout length (default 128)")
    p.add_argument("--shaping", type=float, default=0.5,
                   help="scale of the potential-based pass-fraction shaping of the training reward; 0 = none (default 0.5)")
    p.add_argument("--eval-episodes", type=int, default=50, help="evaluation episodes per seed and policy (default 50)")
    p.add_argument("--tasks", type=int, default=8, help="the first N HumanEval tasks (default 8)")
    p.add_argument("--k", type=int, default=4, help="candidates per turn (default 4)")
    p.add_argument("--max-turns", type=int, default=4, help="feedback turns per episode (default 4)")
    p.add_argument("--window", type=int, default=20, help="episodes in the learning curve's rolling mean (default 20)")
    return p


def smoke_overrides(args: argparse.Namespace) -> argparse.Namespace:
    """The CI size: one seed, 128 timesteps (two rollouts of 64), 6 evaluation episodes."""
    if args.smoke:
        args.seeds, args.timesteps, args.n_steps, args.eval_episodes, args.window = [0], 128, 64, 6, 10
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = smoke_overrides(build_parser().parse_args(argv))
    if args.timesteps < args.n_steps:
        raise SystemExit(f"--timesteps ({args.timesteps}) must be >= --n-steps ({args.n_steps}): PPO learns once per rollout")
    require_no_verbal(args.feedback)
    os.makedirs(args.out, exist_ok=True)
    with SandboxExecutor() as executor:
        results = []
        for seed in args.seeds:
            results.append(run_seed(args, seed, executor))
            print(f"seed {seed}: PPO {results[-1]['ppo_mean_episode_reward']:.3f}, random "
                  f"{results[-1]['random_mean_episode_reward']:.3f} ({results[-1]['seconds']} s); training: "
                  f"{results[-1]['training_episodes']} episodes, mean reward {_mean(results[-1]['training_mean_episode_reward'])}"
                  + (f"; {_canaries(results[-1]['canary'])}" if args.canary else ""), flush=True)
    ppo = [r["ppo_mean_episode_reward"] for r in results]
    rnd = [r["random_mean_episode_reward"] for r in results]
    diffs = np.subtract(ppo, rnd)
    summary = {
        "ppo_mean": float(np.mean(ppo)), "random_mean": float(np.mean(rnd)),
        "margin_mean": float(np.mean(diffs)), "margin_min": float(np.min(diffs)),
        "margin_std": float(np.std(diffs, ddof=1)) if len(diffs) > 1 else None,
        "canary": {name: _pooled([r["canary"][name] for r in results]) for name in ("training", "ppo", "random")},
    }
    settings = {k: v for k, v in vars(args).items() if k != "out"}
    report = {"program": "training/sb3_ppo.py", "synthetic": True, "settings": settings, "summary": summary, "seeds": results}
    with open(os.path.join(args.out, "sb3_ppo.json"), "w") as fh:
        json.dump(report, fh, indent=1)
    _plot(results, os.path.join(args.out, "sb3_ppo.png"), args.window)
    print(f"{'seed':>4} {'PPO':>6} {'random':>6} {'episodes':>8} {'seconds':>7}")
    for r in results:
        print(f"{r['seed']:>4} {r['ppo_mean_episode_reward']:>6.3f} {r['random_mean_episode_reward']:>6.3f} "
              f"{r['training_episodes']:>8} {r['seconds']:>7}")
    print(f"mean PPO {summary['ppo_mean']:.3f} vs random {summary['random_mean']:.3f} "
          f"(margin {summary['margin_mean']:+.3f}, smallest {summary['margin_min']:+.3f}); SYNTHETIC candidate pool")
    if args.canary:
        print(f"{_canaries(summary['canary'])} (twins' episodes; never in the reward)")
    print(f"wrote {os.path.join(args.out, 'sb3_ppo.json')} and sb3_ppo.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
