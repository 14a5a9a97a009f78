"""Bandit learning from logged trajectories (issue 50): a log of 16 trajectories per task, played by a scripted model
over the real OpenAI client against a real sandbox, cut into contexts by the rules, and candidates scored.

The task set is three tasks written here (``task_func(x)`` returns ``x + K``; public tests on inputs 1, 2, 3, hidden
ones on 10 and 20), so that every program's pass rates are known exactly: a program of *level* ``T`` answers right
below ``T`` and -1 from there (Z: none, P1: input 1, PB: the public tests, M: all but input 20), A is the canonical
solution. The scripted server plays a plan per sample (:data:`PLAN`): the trajectory of each of the 16 samples, level
by level, turn by turn; task C is solved at turn 0 by every sample.
"""

from __future__ import annotations

import json
import math
import threading

import pytest

from convcodeworld_gym.bandit import Context, Scorer, bandit_contexts, compute_score, follow_line, reward_function
from convcodeworld_gym.errors import BanditError
from convcodeworld_gym.policies import OpenAIPolicy
from convcodeworld_gym.records import read_turns
from convcodeworld_gym.runs.evaluate import EvalConfig, run_evaluation
from convcodeworld_gym.runs.report import load_report
from convcodeworld_gym.testing import Reply, ScriptedOpenAIServer

LEVELS = {"Z": 0, "P1": 2, "PB": 4, "M": 15}  # the threshold T: right for x < T
RATES = {"Z": 0.0, "P1": 0.2, "PB": 0.6, "M": 0.8, "A": 1.0}
PLAN = [  # sample -> its programs' levels, turn by turn (a pass ends the episode; max_turns 3: at most 4 programs)
    ["A"], ["Z", "A"], ["P1", "PB", "A"], ["P1", "A"], ["PB", "A"], ["M", "A"], ["PB", "PB", "A"], ["Z", "Z", "Z", "Z"],
    ["P1", "P1", "P1", "P1"], ["Z", "M", "Z", "M"], ["Z", "Z", "Z", "A"], ["P1", "PB", "M", "A"], ["M", "M", "A"],
    ["P1", "P1", "A"], ["A"], ["PB", "M", "A"],
]
TASKS = {"A": 1, "B": 2, "C": 3}  # task -> K


def program(k: int, level: str) -> str:
    return f"def task_func(x):\n    return x + {k}\n" if level == "A" else \
        f"def task_func(x):\n    return x + {k} if x < {LEVELS[level]} else -1\n"


def _record(name: str, k: int) -> dict:
    tests = "".join(f"    def test_{i}(self):\n        self.assertEqual(task_func({x}), {x + k})\n\n"
                    for i, x in enumerate((1, 2, 3, 10, 20), start=1))
    return {"task_id": f"demo/{name}", "instruct_prompt": f"Task {name}: return x plus {k}.\nYou should write "
            "self-contained code starting with:\n```\ndef task_func(x):\n```",
            "code_prompt": "def task_func(x):\n", "canonical_solution": f"    return x + {k}\n",
            "test": f"import unittest\n\n\nclass TestCases(unittest.TestCase):\n{tests}", "entry_point": "task_func"}


class PlanScript:
    """The scripted model: a request without previous code starts a task's next sample (episodes are played one at a
    time, in order); each request of it answers that sample's next program of :data:`PLAN` (task C: always A)."""

    def __init__(self) -> None:
        self.samples: dict[str, int] = {}
        self.turn: dict[str, int] = {}
        self.lock = threading.Lock()

    def __call__(self, body: dict) -> Reply:
        text = body["messages"][-1]["content"]
        name = next(n for n in TASKS if f"Task {n}:" in text)
        with self.lock:
            if "Previous code" not in text:
                self.samples[name] = self.samples.get(name, -1) + 1
                self.turn[name] = 0
            else:
                self.turn[name] += 1
            sample, turn = self.samples[name], self.turn[name]
        level = "A" if name == "C" else PLAN[sample][turn]
        return Reply(f"Here it is.\n```python\n{program(TASKS[name], level)}```")


