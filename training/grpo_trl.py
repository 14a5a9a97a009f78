"""Multi-turn GRPO on ConvCodeWorld with TRL's ``GRPOTrainer``.

Each rollout is one ConvCodeWorld episode: the model writes a program, the env compiles
and tests it, and the feedback (compilation, execution, verbal) comes back as a *user*
turn; the model then rewrites, for up to ``--turns`` programs. The reward is the env's
(1.0 when all tests pass). Feedback tokens sit inside the completion but carry
``env_mask = 0``, so TRL leaves them out of the policy loss; only the model's own tokens
are trained.

All episodes of a batch are played together by the rollout driver
(:mod:`convcodeworld_gym.rollouts`): their env steps run concurrently (one shared sandbox
executor), and each turn the prompts of every live episode go to the model in ONE batched
generation (``model.generate``, or TRL's vLLM server where the trainer uses vLLM).

It runs with any Hugging Face causal LM (``--model NAME_OR_PATH``). ``--model tiny-random``
builds a tiny randomly initialised Llama with a byte-level tokenizer from a config, with
no download: the smoke mode CI runs on CPU to prove the plumbing.

    python training/grpo_trl.py --smoke                      # CPU, tiny random model, 2 steps
    python training/grpo_trl.py --model Qwen/Qwen2.5-Coder-1.5B-Instruct \\
        --dataset bigcodebench --stdlib-only --limit 200 --turns 3 --max-steps 200 --bf16

Holds:
    EpisodeRollout    one multi-turn episode as token ids, sampling logprobs and env mask
    ConversationCodec how prompts/feedback become tokens (chat template, or plain text)
    BatchedGeneration one generation call for all live episodes of a batch
    TokenPolicy       the trained model as a policy of the rollout driver, turn by turn in tokens
    make_rollout_func the ``rollout_func`` TRL calls
    tiny_random_model the offline test model
    build_trainer     GRPOTrainer wired to the env
    main              command line
"""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

import convcodeworld_gym  # noqa: F401 - registers the ids
from convcodeworld_gym.aio import run_sync
from convcodeworld_gym.errors import InfrastructureError
from convcodeworld_gym.policies import Policy, PolicyEpisode, PolicyReply
from convcodeworld_gym.policies.base import SampledTokens
from convcodeworld_gym.registration import env_id
from convcodeworld_gym.rollouts import EpisodeJob, Trajectory, iter_rollouts
from convcodeworld_gym.sandbox import SandboxExecutor
from convcodeworld_gym.tasks import Task, TaskSet, load_tasks

__all__ = [
    "EpisodeRollout",
    "ConversationCodec",
    "BatchedGeneration",
    "TokenPolicy",
    "feedback_message",
    "make_rollout_func",
    "tiny_random_model",
    "build_trainer",
    "main",
]


def feedback_message(obs: dict[str, Any]) -> str:
    """The user turn that shows this turn's feedback to the model."""
    parts = [f"Compilation feedback:\n{obs['compilation_feedback']}"]
    if obs["execution_feedback"]:
        parts.append(f"Execution feedback:\n{obs['execution_feedback']}")
    if obs["verbal_feedback"]:
        parts.append(f"User feedback:\n{obs['verbal_feedback']}")
    parts.append("Revise your code. Reply with the complete program in one ```python block.")
    return "\n\n".join(parts)


@dataclass
class EpisodeRollout:
    """Token-level record of one episode: model tokens (mask 1) and feedback tokens (mask 0)."""

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    reward: float = 0.0
    turns: int = 0
    infra_error: str | None = None  # the infrastructure lost a run of it: no reward (the env ended it there)

    def add(self, ids: Sequence[int], logprobs: Sequence[float] | None, from_model: bool) -> None:
        self.completion_ids.extend(ids)
        self.logprobs.extend(logprobs if logprobs is not None else [0.0] * len(ids))
        self.env_mask.extend([1 if from_model else 0] * len(ids))


