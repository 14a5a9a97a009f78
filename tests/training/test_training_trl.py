"""TRL's ``rollout_func`` door (convcodeworld_gym.training.grpo) and its program training/grpo_trl.py: smoke runs on
CPU with a tiny random model (no download)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from convcodeworld_gym.training.grpo import ConversationCodec, grpo_rows, make_rollout_func

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
    assert any(not r.scripted for r in multi_turn) and any(r.scripted for r in multi_turn)
    tokenizer = trainer.processing_class
    for r in multi_turn:
        feedback_ids = [t for t, m in zip(r.completion_ids, r.env_mask) if m == 0]
        assert "Compilation feedback" in tokenizer.decode(feedback_ids)
        assert all(lp == 0.0 for lp, m in zip(r.logprobs, r.env_mask) if m == 0)
        # the model's tokens carry their sampling logprobs; a scripted player's were not sampled (0.0)
        assert any(lp != 0.0 for lp, m in zip(r.logprobs, r.env_mask) if m == 1) != r.scripted

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
    """What a rollout_func reads of TRL's trainer: the model, its tokenizer, GRPOConfig's sampling settings (no vLLM)."""

    use_vllm = False
    temperature, top_p, top_k, min_p, repetition_penalty = 1.0, 1.0, 0, None, 1.0

    def __init__(self, model, tokenizer) -> None:
        self.model, self.processing_class = model, tokenizer


def _counting_tiny_model():
    """The tiny model and its tokenizer, with ``model.generate`` counting the batch size of each call in ``calls``."""
    from convcodeworld_gym.testing.tiny_model import tiny_model

    model, tokenizer = tiny_model(0)
    calls: list[int] = []
    generate = model.generate

    def counting(inputs, **kwargs):
        calls.append(int(inputs.shape[0]))
        return generate(inputs, **kwargs)

    model.generate = counting
    return model, tokenizer, calls


def test_a_batch_is_played_together_one_generation_per_turn(humaneval, executor):
    """4 episodes (2 tasks x 2 generations) of 3 programs: 3 calls of model.generate in all, each for every live
    episode (one per episode and turn, 12, before), and the token record is what was sampled."""
    import gymnasium as gym

    model, tokenizer, calls = _counting_tiny_model()
    tasks = humaneval.subset(limit=2)
    rows = grpo_rows(tasks)
    rollout = make_rollout_func(
        lambda: gym.make("ConvCodeWorld-CF-EF_full-v0", dataset=tasks, max_turns=2, executor=executor),
        rows, turns=3, max_new_tokens=8)
    prompts = [t.prompt for t in tasks for _ in range(2)]
    out = rollout(prompts, _Trainer(model, tokenizer))
    assert calls == [4, 4, 4]  # a random model never passes: every episode lives 3 turns
    assert len(out["prompt_ids"]) == 4 and out["env_reward"] == [0.0] * 4
    codec = ConversationCodec(tokenizer)
    for prompt, ids, completion, logprobs, mask in zip(prompts, out["prompt_ids"], out["completion_ids"], out["logprobs"],
                                                       out["env_mask"]):
        assert ids == codec.prompt(prompt)[1]
        assert len(completion) == len(logprobs) == len(mask) and mask.count(1) <= 3 * 8
        feedback = tokenizer.decode([t for t, m in zip(completion, mask) if m == 0])
        assert feedback.count("Compilation feedback") == 2  # after turns 0 and 1, not after the last
        assert all(lp == 0.0 for lp, m in zip(logprobs, mask) if m == 0) and any(lp != 0.0 for lp, m in zip(logprobs, mask) if m)
    with pytest.raises(ValueError, match="max_turns=2"):
        make_rollout_func(lambda: gym.make("ConvCodeWorld-CF-v0", dataset=tasks, executor=executor), rows, turns=3,
                          max_new_tokens=4)(prompts[:1], _Trainer(model, tokenizer))


def _recording_generate(model) -> list[dict]:
    """Wrap ``model.generate`` (the real one runs) to record the sampling settings of each call."""
    seen: list[dict] = []
    generate = model.generate

    def recording(inputs, **kwargs):
        seen.append({k: kwargs.get(k) for k in ("temperature", "top_p", "top_k", "do_sample")})
        return generate(inputs, **kwargs)

    model.generate = recording
    return seen


def test_the_temperature_flag_is_grpo_configs_and_the_rollouts(tmp_path):
    """``--temperature 0.5``: TRL computes the loss's logprobs at the temperature of its GRPOConfig, so that is where
    the flag goes (it stayed 1.0, while the rollout sampled at 0.5); the rollout samples at the trainer's."""
    grpo = _load()
    args = grpo.smoke_overrides(grpo.build_parser().parse_args(["--output-dir", str(tmp_path), "--temperature", "0.5"]))
    trainer = grpo.build_trainer(args)
    assert trainer.args.temperature == 0.5 and trainer.temperature == 0.5
    # A model call's length (what TRL's vLLM generation takes from max_completion_length) is --max-new-tokens; the
    # feedback's character budget was added to it as if it were tokens.
    assert trainer.args.max_completion_length == args.max_new_tokens == 16
    seen = _recording_generate(trainer.model)
    prompts = [trainer.train_dataset[0]["prompt"]] * 4  # a smoke group: the model plays places 2 and 3
    out = trainer.rollout_func(prompts, trainer)
    assert len(out["completion_ids"]) == 4 and seen
    assert {call["temperature"] for call in seen} == {0.5} and all(call["do_sample"] for call in seen)