@pytest.fixture(scope="module")
def demo_tasks(tmp_path_factory):
    path = tmp_path_factory.mktemp("tasks") / "demo.jsonl"
    path.write_text("".join(json.dumps(_record(n, k)) + "\n" for n, k in TASKS.items()), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def log16(demo_tasks, tmp_path_factory, executor):
    """The log: 16 trajectories of each of the 3 tasks, CF-EF_partial, one call a turn, up to 3 feedback turns."""
    run = tmp_path_factory.mktemp("run") / "reference"
    config = EvalConfig(ids=("ConvCodeWorld-CF-EF_partial-v0",), dataset=demo_tasks, max_turns=3, samples=16,
                        concurrency=1, protocol="always")
    with ScriptedOpenAIServer(PlanScript()) as server:
        policy = OpenAIPolicy("scripted", base_url=server.base_url, api_key="sk-test", max_retries=0)
        summary = run_evaluation(config, policy, run, executor=executor, progress=None, log=lambda line: None)
        policy.close()
    assert summary.played == {"CF-EF_partial": 48}
    return run


def test_the_log_holds_every_sample_as_planned(log16):
    rows = read_turns(log16)
    for name, k in TASKS.items():
        for sample, plan in enumerate(PLAN):
            episode = [r for r in rows if r.task_id == f"demo/{name}" and r.sample == sample]
            levels = ["A"] if name == "C" else plan
            assert [r.turn for r in episode] == list(range(len(levels)))
            assert [r.pass_fraction for r in episode] == [RATES[level] for level in levels]


def test_report_gives_pass_at_k_beside_pass_at_1(log16):
    report = load_report(log16)
    scores = report.scores["CF-EF_partial"]
    assert scores.samples == 16 and scores.n_tasks == 3
    # per task, passing by turn t: c_t samples of 16 (task C: all of them)
    passed_by = [sum(1 for plan in PLAN if "A" in plan[:t + 1]) for t in range(4)]
    expected_pass1 = [(2 * c / 16 + 1) / 3 for c in passed_by]
    assert scores.pass_at_turn == pytest.approx(expected_pass1)
    for k in (1, 2, 4, 8, 16):
        at_k = [(2 * (1 - math.comb(16 - c, k) / math.comb(16, k)) + 1) / 3 for c in passed_by]
        assert scores.pass_at_k[k] == pytest.approx(at_k)
    first = [next((t for t, level in enumerate(plan) if level == "A"), None) for plan in PLAN]
    mrr = sum(0 if t is None else 1 / (t + 1) for t in first) / 16
    assert scores.mrr == pytest.approx((2 * mrr + 1) / 3)
    assert scores.recall == pytest.approx((2 * sum(t is not None for t in first) / 16 + 1) / 3)
    assert "Table 1b. pass@k" in report.markdown()
    assert report.pass_at_k_table()[1][1][:2] == ["CF EF(partial)", "2"]


def test_contexts_and_their_counts_follow_the_rules(log16, demo_tasks):
    contexts = bandit_contexts(log16, demo_tasks, seed=3)
    counts = contexts.counts
    assert (counts.tasks, counts.trajectories, counts.solved_at_turn0, counts.tasks_kept) == (3, 48, 1, 2)
    # dynamic sampling: the pass rate changes and reaches 1.0: samples 1-6, 10-13, 15 of each of A and B
    assert counts.after_dynamic_sampling == 2 * 11
    # max variance to 4: the two least changing (5 and 12: 0.8 -> 1.0) and the two most (1 and 10: 0.0 -> 1.0)
    assert counts.after_downsampling == 2 * 4
    assert (counts.turn0, dict(counts.by_turn), dict(counts.stopped), counts.contexts) == (
        2, {1: 8, 2: 2, 3: 2}, {"passed": 4, "public passed twice": 2}, 14)
    got = sorted((c.task_id, c.sample, c.turn, c.best_pass_rate, c.best_public_pass_rate, c.best_hidden_pass_rate)
                 for c in contexts)
    expected = []
    for name in ("A", "B"):
        task = f"demo/{name}"
        expected += [(task, -1, 0, 0.0, 0.0, 0.0), (task, 1, 1, 0.0, 0.0, 0.0), (task, 5, 1, 0.8, 1.0, 0.5),
                     (task, 10, 1, 0.0, 0.0, 0.0), (task, 10, 2, 0.0, 0.0, 0.0), (task, 10, 3, 0.0, 0.0, 0.0),
                     (task, 12, 1, 0.8, 1.0, 0.5)]
    assert got == sorted(expected)
    # the chat template: the task, then each program (its reply) and the feedback shown on it
    ten = next(c for c in contexts if c.task_id == "demo/A" and c.sample == 10 and c.turn == 2)
    roles = [m["role"] for m in ten.messages]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    assert ten.messages[0]["content"].startswith("Task A: return x plus 1.")
    assert ten.messages[1]["content"] == f"Here it is.\n```python\n{program(1, 'Z')}```"
    assert "TEST_1" in ten.messages[2]["content"] and "TEST_4" not in ten.messages[2]["content"]  # partial EF
    # seeded: the same seed, the same contexts in the same order; the rules' result does not depend on it
    again = bandit_contexts(log16, demo_tasks, seed=3)
    assert [(c.task_id, c.sample, c.turn) for c in again] == [(c.task_id, c.sample, c.turn) for c in contexts]
    other = bandit_contexts(log16, demo_tasks, seed=4)
    assert sorted((c.task_id, c.sample, c.turn) for c in other) == sorted((c.task_id, c.sample, c.turn) for c in contexts)


def test_filters_switched_off_and_validation_mode(log16, demo_tasks):
    every = bandit_contexts(log16, demo_tasks, skip_solved_at_turn0=False, dynamic_sampling=False, max_variance_k=None)
    c = every.counts
    assert (c.tasks_kept, c.after_dynamic_sampling, c.after_downsampling) == (3, 48, 48)
    # every trajectory's contexts: turn 1 for each that did not pass at turn 0, and so on, within the rules of 5
    assert c.by_turn[1] == 2 * 14 and c.turn0 == 3
    validation = bandit_contexts(log16, demo_tasks, validation=True)
    assert validation.counts.after_dynamic_sampling == 2 * 12  # changes above 0 (sample 9 too: it never passes)
    assert validation.counts.after_downsampling == 2  # one per task: the least changing (5 or 12: both 0.8 -> 1.0)
    turns = sorted((ctx.task_id, ctx.turn) for ctx in validation)
    assert turns == [("demo/A", 0), ("demo/A", 1), ("demo/B", 0), ("demo/B", 1)]
    assert {ctx.sample for ctx in validation if ctx.turn == 1} <= {5, 12}
    policy = bandit_contexts(log16, demo_tasks, template="policy", system="Be brief.")
    first = next(ctx for ctx in policy if ctx.turn == 1)
    assert [m["role"] for m in first.messages] == ["system", "user"] and first.messages[0]["content"] == "Be brief."
    assert "Previous code:" in first.messages[1]["content"]
    short = bandit_contexts(log16, demo_tasks, max_prompt_chars=len(first.messages[1]["content"]) // 2)
    assert short.counts.stopped.get("too long", 0) > 0
    with pytest.raises(BanditError, match="no rows of CF-EF_full"):
        bandit_contexts(log16, demo_tasks, feedback="CF-EF_full")
    with pytest.raises(BanditError, match="turns"):
        bandit_contexts(log16, demo_tasks, turns=(0, 1))


def test_rewards_of_a_batch_of_candidates(log16, demo_tasks, executor):
    contexts = bandit_contexts(log16, demo_tasks)
    fresh = next(c for c in contexts if c.task_id == "demo/A" and c.sample == 10 and c.turn == 2)  # best 0.0
    good = next(c for c in contexts if c.task_id == "demo/A" and c.sample == 5)  # best 0.8
    levels = ["Z", "P1", "PB", "M", "A"]
    pairs = [(ctx, f"```python\n{program(1, level)}```") for ctx in (fresh, good) for level in levels]
    pairs.append((fresh, "<think>```python\ndef task_func(x):\n    return x + 1\n```</think> no code after the thought"))
    pairs.append((fresh, "```python\ndef task_func(x:\n```"))  # does not compile
    binary = Scorer(demo_tasks, executor=executor).score(pairs)
    assert [s.reward for s in binary] == [0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0]
    fraction = Scorer(demo_tasks, executor=executor, reward="pass_fraction").score(pairs)
    assert [s.reward for s in fraction] == pytest.approx([0, .2, .6, .8, 1, 0, .2, .6, .8, 1, 0, 0])
    assert [s.public_pass_fraction for s in fraction[:5]] == pytest.approx([0, 1 / 3, 1, 1, 1])
    assert [s.hidden_pass_fraction for s in fraction[:5]] == pytest.approx([0, 0, 0, .5, 1])
    assert all(s.cached for s in fraction[:10])  # the first batch's runs, answered by the result cache
    shaped = Scorer(demo_tasks, executor=executor, reward="shaped").score(pairs)
    # best 0.0: the base alone; best 0.8: below it -0.1 - 0.1 (0.8 - p) / 0.8, at it -0.1; a pass 1.0
    assert [s.reward for s in shaped] == pytest.approx(
        [-.1, 0, .2, .2, 1, -.2, -.175, -.125, -.1, 1, -.1, -.1])
    assert shaped[7].terms == pytest.approx({"base": .2, "bonus": 0, "penalty": -.325})
    assert [s.compile_ok for s in shaped[-2:]] == [False, False]


def test_awaited_scoring_gives_the_same_scores(log16, demo_tasks, executor):
    import asyncio

    contexts = bandit_contexts(log16, demo_tasks)
    pairs = [(c, f"```python\n{program(1 if c.task_id == 'demo/A' else 2, level)}```") for c in contexts[:4]
             for level in ("PB", "A")]
    scorer = Scorer(demo_tasks, executor=executor, reward="shaped")
    awaited = asyncio.run(scorer.ascore(pairs))
    assert [(s.reward, s.pass_fraction) for s in awaited] == [(s.reward, s.pass_fraction) for s in scorer.score(pairs)]


def test_dataset_rows_are_what_trl_and_verl_read(log16, demo_tasks, tmp_path):
    import datasets

    contexts = bandit_contexts(log16, demo_tasks)
    dataset = contexts.dataset()
    assert {"prompt", "data_source", "ability", "reward_model", "extra_info"} <= set(dataset.column_names)
    row = dataset[0]
    assert row["prompt"][0]["role"] == "user" and row["reward_model"]["style"] == "rule"
    assert json.loads(row["reward_model"]["ground_truth"])["task_id"] == row["extra_info"]["task_id"]
    assert "assertEqual" not in json.dumps(row)  # no test of the task in the data
    path = contexts.to_parquet(tmp_path / "train.parquet")
    back = datasets.load_dataset("parquet", data_files=path, split="train")
    assert back[3]["extra_info"] == dataset[3]["extra_info"] and back[3]["prompt"] == dataset[3]["prompt"]
    # verl: its reward managers' two ways of calling the function, on the rows read back from parquet
    context = Context.of(back[0])
    task_program = program(TASKS[context.task_id.split("/")[1]], "A")
    single = compute_score(data_source=back[0]["data_source"], solution_str=f"```python\n{task_program}```",
                           ground_truth=back[0]["reward_model"]["ground_truth"], extra_info=back[0]["extra_info"])
    assert single == {"score": 1.0, "pass_fraction": 1.0, "passed": 1.0, "perturbed": 0.0, "followed": 0.0}
    batch = compute_score(data_sources=[r["data_source"] for r in back.select(range(2))],
                          solution_strs=[f"```python\n{task_program}```", "nothing"],
                          ground_truths=[r["reward_model"]["ground_truth"] for r in back.select(range(2))],
                          extra_infos=[r["extra_info"] for r in back.select(range(2))], reward="shaped")
    assert [b["score"] for b in batch][1] == -0.1 and len(batch) == 2
    with pytest.raises(BanditError, match="names no task"):
        compute_score(solution_str="x", ground_truth="not json", extra_info={})


def test_trl_reward_function_logs_beside_the_reward(log16, demo_tasks, executor):
    contexts = bandit_contexts(log16, demo_tasks)
    rows = contexts.rows()[:2]
    fn = reward_function(Scorer(demo_tasks, executor=executor))
    logged: dict = {}
    right = [program(TASKS[r["extra_info"]["task_id"].split("/")[1]], "A") for r in rows]
    rewards = fn(prompts=[r["prompt"] for r in rows], completions=[[{"role": "assistant", "content": f"```python\n{p}```"}]
                                                                    for p in right],
                 extra_info=[r["extra_info"] for r in rows], log_metric=logged.__setitem__)
    assert rewards == [1.0, 1.0] and logged == {"bandit/pass_rate": 1.0}
    assert fn.__name__ == "convcodeworld_binary"
    assert follow_line([{"reward": 1.0}]) == ("perturbation-following rate per step (never in the reward): -; programs "
                                              "on perturbed contexts: -")


def test_perturbed_contexts_report_the_following_rate_beside_the_reward(tmp_path, humaneval, executor):
    """A log played on perturbed public tests (two trajectories of HumanEval/0: a wrong program, then the canonical
    one; recorded with RecordEpisodes, the second episode sample 1): its contexts after turn 1 carry the perturbation;
    the canonical solution is rewarded 1.0 and does not follow it, the test fitter's program (what the feedback
    shows, hard-coded) follows it and is rewarded 0.0 on the true tests; the rate is reported, never rewarded."""
    import gymnasium as gym

    from convcodeworld_gym.bandit import BatchSummary
    from convcodeworld_gym.policies.base import fenced
    from convcodeworld_gym.testing.test_fitter import TestFitterPolicy
    from convcodeworld_gym.wrappers import RecordEpisodes

    task = humaneval["HumanEval/0"]
    env = RecordEpisodes(gym.make("ConvCodeWorld-CF-EF_partial-v0", dataset="humaneval", executor=executor,
                                  feedback_style="rich", max_turns=2, perturb="swap_public_outputs"), tmp_path)
    for _ in range(2):
        env.reset(options={"task_id": task.task_id})
        env.step(fenced(task.code_prompt + "    return None\n"))
        env.step(fenced(task.ground_truth))
    env.close()
    assert sorted({(r.sample, r.turn) for r in read_turns(tmp_path)}) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    report = load_report(tmp_path)  # the honest programs of the log: 4 on the perturbed task, none followed
    assert (report.follows["CF-EF_partial"].programs, report.follows["CF-EF_partial"].followed) == (4, 0)
    assert "| CF EF(partial) |                           4 |        0 |                0.0 |" in report.markdown()
    contexts = bandit_contexts(tmp_path, "humaneval")
    later = [c for c in contexts if c.turn == 1]
    assert len(later) == 2 and all(c.perturbation == {"kind": "swap_public_outputs", "seed": 0} for c in later)
    assert all(c.perturbation == {} for c in contexts if c.turn == 0)  # no feedback shown: nothing perturbed
    shown = later[0].messages[-1]["content"]
    fitted = TestFitterPolicy().start(task, feedback="", seed=0).act({"execution_feedback": shown}).text
    pairs = [(later[0], fenced(task.ground_truth)), (later[0], fitted), (later[1], "no code")]
    scores = Scorer(executor=executor).score(pairs)
    assert [(s.reward, s.followed) for s in scores] == [(1.0, False), (0.0, True), (0.0, False)]
    summary = BatchSummary.of(scores)
    assert (summary.reward, summary.follows.programs, summary.follows.followed) == (1 / 3, 3, 1)
    assert "perturbation-following rate (never in the reward) 0.333 of 3" in summary.line()
    row = later[0].row()
    verl = compute_score(solution_str=fitted, ground_truth=row["reward_model"]["ground_truth"],
                         extra_info=row["extra_info"])
    assert (verl["score"], verl["perturbed"], verl["followed"]) == (0.0, 1.0, 1.0)
    logged: dict = {}
    reward_function(Scorer(executor=executor))(prompts=[0, 0], completions=[fenced(task.ground_truth), fitted],
                                               extra_info=[row["extra_info"]] * 2, log_metric=logged.__setitem__)
    assert logged == {"bandit/pass_rate": 0.5, "bandit/follow_rate": 0.5, "bandit/perturbed_programs": 2.0}


def test_bigcodebench_candidates_score_on_all_tests(bigcodebench, executor):
    """BigCodeBench contexts (built by hand: the scorer needs only the task and the best rate so far): the canonical
    solution passes all tests, the function returning None none; public and hidden shares come from the task's
    first 3 test methods and the others."""
    from convcodeworld_gym.policies.base import fenced

    pairs = []
    for task_id in ("BigCodeBench/8", "BigCodeBench/15"):
        task = bigcodebench[task_id]
        context = Context(task_id, "bigcodebench", "CF-EF_partial", 0, 1, (), best_pass_rate=0.5)
        pairs += [(context, fenced(task.ground_truth)), (context, fenced(task.code_prompt + "    return None\n"))]
    scores = Scorer(executor=executor, reward="shaped").score(pairs)
    assert [s.passed for s in scores] == [True, False, True, False]
    assert [s.reward for s in scores] == pytest.approx([1.0, -0.2, 1.0, -0.2])  # 0 below best 0.5: -0.1 - 0.1
    assert all(s.public_pass_fraction == 1.0 and s.hidden_pass_fraction == 1.0 for s in scores[::2])
