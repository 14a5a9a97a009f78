"""Multi-turn GRPO on ConvCodeWorld with TRL's ``GRPOTrainer`` and its ``rollout_func``: the runnable program.

Each rollout is one ConvCodeWorld episode: the model writes a program, the env compiles
and tests it, and the feedback (compilation, execution, verbal) comes back as a *user*
turn; the model then rewrites, for up to ``--turns`` programs. The reward is the env's
(1.0 when all tests pass). Feedback tokens sit inside the completion but carry
``env_mask = 0``, so TRL leaves them out of the policy loss; only the model's own tokens
are trained. The pieces are :mod:`convcodeworld_gym.training.grpo` (``make_rollout_func``,
``grpo_rows``, ``env_reward``: import them from there in a program of your own); this
program wires them to a model and a task set, with the flags both TRL programs share
(:mod:`convcodeworld_gym.training.trl_config`: ``--feedback``, ``--temperature`` is GRPOConfig's, ``--use-vllm``).

Lengths: ``--max-new-tokens`` bounds each model call, on both generation paths: it is ``model.generate``'s
``max_new_tokens`` and GRPOConfig's ``max_completion_length``, which TRL (1.16) gives its vLLM generation as each
call's ``max_tokens`` (with ``rollout_func`` TRL truncates nothing the rollout returns: the completion of an episode
holds up to ``--turns`` calls and the feedback between them). ``--max-feedback-chars`` cuts each feedback turn's text
to that many characters before it is tokenized (``--max-feedback-tokens``: its deprecated name; it always counted
characters).

``--canary SHARE`` (``--canary-seed N``) puts canary twins in the place of that share of the tasks (a twin's prompt is
its task's, and this door tells tasks apart by their prompt): a twin's reward is 0.0, and their pass rate is logged
beside the reward as ``canary/pass_rate`` (docs/canary.md) and printed per step at the end. ``--perturb
swap_public_outputs`` (``--perturb-seed N``) swaps two public tests' expected values in what the feedback shows
(:mod:`convcodeworld_gym.tasks.perturb`; the reward stays on the true tests): the share of programs that followed the
swap is logged beside the reward as ``perturbation/follow_rate`` and printed per step at the end.

It runs with any Hugging Face causal LM (``--model NAME_OR_PATH``). ``--model tiny-random``
builds a tiny randomly initialised Llama with a byte-level tokenizer from a config, with
no download. ``--smoke`` (the run CI makes on CPU) plays it on the first 4 HumanEval tasks, 2 optimizer steps of
groups of 4 two-turn episodes, with two places of each group taken by scripted players
(:mod:`convcodeworld_gym.training.smoke`): a reasoning reply whose thought holds a wrong draft and whose answer is the
canonical solution (reward 1.0), and a wrong program (0.0). A random model alone never passes, so its rewards, loss
and grad_norm were all 0; with them each is nonzero, and the program prints each per step. That proves the plumbing
(rollouts, env rewards, masks, a gradient), not that anything learns to code.

    python training/grpo_trl.py --smoke                      # CPU, tiny random model beside scripted players, 2 steps
    python training/grpo_trl.py --model Qwen/Qwen2.5-Coder-1.5B-Instruct \\
        --dataset bigcodebench --stdlib-only --limit 200 --turns 3 --max-steps 200 --bf16 [--use-vllm] [--canary 0.05]

Holds:
    build_trainer     GRPOTrainer wired to the env
    build_parser      the command line
    smoke_overrides   the CI smoke run's settings
    main              command line
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym

import convcodeworld_gym  # noqa: F401 - registers the ids
from convcodeworld_gym.registration import env_id
from convcodeworld_gym.sandbox import SandboxExecutor
from convcodeworld_gym.tasks import load_tasks
from convcodeworld_gym.training.flags import add_canary_arguments, add_deprecated_alias, add_perturb_arguments, canary_tasks
from convcodeworld_gym.training.grpo import (EpisodeRollout, canary_line, env_reward, follow_line, grpo_rows,
                                             make_rollout_func)
from convcodeworld_gym.training.smoke import smoke_line, smoke_player
from convcodeworld_gym.training.trl_config import add_trl_arguments, grpo_config

__all__ = ["build_trainer", "build_parser", "program_settings", "smoke_overrides", "main"]


def program_settings(args: argparse.Namespace) -> dict[str, Any]:
    """This program's own ``GRPOConfig`` fields (:func:`grpo_config` adds the shared flags'): a batch of
    ``--prompts-per-step`` groups, no KL term, and ``max_completion_length`` = ``--max-new-tokens``, the length of one
    model call: TRL (1.16) gives it to its vLLM generation as each call's ``max_tokens`` and truncates nothing a
    ``rollout_func`` returns, so it is no budget of the whole episode (feedback is not counted in it).

    >>> args = build_parser().parse_args(["--max-new-tokens", "256", "--turns", "3", "--max-feedback-chars", "900"])
    >>> program_settings(args)["max_completion_length"]
    256
    """
    return dict(per_device_train_batch_size=args.num_generations * args.prompts_per_step, beta=0.0,
                max_completion_length=args.max_new_tokens)


def build_trainer(args: argparse.Namespace, on_rollout: Callable[[EpisodeRollout], None] | None = None) -> Any:
    """A ``GRPOTrainer`` whose rollouts are ConvCodeWorld episodes (:func:`make_rollout_func` over
    :func:`grpo_rows` of the task set, with ``--canary``'s twins in their tasks' places), configured by the shared flags
    (:func:`grpo_config`); in the smoke run (``args.smoke``), scripted players take places 0 and 1 of each group
    (:func:`~convcodeworld_gym.training.smoke.smoke_player`)."""
    import datasets
    from trl import GRPOTrainer

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    tasks = canary_tasks(load_tasks(args.dataset, stdlib_only=args.stdlib_only, limit=args.limit), args.canary,
                         args.canary_seed, replace=True)
    if args.model == "tiny-random":
        from convcodeworld_gym.testing.tiny_model import tiny_model

        model, tokenizer = tiny_model(args.seed)
    else:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(args.model, padding_side="left")
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        model = AutoModelForCausalLM.from_pretrained(args.model)
    rows = grpo_rows(tasks)
    config = grpo_config(args, **program_settings(args))
    feedback = args.feedback
    executor = SandboxExecutor()  # one for every env of every batch: its pool queues their runs fairly

    def make_env() -> gym.Env:
        return gym.make(env_id(feedback), dataset=tasks, max_turns=max(args.turns - 1, 0), executor=executor,
                        reasoning=args.reasoning, perturb=args.perturb, perturb_seed=args.perturb_seed)

    rollout = make_rollout_func(make_env, rows, turns=args.turns, max_new_tokens=args.max_new_tokens,
                                max_feedback_chars=args.max_feedback_chars, on_rollout=on_rollout,
                                scripts=smoke_player if args.smoke else None)
    return GRPOTrainer(model=model, reward_funcs=env_reward, args=config, train_dataset=datasets.Dataset.from_list(rows),
                       processing_class=tokenizer, rollout_func=rollout)


def build_parser() -> argparse.ArgumentParser:
    """The shared TRL flags (:func:`add_trl_arguments`: ``--feedback``, ...), ``--canary`` and ``--canary-seed``
    (:func:`add_canary_arguments`), ``--perturb`` and ``--perturb-seed`` (:func:`add_perturb_arguments`) and this
    program's own. ``--max-feedback-tokens`` is the deprecated name of
    ``--max-feedback-chars``."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    add_trl_arguments(p)
    add_canary_arguments(p)
    add_perturb_arguments(p)
    p.add_argument("--turns", type=int, default=3, help="programs per episode (1 = single turn)")
    p.add_argument("--prompts-per-step", type=int, default=1)
    p.add_argument("--max-new-tokens", type=int, default=512,
                   help="tokens a model call: model.generate's max_new_tokens and GRPOConfig.max_completion_length "
                        "(TRL's vLLM generation's max_tokens a call)")
    p.add_argument("--max-feedback-chars", type=int, default=1024,
                   help="each feedback turn's text is cut to this many characters")
    add_deprecated_alias(p, "--max-feedback-tokens", "--max-feedback-chars")
    p.set_defaults(output_dir="runs/grpo_trl")
    return p