def test_a_templated_chat_dataset_trains_on_the_rows_tasks(tmp_path, humaneval, executor):
    """Rows whose prompts are chat messages of a template of one's own (a system message, a preamble): TRL hands the
    rollout only their prompts (copies out of the dataset), and each plays its row's task (the old rollout_func
    looked the task up by its instruction text and raised KeyError); the model's first turn is the row's prompt."""
    import argparse

    import datasets
    import gymnasium as gym
    from trl import GRPOTrainer

    from convcodeworld_gym.testing.tiny_model import tiny_tool_model
    from convcodeworld_gym.training.grpo import env_reward
    from convcodeworld_gym.training.trl_config import add_trl_arguments, grpo_config

    tasks = [humaneval["HumanEval/2"], humaneval["HumanEval/0"]]

    def template(task):
        return [{"role": "system", "content": "Answer with one Python program."},
                {"role": "user", "content": f"Solve this ({task.entry_point}):\n{task.prompt}"}]

    rows = grpo_rows(tasks, template)
    model, tokenizer = tiny_tool_model(0)
    seen = _recording_generate(model)
    played = []
    rollout = make_rollout_func(
        lambda: gym.make("ConvCodeWorld-CF-EF_full-v0", dataset=humaneval, max_turns=1, executor=executor),
        rows, turns=2, max_new_tokens=8, on_rollout=played.append)
    flags = add_trl_arguments(argparse.ArgumentParser()).parse_args(
        ["--cpu", "--temperature", "0.5", "--num-generations", "2", "--max-steps", "1", "--learning-rate", "1e-3"])
    trainer = GRPOTrainer(model=model, reward_funcs=env_reward, processing_class=tokenizer,
                          args=grpo_config(flags, output_dir=str(tmp_path), per_device_train_batch_size=4,
                                           max_completion_length=400, beta=0.0),
                          train_dataset=datasets.Dataset.from_list(rows), rollout_func=rollout)
    trainer.train()
    assert trainer.state.global_step == 1
    assert sorted(r.task_id for r in played) == ["HumanEval/0", "HumanEval/0", "HumanEval/2", "HumanEval/2"]
    codec = ConversationCodec(tokenizer)
    for episode in played:
        row = next(r for r in rows if r["task_id"] == episode.task_id)
        assert episode.prompt_ids == codec.prompt(row["prompt"])[1]  # the row's own prompt, system message included
    assert {call["temperature"] for call in seen} == {0.5}


def test_scripted_players_play_beside_the_model_and_their_reasoning_reply_is_judged_on_its_answer(humaneval, executor):
    """The smoke run's players (convcodeworld_gym.training.smoke) in one group of 4: place 0, a reasoning reply (a wrong
    draft in its thought, the canonical solution as its answer), scores 1.0; place 1, a wrong program, 0.0 on both
    turns; the model plays places 2 and 3, batched together (calls of 2 rows). Their tokens are the replies' encoding,
    trained on (mask 1). Read as the reference read replies (``reasoning="keep"``), the draft is judged: 0.0."""
    import gymnasium as gym

    from convcodeworld_gym.training.smoke import reasoning_reply, smoke_player, smoke_programs

    model, tokenizer, calls = _counting_tiny_model()
    task = humaneval["HumanEval/2"]
    rows = grpo_rows([task])
    by_mode = {}
    for reasoning, rewards in (("strip", [1.0, 0.0, 0.0, 0.0]), ("keep", [0.0, 0.0, 0.0, 0.0])):
        played = by_mode[reasoning] = []
        rollout = make_rollout_func(
            lambda: gym.make("ConvCodeWorld-CF-EF_full-v0", dataset=humaneval, max_turns=1, executor=executor,
                             reasoning=reasoning),
            rows, turns=2, max_new_tokens=8, on_rollout=played.append, scripts=smoke_player)
        calls.clear()
        out = rollout([task.prompt] * 4, _Trainer(model, tokenizer))
        assert out["env_reward"] == rewards
        assert [r.scripted for r in played] == [True, True, False, False] and calls == [2, 2]
    right, wrong = smoke_programs(task)
    first, second = by_mode["strip"][:2]
    assert tokenizer.decode([t for t, m in zip(first.completion_ids, first.env_mask) if m == 1],
                            skip_special_tokens=True) == reasoning_reply(wrong, right)
    assert second.turns == 2 and set(second.logprobs) == {0.0} and 1 in second.env_mask


@pytest.mark.slow
def test_the_smoke_run_prints_a_nonzero_reward_loss_and_grad_norm(tmp_path, capsys):
    """``training/grpo_trl.py --smoke``: the tiny random model alone printed reward 0, loss 0 and grad_norm 0 on every
    step; beside the scripted players each is nonzero on every step, for the reason it prints (docs/training.md).
    With ``--reasoning keep`` the reasoning reply's wrong draft is judged instead of its answer: no reward in any
    group, and loss and grad_norm are 0 again, so the signal is the players' right answer."""
    grpo = _load()
    assert grpo.main(["--smoke", "--output-dir", str(tmp_path / "strip")]) == 0
    printed = capsys.readouterr().out
    per_step = {line.split(":")[0]: [float(v) for v in line.split(":", 1)[1].split(",")]
                for line in printed.splitlines() if line.endswith(tuple("0123456789")) and "per step:" in line}
    assert per_step["mean reward per step"] == [0.25, 0.25]  # 1 of each group of 4
    assert all(v != 0.0 for v in per_step["loss per step"]) and all(v > 0.0 for v in per_step["grad_norm per step"])
    assert "smoke run: in each group of 4, scripted players took 2 places" in printed
    assert grpo.main(["--smoke", "--reasoning", "keep", "--output-dir", str(tmp_path / "keep")]) == 0
    printed = capsys.readouterr().out
    assert "mean reward per step: 0.000, 0.000" in printed and "grad_norm per step: 0, 0" in printed
