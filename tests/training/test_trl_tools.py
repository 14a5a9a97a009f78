"""TRL's ``environment_factory`` door (convcodeworld_gym.training.tools): its contract, and two GRPO steps in which
a tiny random model, its ``generate`` scripted as TRL's own tests do, calls the tool and the env's reward reaches the
trainer's logs."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import pickle

import pytest

from convcodeworld_gym.tasks import TaskSet, load_tasks
from convcodeworld_gym.testing import FakeExecutor
from convcodeworld_gym.training.tools import (
    SUBMIT_PROGRAM_TOOL,
    TOOL_SYSTEM_PROMPT,
    ConvCodeWorldTools,
    NoSubmissionWarning,
    report_canary,
    submit_code_blocks,
    tool_rows,
)


def _tools_trl_sees(env: object) -> list[str]:
    """The methods TRL turns into tools: public functions of the class but reset and get_reward (its own rule)."""
    return [name for name, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
            if name not in ("reset", "get_reward") and not name.startswith("_")]


def test_constructed_with_no_arguments_loads_nothing_and_has_exactly_one_tool():
    env = ConvCodeWorldTools()  # what TRL calls; no task set is loaded, no sandbox started
    assert env._env is None  # noqa: SLF001
    assert _tools_trl_sees(env) == ["submit_program"]
    assert env.submit_program("print(1)").startswith("The episode is over")  # nothing judged before reset


def test_the_tool_schema_is_what_transformers_renders():
    get_json_schema = pytest.importorskip("transformers.utils").get_json_schema
    schema = get_json_schema(ConvCodeWorldTools().submit_program)["function"]
    assert schema["name"] == "submit_program"
    assert schema["parameters"]["required"] == ["code"]
    assert schema["parameters"]["properties"]["code"]["type"] == "string"
    assert "tests" in schema["description"]
    # The schema the verifiers door's tool variant sends is this one.
    assert {**SUBMIT_PROGRAM_TOOL, "function": {**schema, "return": None}} == {
        **SUBMIT_PROGRAM_TOOL, "function": {**SUBMIT_PROGRAM_TOOL["function"], "return": None}}


@pytest.mark.parametrize("env_id", ["ConvCodeWorld-CF-EF_full-v0", "ConvCodeWorld-CF-v0"])
def test_a_wrong_program_then_the_canonical_one_score_zero_then_one(env_id, humaneval):
    factory = functools.partial(ConvCodeWorldTools, env_id, dataset=humaneval)
    env = pickle.loads(pickle.dumps(factory))()  # the factory pickles (AsyncGRPOTrainer needs it)
    task = humaneval["HumanEval/0"]
    row = tool_rows([task])[0]
    assert row["prompt"] == [{"role": "system", "content": TOOL_SYSTEM_PROMPT},
                             {"role": "user", "content": task.prompt.strip()}]
    assert env.reset(**row) is None
    wrong = env.submit_program(task.code_prompt + "    return False\n")
    assert env.get_reward() == 0.0 and "Not all tests pass" in wrong
    assert ("TEST_1" in wrong) == (env_id == "ConvCodeWorld-CF-EF_full-v0")  # the feedback the id shows, no more
    assert env.submit_program(task.ground_truth).startswith("All tests pass") and env.get_reward() == 1.0
    assert env.submit_program(task.ground_truth).startswith("The episode is over")  # nothing after the end
    env.reset(**row)  # TRL reuses instances: a reset starts afresh
    with pytest.warns(NoSubmissionWarning):  # nothing submitted since
        assert env.get_reward() == 0.0


def test_the_submissions_end_at_max_turns(humaneval):
    env = ConvCodeWorldTools("ConvCodeWorld-CF-EF_full-v0", dataset=humaneval, max_turns=1)
    env.reset(task_id="HumanEval/2")
    assert "(1 more allowed)" in env.submit_program("def truncate_number(x):\n    return -1\n")
    assert "last submission" in env.submit_program("def truncate_number(x):\n    return -1\n")
    assert env.get_reward() == 0.0


def test_a_run_lost_to_the_infrastructure_has_no_reward(humaneval):
    lost = FakeExecutor(lost=lambda task, program: "the worker was killed by signal SIGKILL")
    env = ConvCodeWorldTools("ConvCodeWorld-CF-EF_full-v0", dataset=humaneval, executor=lost)
    env.reset(task_id="HumanEval/0")
    text = env.submit_program(humaneval["HumanEval/0"].ground_truth)
    assert "no verdict" in text and env.get_reward() is None  # TRL: unscorable, never a 0


def test_a_row_without_a_task_id_says_how_to_build_rows():
    with pytest.raises(ValueError, match="tool_rows"):
        ConvCodeWorldTools().reset(prompt=[{"role": "user", "content": "x"}])
    with pytest.raises(ValueError, match="is not a ConvCodeWorld id"):
        ConvCodeWorldTools("CartPole-v1")


def test_rows_of_another_task_set_fail_at_once_naming_both_sets_and_the_fix(humaneval):
    row = tool_rows(humaneval.subset(limit=1))[0]
    assert row["task_set"] == "humaneval"
    env = ConvCodeWorldTools()  # plays BigCodeBench, the default
    with pytest.raises(ValueError, match=r"the dataset row's task 'HumanEval/0' comes from task set 'humaneval', but these "
                                         r"ConvCodeWorldTools play task set 'bigcodebench' \(the default: no dataset= given\): "
                                         r"build the tools on the rows' task set, environment_factory=functools.partial\("
                                         r"ConvCodeWorldTools, 'ConvCodeWorld-CF-EF_full-v0', dataset=tasks\) with "
                                         r"train_dataset=tool_rows\(tasks\)$"):
        env.reset(**row)
    assert env._env is None  # noqa: SLF001 - failed before BigCodeBench was loaded or a sandbox started

    mine = TaskSet((dataclasses.replace(humaneval["HumanEval/0"], task_id="mine/0"),), name="mine")
    tools = ConvCodeWorldTools(dataset=humaneval.subset(limit=3), executor=FakeExecutor())
    with pytest.raises(ValueError, match=r"task 'mine/0' comes from task set 'mine', but these ConvCodeWorldTools play "
                                         r"task set 'humaneval/limit3' \(3 tasks\)"):
        tools.reset(**tool_rows(mine)[0])
    with pytest.raises(ValueError, match=r"task 'mine/0' comes from another task set"):  # rows of a plain list of tasks
        tools.reset(task_id="mine/0")
    assert tools.reset(**tool_rows(humaneval.subset(limit=3))[2]) is None  # rows of the set the tools play


def test_a_bigcodebench_task_through_the_tool(bigcodebench):
    task = bigcodebench["BigCodeBench/3"]
    env = ConvCodeWorldTools("ConvCodeWorld-CF-EF_partial-v0", dataset=bigcodebench)
    env.reset(**tool_rows([task])[0])
    assert "Not all tests pass" in env.submit_program(task.code_prompt + "    return {}\n")
    assert env.submit_program(task.ground_truth).startswith("All tests pass") and env.get_reward() == 1.0


def test_each_episodes_result_is_public_and_no_tool(humaneval):
    """The pass fraction, the programs judged and the last info, for reward functions and logs: a property, which TRL
    does not make a tool (it had only get_reward)."""
    env = ConvCodeWorldTools("ConvCodeWorld-CF-EF_full-v0", dataset=humaneval)
    assert _tools_trl_sees(env) == ["submit_program"]
    task = humaneval["HumanEval/0"]
    env.reset(**tool_rows([task])[0])
    assert (env.result.task_id, env.result.turns, env.result.pass_fraction, dict(env.result.info)) == (
        "HumanEval/0", 0, 0.0, {})
    env.submit_program(task.code_prompt + "    return False\n")
    wrong = env.result
    assert wrong.turns == 1 and 0.0 < wrong.pass_fraction < 1.0 and wrong.info["passed"] is False
    outcomes = [t["outcome"] for t in wrong.rows[0].tests]
    assert outcomes.count("passed") == round(wrong.pass_fraction * len(outcomes))
    env.submit_program(task.ground_truth)
    right = env.result
    assert (right.turns, right.pass_fraction, right.reward, right.info["passed"]) == (2, 1.0, 1.0, True)
    assert wrong.turns == 1  # a result is a snapshot
    env.reset(**tool_rows([task])[0])
    assert env.result.turns == 0 and env.result.reward == 0.0


def test_a_lost_run_has_no_pass_fraction(humaneval):
    lost = FakeExecutor(lost=lambda task, program: "the worker was killed by signal SIGKILL")
    env = ConvCodeWorldTools("ConvCodeWorld-CF-EF_full-v0", dataset=humaneval, executor=lost)
    env.reset(task_id="HumanEval/0")
    env.submit_program(humaneval["HumanEval/0"].ground_truth)
    assert env.result.reward is None and env.result.pass_fraction is None and env.result.info["infra_error"]


def test_no_submission_is_said_once_per_process(humaneval):
    """Python's default filter shows the warning once, however many rollouts (from one call site, as TRL's) had none."""
    import warnings

    envs = [ConvCodeWorldTools(dataset=humaneval, executor=FakeExecutor()) for _ in range(3)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for env in envs:
            env.reset(task_id="HumanEval/0")
            assert env.get_reward() == 0.0
    assert [w.category for w in caught] == [NoSubmissionWarning]
    assert "submit_code_blocks" in str(caught[0].message)


def test_a_code_block_instead_of_a_tool_call_warns_and_counts_only_when_switched_on(humaneval):
    task = humaneval["HumanEval/0"]
    reply = [{"role": "assistant", "content": f"Here it is:\n```python\n{task.ground_truth}\n```"}]
    env = ConvCodeWorldTools("ConvCodeWorld-CF-EF_full-v0", dataset=humaneval)
    env.reset(**tool_rows([task])[0])
    with pytest.warns(NoSubmissionWarning, match="submit_code_blocks"):
        assert env.get_reward() == 0.0  # the block was no submission
    assert submit_code_blocks([reply], environments=[env]) == [None]
    assert env.get_reward() == 1.0 and env.result.turns == 1
    assert submit_code_blocks([reply], environments=[env]) == [None]  # the episode is over: nothing more is judged
    assert env.result.turns == 1
    env.reset(**tool_rows([task])[0])
    called = [{"role": "assistant", "content": "```python\nx = 1\n```", "tool_calls": [{"type": "function"}]}]
    submit_code_blocks([called, [{"role": "assistant", "content": "no code"}]], environments=[env, env])
    assert env.result.turns == 0  # a reply that called a tool, or holds no block, is not submitted
    with pytest.raises(ValueError, match="environment_factory"):
        submit_code_blocks([reply])


@pytest.mark.train
def test_two_grpo_steps_call_the_tool_and_log_the_envs_reward(tmp_path, humaneval):
    """Each prompt's two generations call the tool: one with a wrong program, one with the canonical solution. The
    env scores them 0 and 1, so TRL's log of the env-owned reward reads 0.5 for each step."""
    pytest.importorskip("trl", reason="the TRL test needs the 'train' extra: pip install -e '.[train]'")
    import json
    from unittest.mock import patch

    import datasets
    import torch
    from trl import GRPOConfig, GRPOTrainer

    from convcodeworld_gym.testing.tiny_model import tiny_tool_model

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    tasks = [humaneval["HumanEval/0"], humaneval["HumanEval/2"]]
    model, tokenizer = tiny_tool_model()
    trainer = GRPOTrainer(
        model=model, processing_class=tokenizer,
        args=GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=2, num_generations=2, max_steps=2,
                        max_completion_length=3000, max_tool_calling_iterations=2, learning_rate=1e-3,
                        logging_steps=1, report_to="none", use_cpu=True, seed=0),
        train_dataset=datasets.Dataset.from_list(tool_rows(tasks)),
        environment_factory=functools.partial(ConvCodeWorldTools, dataset=humaneval),
    )
    assert trainer.reward_func_names == ["ConvCodeWorldTools"]
    calls = []

    def completion(text: str) -> list[int]:
        return tokenizer.encode(text, add_special_tokens=False)

    def scripted_generate(input_ids, **kwargs):
        prompts = [tokenizer.decode(row, skip_special_tokens=False) for row in input_ids]
        calls.append(len(prompts))
        rows = []
        for i, prompt in enumerate(prompts):
            if "<tool_response>" in prompt:  # the tool answered: end the turn
                rows.append(completion("Done.<|im_end|>"))
                continue
            task = next(t for t in tasks if t.prompt.strip()[:200] in prompt)
            program = task.ground_truth if i % 2 else task.code_prompt + "    return None\n"
            call = json.dumps({"name": "submit_program", "arguments": {"code": program}})
            rows.append(completion(f"<tool_call>\n{call}\n</tool_call><|im_end|>"))
        width = max(map(len, rows))
        padded = [row + [tokenizer.pad_token_id] * (width - len(row)) for row in rows]
        return torch.cat([input_ids, torch.tensor(padded, device=input_ids.device)], dim=-1)

    with patch.object(trainer.model, "generate", side_effect=scripted_generate):
        trainer.train()

    assert trainer.state.global_step == 2 and calls == [2, 2, 2, 2]  # per step: the tool calls, then the answers
    logged = [entry["rewards/ConvCodeWorldTools/mean"] for entry in trainer.state.log_history
              if "rewards/ConvCodeWorldTools/mean" in entry]
    assert logged == [0.5, 0.5], trainer.state.log_history


