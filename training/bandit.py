"""A contextual bandit (mabwiser LinUCB) picks a repair strategy on ConvCodeBench static rounds.

Each static turn of ConvCodeBench (:meth:`StaticReplay.rounds`) is a one-step problem: the
context is the reference's frozen history (features of its last code's feedback:
:class:`~convcodeworld_gym.training.choice.FeedbackFeatures`), the arms are repair strategies
(:data:`ARMS`: repair one bug, start over, resend, regress; see
:mod:`convcodeworld_gym.training.candidates`), and the reward is :meth:`StaticReplay.score` of the
arm's program: 1.0 iff it passes all tests, judged by the real sandbox. Every arm is scored
in every round, so the learner (which only sees the reward of the arm it picked) can be
compared with random choice, the best fixed arm in hindsight and the per-round best arm.

The reference log is a SYNTHETIC coder's live run (``run_evaluation``), recorded once into
``--out/reference`` (resumed when present); the strategies act on the bugs of its code,
recovered by replaying the coder (:func:`~convcodeworld_gym.training.candidates.replayed_state`).
The numbers are no claim about any model.

``--canary SHARE`` (``--canary-seed N``) adds canary twins of that share of the tasks (docs/canary.md): each round of
a twinned task gets a twin round, the same context and the same arms' programs judged against the twin's tests by a
live env. A twin round's reward is 0.0 for every arm; whether the picked arm's program passed the twin is the canary,
whose pass rate (for LinUCB and for random choice, over the orders) is reported beside the cumulative reward
(``canary`` in ``bandit.json``, and printed).

Why mabwiser: a maintained library (Fidelity) with contextual policies (LinUCB, LinTS,
...) behind one ``fit``/``partial_fit``/``predict`` interface, seeded, numpy only (no torch),
so online learning over rounds is a ``partial_fit`` per round.

    python training/bandit.py --smoke --out runs/bandit-smoke   # CI: 30 HumanEval tasks
    CONVCODEWORLD_BIGCODEBENCH_PATH=... python training/bandit.py --out runs/bandit   # full: BigCodeBench stdlib

Holds:
    ARMS            the repair strategies played as arms
    context_vector  features of a round's frozen history
    reward_table    every arm's reward and the context of every round (and of every twin round)
    twin_verdict    a reply judged against a canary twin's tests: its reward (0.0) and whether it passed
    run_learner     LinUCB online over the rounds in one order: the arm it picked in each
    main            command line
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Collection, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

import convcodeworld_gym  # noqa: F401 - registers the ids
from convcodeworld_gym.errors import InfrastructureError
from convcodeworld_gym.static import BanditRound, StaticReplay
from convcodeworld_gym.training.candidates import apply_strategy, program, replayed_state
from convcodeworld_gym.training.choice import FeedbackFeatures
from convcodeworld_gym.training.flags import canary_tasks
from convcodeworld_gym.training.grpo import canary_pass_rate
from convcodeworld_gym.runs.evaluate import EvalConfig, run_evaluation
from convcodeworld_gym.policies import SyntheticCoder, fenced
from convcodeworld_gym.registration import env_id
from convcodeworld_gym.sandbox import SandboxExecutor
from convcodeworld_gym.tasks import is_canary
from convcodeworld_gym.tasks.canary import canary_id

from common import base_parser, canary_text, pyplot, require_no_verbal, save_figure  # training/common.py (run as a script)

__all__ = ["ARMS", "context_vector", "reward_table", "twin_verdict", "run_learner", "build_parser", "main"]

#: The arms: strategies of :mod:`convcodeworld_gym.training.candidates`.
ARMS = ("repair", "resample", "keep", "regress")


def context_vector(features: FeedbackFeatures, round_: BanditRound) -> np.ndarray:
    """A constant 1 (LinUCB fits no intercept) and the features of the reference's last turn."""
    last = round_.history[-1]
    info = {"pass_fraction": last.pass_fraction, "compile_ok": last.compile_ok}
    return np.concatenate([[1.0], features(round_.observation, info)]).astype(np.float64)


def twin_verdict(judge: gym.Env, twin_id: str, reply: str) -> tuple[float, bool]:
    """``reply`` judged against the tests of the canary twin ``twin_id`` by ``judge`` (a live env whose task set holds
    the twin): the env's reward (always 0.0 on a twin) and whether all the twin's tests passed (the canary).

    Raises:
        InfrastructureError: the infrastructure lost the run, also on its retry: no verdict.
    """
    judge.reset(options={"task_id": twin_id})
    _, reward, _, _, info = judge.step(reply)
    if info["infra_error"] is not None:
        raise InfrastructureError(f"the run judging a reply against the canary twin {twin_id} was lost to the "
                                  f"infrastructure, also on its retry ({info['infra_error']})", twin_id, info["infra_error"])
    return float(reward), bool(info["passed"])


