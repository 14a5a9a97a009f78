"""The TRL programs' smoke runs: scripted players beside the tiny random model, so that two GRPO steps on a CPU show
a learning signal.

A tiny random model (:mod:`~convcodeworld_gym.testing.tiny_model`) writes neither a program that passes nor a tool
call: every reward of its batch is 0.0, so every GRPO advantage is 0, and so are the loss and the gradient (the smoke
runs printed reward 0, loss 0 and grad_norm 0 on every step). In a smoke run, each GRPO group (the generations of one
task) holds two scripted players beside the model's own samples (:data:`SMOKE_SCRIPTED`):

* place 0 writes a reasoning reply (:func:`reasoning_reply`): a thought holding a wrong draft, then the task's
  canonical solution as its answer: reward 1.0, since the env judges the answer and never the thought (read as the
  reference read replies, ``reasoning="keep"``, the draft would be judged: 0.0);
* place 1 writes a wrong program (the task's function returning None), every turn: reward 0.0;
* the other places are the model's own samples: 0.0 (a random model's).

So each group's rewards differ, its advantages are not 0, and the reward, loss and grad_norm printed are not 0. The
loss is GRPO's on these completions, the scripted ones trained on as if the model had sampled them (their sampling
logprobs are 0.0, which TRL reads only to correct vLLM's sampling): it shows that the trainer turns the env's reward
into a gradient, never that a model learns to code.

The ``rollout_func`` door (``training/grpo_trl.py``) gives the players to :func:`~.grpo.make_rollout_func`
(``scripts=``:func:`smoke_player`); the ``environment_factory`` door (``training/grpo_trl_tools.py``), where TRL generates,
wraps the model's ``generate`` (:func:`scripted_tool_generate`): the scripted rows' completions are tool calls, the
first behind a thought whose draft calls the tool with the wrong program (TRL's response parser leaves a thought's
calls uncalled), the others the model's own.

Holds:
    SMOKE_SCRIPTED          how many places of each group scripted players take
    smoke_programs          a task's right program (its canonical solution) and a wrong one
    reasoning_reply         a reasoning model's reply: a thought with a draft, then the answer
    smoke_player            the scripted player of a place of a group in the chat format, or None (the model's place):
                            ``make_rollout_func(scripts=smoke_player)``
    scripted_tool_generate  the tool door's: a ``model.generate`` whose scripted rows call the tool
    scripted_bandit_generate  the bandit door's: a ``model.generate`` whose scripted rows write the canonical solution
                            and the test fitter's program (which follows a perturbed context's feedback)
    smoke_line              what a smoke run prints about who played
    bandit_smoke_line       what the bandit program's smoke run prints about who played
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..policies.base import fenced
from ..tasks import Task
from .grpo import ScriptedPlayer

__all__ = ["SMOKE_SCRIPTED", "smoke_programs", "reasoning_reply", "smoke_player", "scripted_tool_generate",
           "scripted_bandit_generate", "smoke_line", "bandit_smoke_line"]

#: The places of each GRPO group that scripted players take: 0, a reasoning reply whose answer is right; 1, a wrong
#: program. The smoke runs' groups are larger, so the model plays the rest.
SMOKE_SCRIPTED = 2

#: What the scripted tool calls say before calling: how a follow-up turn knows a scripted row.
_SUBMITTING = "Submitting the program."


def smoke_programs(task: Task) -> tuple[str, str]:
    """``(right, wrong)``: the task's canonical solution, and its function returning None (a wrong program on every
    task of HumanEval and BigCodeBench).

    >>> from convcodeworld_gym.tasks import load_tasks
    >>> right, wrong = smoke_programs(load_tasks("humaneval")["HumanEval/2"])
    >>> wrong.splitlines()[-1]
    '    return None'
    """
    return task.ground_truth, task.code_prompt.rstrip("\n") + "\n    return None\n"


def reasoning_reply(draft: str, answer: str) -> str:
    """A reasoning model's reply (Qwen3, DeepSeek-R1): a ``<think>`` thought that holds ``draft`` in a fenced block,
    then ``answer`` in one.

    >>> print(reasoning_reply("x = 0", "x = 1"))
    <think>
    A first draft:
    ```python
    x = 0
    ```
    No, that is not what the task asks. Let me write it again.
    </think>
    <BLANKLINE>
    ```python
    x = 1
    ```
    """
    return (f"<think>\nA first draft:\n{fenced(draft)}\nNo, that is not what the task asks. Let me write it again.\n"
            f"</think>\n\n{fenced(answer)}")


def smoke_player(task: Task, place: int) -> ScriptedPlayer | None:
    """The scripted player of ``place`` in ``task``'s group (see the module): 0, a reasoning reply with a wrong
    draft in its thought and the canonical solution as its answer; 1, the wrong program, every turn; None for the
    other places (the model plays them).

    >>> from convcodeworld_gym.tasks import load_tasks
    >>> task = load_tasks("humaneval")["HumanEval/2"]
    >>> smoke_player(task, 0)({}).startswith("<think>"), smoke_player(task, 1)({}).startswith("```python"), smoke_player(task, 2)
    (True, True, None)
    """
    right, wrong = smoke_programs(task)
    if place == 0:
        reply = reasoning_reply(wrong, right)
    elif place == 1:
        reply = fenced(wrong)
    else:
        return None
    return lambda observation: reply


def _tool_call(code: str) -> str:
    """One ``submit_program`` call in the Qwen3 chat format."""
    return f"<tool_call>\n{json.dumps({'name': 'submit_program', 'arguments': {'code': code}})}\n</tool_call>"


def _tool_reply(task: Task, place: int) -> str | None:
    """The completion of ``place`` in ``task``'s group in the tool door's smoke run (ending the turn), or None."""
    right, wrong = smoke_programs(task)
    if place == 0:  # a thought whose draft calls the tool with the wrong program, then the right call
        return (f"<think>\nA first draft:\n{_tool_call(wrong)}\nNo, that is not what the task asks.\n</think>\n\n"
                f"{_SUBMITTING}\n{_tool_call(right)}<|im_end|>")
    if place == 1:
        return f"{_SUBMITTING}\n{_tool_call(wrong)}<|im_end|>"
    return None


def scripted_tool_generate(model: Any, tokenizer: Any, tasks: Sequence[Task]) -> Callable[..., Any]:
    """A ``model.generate`` for the ``environment_factory`` door's smoke run (assign it to ``model.generate``): in each
    call (TRL's, on a left-padded batch), a first turn of ``tasks``' places 0 and 1 of each group (its rows in batch
    order) gets the scripted tool-calling completion (:func:`smoke_player`'s programs, as ``submit_program`` calls in
    the Qwen3 format of :func:`~convcodeworld_gym.testing.tiny_model.tiny_tool_model`), a turn after a scripted call
    ends with ``Done.``, and every other row is the model's own generation (the original ``generate``, on those rows
    alone). Returns the prompts and completions, padded, as ``generate`` does."""
    by_prompt = {task.prompt.strip(): task for task in tasks}

    def task_of(prompt: str) -> Task | None:
        return next((task for text, task in by_prompt.items() if text in prompt), None)

    def scripted_of(prompts: list[str]) -> list[str | None]:
        places: dict[str, int] = {}
        scripted: list[str | None] = []
        for prompt in prompts:
            task = task_of(prompt)
            if "<tool_response>" in prompt:  # a later turn: a scripted row's ends, a model's goes on
                scripted.append("Done.<|im_end|>" if _SUBMITTING in prompt else None)
            elif task is None:
                scripted.append(None)
            else:
                place = places[task.task_id] = places.get(task.task_id, -1) + 1
                scripted.append(_tool_reply(task, place))
        return scripted

    return _padded_generate(model, tokenizer, scripted_of)


def _padded_generate(model: Any, tokenizer: Any, scripted_of: Callable[[list[str]], list[str | None]]) -> Callable[..., Any]:
    """A ``model.generate`` whose rows ``scripted_of(prompts)`` answers get that completion (encoded), the others the
    model's own generation (the original ``generate``, on those rows alone); prompts and completions padded, as
    ``generate`` returns them."""
    original = model.generate

    def generate(input_ids: Any = None, attention_mask: Any = None, **kwargs: Any) -> Any:
        import torch

        scripted = scripted_of(tokenizer.batch_decode(input_ids, skip_special_tokens=False))
        width = input_ids.shape[1]
        completions: list[list[int]] = [tokenizer.encode(text, add_special_tokens=False) if text is not None else []
                                        for text in scripted]
        own = [row for row, text in enumerate(scripted) if text is None]
        if own:
            mask = attention_mask[own] if attention_mask is not None else None
            generated = original(input_ids=input_ids[own], attention_mask=mask, **kwargs)
            for row, sequence in zip(own, generated[:, width:].tolist()):
                completions[row] = sequence
        longest = max(len(ids) for ids in completions)
        padded = [ids + [tokenizer.pad_token_id] * (longest - len(ids)) for ids in completions]
        return torch.cat([input_ids, torch.tensor(padded, dtype=input_ids.dtype, device=input_ids.device)], dim=-1)

    return generate


def scripted_bandit_generate(model: Any, tokenizer: Any, tasks: Sequence[Task], end: str = "<|im_end|>") -> Callable[..., Any]:
    """A ``model.generate`` for the bandit program's smoke run (assign it to ``model.generate``): in each call (TRL's,
    on a left-padded batch of contexts, each repeated once per place of its group), place 0 of each context writes the
    task's canonical solution, place 1 what the test fitter writes on the context's feedback
    (:class:`~convcodeworld_gym.testing.test_fitter.TestFitterPolicy`: the expected values the feedback shows,
    hard-coded: on a perturbed context it follows the swapped expectations, and fails the true tests), each ending
    with ``end``; the other places are the model's own."""
    from ..testing.test_fitter import TestFitterPolicy

    by_prompt = {task.prompt.strip(): task for task in tasks}

    def scripted_of(prompts: list[str]) -> list[str | None]:
        places: dict[str, int] = {}
        out: list[str | None] = []
        for prompt in prompts:
            task = next((t for text, t in by_prompt.items() if text in prompt), None)
            place = places[prompt] = places.get(prompt, -1) + 1
            if task is None or place > 1:
                out.append(None)
            elif place == 0:
                out.append(f"{fenced(task.ground_truth)}{end}")
            else:
                fitted = TestFitterPolicy().start(task, feedback="", seed=0).act({"execution_feedback": prompt}).text
                out.append(f"{fitted}{end}")
        return out

    return _padded_generate(model, tokenizer, scripted_of)