class ConversationCodec:
    """Turns the conversation into token ids, appending one segment at a time.

    With a chat template, each segment is the difference between the rendered conversation
    before and after the new message (so the template's own markers are included). Without
    one, a plain-text format is used.
    """

    def __init__(self, tokenizer: Any, max_feedback_chars: int = 4000) -> None:
        self.tokenizer = tokenizer
        self.max_feedback_chars = max_feedback_chars
        self.chat = getattr(tokenizer, "chat_template", None) is not None

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt(self, task_prompt: str) -> tuple[list[dict[str, str]], list[int]]:
        messages = [{"role": "user", "content": task_prompt}]
        if self.chat:
            ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
            return messages, list(ids["input_ids"] if isinstance(ids, dict) else ids)
        return messages, self._encode(f"### Task\n{task_prompt}\n\n### Code\n")

    def feedback(self, messages: list[dict[str, str]], reply: str, text: str) -> list[int]:
        """Ids of the feedback segment that follows the model's ``reply``; updates ``messages``."""
        text = text if len(text) <= self.max_feedback_chars else text[: self.max_feedback_chars] + "\n..."
        if not self.chat:
            return self._encode(f"\n\n### Feedback\n{text}\n\n### Code\n")
        before = self.tokenizer.apply_chat_template(messages + [{"role": "assistant", "content": reply}], tokenize=False)
        messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": text}]
        after = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return self._encode(after[len(before):])


#: A batched generation: the prompts' token ids -> each one's (sampled ids, sampling logprob of each).
GenerateBatch = Callable[[list[list[int]]], list[tuple[list[int], list[float]]]]


def hf_generate_batch(model: Any, tokenizer: Any, max_new_tokens: int, temperature: float) -> GenerateBatch:
    """One sampled continuation of each prompt by ``model.generate`` in one left-padded batch: its ids (up to and
    with the first end-of-sequence token) and the sampling logprob of each."""

    def generate(batch: list[list[int]]) -> list[tuple[list[int], list[float]]]:
        import torch

        width = max(len(ids) for ids in batch)
        pad = tokenizer.pad_token_id
        inputs = torch.tensor([[pad] * (width - len(ids)) + ids for ids in batch], device=model.device)
        mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in batch], device=model.device)
        with torch.no_grad():
            out = model.generate(inputs, attention_mask=mask, max_new_tokens=max_new_tokens, do_sample=True,
                                 temperature=temperature, top_k=0, top_p=1.0, return_dict_in_generate=True,
                                 output_scores=True, pad_token_id=pad)
        eos = model.generation_config.eos_token_id
        ends = set(eos if isinstance(eos, list) else [eos if eos is not None else tokenizer.eos_token_id])
        results = []
        for row in range(len(batch)):
            new_ids = out.sequences[row, width:].tolist()
            cut = next((i + 1 for i, token in enumerate(new_ids) if token in ends), len(new_ids))
            new_ids = new_ids[:cut]
            logprobs = [torch.log_softmax(out.scores[i][row].float(), dim=-1)[token].item() for i, token in enumerate(new_ids)]
            results.append((new_ids, logprobs))
        return results

    return generate


def vllm_generate_batch(trainer: Any) -> GenerateBatch:
    """The same through TRL's own vLLM generation (``trainer.vllm_generation``: server or colocate mode, its sampling
    settings and ``max_completion_length`` as the trainer configured them). Not run here: no vLLM on this machine."""

    def generate(batch: list[list[int]]) -> list[tuple[list[int], list[float]]]:
        _, completion_ids, logprobs, _ = trainer.vllm_generation.generate(prompts=batch, images=None, num_generations=1)
        return [(list(ids), [lp[0] for lp in lps]) for ids, lps in zip(completion_ids, logprobs)]

    return generate