def smoke_overrides(args: argparse.Namespace) -> argparse.Namespace:
    """The CI smoke run: tiny model on CPU, 2 optimizer steps of 2-turn rollouts on HumanEval, in groups of 4 of which
    scripted players take 2 (``args.smoke``)."""
    args.smoke = True
    args.model, args.cpu, args.bf16, args.use_vllm = "tiny-random", True, False, False
    args.dataset, args.limit = "humaneval", args.limit or 4
    args.num_generations, args.prompts_per_step, args.max_steps = 4, 1, 2
    args.turns, args.max_new_tokens, args.max_feedback_chars = 2, 16, 256
    args.learning_rate = 1e-3
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.smoke:
        args = smoke_overrides(args)
    trainer = build_trainer(args)
    result = trainer.train()
    print(f"finished {trainer.state.global_step} optimizer steps; train loss {result.training_loss:.4f}")
    steps = [h for h in trainer.state.log_history if "reward" in h]
    if steps:
        print("mean reward per step:", ", ".join(f"{h['reward']:.3f}" for h in steps))
        print("loss per step:", ", ".join(f"{h['loss']:.4g}" for h in steps))
        print("grad_norm per step:", ", ".join(f"{h['grad_norm']:.4g}" for h in steps))
    if args.smoke:
        print(smoke_line(args.num_generations))
    if args.canary:
        print(canary_line(trainer.state.log_history))
    if args.perturb:
        print(follow_line(trainer.state.log_history))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