@pytest.mark.slow
@pytest.mark.train
def test_the_example_programs_smoke_run(tmp_path, capsys):
    """training/grpo_trl_tools.py --smoke: a tiny random model, HumanEval, 2 GRPO steps on CPU."""
    pytest.importorskip("trl", reason="the TRL test needs the 'train' extra: pip install -e '.[train]'")
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "training" / "grpo_trl_tools.py"
    spec = importlib.util.spec_from_file_location("grpo_trl_tools", path)
    program = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(program)  # type: ignore[union-attr]
    program.main(["--smoke", "--output-dir", str(tmp_path)])
    printed = capsys.readouterr().out
    # The tiny random model alone printed [0.0, 0.0] (it writes no tool call), loss 0 and grad_norm 0; beside the
    # scripted players (one right call of each group of 4) each is nonzero, for the reason the program prints.
    assert "2 steps; env reward per step: [0.25, 0.25]" in printed
    per_step = {line.split(":")[0]: [float(v) for v in line.split(":", 1)[1].split(",")]
                for line in printed.splitlines() if line.startswith(("loss per step:", "grad_norm per step:"))}
    assert all(v != 0.0 for v in per_step["loss per step"]) and all(v > 0.0 for v in per_step["grad_norm per step"])
    assert "smoke run: in each group of 4, scripted players took 2 places" in printed