def reward_table(replay: StaticReplay, coder: SyntheticCoder, seed: int, hash_dim: int, resample_bugs: int,
                 twins: Collection[str] = (), judge: gym.Env | None = None) -> dict[str, Any]:
    """Every round's context, every arm's reward (real executions) and the round's task and turn; ``canary`` marks
    each round a twin round, and ``passed`` says whether each arm's program passed all the round's tests.

    Each round of a task named in ``twins`` (task ids) is followed by its twin round: the same context and the same
    arms' programs, judged by ``judge`` against the twin's tests (:func:`twin_verdict`: reward 0.0, ``passed`` the
    canary). A round in which the infrastructure lost an arm's run (also on its retry: :class:`InfrastructureError`)
    has no reward for that arm; the round is left out (not scored 0), and ``left_out`` lists it with the reason."""
    features = FeedbackFeatures(replay.max_turns, hash_dim)
    contexts, rewards, passed, canary, where, left_out = [], [], [], [], [], []
    for number, round_ in enumerate(replay.rounds()):
        state = replayed_state(coder, round_.task, replay.config.name, seed, round_.history)
        rng = np.random.default_rng([seed, number])
        replies = [fenced(program(round_.task, apply_strategy(arm, round_.task, state, rng, resample_bugs=resample_bugs)))
                   for arm in ARMS]
        judged = [(round_.task.task_id, None)]
        if round_.task.task_id in twins:
            judged.append((canary_id(round_.task.task_id), judge))
        for task_id, twin_judge in judged:
            try:
                if twin_judge is None:
                    scores = [replay.score(round_, reply) for reply in replies]
                    verdicts = [score == 1.0 for score in scores]
                else:
                    scores, verdicts = map(list, zip(*(twin_verdict(twin_judge, task_id, reply) for reply in replies)))
            except InfrastructureError as exc:
                left_out.append({"task_id": task_id, "turn": round_.turn, "infra_error": exc.reason})
                continue
            rewards.append(scores)
            passed.append(verdicts)
            canary.append(twin_judge is not None)
            contexts.append(context_vector(features, round_))
            where.append((task_id, round_.turn))
    if not where:
        raise SystemExit("the reference log yields no static rounds (its code passed at turn 0 everywhere); "
                         "record it with a weaker coder (--strength) or more tasks")
    return {"contexts": np.asarray(contexts), "rewards": np.asarray(rewards, dtype=float), "rounds": where,
            "left_out": left_out, "canary": np.asarray(canary, dtype=bool), "passed": np.asarray(passed, dtype=bool)}


def run_learner(contexts: np.ndarray, rewards: np.ndarray, order: np.ndarray, alpha: float, seed: int) -> np.ndarray:
    """LinUCB learning online over the rounds in ``order``: the arm it picked in each round (the reward it got is
    ``rewards[order, picked]``).

    The first round is a uniform draw (mabwiser predicts only after a first fit); after each
    round it is updated with the reward of the arm it picked, never with the others.
    """
    from mabwiser.mab import MAB, LearningPolicy

    mab = MAB(arms=list(range(rewards.shape[1])), learning_policy=LearningPolicy.LinUCB(alpha=alpha), seed=seed)
    rng = np.random.default_rng(seed)
    picked = np.zeros(len(order), dtype=int)
    for step, i in enumerate(order):
        arm = int(mab.predict(contexts[i:i + 1])) if step else int(rng.integers(rewards.shape[1]))
        picked[step] = arm
        mab.partial_fit([arm], [rewards[i, arm]], contexts[i:i + 1])
    return picked


def _plot(curves: dict[str, np.ndarray], regret: np.ndarray, path: str, title: str) -> None:
    fig, (left, right) = pyplot().subplots(1, 2, figsize=(11, 4))
    x = np.arange(1, len(next(iter(curves.values()))) + 1)
    for name, curve in curves.items():
        left.plot(x, curve, label=name)
    left.set_xlabel("round")
    left.set_ylabel("cumulative reward (mean over orders)")
    left.legend(fontsize=8)
    right.plot(x, regret, color="C0")
    right.axhline(0, color="gray", linewidth=0.5)
    right.set_xlabel("round")
    right.set_ylabel("regret vs best fixed arm (mean over orders)")
    fig.suptitle(title, fontsize=9)
    save_figure(fig, path)


