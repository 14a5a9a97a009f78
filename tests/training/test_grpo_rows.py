"""The TRL programs' shared flags (convcodeworld_gym.training.trl_config) and how the ``rollout_func`` door
(convcodeworld_gym.training.grpo) tells a prompt's task: by its dataset row, whatever the prompt's template. No TRL or
torch needed."""

from __future__ import annotations


import pytest

from convcodeworld_gym.training.grpo import ConversationCodec, grpo_rows, make_rollout_func
from convcodeworld_gym.training.trl_config import grpo_settings



@pytest.mark.parametrize("name", ["grpo_trl", "grpo_trl_tools"])
def test_both_trl_programs_take_the_vllm_and_sampling_flags_into_grpo_config(name, training_program):
    """grpo_trl.py had no --use-vllm (docs/training.md describes its vLLM path); both programs' flags go to the same
    GRPOConfig fields, temperature included."""
    args = training_program(name).build_parser().parse_args(["--use-vllm", "--vllm-mode", "server", "--temperature", "0.5"])
    settings = grpo_settings(args)
    assert (settings["use_vllm"], settings["vllm_mode"], settings["temperature"]) == (True, "server", 0.5)


def test_a_prompt_plays_its_rows_task_and_an_unknown_one_is_named(humaneval):
    tasks = [humaneval["HumanEval/0"], humaneval["HumanEval/1"]]
    rows = grpo_rows(tasks, lambda t: f"## {t.entry_point}\n{t.prompt}")
    rollout = make_rollout_func(lambda: None, rows, turns=2, max_new_tokens=4)  # type: ignore[arg-type, return-value]
    with pytest.raises(KeyError, match="not the prompt of any row"):
        rollout([tasks[0].prompt], None)  # the instruction alone is no row's prompt here


def test_rows_that_cannot_tell_their_tasks_apart_are_refused(humaneval):
    tasks = [humaneval["HumanEval/0"], humaneval["HumanEval/1"]]
    with pytest.raises(ValueError, match="same prompt but different tasks"):
        make_rollout_func(lambda: None, grpo_rows(tasks, lambda t: "Write the program."), turns=1,  # type: ignore
                          max_new_tokens=4)
    with pytest.raises(TypeError, match="grpo_rows"):
        make_rollout_func(lambda: None, tasks, turns=1, max_new_tokens=4)  # type: ignore[arg-type]


def test_a_chat_prompt_needs_a_chat_template():
    class PlainTokenizer:
        chat_template = None

    with pytest.raises(ValueError, match="chat template"):
        ConversationCodec(PlainTokenizer()).prompt([{"role": "user", "content": "x"}])
