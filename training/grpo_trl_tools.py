"""GRPO on ConvCodeWorld through TRL's ``environment_factory``: the model submits programs with a tool.

Each rollout is one ConvCodeWorld episode in which the model calls ``submit_program(code)``; the tool's answer is the
feedback the id shows, and the env's reward (1.0 when all tests pass) scores the rollout
(:class:`convcodeworld_gym.training.tools.ConvCodeWorldTools`). Use it for models trained to call tools;
``training/grpo_trl.py`` plays the paper's chat format instead (feedback as a user turn). docs/training.md compares
the two.

    python training/grpo_trl_tools.py --smoke        # CPU: a tiny random model (no download), HumanEval, 2 steps
    python training/grpo_trl_tools.py --model Qwen/Qwen3-1.7B --env-id ConvCodeWorld-CF-EF_full-v0 \\
        --dataset bigcodebench --stdlib-only --limit 200 --max-steps 200 --bf16 --use-vllm   # one GPU

The smoke run proves the plumbing: the tiny random model rarely writes a well-formed tool call, so its rewards are
0. tests/training/test_trl_tools.py scripts a tiny model's ``generate`` to call the tool and checks the rewards.
"""

from __future__ import annotations

import argparse
import functools
import os
from typing import Any

from convcodeworld_gym.registration import LIVE_IDS
from convcodeworld_gym.tasks import load_tasks
from convcodeworld_gym.training.tools import ConvCodeWorldTools, tool_rows


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="CPU smoke run: tiny random model, HumanEval, 2 steps")
    parser.add_argument("--model", default="Qwen/Qwen3-1.7B", help="a Hugging Face causal LM with a tool-calling "
                        "chat template TRL knows (Qwen3, Llama 3.1/3.2, ...)")
    parser.add_argument("--env-id", default="ConvCodeWorld-CF-EF_full-v0", choices=LIVE_IDS)
    parser.add_argument("--dataset", default="bigcodebench")
    parser.add_argument("--stdlib-only", action="store_true")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--max-turns", type=int, default=3, help="feedback turns after the first submission")
    parser.add_argument("--max-steps", type=int, default=200)
    parser.add_argument("--num-generations", type=int, default=8)
    parser.add_argument("--max-completion-length", type=int, default=4096)
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--use-vllm", action="store_true", help="generate with vLLM (colocated)")
    parser.add_argument("--output-dir", default="runs/grpo-tools")
    parser.add_argument("--seed", type=int, default=0)
    return parser


def build_trainer(args: argparse.Namespace) -> Any:
    """A ``GRPOTrainer`` whose rollouts are ConvCodeWorld episodes played through :class:`ConvCodeWorldTools`."""
    import datasets
    from trl import GRPOConfig, GRPOTrainer

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    tasks = load_tasks("humaneval" if args.smoke else args.dataset, stdlib_only=args.stdlib_only,
                       limit=2 if args.smoke else args.limit)
    if args.smoke:
        from convcodeworld_gym.testing.tiny_model import tiny_tool_model

        model, tokenizer = tiny_tool_model(args.seed)
    else:
        model, tokenizer = args.model, None
    config = GRPOConfig(
        output_dir=args.output_dir, seed=args.seed, report_to="none", logging_steps=1,
        max_steps=2 if args.smoke else args.max_steps, per_device_train_batch_size=2 if args.smoke else args.num_generations,
        num_generations=2 if args.smoke else args.num_generations,
        max_completion_length=256 if args.smoke else args.max_completion_length,
        max_tool_calling_iterations=args.max_turns + 1, bf16=args.bf16, use_cpu=args.smoke,
        use_vllm=args.use_vllm, vllm_mode="colocate",
    )
    factory = functools.partial(ConvCodeWorldTools, args.env_id, dataset=tasks, max_turns=args.max_turns)
    return GRPOTrainer(model=model, processing_class=tokenizer, args=config, environment_factory=factory,
                       train_dataset=datasets.Dataset.from_list(tool_rows(tasks)))


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    trainer = build_trainer(args)
    trainer.train()
    rewards = [entry["rewards/ConvCodeWorldTools/mean"] for entry in trainer.state.log_history
               if "rewards/ConvCodeWorldTools/mean" in entry]
    print(f"{trainer.state.global_step} steps; env reward per step: {rewards}")


if __name__ == "__main__":
    main()