class BatchedGeneration:
    """Generations of all live episodes of a batch, made together: an episode awaits :meth:`generate`; once every
    episode still playing waits, their prompts go to the model in one call of ``generate_batch`` (run in a thread:
    the env steps of the loop go on meanwhile). An episode that ends leaves (:meth:`leave`), so the others do not
    wait for it. ``calls`` counts the batched calls; ``sizes`` their batch sizes.

    Args:
        generate_batch: prompts' token ids -> each one's (sampled ids, logprobs).
        episodes: how many episodes will join (:meth:`join`); no call is made before they all have.
    """

    def __init__(self, generate_batch: GenerateBatch, episodes: int) -> None:
        self._generate_batch = generate_batch
        self._unstarted = episodes
        self._live = 0
        self._waiting: list[tuple[list[int], asyncio.Future[tuple[list[int], list[float]]]]] = []
        self._busy = False
        self._flushing: asyncio.Task[None] | None = None
        self.calls = 0
        self.sizes: list[int] = []

    def join(self) -> None:
        """An episode starts playing (or is played again)."""
        self._unstarted = max(0, self._unstarted - 1)
        self._live += 1

    def leave(self) -> None:
        """An episode is over: the others no longer wait for it."""
        self._live -= 1
        self._flush_when_ready()

    async def generate(self, input_ids: list[int]) -> tuple[list[int], list[float]]:
        """The model's continuation of ``input_ids`` (ids, logprobs), generated with the other live episodes'."""
        done: asyncio.Future[tuple[list[int], list[float]]] = asyncio.get_running_loop().create_future()
        self._waiting.append((list(input_ids), done))
        self._flush_when_ready()
        return await done

    def _flush_when_ready(self) -> None:
        if self._waiting and not self._busy and self._unstarted == 0 and len(self._waiting) >= self._live:
            self._busy = True
            self._flushing = asyncio.get_running_loop().create_task(self._flush())  # held: the loop keeps weak refs

    async def _flush(self) -> None:
        batch, self._waiting = self._waiting, []
        try:
            results = await asyncio.to_thread(self._generate_batch, [ids for ids, _ in batch])
            self.calls += 1
            self.sizes.append(len(batch))
            for (_, done), result in zip(batch, results):
                done.set_result(result)
        except BaseException as exc:  # noqa: BLE001 - every waiting episode learns why
            for _, done in batch:
                if not done.done():
                    done.set_exception(exc)
        finally:
            self._busy = False
            self._flush_when_ready()


class TokenPolicy(Policy):
    """The model being trained, as a policy of the rollout driver: each call continues the episode's token sequence
    (the prompt, then per turn the model's tokens and the feedback's, :class:`ConversationCodec`) in a batched
    generation; its replies carry the exact prompt and sampled ids and logprobs (``PolicyReply.sampled``)."""

    name = "grpo-policy"

    def __init__(self, codec: ConversationCodec, generation: BatchedGeneration) -> None:
        self.codec, self.generation = codec, generation

    def start(self, task: Task, *, feedback: str, seed: int) -> PolicyEpisode:
        self.generation.join()
        return _TokenEpisode(self.codec, self.generation)


class _TokenEpisode(PolicyEpisode):
    def __init__(self, codec: ConversationCodec, generation: BatchedGeneration) -> None:
        self.codec, self.generation = codec, generation
        self.messages: list[dict[str, str]] = []
        self.ids: list[int] | None = None  # the sequence so far: prompt, model tokens, feedback tokens
        self.reply = ""

    def act(self, observation: Mapping[str, Any]) -> PolicyReply:
        raise TypeError("a TokenPolicy's calls are batched across the episodes of a batch: await aact")

    async def aact(self, observation: Mapping[str, Any]) -> PolicyReply:
        if self.ids is None:
            self.messages, self.ids = self.codec.prompt(str(observation["task"]))
        else:
            self.ids = self.ids + self.codec.feedback(self.messages, self.reply, feedback_message(observation))
        prompt = tuple(self.ids)
        ids, logprobs = await self.generation.generate(self.ids)
        self.ids = self.ids + list(ids)
        self.reply = self.codec.tokenizer.decode(ids, skip_special_tokens=True)
        return PolicyReply(self.reply, {"prompt_tokens": float(len(prompt)), "completion_tokens": float(len(ids))},
                           sampled=SampledTokens(token_ids=tuple(ids), logprobs=tuple(logprobs), prompt_token_ids=prompt))

    def close(self) -> None:
        self.generation.leave()


def episode_rollout(trajectory: Trajectory) -> EpisodeRollout:
    """The token record of a trajectory played by a :class:`TokenPolicy`: the first call's prompt, then per call the
    feedback tokens before it (mask 0) and the tokens it sampled (mask 1)."""
    first = trajectory.calls[0].sampled
    assert first is not None and first.prompt_token_ids is not None
    episode = EpisodeRollout(prompt_ids=list(first.prompt_token_ids), reward=float(trajectory.reward or 0.0),
                             turns=len(trajectory.rows), infra_error=trajectory.infra_error)
    for call in trajectory.calls:
        sampled = call.sampled
        assert sampled is not None and sampled.prompt_token_ids is not None and sampled.token_ids is not None
        so_far = episode.prompt_ids + episode.completion_ids
        if list(sampled.prompt_token_ids[:len(so_far)]) != so_far:
            raise AssertionError("a call's prompt does not continue the episode's tokens: they must be what was sampled")
        episode.add(sampled.prompt_token_ids[len(so_far):], None, from_model=False)
        episode.add(sampled.token_ids, sampled.logprobs, from_model=True)
    return episode