@pytest.mark.slow
@pytest.mark.train
def test_a_tool_call_in_the_thought_is_never_made(tmp_path, humaneval):
    """The smoke run's scripted rows through TRL's own tool loop (its Qwen3 response parser): place 0 writes a thought
    whose draft calls submit_program with a wrong program, then calls it with the canonical solution; only the
    answer's call is made (one program judged, passed). Place 1's wrong call is judged once and fails; the model's own
    rows submit nothing. The env's reward per rollout reaches TRL as [1, 0, 0, 0]."""
    pytest.importorskip("trl", reason="the TRL test needs the 'train' extra: pip install -e '.[train]'")
    import datasets
    from trl import GRPOConfig, GRPOTrainer

    from convcodeworld_gym.testing.tiny_model import tiny_tool_model
    from convcodeworld_gym.training.smoke import scripted_tool_generate, smoke_programs

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    task = humaneval["HumanEval/2"]
    right, wrong = smoke_programs(task)
    model, tokenizer = tiny_tool_model()
    model.generate = scripted_tool_generate(model, tokenizer, [task])
    seen: list[list] = []

    def judged(environments, **_):
        seen.extend([[row.code for row in env.result.rows], env.result.reward] for env in environments)
        return [None] * len(environments)

    trainer = GRPOTrainer(
        model=model, processing_class=tokenizer, reward_funcs=[judged],
        args=GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=4, max_steps=1,
                        max_completion_length=3000, max_tool_calling_iterations=2, learning_rate=1e-3,
                        logging_steps=1, report_to="none", use_cpu=True, seed=0),
        train_dataset=datasets.Dataset.from_list(tool_rows([task])),
        environment_factory=functools.partial(ConvCodeWorldTools, dataset=humaneval, max_turns=1),
    )
    with pytest.warns(NoSubmissionWarning):  # the model's own rows
        trainer.train()
    assert seen[:2] == [[[right], 1.0], [[wrong], 0.0]], seen
    assert seen[2:] == [[[], 0.0], [[], 0.0]]
    assert trainer.state.log_history[0]["rewards/ConvCodeWorldTools/mean"] == 0.25