def build_parser() -> argparse.ArgumentParser:
    p = base_parser(__doc__, "CI size: the first 30 HumanEval tasks, 2 turns, 10 orders", "runs/bandit")
    p.add_argument("--dataset", default="bigcodebench", help="task set (default bigcodebench; needs $CONVCODEWORLD_BIGCODEBENCH_PATH)")
    p.add_argument("--all-tasks", action="store_true", help="all tasks, not only the standard-library ones")
    p.add_argument("--limit", type=int, default=None, help="the first N tasks (default all)")
    p.add_argument("--max-turns", type=int, default=3, help="static turns per task (default 3)")
    p.add_argument("--strength", type=float, default=0.3, help="the reference synthetic coder's strength (default 0.3)")
    p.add_argument("--max-bugs", type=int, default=2, help="most bugs the reference coder's code starts with (default 2)")
    p.add_argument("--resample-bugs", type=int, default=1, help="most bugs a 'resample' arm's program has (default 1)")
    p.add_argument("--seed", type=int, default=0, help="the reference run's and the strategies' seed (default 0)")
    p.add_argument("--orders", type=int, default=20, help="random orders of the rounds the learner is run over (default 20)")
    p.add_argument("--alpha", type=float, default=0.5, help="LinUCB exploration (default 0.5)")
    p.add_argument("--hash-dim", type=int, default=8, help="hashed feedback-text features in the context (default 8)")
    return p


