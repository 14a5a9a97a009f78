"""TRL's ``rollout_func`` door: multi-turn GRPO on ConvCodeWorld episodes in the paper's chat format.

``GRPOTrainer(rollout_func=make_rollout_func(make_env, rows, ...), train_dataset=Dataset.from_list(rows))`` plays
each prompt of a batch as one ConvCodeWorld episode: the model writes a program, the env compiles and tests it, and
the feedback (compilation, execution, verbal) comes back as a *user* turn; the model then rewrites, for up to
``turns`` programs. The reward is the env's (1.0 when all tests pass), forwarded to the :func:`env_reward` reward
function. Feedback tokens sit inside the completion with ``env_mask = 0``, so TRL leaves them out of the policy loss.

All episodes of a batch are played together by the rollout driver (:mod:`convcodeworld_gym.rollouts`): their env
steps run concurrently (one shared sandbox executor), and each turn the prompts of every live episode go to the model
in ONE batched generation (``model.generate``, or TRL's vLLM generation where the trainer uses vLLM). Sampling
follows the trainer's own settings (``GRPOConfig.temperature``, ``top_p``, ``top_k``, ``min_p``,
``repetition_penalty``), the ones TRL computes the loss's logprobs with: there is no second temperature here.

Which task a prompt plays is its dataset row's ``task_id`` (:func:`grpo_rows`), not a task whose instruction reads
the same: TRL (1.16) hands ``rollout_func`` only the rows' ``prompt`` values (unchanged copies; the other columns go to
the reward functions), so :func:`make_rollout_func` is given the rows and finds each prompt's row. Any prompt
template works, and the model's first turn is the row's prompt as written.

Scripted players can play some episodes of a batch beside the model (``make_rollout_func(..., scripts=...)``): the
smoke runs use them (:mod:`.smoke`) so that a tiny random model's batch holds a passing program and a failing one,
and the loss has a reward to learn from. A scripted reply's tokens are the reply's encoding, trained on as the model's
are (mask 1), with a sampling logprob of 0.0: nothing sampled them (TRL reads the rollout's logprobs only to correct
vLLM's sampling).

Importing this module imports neither TRL nor torch (the generation functions import torch when called).

Holds:
    Prompt              a row's prompt: text, or chat messages
    grpo_rows           the dataset rows (prompt + task_id) of a task set, through an optional prompt template
    feedback_message    the user turn that shows a turn's feedback, cut to a length, its closing instruction kept
    REVISE              that closing instruction
    EpisodeRollout      one multi-turn episode as token ids, sampling logprobs and env mask
    ConversationCodec   how prompts and feedback become tokens (chat template, or plain text)
    hf_generate_batch   one batched ``model.generate`` call at the trainer's sampling settings
    vllm_generate_batch the same through TRL's vLLM generation
    GenerateBatch       the type of those two: token ids of a batch's prompts in, completions with logprobs out
    BatchedGeneration   one generation call for all live episodes of a batch
    ScriptedPlayer      a scripted player's replies in one episode: turn observation -> reply
    Scripts             which episodes scripted players play: (task, its place in its group) -> a player, or None
    TokenPolicy         the trained model as a policy of the rollout driver, turn by turn in tokens (beside scripted
                        players, where given)
    episode_rollout     a trajectory's token record
    make_rollout_func   the ``rollout_func`` TRL calls
    env_reward          the reward function that reads the env's episode reward
    canary_pass_rate    the canary pass rate of episodes' verdicts, logged with TRL's ``log_metric`` when given
    CANARY_METRICS      the names it logs under
    canary_line         the canary pass rate per step, read back from a trainer's log (the training programs print it)
    follow_rate         the perturbation-following rate of episodes' programs (``perturb=``), logged when given
    FOLLOW_METRICS      the names it logs under
    follow_line         that rate per step, read back from a trainer's log
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

import gymnasium as gym

from ..aio import run_sync
from ..errors import InfrastructureError
from ..policies import Policy, PolicyEpisode, PolicyReply
from ..policies.base import SampledTokens
from ..rollouts import EpisodeJob, Trajectory, iter_rollouts
from ..tasks import Task
from ..tasks.canary import CanaryRate
from ..tasks.perturb import FollowRate
from .logs import per_step_line

__all__ = [
    "Prompt",
    "grpo_rows",
    "feedback_message",
    "REVISE",
    "EpisodeRollout",
    "ConversationCodec",
    "GenerateBatch",
    "hf_generate_batch",
    "vllm_generate_batch",
    "BatchedGeneration",
    "ScriptedPlayer",
    "Scripts",
    "TokenPolicy",
    "episode_rollout",
    "make_rollout_func",
    "env_reward",
    "canary_pass_rate",
    "CANARY_METRICS",
    "canary_line",
    "follow_rate",
    "FOLLOW_METRICS",
    "follow_line",
]

#: The names :func:`canary_pass_rate` logs under: the twins' pass rate, and how many twins' episodes it counts.
CANARY_METRICS = ("canary/pass_rate", "canary/episodes")
#: The names :func:`follow_rate` logs under: the perturbation-following rate, and how many programs it counts.
FOLLOW_METRICS = ("perturbation/follow_rate", "perturbation/programs")

#: A dataset row's prompt, as TRL's datasets hold it: a text (standard), or chat messages (conversational).
Prompt = Union[str, list[dict[str, Any]]]


def grpo_rows(tasks: Iterable[Task], template: Callable[[Task], Prompt] | None = None) -> list[dict[str, Any]]:
    """One dataset row per task for ``GRPOTrainer(rollout_func=make_rollout_func(...))``: ``prompt`` (the task's
    instruction, or ``template(task)``: a text or chat messages) and ``task_id``, which picks the episode's task.

    >>> from convcodeworld_gym.tasks import load_tasks
    >>> tasks = load_tasks("humaneval", limit=1)
    >>> grpo_rows(tasks)[0]["task_id"], grpo_rows(tasks)[0]["prompt"] == tasks["HumanEval/0"].prompt
    ('HumanEval/0', True)
    >>> grpo_rows(tasks, lambda t: [{"role": "system", "content": "Be brief."},
    ...                             {"role": "user", "content": t.prompt}])[0]["prompt"][0]["content"]
    'Be brief.'
    """
    return [{"prompt": task.prompt if template is None else template(task), "task_id": task.task_id} for task in tasks]


def _prompt_key(prompt: Any) -> str:
    """A prompt as a hashable key, equal for a row's prompt and the copy TRL hands over (a dataset stores every
    message with the union of the messages' keys, the missing ones None: those are dropped)."""
    if isinstance(prompt, str):
        return "text:" + prompt
    if isinstance(prompt, Sequence) and all(isinstance(m, Mapping) for m in prompt):
        return "chat:" + json.dumps([{k: v for k, v in m.items() if v is not None} for m in prompt], sort_keys=True,
                                    default=str)
    raise TypeError(f"a prompt is a text or a list of chat messages (dicts), got {type(prompt).__name__}")