@pytest.mark.train
def test_code_block_replies_reach_the_envs_reward_through_submit_code_blocks(tmp_path, humaneval):
    """A model that answers with a fenced block, no tool call: with submit_code_blocks among the reward functions the
    blocks are judged (the canonical one scores 1, a wrong one 0: the env's reward logs 0.5), and a reward function of
    one's own reads each episode's pass fraction from TRL's ``environments``."""
    pytest.importorskip("trl", reason="the TRL test needs the 'train' extra: pip install -e '.[train]'")
    from unittest.mock import patch

    import datasets
    import torch
    from trl import GRPOConfig, GRPOTrainer

    from convcodeworld_gym.testing.tiny_model import tiny_tool_model

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    task = humaneval["HumanEval/0"]
    model, tokenizer = tiny_tool_model()
    fractions: list[float] = []

    def pass_fraction(environments, **_):
        fractions.extend(env.result.pass_fraction for env in environments)
        return [env.result.pass_fraction for env in environments]

    def block_reply(input_ids, **kwargs):
        rows = []
        for i in range(len(input_ids)):
            program = task.ground_truth if i % 2 else task.code_prompt + "    return False\n"
            rows.append(tokenizer.encode(f"```python\n{program}\n```<|im_end|>", add_special_tokens=False))
        width = max(map(len, rows))
        padded = [row + [tokenizer.pad_token_id] * (width - len(row)) for row in rows]
        return torch.cat([input_ids, torch.tensor(padded, device=input_ids.device)], dim=-1)

    def train(reward_funcs):
        trainer = GRPOTrainer(
            model=model, processing_class=tokenizer, reward_funcs=reward_funcs,
            args=GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=2, num_generations=2, max_steps=1,
                            max_completion_length=1500, learning_rate=1e-3, logging_steps=1, report_to="none",
                            use_cpu=True, seed=0),
            train_dataset=datasets.Dataset.from_list(tool_rows([task])),
            environment_factory=functools.partial(ConvCodeWorldTools, dataset=humaneval),
        )
        with patch.object(trainer.model, "generate", side_effect=block_reply):
            trainer.train()
        return trainer.state.log_history[0]

    with pytest.warns(NoSubmissionWarning):
        off = train([pass_fraction])
    assert off["rewards/ConvCodeWorldTools/mean"] == 0.0 and fractions == [0.0, 0.0]
    fractions.clear()
    on = train([submit_code_blocks, pass_fraction])
    assert on["rewards/ConvCodeWorldTools/mean"] == 0.5
    assert sorted(fractions)[1] == 1.0 and 0.0 < sorted(fractions)[0] < 1.0