def make_rollout_func(
    env_factory: Callable[[], gym.Env],
    tasks: TaskSet,
    *,
    turns: int,
    max_new_tokens: int,
    temperature: float = 1.0,
    max_feedback_chars: int = 4000,
    on_rollout: Callable[[EpisodeRollout], None] | None = None,
) -> Callable[[list[Any], Any], dict[str, list]]:
    """A TRL ``rollout_func``: each prompt entry is played as one multi-turn episode; all of them at once.

    TRL's sampler already repeats each prompt ``num_generations`` times, so the group of
    an instruction is its repeated entries. The prompt text identifies the task. Every episode gets an env of
    ``env_factory`` (give it one shared executor); the episodes' env steps run concurrently, and each turn one
    batched generation serves every live episode (:class:`BatchedGeneration`; TRL's vLLM generation when the
    trainer uses vLLM). ``turns`` programs an episode: the envs must have ``max_turns == turns - 1``.
    Returns ``prompt_ids``, ``completion_ids``, ``logprobs``, ``env_mask`` (0 on feedback
    tokens) and ``env_reward`` (forwarded to the reward function), in the order of the prompts.

    An episode in which the infrastructure lost a run (``info["infra_error"]``: lost, also on the
    executor's own retry; the env ends the episode there) has no reward, and GRPO needs one for every
    completion of a group: the driver plays it again from its prompt. Lost again,
    :class:`~convcodeworld_gym.errors.InfrastructureError` is raised rather than a 0 given.
    """
    by_prompt = {task.prompt: task.task_id for task in tasks}

    def rollout(prompts: list[Any], trainer: Any) -> dict[str, list]:
        model, tokenizer = trainer.model, trainer.processing_class
        jobs = []
        for prompt in prompts:
            text = prompt if isinstance(prompt, str) else prompt[-1]["content"]
            if text not in by_prompt:
                raise KeyError(f"rollout prompt does not match any task's instruction: {text[:80]!r}...")
            jobs.append(EpisodeJob(by_prompt[text]))
        generate = (vllm_generate_batch(trainer) if getattr(trainer, "use_vllm", False)
                    else hf_generate_batch(model, tokenizer, max_new_tokens, temperature))
        generation = BatchedGeneration(generate, len(jobs))
        policy = TokenPolicy(ConversationCodec(tokenizer, max_feedback_chars), generation)

        def make_env() -> gym.Env:
            env = env_factory()
            if env.unwrapped.max_turns != turns - 1:
                raise ValueError(f"the rollout plays {turns} programs an episode: make the envs with max_turns={turns - 1}, "
                                 f"not {env.unwrapped.max_turns}")
            return env

        async def play_all() -> list[Trajectory]:
            return [t async for t in iter_rollouts(jobs, make_env, policy, concurrency=len(jobs), protocol="always")]

        was_training = model.training
        model.eval()
        try:
            trajectories = run_sync(play_all())
        finally:
            model.train(was_training)
        out: dict[str, list] = {k: [] for k in ("prompt_ids", "completion_ids", "logprobs", "env_mask", "env_reward")}
        for trajectory in trajectories:
            if trajectory.infra_error is not None:  # played again by the driver, and lost again
                assert trajectory.replay_of is not None
                raise InfrastructureError(
                    f"an episode of {trajectory.task_id} was lost to the infrastructure ({trajectory.replay_of.infra_error}), "
                    f"and again when played anew ({trajectory.infra_error}); it has no reward to train on",
                    trajectory.task_id, trajectory.infra_error)
            episode = episode_rollout(trajectory)
            if on_rollout is not None:
                on_rollout(episode)
            out["prompt_ids"].append(episode.prompt_ids)
            out["completion_ids"].append(episode.completion_ids)
            out["logprobs"].append(episode.logprobs)
            out["env_mask"].append(episode.env_mask)
            out["env_reward"].append(episode.reward)
        return out

    return rollout