def _task_of_prompt(rows: Iterable[Any]) -> dict[str, str]:
    """The task id of each row's prompt (by :func:`_prompt_key`); the same prompt for two tasks is refused."""
    by_prompt: dict[str, str] = {}
    for row in rows:
        if not isinstance(row, Mapping) or "prompt" not in row or not isinstance(row.get("task_id"), str):
            raise TypeError(f"make_rollout_func takes the dataset rows, each with a 'prompt' and a 'task_id' (str), "
                            f"got {type(row).__name__}; build them with grpo_rows(tasks)")
        key = _prompt_key(row["prompt"])
        if by_prompt.setdefault(key, row["task_id"]) != row["task_id"]:
            raise ValueError(f"two rows have the same prompt but different tasks ({by_prompt[key]}, {row['task_id']}): "
                             "a rollout could not tell which task to play; make their prompts differ")
    return by_prompt


#: The closing line of every feedback turn: what the model is asked to do next.
REVISE = "Revise your code. Reply with the complete program in one ```python block."


def feedback_message(obs: Mapping[str, Any], max_chars: int | None = None) -> str:
    """The user turn that shows this turn's feedback to the model: the feedback the observation shows (compilation,
    execution, the user's words), cut to ``max_chars`` characters (marked ``...``) when longer, then :data:`REVISE`,
    which a cut never removes.

    >>> obs = {"compilation_feedback": "ok", "execution_feedback": "x" * 50, "verbal_feedback": ""}
    >>> feedback_message(obs, max_chars=30).splitlines()[-3:] == ["...", "", REVISE]
    True
    """
    parts = [f"Compilation feedback:\n{obs['compilation_feedback']}"]
    if obs["execution_feedback"]:
        parts.append(f"Execution feedback:\n{obs['execution_feedback']}")
    if obs["verbal_feedback"]:
        parts.append(f"User feedback:\n{obs['verbal_feedback']}")
    text = "\n\n".join(parts)
    if max_chars is not None and len(text) > max_chars:
        text = text[:max_chars] + "\n..."
    return f"{text}\n\n{REVISE}"