def _fit_through_the_tool(env: ConvCodeWorldTools, task) -> None:
    """Play the scripted test fitter through the tool: it reads only the tool's answers (what a model is shown)."""
    from convcodeworld_gym.testing.test_fitter import TestFitterPolicy

    episode, answer = TestFitterPolicy().start(task, feedback="CF-EF_full", seed=0), ""
    while env.accepts_submission:
        answer = env.submit_program(episode.act({"execution_feedback": answer}).text)


@pytest.mark.parametrize("replace", [False, True])
def test_the_tools_play_canary_twins_and_report_canary_counts_a_fitted_pass_never_in_the_reward(replace, executor):
    """Rows of a set with twins (added, or each in its task's place) play the twins; a twin's reward is 0.0 whatever
    the program. The test fitter passes HumanEval/0's and HumanEval/2's twins by hard-coding what the tool's answers
    show, so report_canary logs a rate of 1.0 over them; the canonical solution passes no twin (rate 0.0)."""
    from convcodeworld_gym.tasks import is_canary, with_canaries
    from convcodeworld_gym.training.grpo import canary_pass_rate

    ids = ["HumanEval/0", "HumanEval/2"]
    tasks = with_canaries(load_tasks("humaneval", task_ids=ids), ids, replace=replace)
    rows = tool_rows(tasks)
    twin_ids = ["HumanEval/0/canary", "HumanEval/2/canary"]
    assert [r["task_id"] for r in rows] == (twin_ids if replace else ids + twin_ids)

    def play(fit: bool) -> list[ConvCodeWorldTools]:
        envs = []
        for row in rows:
            env = ConvCodeWorldTools("ConvCodeWorld-CF-EF_full-v0", dataset=tasks, executor=executor,
                                     feedback_style="rich", max_turns=2)
            env.reset(**row)
            task = tasks[row["task_id"]]
            if fit:
                _fit_through_the_tool(env, task)
            else:
                env.submit_program(task.ground_truth)
            envs.append(env)
        return envs

    fitted, honest = play(fit=True), play(fit=False)
    for env in fitted + honest:
        twin = is_canary(tasks[env.result.task_id])
        assert env.result.canary is twin
        assert env.get_reward() == (0.0 if twin else 1.0)  # a twin's pass is never a reward
    assert [env.result.canary_passed for env in fitted] == [None] * (len(rows) - 2) + [True, True]
    assert [env.result.canary_passed for env in honest] == [None] * (len(rows) - 2) + [False, False]
    assert all(env.result.turns == 2 for env in fitted if env.result.canary)  # the canonical program failed first

    for envs, rate in ((fitted, 1.0), (honest, 0.0)):
        logged: dict[str, float] = {}
        assert report_canary([None] * len(envs), environments=envs, log_metric=logged.__setitem__) == [None] * len(envs)
        assert logged == {"canary/pass_rate": rate, "canary/episodes": 2}
        assert canary_pass_rate(env.result.canary_passed for env in envs) == (rate, 2)  # the same helper env_reward uses
    logged = {}
    report_canary([None], environments=[fitted[0]] if not replace else [], log_metric=logged.__setitem__)
    assert logged == {}  # no twin in the batch: nothing logged
    with pytest.raises(ValueError, match="environment_factory"):
        report_canary([None])