def bandit_smoke_line(group: int) -> str:
    """What the bandit program's smoke run prints about who played its groups of ``group`` generations.

    >>> bandit_smoke_line(4).split(": ")[1]
    "in each group of 4, scripted players took 2 places beside the tiny random model's 2"
    """
    return (f"smoke run: in each group of {group}, scripted players took {SMOKE_SCRIPTED} places beside the tiny random "
            f"model's {group - SMOKE_SCRIPTED}: the canonical solution (reward 1.0) and the test fitter, which hard-codes "
            "the expected values the context's feedback shows (on a perturbed context it follows the swapped ones: "
            "reward 0.0, counted in the following rate); the nonzero reward, loss, grad_norm and following rate come "
            "from them (docs/training.md)")


def smoke_line(group: int) -> str:
    """What a smoke run prints about who played its groups of ``group`` generations.

    >>> print(smoke_line(4))  # doctest: +NORMALIZE_WHITESPACE
    smoke run: in each group of 4, scripted players took 2 places beside the tiny random model's 2: a reasoning reply
    (a wrong draft in its thought, the canonical solution as its answer: reward 1.0) and a wrong program (0.0); the
    nonzero reward, loss and grad_norm come from them (docs/training.md)
    """
    return (f"smoke run: in each group of {group}, scripted players took {SMOKE_SCRIPTED} places beside the tiny "
            f"random model's {group - SMOKE_SCRIPTED}: a reasoning reply (a wrong draft in its thought, the canonical "
            "solution as its answer: reward 1.0) and a wrong program (0.0); the nonzero reward, loss and grad_norm "
            "come from them (docs/training.md)")