@dataclass
class EpisodeRollout:
    """Token-level record of one episode of ``task_id``: model tokens (mask 1) and feedback tokens (mask 0)."""

    prompt_ids: list[int]
    task_id: str = ""
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    reward: float = 0.0
    turns: int = 0
    infra_error: str | None = None  # the infrastructure lost a run of it: no reward (the env ended it there)
    scripted: bool = False  # a scripted player wrote its replies, not the model (make_rollout_func's scripts)

    def add(self, ids: Sequence[int], logprobs: Sequence[float] | None, from_model: bool) -> None:
        self.completion_ids.extend(ids)
        self.logprobs.extend(logprobs if logprobs is not None else [0.0] * len(ids))
        self.env_mask.extend([1 if from_model else 0] * len(ids))


class ConversationCodec:
    """Turns the conversation into token ids, appending one segment at a time.

    With a chat template, each segment is the difference between the rendered conversation
    before and after the new message (so the template's own markers are included). Without
    one, a plain-text format is used (text prompts only). Texts are encoded as given (a feedback turn is cut
    beforehand: :func:`feedback_message`).
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.chat = getattr(tokenizer, "chat_template", None) is not None

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt(self, prompt: Prompt) -> tuple[list[dict[str, Any]], list[int]]:
        """The conversation so far and its ids for a row's ``prompt``: a text becomes one user message; chat
        messages are kept as they are (they need a tokenizer with a chat template)."""
        if isinstance(prompt, str):
            messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
            if not self.chat:
                return messages, self._encode(f"### Task\n{prompt}\n\n### Code\n")
        elif not self.chat:
            raise ValueError("a prompt of chat messages needs a tokenizer with a chat template; give this tokenizer "
                             "one, or text prompts")
        else:
            messages = [{k: v for k, v in m.items() if v is not None} for m in prompt]
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        return messages, list(ids["input_ids"] if isinstance(ids, Mapping) else ids)

    def reply_ids(self, reply: str) -> list[int]:
        """The ids of ``reply`` as the model would have generated it: its encoding, then the end-of-sequence token
        (a scripted player's reply, :class:`TokenPolicy`)."""
        return self._encode(reply) + [self.tokenizer.eos_token_id]

    def feedback(self, messages: list[dict[str, Any]], reply: str, text: str) -> list[int]:
        """Ids of the feedback segment that follows the model's ``reply``; updates ``messages``."""
        if not self.chat:
            return self._encode(f"\n\n### Feedback\n{text}\n\n### Code\n")
        before = self.tokenizer.apply_chat_template(messages + [{"role": "assistant", "content": reply}], tokenize=False)
        messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": text}]
        after = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return self._encode(after[len(before):])


#: A batched generation: the prompts' token ids -> each one's (sampled ids, sampling logprob of each).
GenerateBatch = Callable[[list[list[int]]], list[tuple[list[int], list[float]]]]


def hf_generate_batch(model: Any, tokenizer: Any, max_new_tokens: int, *, temperature: float, top_p: float = 1.0,
                      top_k: int = 0, min_p: float | None = None, repetition_penalty: float = 1.0) -> GenerateBatch:
    """One sampled continuation of each prompt by ``model.generate`` in one left-padded batch: its ids (up to and
    with the first end-of-sequence token) and the sampling logprob of each (of the processed distribution it was
    drawn from). The sampling settings are GRPOConfig's (``temperature`` ... ``repetition_penalty``)."""

    def generate(batch: list[list[int]]) -> list[tuple[list[int], list[float]]]:
        import torch

        width = max(len(ids) for ids in batch)
        pad = tokenizer.pad_token_id
        inputs = torch.tensor([[pad] * (width - len(ids)) + ids for ids in batch], device=model.device)
        mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in batch], device=model.device)
        with torch.no_grad():
            out = model.generate(inputs, attention_mask=mask, max_new_tokens=max_new_tokens, do_sample=True,
                                 temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
                                 repetition_penalty=repetition_penalty, return_dict_in_generate=True,
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


def _trainer_sampling(trainer: Any) -> dict[str, Any]:
    """The sampling settings TRL's ``GRPOTrainer`` keeps from its ``GRPOConfig`` (and computes logprobs with)."""
    return {name: getattr(trainer, name) for name in ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")}


def vllm_generate_batch(trainer: Any) -> GenerateBatch:
    """The same through TRL's own vLLM generation (``trainer.vllm_generation``: server or colocate mode, the sampling
    settings and ``max_completion_length`` of the trainer's GRPOConfig). Written against trl 1.16's
    ``VLLMGeneration.generate``; not run here: no vLLM on the development machine."""

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

    def apart(self) -> None:
        """An episode of the batch starts that the model does not play (a scripted player's): no call waits for it."""
        self._unstarted = max(0, self._unstarted - 1)
        if self._waiting:
            self._flush_when_ready()

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


#: A scripted player's replies in one episode: the observation of each turn -> the reply it writes.
ScriptedPlayer = Callable[[Mapping[str, Any]], str]
#: Which episodes of a batch scripted players play: (the task, the episode's place among the batch's episodes of that
#: task, 0 first: its place in its GRPO group) -> its player, or None: the model plays it.
Scripts = Callable[[Task, int], Union[ScriptedPlayer, None]]


class TokenPolicy(Policy):
    """The model being trained, as a policy of the rollout driver: each call continues the episode's token sequence
    (its prompt, then per turn the model's tokens and the feedback's, :class:`ConversationCodec`) in a batched
    generation; its replies carry the exact prompt and sampled ids and logprobs (``PolicyReply.sampled``).

    Args:
        codec: how the conversation becomes tokens.
        generation: the batch's generation, shared by its episodes.
        prompts: the episodes' first prompts; an episode's job seed is the index of its prompt here.
        max_feedback_chars: each feedback turn's feedback is cut to this many characters (:func:`feedback_message`).
        scripts: scripted players for some episodes (:data:`Scripts`); their replies are encoded in the same
            sequence of tokens (each ended by the end-of-sequence token, as a generation is), with logprobs of 0.0.
            ``scripted_seeds`` lists the seeds of the episodes they played.
    """

    name = "grpo-policy"

    def __init__(self, codec: ConversationCodec, generation: BatchedGeneration, prompts: Sequence[Prompt],
                 max_feedback_chars: int = 4000, scripts: Scripts | None = None) -> None:
        self.codec, self.generation, self.prompts = codec, generation, list(prompts)
        self.max_feedback_chars = max_feedback_chars
        self.scripts = scripts
        self.scripted_seeds: set[int] = set()

    def start(self, task: Task, *, feedback: str, seed: int) -> PolicyEpisode:
        if not 0 <= seed < len(self.prompts):
            raise IndexError(f"a TokenPolicy episode's seed is the index of its prompt (0..{len(self.prompts) - 1}), "
                             f"got {seed}")
        place = sum(_prompt_key(p) == _prompt_key(self.prompts[seed]) for p in self.prompts[:seed])
        player = self.scripts(task, place) if self.scripts is not None else None
        if player is not None:
            self.scripted_seeds.add(seed)
            self.generation.apart()
            return _TokenEpisode(self.codec, None, self.prompts[seed], self.max_feedback_chars, player)
        self.generation.join()
        return _TokenEpisode(self.codec, self.generation, self.prompts[seed], self.max_feedback_chars)


class _TokenEpisode(PolicyEpisode):
    def __init__(self, codec: ConversationCodec, generation: BatchedGeneration | None, prompt: Prompt,
                 max_feedback_chars: int, player: ScriptedPlayer | None = None) -> None:
        self.codec, self.generation, self.prompt = codec, generation, prompt
        self.max_feedback_chars = max_feedback_chars
        self.player = player
        self.messages: list[dict[str, Any]] = []
        self.ids: list[int] | None = None  # the sequence so far: prompt, model tokens, feedback tokens
        self.reply = ""

    def act(self, observation: Mapping[str, Any]) -> PolicyReply:
        raise TypeError("a TokenPolicy's calls are batched across the episodes of a batch: await aact")

    async def aact(self, observation: Mapping[str, Any]) -> PolicyReply:
        if self.ids is None:
            self.messages, self.ids = self.codec.prompt(self.prompt)
        else:
            text = feedback_message(observation, self.max_feedback_chars)
            self.ids = self.ids + self.codec.feedback(self.messages, self.reply, text)
        prompt = tuple(self.ids)
        if self.player is None:
            assert self.generation is not None
            ids, logprobs = await self.generation.generate(self.ids)
            self.reply = self.codec.tokenizer.decode(ids, skip_special_tokens=True)
        else:  # a scripted player's reply: its encoding, ended as a generation is; nothing sampled it
            self.reply = self.player(observation)
            ids = self.codec.reply_ids(self.reply)
            logprobs = [0.0] * len(ids)
        self.ids = self.ids + list(ids)
        return PolicyReply(self.reply, {"prompt_tokens": float(len(prompt)), "completion_tokens": float(len(ids))},
                           sampled=SampledTokens(token_ids=tuple(ids), logprobs=tuple(logprobs), prompt_token_ids=prompt))

    def close(self) -> None:
        if self.generation is not None:
            self.generation.leave()


def episode_rollout(trajectory: Trajectory) -> EpisodeRollout:
    """The token record of a trajectory played by a :class:`TokenPolicy`: the first call's prompt, then per call the
    feedback tokens before it (mask 0) and the tokens it sampled (mask 1)."""
    first = trajectory.calls[0].sampled
    assert first is not None and first.prompt_token_ids is not None
    episode = EpisodeRollout(prompt_ids=list(first.prompt_token_ids), task_id=trajectory.task_id, reward=float(trajectory.reward or 0.0),
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
    rows: Iterable[Mapping[str, Any]],
    *,
    turns: int,
    max_new_tokens: int,
    max_feedback_chars: int = 4000,
    on_rollout: Callable[[EpisodeRollout], None] | None = None,
    scripts: Scripts | None = None,
) -> Callable[[list[Any], Any], dict[str, list]]:
    """A TRL ``rollout_func``: each prompt entry is played as one multi-turn episode; all of them at once.

    ``rows`` are the trainer's dataset rows (:func:`grpo_rows`, or any rows with ``prompt`` and ``task_id``; a
    ``datasets.Dataset`` iterates as such). TRL hands ``rollout_func`` only the rows' prompts, each already repeated
    ``num_generations`` times by its sampler (the group of an instruction is its repeated entries); each prompt's
    row gives the task it plays (``task_id``), and the prompt is the model's first turn. Every episode gets an env of
    ``env_factory`` (give it one shared executor); the episodes' env steps run concurrently, and each turn one
    batched generation serves every live episode (:class:`BatchedGeneration`), sampled at the trainer's settings
    (GRPOConfig's ``temperature``, ``top_p``, ``top_k``, ``min_p``, ``repetition_penalty``): by ``model.generate``
    with at most ``max_new_tokens`` a call, or by TRL's vLLM generation when the trainer uses vLLM (its
    ``max_completion_length`` a call: give it ``max_new_tokens``). ``turns`` programs an episode: the envs must have
    ``max_turns == turns - 1``. Each feedback turn's feedback is cut to ``max_feedback_chars`` characters (its closing
    instruction kept: :func:`feedback_message`). ``scripts``: scripted players for some episodes of each batch
    (:data:`Scripts`: by task and place in the group; the smoke runs' :func:`~.smoke.smoke_player`), played beside
    the model's; their episodes are marked ``scripted`` (``on_rollout`` sees them).
    Returns ``prompt_ids``, ``completion_ids``, ``logprobs``, ``env_mask`` (0 on feedback tokens) and
    ``env_reward`` (forwarded to the reward functions: :func:`env_reward`), ``canary_passed`` (for a canary twin's
    episode whether it passed the twin's tests, else None: :func:`env_reward` logs their rate beside the reward) and
    ``perturbation_followed`` (on a task the envs perturb, ``perturb=``, whether each program followed the perturbation,
    else ``[]``: :func:`env_reward` logs the rate beside the reward), in the order of the prompts.

    An episode in which the infrastructure lost a run (``info["infra_error"]``: lost, also on the
    executor's own retry; the env ends the episode there) has no reward, and GRPO needs one for every
    completion of a group: the driver plays it again from its prompt. Lost again,
    :class:`~convcodeworld_gym.errors.InfrastructureError` is raised rather than a 0 given.

    Raises (when called):
        KeyError: a prompt is not the prompt of any of ``rows``.
        ValueError: the envs' ``max_turns`` is not ``turns - 1``.
    """
    by_prompt = _task_of_prompt(rows)

    def rollout(prompts: list[Any], trainer: Any) -> dict[str, list]:
        jobs = []
        for index, prompt in enumerate(prompts):
            task_id = by_prompt.get(_prompt_key(prompt))
            if task_id is None:
                raise KeyError(f"rollout prompt {str(prompt)[:80]!r}... is not the prompt of any row given to "
                               "make_rollout_func: give it the rows of the trainer's train_dataset")
            jobs.append(EpisodeJob(task_id, seed=index))  # the seed indexes the TokenPolicy's prompts
        model, tokenizer = trainer.model, trainer.processing_class
        generate = (vllm_generate_batch(trainer) if getattr(trainer, "use_vllm", False)
                    else hf_generate_batch(model, tokenizer, max_new_tokens, **_trainer_sampling(trainer)))
        generation = BatchedGeneration(generate, len(jobs))
        policy = TokenPolicy(ConversationCodec(tokenizer), generation, prompts, max_feedback_chars, scripts)

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
        out: dict[str, list] = {k: [] for k in ("prompt_ids", "completion_ids", "logprobs", "env_mask", "env_reward",
                                                "canary_passed", "perturbation_followed")}
        for index, trajectory in enumerate(trajectories):
            if trajectory.infra_error is not None:  # played again by the driver, and lost again
                assert trajectory.replay_of is not None
                raise InfrastructureError(
                    f"an episode of {trajectory.task_id} was lost to the infrastructure ({trajectory.replay_of.infra_error}), "
                    f"and again when played anew ({trajectory.infra_error}); it has no reward to train on",
                    trajectory.task_id, trajectory.infra_error)
            episode = episode_rollout(trajectory)
            episode.scripted = index in policy.scripted_seeds
            if on_rollout is not None:
                on_rollout(episode)
            out["prompt_ids"].append(episode.prompt_ids)
            out["completion_ids"].append(episode.completion_ids)
            out["logprobs"].append(episode.logprobs)
            out["env_mask"].append(episode.env_mask)
            out["env_reward"].append(episode.reward)
            out["canary_passed"].append(trajectory.canary_passed)  # None but on a canary twin (reward 0.0 there)
            out["perturbation_followed"].append(list(trajectory.follows))  # [] but on a perturbed task
        return out

    return rollout


def env_reward(prompts: list[Any], completions: list[Any], env_reward: list[float], *,
               canary_passed: list[bool | None] | None = None,
               perturbation_followed: list[list[bool | None] | None] | None = None,
               log_metric: Callable[[str, float], None] | None = None, **_: Any) -> list[float]:
    """Reward function: the env's episode reward, forwarded by the rollout (``env_reward``; 0.0 on a canary twin).
    Where the batch played canary twins (``canary_passed``), it logs their pass rate beside the reward with TRL's
    ``log_metric`` (``canary/pass_rate``, ``canary/episodes``): never part of the reward (docs/canary.md); where it
    played perturbed tasks (``perturbation_followed``), the perturbation-following rate (:func:`follow_rate`).

    >>> logged = {}
    >>> env_reward([], [], [1.0, 0.0], canary_passed=[None, True], log_metric=logged.__setitem__), logged
    ([1.0, 0.0], {'canary/pass_rate': 1.0, 'canary/episodes': 1})
    """
    canary_pass_rate(canary_passed or (), log_metric)
    follow_rate(perturbation_followed or (), log_metric)
    return [float(r) for r in env_reward]


def canary_pass_rate(canary_passed: Iterable[bool | None],
                     log_metric: Callable[[str, float], None] | None = None) -> tuple[float | None, int]:
    """``(rate, twins)`` of episodes' canary verdicts: ``canary_passed`` holds, per episode, whether a program passed
    its canary twin's tests (None: the episode played no twin, or has no verdict); the rate is the share of the twins'
    episodes that passed (None without any), ``twins`` their count. Where there are twins and ``log_metric`` is given
    (TRL hands reward functions its ``log_metric``), both are logged under :data:`CANARY_METRICS`. Every door and
    training program reports the canary through this, beside the reward and never in it (docs/canary.md).

    >>> logged = {}
    >>> canary_pass_rate([None, True, False, None], logged.__setitem__), logged
    ((0.5, 2), {'canary/pass_rate': 0.5, 'canary/episodes': 2})
    >>> canary_pass_rate([None, None], logged.__setitem__)  # no twin played: nothing logged
    (None, 0)
    """
    canary = CanaryRate.of(canary_passed)
    if canary.episodes and log_metric is not None:
        log_metric(CANARY_METRICS[0], canary.rate)
        log_metric(CANARY_METRICS[1], canary.episodes)
    return canary.rate, canary.episodes


def canary_line(log_history: Sequence[Mapping[str, Any]]) -> str:
    """The canary pass rate of each logged step and its twins' episodes (``-``: the step played no twin), read from a
    TRL trainer's ``log_history`` (what :func:`canary_pass_rate` logged with ``log_metric``; a step is an entry with
    ``reward``), for a program to print beside the reward.

    >>> canary_line([{"reward": 0.5}, {"reward": 0.0, "canary/pass_rate": 0.5, "canary/episodes": 2.0}])
    'canary pass rate per step (never in the reward): -, 0.500; twin episodes per step: -, 2'
    """
    return per_step_line(log_history, *CANARY_METRICS, rate_name="canary pass rate", count_name="twin episodes per step")


def follow_rate(followed: Iterable[Iterable[bool | None] | None],
                log_metric: Callable[[str, float], None] | None = None) -> FollowRate:
    """The perturbation-following rate of a batch's episodes: ``followed`` holds, per episode, whether each of its
    programs followed the perturbation of its task (:attr:`~convcodeworld_gym.rollouts.Trajectory.follows`; empty or
    None on a task played as it is). Where a program was judged on a perturbed task and ``log_metric`` is given, the
    rate and the programs are logged under :data:`FOLLOW_METRICS`, beside the reward, never in it.

    >>> logged = {}
    >>> follow_rate([[False, True], None, [None]], logged.__setitem__), logged
    (FollowRate(programs=2, followed=1), {'perturbation/follow_rate': 0.5, 'perturbation/programs': 2})
    """
    rate = FollowRate.of(verdict for episode in followed for verdict in (episode or ()))
    if rate.programs and log_metric is not None:
        log_metric(FOLLOW_METRICS[0], float(rate.rate or 0.0))
        log_metric(FOLLOW_METRICS[1], rate.programs)
    return rate


def follow_line(log_history: Sequence[Mapping[str, Any]]) -> str:
    """The perturbation-following rate of each logged step and the programs judged on perturbed tasks (what
    :func:`follow_rate` logged), for a program to print beside the reward.

    >>> follow_line([{"reward": 0.5}, {"reward": 0.0, "perturbation/follow_rate": 0.5, "perturbation/programs": 4.0}])
    'perturbation-following rate per step (never in the reward): -, 0.500; programs on perturbed tasks per step: -, 4'
    """
    return per_step_line(log_history, *FOLLOW_METRICS, rate_name="perturbation-following rate",
                         count_name="programs on perturbed tasks per step")