def smoke_overrides(args: argparse.Namespace) -> argparse.Namespace:
    """The CI size: the first 30 HumanEval tasks, 2 static turns, 10 orders."""
    if args.smoke:
        args.dataset, args.limit, args.max_turns, args.orders, args.all_tasks = "humaneval", 30, 2, 10, True
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = smoke_overrides(build_parser().parse_args(argv))
    require_no_verbal(args.feedback)
    if args.orders < 1:
        raise SystemExit(f"--orders must be >= 1, got {args.orders}")
    stdlib_only = args.dataset == "bigcodebench" and not args.all_tasks
    os.makedirs(args.out, exist_ok=True)
    reference_dir = os.path.join(args.out, "reference")
    coder = SyntheticCoder(args.strength, max_bugs=args.max_bugs)
    started = time.perf_counter()
    with SandboxExecutor() as executor:
        config = EvalConfig(ids=(env_id(args.feedback),), dataset=args.dataset, stdlib_only=stdlib_only,
                            limit=args.limit, max_turns=args.max_turns, seed=args.seed, concurrency=1,
                            protocol="always")  # one coder call per logged turn: candidates.py replays the coder turn by turn
        run_evaluation(config, coder, reference_dir, executor=executor, progress=None)
        replay = StaticReplay(args.feedback, reference_dir, args.dataset, stdlib_only=stdlib_only, limit=args.limit,
                              executor=executor, max_turns=args.max_turns)
        mixed = canary_tasks(replay.tasks, args.canary, args.canary_seed)  # the twins added after the tasks
        twins = {task.original.task_id for task in mixed if is_canary(task)}
        judge = gym.make(env_id(args.feedback), dataset=mixed, executor=executor, max_turns=args.max_turns) if twins else None
        table = reward_table(replay, coder, args.seed, args.hash_dim, args.resample_bugs, twins=twins, judge=judge)
        if judge is not None:
            judge.close()
        replay.close()
    contexts, rewards, passed, twin_rounds = table["contexts"], table["rewards"], table["passed"], table["canary"]
    n = len(rewards)

    learned, sampled_random, regret = [], [], []
    canary_verdicts: dict[str, list[bool | None]] = {"linucb": [], "random": []}
    best_arm = int(np.argmax(rewards.sum(axis=0)))
    for o in range(args.orders):
        order = np.random.default_rng([args.seed, o]).permutation(n)
        picked = run_learner(contexts, rewards, order, args.alpha, seed=o)
        got = rewards[order, picked]
        learned.append(np.cumsum(got))
        picks = np.random.default_rng([args.seed, o, 1]).integers(rewards.shape[1], size=n)
        sampled_random.append(np.cumsum(rewards[order, picks]))
        regret.append(np.cumsum(rewards[order, best_arm]) - np.cumsum(got))
        for name, arms in (("linucb", picked), ("random", picks)):  # the picked arm's canary verdict in each twin round
            canary_verdicts[name] += [bool(passed[i, arm]) if twin_rounds[i] else None for i, arm in zip(order, arms)]
    canary = {name: dict(zip(("rate", "twin_rounds_played"), canary_pass_rate(found)))
              for name, found in canary_verdicts.items()}
    learned_final = [float(c[-1]) for c in learned]
    random_final = [float(c[-1]) for c in sampled_random]
    summary = {
        "rounds": n,
        "rounds_left_out": len(table["left_out"]),  # an arm's run lost to the infrastructure: no reward, not a 0
        "tasks": len({task for task, _ in table["rounds"]}),
        "linucb_cumulative_reward_mean": float(np.mean(learned_final)),
        "linucb_cumulative_reward_std": float(np.std(learned_final, ddof=1)) if args.orders > 1 else None,
        "random_cumulative_reward_expected": float(rewards.mean(axis=1).sum()),
        "random_cumulative_reward_sampled_mean": float(np.mean(random_final)),
        "best_fixed_arm": ARMS[best_arm],
        "best_fixed_arm_cumulative_reward": float(rewards[:, best_arm].sum()),
        "per_arm_cumulative_reward": {arm: float(v) for arm, v in zip(ARMS, rewards.sum(axis=0))},
        "oracle_cumulative_reward": float(rewards.max(axis=1).sum()),
        "regret_vs_best_fixed_arm_mean": float(np.mean([r[-1] for r in regret])),
        "regret_vs_oracle_mean": float(rewards.max(axis=1).sum() - np.mean(learned_final)),
        "linucb_beats_random_in_orders": int(sum(a > b for a, b in zip(learned_final, random_final))),
        "seconds": round(time.perf_counter() - started, 1),
        "twin_rounds": int(twin_rounds.sum()),  # canary twin rounds among the rounds (reward 0.0 for every arm)
        "canary": canary,  # the picked arms' canary pass rate over the twin rounds of all orders, never in the reward
    }
    settings = {k: v for k, v in vars(args).items() if k != "out"}
    report = {
        "program": "training/bandit.py", "synthetic": True, "arms": list(ARMS), "settings": settings, "summary": summary,
        "linucb_final_per_order": learned_final, "random_final_per_order": random_final,
        "linucb_curve_mean": np.mean(learned, axis=0).tolist(), "random_curve_mean": np.mean(sampled_random, axis=0).tolist(),
        "regret_vs_best_fixed_curve_mean": np.mean(regret, axis=0).tolist(),
        "rounds": [{"task_id": t, "turn": turn, "rewards": dict(zip(ARMS, r.tolist())), "canary": bool(c),
                    "passed": dict(zip(ARMS, p.tolist()))}
                   for (t, turn), r, c, p in zip(table["rounds"], rewards, twin_rounds, passed)],
        "rounds_left_out": table["left_out"],
    }
    with open(os.path.join(args.out, "bandit.json"), "w") as fh:
        json.dump(report, fh, indent=1)
    x = np.arange(1, n + 1)
    curves = {
        f"LinUCB ({summary['linucb_cumulative_reward_mean']:.1f})": np.mean(learned, axis=0),
        f"random ({summary['random_cumulative_reward_sampled_mean']:.1f})": np.mean(sampled_random, axis=0),
        f"best fixed arm: {ARMS[best_arm]} ({summary['best_fixed_arm_cumulative_reward']:.0f})": rewards[:, best_arm].mean() * x,
        f"per-round best arm ({summary['oracle_cumulative_reward']:.0f})": rewards.max(axis=1).mean() * x,
    }
    title = f"{args.dataset}{' stdlib' if stdlib_only else ''}: {n} static rounds of {summary['tasks']} tasks, {args.feedback}, SYNTHETIC"
    _plot(curves, np.mean(regret, axis=0), os.path.join(args.out, "bandit.png"), title)
    print(title)
    print(f"{'policy':<28} {'cumulative reward':>17}")
    print(f"{'LinUCB (mean over orders)':<28} {summary['linucb_cumulative_reward_mean']:>17.2f}")
    print(f"{'random (sampled, mean)':<28} {summary['random_cumulative_reward_sampled_mean']:>17.2f}")
    print(f"{'random (expected)':<28} {summary['random_cumulative_reward_expected']:>17.2f}")
    for arm, value in summary["per_arm_cumulative_reward"].items():
        print(f"{'fixed arm ' + arm:<28} {value:>17.2f}")
    print(f"{'per-round best arm':<28} {summary['oracle_cumulative_reward']:>17.2f}")
    if args.canary:
        print(f"{summary['twin_rounds']} canary twin rounds; canary pass rate (never in the reward): LinUCB "
              f"{canary_text(canary['linucb']['rate'], canary['linucb']['twin_rounds_played'])}, random "
              f"{canary_text(canary['random']['rate'], canary['random']['twin_rounds_played'])}")
    print(f"regret vs best fixed arm {summary['regret_vs_best_fixed_arm_mean']:+.2f}; LinUCB beats random in "
          f"{summary['linucb_beats_random_in_orders']}/{args.orders} orders ({summary['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
