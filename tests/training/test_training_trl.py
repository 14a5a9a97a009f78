"""The TRL multi-turn GRPO program: a smoke run on CPU with a tiny random model (no download)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl", reason="the TRL test needs the 'train' extra: pip install -e '.[train]'")
pytestmark = pytest.mark.train

_PATH = Path(__file__).resolve().parents[2] / "training" / "grpo_trl.py"


def _load():
    spec = importlib.util.spec_from_file_location("grpo_trl", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_smoke_run_masks_feedback_tokens(tmp_path):
    grpo = _load()
    args = grpo.smoke_overrides(grpo.build_parser().parse_args(["--output-dir", str(tmp_path)]))
    rollouts = []
    trainer = grpo.build_trainer(args, on_rollout=rollouts.append)
    seen = []
    original = trainer._compute_loss

    def capture(model, inputs):
        seen.append({k: inputs[k].detach().clone() for k in ("completion_ids", "completion_mask", "tool_mask")})
        return original(model, inputs)

    trainer._compute_loss = capture
    trainer.train()

    assert trainer.state.global_step >= 2
    multi_turn = [r for r in rollouts if r.turns >= 2]
    assert multi_turn, "no rollout reached a second turn"
    tokenizer = trainer.processing_class
    for r in multi_turn:
        feedback_ids = [t for t, m in zip(r.completion_ids, r.env_mask) if m == 0]
        assert "Compilation feedback" in tokenizer.decode(feedback_ids)
        assert all(lp == 0.0 for lp, m in zip(r.logprobs, r.env_mask) if m == 0)
        assert any(lp != 0.0 for lp, m in zip(r.logprobs, r.env_mask) if m == 1)

    # What TRL trained on: the loss mask (completion_mask * tool_mask) is zero exactly on feedback tokens.
    by_ids = {tuple(r.completion_ids): r for r in rollouts}
    checked = 0
    for batch in seen:
        for ids, cmask, tmask in zip(batch["completion_ids"], batch["completion_mask"], batch["tool_mask"]):
            length = int(cmask.sum())
            row = by_ids.get(tuple(ids[:length].tolist()))
            if row is None:
                continue
            loss_mask = (cmask * tmask)[:length].tolist()
            assert loss_mask == row.env_mask
            checked += int(0 in row.env_mask)
    assert checked > 0, "no multi-turn sequence reached the loss"


class _Trainer:
    """What a rollout_func reads of TRL's trainer: the model and its tokenizer (no vLLM)."""

    use_vllm = False

    def __init__(self, model, tokenizer) -> None:
        self.model, self.processing_class = model, tokenizer


def test_a_batch_is_played_together_one_generation_per_turn(humaneval, executor):
    """4 episodes (2 tasks x 2 generations) of 3 programs: 3 calls of model.generate in all, each for every live
    episode (one per episode and turn, 12, before), and the token record is what was sampled."""
    import gymnasium as gym

    grpo = _load()
    model, tokenizer = grpo.tiny_random_model(0)
    calls: list[int] = []
    generate = model.generate

    def counting(inputs, **kwargs):
        calls.append(int(inputs.shape[0]))
        return generate(inputs, **kwargs)

    model.generate = counting
    tasks = humaneval.subset(limit=2)
    rollout = grpo.make_rollout_func(
        lambda: gym.make("ConvCodeWorld-CF-EF_full-v0", dataset=tasks, max_turns=2, executor=executor),
        tasks, turns=3, max_new_tokens=8)
    prompts = [t.prompt for t in tasks for _ in range(2)]
    out = rollout(prompts, _Trainer(model, tokenizer))
    assert calls == [4, 4, 4]  # a random model never passes: every episode lives 3 turns
    assert len(out["prompt_ids"]) == 4 and out["env_reward"] == [0.0] * 4
    codec = grpo.ConversationCodec(tokenizer)
    for prompt, ids, completion, logprobs, mask in zip(prompts, out["prompt_ids"], out["completion_ids"], out["logprobs"],
                                                       out["env_mask"]):
        assert ids == codec.prompt(prompt)[1]
        assert len(completion) == len(logprobs) == len(mask) and mask.count(1) <= 3 * 8
        feedback = tokenizer.decode([t for t, m in zip(completion, mask) if m == 0])
        assert feedback.count("Compilation feedback") == 2  # after turns 0 and 1, not after the last
        assert all(lp == 0.0 for lp, m in zip(logprobs, mask) if m == 0) and any(lp != 0.0 for lp, m in zip(logprobs, mask) if m)
    with pytest.raises(ValueError, match="max_turns=2"):
        grpo.make_rollout_func(lambda: gym.make("ConvCodeWorld-CF-v0", dataset=tasks, executor=executor), tasks, turns=3,
                               max_new_tokens=4)(prompts[:1], _Trainer(model, tokenizer))
