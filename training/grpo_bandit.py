"""GRPO on bandit contexts cut from logged trajectories (Cobalt, arXiv 2602.03806) with TRL's ``GRPOTrainer``.

A reference model's trajectories (a log of ``convcodeworld evaluate --samples N``) are cut into contexts
(:func:`convcodeworld_gym.bandit.bandit_contexts`: the partial trajectories after turns 1..K and each task's turn 0,
filtered by Cobalt's rules: tasks solved at turn 0 skipped, dynamic sampling, max-variance down-sampling); the model
writes ONE program per context (``--num-generations`` of them, the GRPO group), and each is scored on the task's
tests in one batch per step (:func:`convcodeworld_gym.bandit.reward_function`: binary, pass-fraction or shaped
rewards). No episode is played while training: one step of generation per context, no feedback turn, no env in the
loop. Contexts cut from trajectories played on perturbed public tests (``perturb=swap_public_outputs``) report the
share of programs that follow the swapped expectations (``bandit/follow_rate``) beside the reward, never in it, and
the program prints it per step.

The prompts are chat messages (the ``chat`` template: the conversation as the multi-turn door plays it; or
``--template policy``): the model needs a chat template. ``--parquet PATH`` writes the contexts also as the parquet
verl trains on (``custom_reward_function.path=convcodeworld_gym/training/verl_reward.py``, docs/training.md).

``--smoke`` (the run CI makes on CPU): it makes its own log first: the scripted coder (a wrong program, then the
canonical solution) served by the scripted OpenAI server plays 4 trajectories of each of the first 4 HumanEval tasks
through the real OpenAI client, on perturbed public tests with the rich feedback style (a HumanEval assert shows its
expected value only in its source line); then 2 GRPO steps of the tiny random model on the contexts, in groups of 4 of
which scripted players take 2 (:func:`convcodeworld_gym.training.smoke.scripted_bandit_generate`): the canonical
solution, and the test fitter, which hard-codes what the feedback shows (on a perturbed context it follows the swap).
It prints the contexts' counts, the reward per step and the perturbation-following rate per step. That proves the
plumbing (contexts, scoring, the rates, a gradient), not that anything learns to code.

    python training/grpo_bandit.py --smoke
    convcodeworld evaluate CF-EF_partial --dataset bigcodebench --stdlib-only --samples 16 --max-turns 8 \\
        --protocol always --model Qwen/Qwen2.5-Coder-7B-Instruct --base-url http://localhost:8000/v1 --temperature 0.7 \\
        --out runs/reference
    python training/grpo_bandit.py --log runs/reference --dataset bigcodebench --reward shaped \\
        --model Qwen/Qwen2.5-Coder-1.5B-Instruct --max-steps 200 --bf16 [--use-vllm]

Holds:
    build_parser      the command line
    smoke_overrides   the CI smoke run's settings
    make_smoke_log    the smoke run's log, played by the scripted coder
    build_contexts    the contexts of ``--log`` by the flags
    build_trainer     GRPOTrainer on the contexts with the bandit reward function
    main              command line
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import convcodeworld_gym  # noqa: F401 - registers the ids
from convcodeworld_gym.bandit import REWARDS, TEMPLATES, ContextSet, Scorer, bandit_contexts, follow_line, reward_function
from convcodeworld_gym.tasks import load_tasks
from convcodeworld_gym.training.shared import shared_executor
from convcodeworld_gym.training.smoke import bandit_smoke_line, scripted_bandit_generate
from convcodeworld_gym.training.trl_config import add_trl_arguments, grpo_config

__all__ = ["build_parser", "smoke_overrides", "make_smoke_log", "build_contexts", "build_trainer", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The shared TRL flags (:func:`add_trl_arguments`) and this program's own."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    add_trl_arguments(p)
    p.add_argument("--log", help="the run folder (or turns.jsonl) of the reference trajectories; --smoke makes one")
    p.add_argument("--turns", default="1,2,3", help="contexts after these turns (default 1,2,3)")
    p.add_argument("--no-turn0", action="store_true", help="no turn-0 context per task")
    p.add_argument("--template", choices=TEMPLATES, default="chat", help="how a context is written (default chat)")
    p.add_argument("--system", default=None, help="a system message first in every context")
    p.add_argument("--reward", choices=REWARDS, default="binary", help="binary (default), pass_fraction or shaped")
    p.add_argument("--max-variance-k", type=int, default=4, help="trajectories per task after down-sampling (default 4; 0: all)")
    p.add_argument("--no-dynamic-sampling", action="store_true", help="keep trajectories whose pass rate never changes")
    p.add_argument("--keep-solved-at-turn0", action="store_true", help="keep tasks every trajectory solved at turn 0")
    p.add_argument("--max-prompt-chars", type=int, default=None, help="leave out longer contexts")
    p.add_argument("--max-feedback-chars", type=int, default=None, help="cut each feedback turn's text to this length")
    p.add_argument("--parquet", default=None, help="also write the contexts as parquet (what verl reads)")
    p.add_argument("--prompts-per-step", type=int, default=2, help="contexts a step (each --num-generations times)")
    p.add_argument("--max-new-tokens", type=int, default=512, help="tokens of a completion (GRPOConfig.max_completion_length)")
    p.set_defaults(feedback="CF-EF_partial", output_dir="runs/grpo_bandit")
    return p


def smoke_overrides(args: argparse.Namespace) -> argparse.Namespace:
    """The CI smoke run: tiny model on CPU, its log made by the scripted coder on 4 HumanEval tasks, 2 optimizer steps
    of 2 contexts in groups of 4, of which scripted players take 2 (``args.smoke``)."""
    args.smoke = True
    args.model, args.cpu, args.bf16, args.use_vllm = "tiny-random", True, False, False
    args.dataset, args.limit, args.stdlib_only = "humaneval", args.limit or 4, False
    args.num_generations, args.prompts_per_step, args.max_steps = 4, 2, 2
    args.max_new_tokens, args.learning_rate = 16, 1e-3
    args.log = args.log or os.path.join(args.output_dir, "smoke-log")
    return args


def make_smoke_log(args: argparse.Namespace) -> str:
    """The smoke run's log: the scripted coder (a wrong program, then the canonical solution) on the scripted
    OpenAI server, 4 trajectories of each of ``args.limit`` HumanEval tasks, ``args.feedback``, perturbed public
    tests, the rich feedback style, one call a turn; resumed when the folder holds it already."""
    from convcodeworld_gym.policies import OpenAIPolicy
    from convcodeworld_gym.registration import env_id
    from convcodeworld_gym.runs.evaluate import EvalConfig, run_evaluation
    from convcodeworld_gym.testing import ScriptedOpenAIServer
    from convcodeworld_gym.testing.scripted_coder import CoderScript

    tasks = load_tasks(args.dataset, limit=args.limit)
    config = EvalConfig(ids=(env_id(args.feedback),), dataset=args.dataset, limit=args.limit, max_turns=2, samples=4,
                        concurrency=4, protocol="always", feedback_style="rich",
                        env_kwargs={"perturb": "swap_public_outputs"})
    with ScriptedOpenAIServer(CoderScript(tuple(tasks), wrong_turns=1)) as server:
        policy = OpenAIPolicy("scripted-coder", base_url=server.base_url, api_key="sk-smoke", max_retries=0)
        try:
            run_evaluation(config, policy, args.log, executor=shared_executor(), progress=None)
        finally:
            policy.close()
    return str(args.log)


def build_contexts(args: argparse.Namespace) -> ContextSet:
    """The contexts of ``args.log`` by the flags."""
    if not args.log:
        raise SystemExit("--log: name the run folder of the reference trajectories (convcodeworld evaluate --samples N "
                         "--out FOLDER), or pass --smoke")
    return bandit_contexts(
        args.log, args.dataset, feedback=args.feedback, turns=tuple(int(t) for t in args.turns.split(",") if t.strip()),
        include_turn0=not args.no_turn0, template=args.template, system=args.system,
        skip_solved_at_turn0=not args.keep_solved_at_turn0, dynamic_sampling=not args.no_dynamic_sampling,
        max_variance_k=args.max_variance_k or None, seed=args.seed, max_prompt_chars=args.max_prompt_chars,
        max_feedback_chars=args.max_feedback_chars)


def build_trainer(args: argparse.Namespace, contexts: ContextSet) -> Any:
    """A ``GRPOTrainer`` on ``contexts`` (their dataset), rewarded by :func:`reward_function` of ``args.reward`` on
    the process's shared executor; in the smoke run the tiny model's ``generate`` lets scripted players take places 0
    and 1 of each group (:func:`scripted_bandit_generate`)."""
    from trl import GRPOTrainer

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    if args.model == "tiny-random":
        from convcodeworld_gym.testing.tiny_model import tiny_tool_model

        model, tokenizer = tiny_tool_model(args.seed)  # a chat template: the contexts are conversations
        if getattr(args, "smoke", False):
            model.generate = scripted_bandit_generate(model, tokenizer, list(load_tasks(args.dataset)))
    else:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(args.model, padding_side="left")
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        model = AutoModelForCausalLM.from_pretrained(args.model)
    config = grpo_config(args, per_device_train_batch_size=args.num_generations * args.prompts_per_step, beta=0.0,
                         max_completion_length=args.max_new_tokens)
    scorer = Scorer(args.dataset, executor=shared_executor(), reward=args.reward, reasoning=args.reasoning)
    return GRPOTrainer(model=model, reward_funcs=reward_function(scorer), args=config, train_dataset=contexts.dataset(),
                       processing_class=tokenizer)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.smoke:
        args = smoke_overrides(args)
        print(f"smoke run: the reference trajectories, played by the scripted coder: {make_smoke_log(args)}")
    contexts = build_contexts(args)
    for line in contexts.counts.lines():
        print(line)
    if args.parquet:
        print(f"contexts written for verl: {contexts.to_parquet(Path(args.parquet))}")
    trainer = build_trainer(args, contexts)
    result = trainer.train()
    print(f"finished {trainer.state.global_step} optimizer steps on {len(contexts)} contexts; train loss "
          f"{result.training_loss:.4f}")
    steps = [h for h in trainer.state.log_history if "reward" in h]
    if steps:
        print(f"mean reward ({args.reward}) per step:", ", ".join(f"{h['reward']:.3f}" for h in steps))
        print("pass rate per step:", ", ".join(f"{h.get('bandit/pass_rate', float('nan')):.3f}" for h in steps))
        print("loss per step:", ", ".join(f"{h['loss']:.4g}" for h in steps))
        print("grad_norm per step:", ", ".join(f"{h['grad_norm']:.4g}" for h in steps))
    print(follow_line(trainer.state.log_history))
    if args.smoke:
        print(bandit_smoke_line(args.num_generations))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
