"""GRPO on ConvCodeWorld through TRL's ``environment_factory``: the model submits programs with a tool.

Each rollout is one ConvCodeWorld episode in which the model calls ``submit_program(code)``; the tool's answer is the
feedback the id shows, and the env's reward (1.0 when all tests pass) scores the rollout
(:class:`convcodeworld_gym.training.tools.ConvCodeWorldTools`). Use it for models trained to call tools;
``training/grpo_trl.py`` plays the paper's chat format instead (feedback as a user turn). docs/training.md compares
the two.

    python training/grpo_trl_tools.py --smoke        # CPU: a tiny random model beside scripted players, 2 steps
    python training/grpo_trl_tools.py --model Qwen/Qwen3-1.7B --feedback CF-EF_full \\
        --dataset bigcodebench --stdlib-only --limit 200 --max-steps 200 --bf16 --use-vllm   # one GPU

``--canary SHARE`` (``--canary-seed N``) puts canary twins in the place of that share of the tasks (as
``training/grpo_trl.py`` does, so that ``--limit`` stays the number of tasks trained on): a twin's reward is 0.0, and
:func:`~convcodeworld_gym.training.tools.report_canary` logs their pass rate beside the reward as ``canary/pass_rate``
(docs/canary.md); it is printed per step at the end.

The smoke run (``--smoke``, CPU, no download) plays the first 2 HumanEval tasks for 2 optimizer steps in groups of 4,
two places of each group taken by scripted players (:mod:`convcodeworld_gym.training.smoke`: the model's ``generate``
answers their rows): a reasoning reply whose thought calls the tool with a wrong draft and whose answer calls it with
the canonical solution (reward 1.0: TRL's response parser leaves the thought's call uncalled), and a call with a wrong
program (0.0). The tiny random model never writes a well-formed tool call, so alone its rewards, loss and grad_norm
were all 0; with the scripted players each is nonzero, and the program prints them per step. That proves the plumbing
(tool calls, the env's reward, a gradient), not that anything learns.
"""

from __future__ import annotations

import argparse
import functools
import os
from typing import Any

from convcodeworld_gym.registration import env_id
from convcodeworld_gym.tasks import load_tasks
from convcodeworld_gym.training.flags import FEEDBACK_FLAG, add_canary_arguments, add_deprecated_alias, canary_tasks
from convcodeworld_gym.training.grpo import canary_line
from convcodeworld_gym.training.smoke import scripted_tool_generate, smoke_line
from convcodeworld_gym.training.tools import ConvCodeWorldTools, report_canary, tool_rows
from convcodeworld_gym.training.trl_config import add_trl_arguments, grpo_config


def build_parser() -> argparse.ArgumentParser:
    """The shared TRL flags (:func:`add_trl_arguments`; ``--feedback``, ``--temperature``, ``--use-vllm``, ...),
    ``--canary`` and ``--canary-seed`` (:func:`add_canary_arguments`) and this program's own. ``--env-id`` is the
    deprecated spelling of ``--feedback``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_trl_arguments(parser)
    add_canary_arguments(parser)
    add_deprecated_alias(parser, "--env-id", FEEDBACK_FLAG)
    parser.add_argument("--max-turns", type=int, default=3, help="feedback turns after the first submission")
    parser.add_argument("--max-completion-length", type=int, default=4096)
    parser.set_defaults(model="Qwen/Qwen3-1.7B", dataset="bigcodebench", max_steps=200, num_generations=8,
                        output_dir="runs/grpo-tools")
    return parser


def smoke_overrides(args: argparse.Namespace) -> argparse.Namespace:
    """The CI smoke run: a tiny random tool model on CPU beside scripted players (``args.smoke``), 2 HumanEval tasks,
    2 optimizer steps of one group of 4."""
    args.smoke = True
    args.model, args.cpu, args.bf16, args.use_vllm = "tiny-random", True, False, False
    args.dataset, args.limit = "humaneval", 2
    args.num_generations, args.max_steps, args.max_completion_length = 4, 2, 3000
    return args


def build_trainer(args: argparse.Namespace) -> Any:
    """A ``GRPOTrainer`` whose rollouts are ConvCodeWorld episodes played through :class:`ConvCodeWorldTools`,
    configured by the shared flags (:func:`grpo_config`); with ``--canary``, twins in their tasks' places and
    :func:`report_canary` among the reward functions; in the smoke run (``args.smoke``), the model's ``generate``
    plays scripted players' tool calls in places 0 and 1 of each group
    (:func:`~convcodeworld_gym.training.smoke.scripted_tool_generate`)."""
    import datasets
    from trl import GRPOTrainer

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    tasks = canary_tasks(load_tasks(args.dataset, stdlib_only=args.stdlib_only, limit=args.limit), args.canary,
                         args.canary_seed, replace=True)
    if args.model == "tiny-random":
        from convcodeworld_gym.testing.tiny_model import tiny_tool_model

        model, tokenizer = tiny_tool_model(args.seed)
        if getattr(args, "smoke", False):
            model.generate = scripted_tool_generate(model, tokenizer, list(tasks))
    else:
        model, tokenizer = args.model, None  # TRL loads it, and its tokenizer
    config = grpo_config(args, per_device_train_batch_size=args.num_generations,
                         max_completion_length=args.max_completion_length,
                         max_tool_calling_iterations=args.max_turns + 1)
    factory = functools.partial(ConvCodeWorldTools, env_id(args.feedback), dataset=tasks, max_turns=args.max_turns,
                                reasoning=args.reasoning)
    return GRPOTrainer(model=model, processing_class=tokenizer, args=config, environment_factory=factory,
                       reward_funcs=[report_canary] if args.canary else None,
                       train_dataset=datasets.Dataset.from_list(tool_rows(tasks)))


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    if args.smoke:
        args = smoke_overrides(args)
    trainer = build_trainer(args)
    trainer.train()
    steps = [entry for entry in trainer.state.log_history if "rewards/ConvCodeWorldTools/mean" in entry]
    rewards = [entry["rewards/ConvCodeWorldTools/mean"] for entry in steps]
    print(f"{trainer.state.global_step} steps; env reward per step: {rewards}")
    print("loss per step:", ", ".join(f"{entry['loss']:.4g}" for entry in steps))
    print("grad_norm per step:", ", ".join(f"{entry['grad_norm']:.4g}" for entry in steps))
    if args.smoke:
        print(smoke_line(args.num_generations))
    if args.canary:
        print(canary_line(trainer.state.log_history))


if __name__ == "__main__":
    main()