def test_a_twins_episode_lost_to_the_infrastructure_has_no_canary_verdict(humaneval):
    from convcodeworld_gym.tasks import with_canaries

    tasks = with_canaries(humaneval.subset(task_ids=["HumanEval/0"]), ["HumanEval/0"], replace=True)
    lost = FakeExecutor(lost=lambda task, program: "the worker was killed by signal SIGKILL")
    env = ConvCodeWorldTools("ConvCodeWorld-CF-EF_full-v0", dataset=tasks, executor=lost)
    env.reset(**tool_rows(tasks)[0])
    assert env.result.canary and env.result.canary_passed is False  # reset, nothing submitted yet: no pass
    env.submit_program(tasks["HumanEval/0/canary"].ground_truth)
    assert env.get_reward() is None and env.result.canary_passed is None  # no verdict: left out of the rate


@pytest.mark.train
def test_a_grpo_step_on_a_twin_logs_the_canary_rate_beside_the_reward_never_in_it(tmp_path, executor):
    """One GRPO step on HumanEval/0's twin (in its task's place): one generation calls the tool with the test fitter's
    program (fitted to the twin's changed test: it passes it), the other with the canonical solution (fails it).
    The env's reward is 0.0 for both; report_canary logs the canary pass rate 0.5 over 2 twins' episodes in the
    trainer's logs, beside the reward."""
    pytest.importorskip("trl", reason="the TRL test needs the 'train' extra: pip install -e '.[train]'")
    import json
    from unittest.mock import patch

    import datasets
    import torch
    from trl import GRPOConfig, GRPOTrainer

    from convcodeworld_gym.tasks import with_canaries
    from convcodeworld_gym.testing.tiny_model import tiny_tool_model

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    tasks = with_canaries(load_tasks("humaneval", task_ids=["HumanEval/0"]), ["HumanEval/0"], replace=True)
    twin = tasks["HumanEval/0/canary"]
    factory = functools.partial(ConvCodeWorldTools, "ConvCodeWorld-CF-EF_full-v0", dataset=tasks, executor=executor,
                                feedback_style="rich")
    scout = factory()
    scout.reset(**tool_rows(tasks)[0])
    _fit_through_the_tool(scout, twin)
    assert scout.result.canary_passed is True
    fitted = scout.result.rows[-1].code

    model, tokenizer = tiny_tool_model()
    trainer = GRPOTrainer(
        model=model, processing_class=tokenizer, reward_funcs=[report_canary],
        args=GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=2, num_generations=2, max_steps=1,
                        max_completion_length=3000, max_tool_calling_iterations=1, learning_rate=1e-3,
                        logging_steps=1, report_to="none", use_cpu=True, seed=0),
        train_dataset=datasets.Dataset.from_list(tool_rows(tasks)), environment_factory=factory,
    )

    def scripted_generate(input_ids, **kwargs):
        rows = []
        for i, row in enumerate(input_ids):
            if "<tool_response>" in tokenizer.decode(row, skip_special_tokens=False):
                text = "Done.<|im_end|>"
            else:
                call = json.dumps({"name": "submit_program",
                                   "arguments": {"code": fitted if i % 2 else twin.ground_truth}})
                text = f"<tool_call>\n{call}\n</tool_call><|im_end|>"
            rows.append(tokenizer.encode(text, add_special_tokens=False))
        width = max(map(len, rows))
        padded = [row + [tokenizer.pad_token_id] * (width - len(row)) for row in rows]
        return torch.cat([input_ids, torch.tensor(padded, device=input_ids.device)], dim=-1)

    with patch.object(trainer.model, "generate", side_effect=scripted_generate):
        trainer.train()
    (entry,) = [e for e in trainer.state.log_history if "reward" in e]
    assert entry["rewards/ConvCodeWorldTools/mean"] == 0.0 and entry["reward"] == 0.0  # never in the reward
    assert (entry["canary/pass_rate"], entry["canary/episodes"]) == (0.5, 2)


@pytest.mark.parametrize(("reasoning", "reward"), [("strip", 1.0), ("keep", 0.0)])
def test_the_tools_take_the_envs_reasoning_option(reasoning, reward, humaneval, executor):
    """``ConvCodeWorldTools(..., reasoning=)`` reaches the env: a submission written as a reasoning reply (a wrong
    draft in its thought, the canonical solution after) is judged on its answer, or, with ``"keep"``, on the draft."""
    from convcodeworld_gym.training.smoke import reasoning_reply, smoke_programs

    task = humaneval["HumanEval/2"]
    right, wrong = smoke_programs(task)
    env = ConvCodeWorldTools(dataset=humaneval, executor=executor, reasoning=reasoning)
    env.reset(**tool_rows([task])[0])
    env.submit_program(reasoning_reply(wrong, right))
    assert env.get_reward() == reward and env.result.info["reasoning"]["mode"] == reasoning
