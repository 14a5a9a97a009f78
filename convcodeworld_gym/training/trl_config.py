"""What the two TRL programs share: their common command-line flags and the ``GRPOConfig`` made from them.

``training/grpo_trl.py`` (the ``rollout_func`` door, :mod:`.grpo`) and ``training/grpo_trl_tools.py`` (the
``environment_factory`` door, :mod:`.tools`) take the same flags for what TRL itself does: the model, the task set,
the feedback combination (``--feedback``, one spelling across training programs: :mod:`.flags`), the optimizer
steps, sampling and vLLM. Each flag has one place it goes: :func:`grpo_config` puts it in the
``GRPOConfig``, and TRL reads it from there everywhere it matters. ``--temperature`` is GRPOConfig's
``temperature``: TRL samples with it (``model.generate``, vLLM) and divides the logits by it when it computes the
loss's logprobs, and the ``rollout_func`` door samples with the trainer's value too; ``--use-vllm`` and
``--vllm-mode`` are GRPOConfig's ``use_vllm`` and ``vllm_mode``. ``--reasoning`` is no GRPOConfig field: it is the
envs' ``reasoning=`` (how a reasoning model's reply is read; :func:`~convcodeworld_gym.extract.read_reply`), which
each program gives the envs it makes.

Importing this module imports neither TRL nor torch: :func:`grpo_config` imports TRL when called.

Holds:
    add_trl_arguments  the shared flags, added to a program's parser
    grpo_settings      the GRPOConfig fields of the parsed flags, with the program's own
    grpo_config        the GRPOConfig itself
"""

from __future__ import annotations

import argparse
from typing import Any

from ..extract import REASONING_MODES
from .flags import add_feedback_argument

__all__ = ["add_trl_arguments", "grpo_settings", "grpo_config"]


def add_trl_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the flags both TRL programs take to ``parser`` and return it; a program changes their defaults with
    ``parser.set_defaults``."""
    parser.add_argument("--smoke", action="store_true", help="CPU smoke run: a tiny random model (no download), 2 steps")
    parser.add_argument("--model", default="tiny-random",
                        help="a Hugging Face causal LM name or path (the tool door's needs a tool-calling chat template "
                             "TRL knows: Qwen3, Llama 3.1/3.2, ...), or 'tiny-random': a tiny random model, no download")
    parser.add_argument("--dataset", default="humaneval", help="task set: bigcodebench, humaneval, or a path")
    add_feedback_argument(parser)
    parser.add_argument("--stdlib-only", action="store_true", help="only the tasks that need the standard library alone")
    parser.add_argument("--limit", type=int, default=None, help="the first N tasks")
    parser.add_argument("--max-steps", type=int, default=100, help="optimizer steps")
    parser.add_argument("--num-generations", type=int, default=4, help="completions per prompt (the GRPO group)")
    parser.add_argument("--learning-rate", type=float, default=1e-6)
    parser.add_argument("--temperature", type=float, default=1.0,
                        help="sampling temperature: GRPOConfig.temperature, which TRL also computes the loss's "
                             "logprobs with (generate and vLLM alike)")
    parser.add_argument("--use-vllm", action="store_true", help="generate with vLLM (GRPOConfig.use_vllm; needs vllm)")
    parser.add_argument("--vllm-mode", choices=("colocate", "server"), default="colocate",
                        help="colocate: vLLM in the training process; server: a `trl vllm-serve` server")
    parser.add_argument("--reasoning", choices=REASONING_MODES, default="strip",
                        help="how the envs read a reasoning model's reply: strip (default: <think>...</think> thoughts "
                             "are removed and the answer's code is judged; a thought that never closes has no answer) "
                             "or keep (the reply as it is, the first fenced block anywhere, as the reference read it)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cpu", action="store_true", help="train on CPU")
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--output-dir", default="runs/grpo")
    return parser


def grpo_settings(args: argparse.Namespace, **fields: Any) -> dict[str, Any]:
    """The ``trl.GRPOConfig`` fields of the flags of :func:`add_trl_arguments` (``args``), with the program's own
    ``fields`` (batch size, completion length, ...; a field given here wins over a flag's).

    >>> args = add_trl_arguments(argparse.ArgumentParser()).parse_args(["--temperature", "0.5", "--use-vllm"])
    >>> settings = grpo_settings(args, per_device_train_batch_size=8)
    >>> settings["temperature"], settings["use_vllm"], settings["vllm_mode"], settings["per_device_train_batch_size"]
    (0.5, True, 'colocate', 8)
    """
    settings: dict[str, Any] = dict(
        output_dir=args.output_dir, max_steps=args.max_steps, num_generations=args.num_generations,
        learning_rate=args.learning_rate, temperature=args.temperature, use_vllm=args.use_vllm,
        vllm_mode=args.vllm_mode, seed=args.seed, use_cpu=args.cpu, bf16=args.bf16,
        logging_steps=1, save_strategy="no", report_to="none",
    )
    settings.update(fields)
    return settings


def grpo_config(args: argparse.Namespace, **fields: Any) -> Any:
    """``trl.GRPOConfig(**grpo_settings(args, **fields))``."""
    from trl import GRPOConfig

    return GRPOConfig(**grpo_settings(args, **fields))