def env_reward(prompts: list[Any], completions: list[Any], env_reward: list[float], **_: Any) -> list[float]:
    """Reward function: the env's episode reward, forwarded by the rollout."""
    return [float(r) for r in env_reward]


def tiny_random_model(seed: int = 0) -> tuple[Any, Any]:
    """A 2-layer Llama with a byte-level tokenizer, built from a config: no download (the package's test model,
    :func:`convcodeworld_gym.testing.tiny_model.tiny_model`)."""
    from convcodeworld_gym.testing.tiny_model import tiny_model

    return tiny_model(seed)


def build_trainer(args: argparse.Namespace, on_rollout: Callable[[EpisodeRollout], None] | None = None) -> Any:
    """A ``GRPOTrainer`` whose rollouts are ConvCodeWorld episodes."""
    import datasets
    from trl import GRPOConfig, GRPOTrainer

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    tasks = load_tasks(args.dataset, stdlib_only=args.stdlib_only, limit=args.limit)
    if args.model == "tiny-random":
        model, tokenizer = tiny_random_model(args.seed)
    else:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(args.model, padding_side="left")
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        model = AutoModelForCausalLM.from_pretrained(args.model)
    train = datasets.Dataset.from_list([{"prompt": t.prompt} for t in tasks])
    batch = args.num_generations * args.prompts_per_step
    config = GRPOConfig(
        output_dir=args.output_dir,
        max_steps=args.max_steps,
        per_device_train_batch_size=batch,
        num_generations=args.num_generations,
        learning_rate=args.learning_rate,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=args.cpu,
        bf16=args.bf16,
        seed=args.seed,
        beta=0.0,
        max_completion_length=args.max_new_tokens * args.turns + args.max_feedback_tokens * (args.turns - 1),
    )
    feedback = args.feedback
    executor = SandboxExecutor()  # one for every env of every batch: its pool queues their runs fairly

    def make_env() -> gym.Env:
        return gym.make(env_id(feedback), dataset=tasks, max_turns=max(args.turns - 1, 0), executor=executor)

    rollout = make_rollout_func(
        make_env, tasks, turns=args.turns, max_new_tokens=args.max_new_tokens,
        temperature=args.temperature, max_feedback_chars=args.max_feedback_tokens, on_rollout=on_rollout,
    )
    return GRPOTrainer(model=model, reward_funcs=env_reward, args=config, train_dataset=train,
                       processing_class=tokenizer, rollout_func=rollout)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="tiny-random", help="HF causal LM name/path, or 'tiny-random' (offline)")
    p.add_argument("--dataset", default="humaneval")
    p.add_argument("--stdlib-only", action="store_true")
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--feedback", default="CF-EF_full", help="feedback combination, e.g. CF-EF_full-SNF")
    p.add_argument("--turns", type=int, default=3, help="programs per episode (1 = single turn)")
    p.add_argument("--num-generations", type=int, default=4)
    p.add_argument("--prompts-per-step", type=int, default=1)
    p.add_argument("--max-steps", type=int, default=100)
    p.add_argument("--max-new-tokens", type=int, default=512)
    p.add_argument("--max-feedback-tokens", type=int, default=1024, help="feedback is cut to this many characters")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--learning-rate", type=float, default=1e-6)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cpu", action="store_true", help="train on CPU")
    p.add_argument("--bf16", action="store_true")
    p.add_argument("--output-dir", default="runs/grpo_trl")
    p.add_argument("--smoke", action="store_true", help="CPU, tiny random model, 2 prompts x 2 generations, 2 steps")
    return p


def smoke_overrides(args: argparse.Namespace) -> argparse.Namespace:
    """The CI smoke run: tiny model on CPU, 2 optimizer steps of 2-turn rollouts."""
    args.model, args.cpu, args.bf16 = "tiny-random", True, False
    args.limit = args.limit or 4
    args.num_generations, args.prompts_per_step, args.max_steps = 2, 1, 2
    args.turns, args.max_new_tokens, args.max_feedback_tokens = 2, 16, 256
    args.learning_rate = 1e-3
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.smoke:
        args = smoke_overrides(args)
    trainer = build_trainer(args)
    result = trainer.train()
    print(f"finished {trainer.state.global_step} optimizer steps; train loss {result.training_loss:.4f}")
    rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    if rewards:
        print("mean reward per step:", ", ".join(f"{r:.3f}" for r in rewards))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
