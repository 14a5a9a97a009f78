"""The offline simulated user on real tasks: rules, golden texts, determinism, no leaks, usefulness."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from broken_programs import MUTATIONS, mutate, names_failing_behaviour
from convcodeworld_gym import ConvCodeWorldEnv, LocalExecutor, Task
from convcodeworld_gym.feedback.verbal import OfflineSimulator
from convcodeworld_gym.feedback.verbal.leak import nontrivial_lines
from convcodeworld_gym.feedback.verbal.static import code_facts
from convcodeworld_gym.sandbox import SandboxExecutor
from convcodeworld_gym.sandbox.host.forgeable import SPLIT_UNJUDGEABLE

# Canonical solutions that fail on a machine without network, or as root (see README).
_UNRELIABLE = {"BigCodeBench/176", "BigCodeBench/314", "BigCodeBench/1005", "BigCodeBench/812", "BigCodeBench/832"}


def _feedback(task: Task, combo: str, code: str, executor, *, seed: int = 0) -> tuple[str, dict]:
    env = ConvCodeWorldEnv(combo, dataset=[task], executor=executor, simulator_kwargs={"backend": "offline", "seed": seed})
    env.reset()
    obs, _, _, _, info = env.step(code)
    env.close()
    return obs["verbal_feedback"], info


def _assert_clean(text: str, task: Task) -> None:
    assert "```" not in text
    assert not [line for line in nontrivial_lines(task.canonical_solution, task.prompt) if line in " ".join(text.split())]


def test_golden_expert_and_novice(bigcodebench, executor):
    task = bigcodebench["BigCodeBench/15"]
    stub = task.code_prompt + "    return None\n"
    text, info = _feedback(task, "CF-EF_full-SEF", stub, executor)
    assert text == (
        "1. For the input ('./tmpdir/valid_commands.csv', './tmpdir') the result is None; "
        "the correct result is ['./tmpdir/command_1_output.txt'].\n"
        "2. The solution needs `csv.reader`, `os.makedirs`, `os.path.exists`, which your code never calls.\n"
        "3. The function is expected to raise FileNotFoundError for invalid input, as the task describes; "
        "your code never raises it."
    )
    assert info["verbal_feedback_source"] == "offline"
    assert info["verbal_feedback_details"]["leak"] == {"detected": False, "regenerated": False, "redacted_lines": 0}
    text, _ = _feedback(task, "CF-EF_full-SNF", stub, executor)
    assert text == (
        "When I ran it, I got this error: TypeError: object of type 'NoneType' has no len(). "
        "I think some value has the wrong type, or a function gets the wrong arguments."
    )
    text, _ = _feedback(task, "CF-SNF", task.code_prompt + "    return [\n", executor)
    assert text == (
        "I got this error: SyntaxError: '[' was never closed. I think something is written in a way "
        "Python does not understand. The error points at line 5 of the code."
    )
    one = bigcodebench["BigCodeBench/1"]
    text, _ = _feedback(one, "CF-EF_partial-SEF", mutate(one.ground_truth, one.entry_point, "drop_raise"), executor)
    assert text.splitlines()[0] == "1. For the input (-1) the function must raise ValueError; instead it returns {}."
    _assert_clean(text, one)


def test_who_speaks_when(humaneval, executor):
    task = humaneval["HumanEval/0"]
    wrong = "def has_close_elements(numbers, threshold):\n    return False"
    partial_pass = "def has_close_elements(numbers, threshold):\n    return threshold in (0.3, 0.95)"
    broken = "def has_close_elements(numbers, threshold):\n    return ("
    cases = {
        ("CF-SNF", wrong): False,  # compiles, no EF: nothing for a novice to react to
        ("CF-SNF", broken): True,
        ("CF-EF_partial-SNF", partial_pass): False,  # shown tests pass (hidden ones fail)
        ("CF-EF_partial-SNF", wrong): True,
        ("CF-EF_partial-SEF", partial_pass): True,  # the expert knows better
        ("CF-SEF", wrong): True,
        ("CF-SEF", broken): False,  # the reference lets the model refine from CF alone
        ("CF-EF_full-SEF", task.ground_truth): False,  # solved: nobody speaks
    }
    for (combo, code), speaks in cases.items():
        text, info = _feedback(task, combo, code, executor)
        assert bool(text) is speaks, (combo, code, text)
        assert info["verbal_feedback_source"] == ("offline" if speaks else None)
    # the expert knows the program is wrong, but the failing tests are hidden: none of their inputs is its to tell
    text, _ = _feedback(task, "CF-EF_partial-SEF", partial_pass, executor)
    assert "For the input" not in text and "When the function is called with" not in text, text
    assert "differs from what the task asks" in text, text


def test_novice_never_uses_hidden_tests_or_ground_truth(humaneval, executor):
    task = humaneval["HumanEval/0"]
    wrong = "def has_close_elements(numbers, threshold):\n    return False"
    env = ConvCodeWorldEnv("CF-EF_partial-SNF", dataset=[task], executor=executor, simulator_kwargs={"backend": "offline"})
    env.reset()
    obs, *_ = env.step(wrong)
    env.close()
    shown = obs["execution_feedback"]
    assert "TEST_1" in shown and "TEST_4" not in shown
    # it quotes the failed check of the first shown test, and nothing of the hidden ones
    assert obs["verbal_feedback"] == "This check did not pass: assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True."


def test_same_seed_same_text_other_seeds_vary(bigcodebench, executor):
    tasks = [bigcodebench[f"BigCodeBench/{i}"] for i in (15, 19, 1, 24)]
    texts = {}
    for seed in (0, 0, 1, 2, 3):
        texts.setdefault(seed, []).append(
            [_feedback(t, "CF-EF_full-SNF", t.code_prompt + "    return None\n", executor, seed=seed)[0] for t in tasks]
        )
    assert texts[0][0] == texts[0][1]
    assert len({tuple(v[0]) for v in texts.values()}) > 1


def _broken_programs(bigcodebench, count: int, ids: tuple[str, ...] | None = None):
    # Tasks only the in-process judge can judge are not in the env's default set (sandbox.forgeable).
    tasks = [t for t in bigcodebench.subset(stdlib_only=True) if t.task_id not in _UNRELIABLE | SPLIT_UNJUDGEABLE.keys()]
    for task in [bigcodebench[i] for i in ids] if ids else tasks[:count]:
        for kind in MUTATIONS:
            program = mutate(task.ground_truth, task.entry_point, kind)
            if program is not None:
                yield task, kind, program


def _judge_one(task: Task, kind: str, program: str, executor) -> tuple[str, str, str | None]:
    """(task id, mutation, the expert's text) for one broken program; text None when its tests do not notice it."""
    simulator = OfflineSimulator("expert", executor=executor)
    env = ConvCodeWorldEnv("CF-EF_full-SEF", dataset=[task], executor=executor, verbal_feedback=simulator)
    env.reset()
    obs, reward, *_ = env.step(program)
    env.close()
    return task.task_id, kind, (None if reward == 1.0 else obs["verbal_feedback"])


def _usefulness(bigcodebench, executor, count: int, ids: tuple[str, ...] | None = None) -> tuple[dict, list]:
    stats: dict[str, int] = {"programs": 0, "strict": 0, "loose": 0}
    tasks, misses = set(), []
    jobs = list(_broken_programs(bigcodebench, count, ids))
    # One episode per program, as many at once as the sandbox has workers; the slowest tasks first, so that they
    # do not end the measurement alone.
    order = sorted(range(len(jobs)), key=lambda i: -(executor.profile(jobs[i][0]).canonical_s or 0.0))
    jobs = [jobs[i] for i in order]
    with ThreadPoolExecutor(executor.default_concurrency()) as pool:
        judged = list(pool.map(lambda job: _judge_one(*job, executor), jobs))
    for (task, kind, _), (_, _, text) in zip(jobs, judged):
        if text is None:
            continue  # the tests do not notice this mutation
        raises = code_facts(task.ground_truth).raises
        _assert_clean(text, task)
        tasks.add(task.task_id)
        stats["programs"] += 1
        stats["strict"] += names_failing_behaviour(kind, text, raises)
        stats["loose"] += names_failing_behaviour(kind, text, raises, strict=False)
        if not names_failing_behaviour(kind, text, raises):
            misses.append((task.task_id, kind, text))
    stats["tasks"] = len(tasks)
    return stats, misses


def test_expert_names_failing_behaviour_sample(bigcodebench, executor):
    # fast tasks (the broken BigCodeBench/0 alone runs ~45 s); the slow test below takes the first 70
    stats, misses = _usefulness(bigcodebench, executor, 0, ("BigCodeBench/1", "BigCodeBench/4", "BigCodeBench/6", "BigCodeBench/19"))
    assert stats["tasks"] == 4 and stats["programs"] >= 5
    assert stats["strict"] >= 0.9 * stats["programs"], misses


@pytest.mark.slow
def test_expert_names_failing_behaviour_70_tasks(bigcodebench):
    """The measurement in the README: 70 standard-library tasks, up to 3 broken programs each.

    Three workers on two cores: BigCodeBench/195's programs sleep through most of their 45-90 s (its tests
    poll a mocked process ten times a test), and the other programs need not wait for them."""
    with SandboxExecutor(workers=3) as executor:
        stats, misses = _usefulness(bigcodebench, executor, 70)
    print(f"\nexpert usefulness: {stats}")
    for miss in misses:
        print("  miss:", miss)
    assert stats["tasks"] >= 50
    assert stats["strict"] >= 0.85 * stats["programs"] and stats["loose"] >= 0.95 * stats["programs"]


@pytest.mark.parametrize("combo", ["CF-EF_full-SNF", "CF-SEF", "CF-EF_partial-SEF"])
@pytest.mark.parametrize("dataset, task_id", [("humaneval", "HumanEval/2"), ("bigcodebench", "BigCodeBench/19")])
def test_end_to_end_episodes(combo, dataset, task_id, executor, request):
    for task in (request.getfixturevalue(dataset)[task_id],):
        env = ConvCodeWorldEnv(combo, dataset=[task], executor=executor, simulator_kwargs={"backend": "offline"}, max_turns=3)
        env.reset()
        broken = task.code_prompt + "    return (\n"
        wrong = task.code_prompt + "    return None\n"
        transcript = [env.step(code) for code in (broken, wrong)]
        obs, reward, terminated, _, info = env.step(task.ground_truth)
        env.close()
        assert reward == 1.0 and terminated and obs["verbal_feedback"] == ""
        assert bool(transcript[0][0]["verbal_feedback"]) is ("SNF" in combo)
        assert transcript[1][0]["verbal_feedback"], (combo, task.task_id)
        for step in transcript:
            _assert_clean(step[0]["verbal_feedback"], task)


class _CountingExecutor(SandboxExecutor):
    """A real sandbox executor that counts its runs (a probe judged in-process informs nothing: the program could
    read the tests there)."""

    def __init__(self) -> None:
        super().__init__(workers=1)
        self.runs = 0

    def run(self, task, program):
        self.runs += 1
        return super().run(task, program)


def test_expert_probes_run_in_the_envs_executor(humaneval):
    with _CountingExecutor() as executor:
        _expert_probes_in(executor, humaneval)


def _expert_probes_in(executor, humaneval):
    env = ConvCodeWorldEnv("CF-EF_full-SEF", dataset=[humaneval["HumanEval/0"]], executor=executor,
                           simulator_kwargs={"backend": "offline"})
    env.reset()
    obs, *_ = env.step("def has_close_elements(numbers, threshold):\n    return False")
    assert executor.runs == 3  # the tests, then the probes of ground truth and candidate
    assert "When the function is called with" in obs["verbal_feedback"] or "For the input" in obs["verbal_feedback"]
    obs, *_ = env.step("def has_close_elements(numbers, threshold):\n    return None")
    assert executor.runs == 5  # the ground truth's probe is remembered
    env.close()
    executor.runs = 0
    env = ConvCodeWorldEnv("CF-EF_full-SEF", dataset=[humaneval["HumanEval/0"]], executor=executor,
                           simulator_kwargs={"backend": "offline", "probe": False})
    env.reset()
    obs, *_ = env.step("def has_close_elements(numbers, threshold):\n    return False")
    env.close()
    assert executor.runs == 1 and obs["verbal_feedback"].startswith("1. This check on the result fails: assert candidate(")
    # Without EF every test is hidden: the expert probes none and names none of their inputs
    executor.runs = 0
    env = ConvCodeWorldEnv("CF-SEF", dataset=[humaneval["HumanEval/0"]], executor=executor, simulator_kwargs={"backend": "offline"})
    env.reset()
    obs, *_ = env.step("def has_close_elements(numbers, threshold):\n    return False")
    env.close()
    assert executor.runs == 1, executor.runs
    assert "candidate(" not in obs["verbal_feedback"] and "For the input" not in obs["verbal_feedback"], obs["verbal_feedback"]


def test_plain_string_provider(humaneval, executor):
    class Teacher:
        expertise = "novice"
        source = "teacher"

        def __call__(self, context):
            return f"turn {context.turn}: look again"

    env = ConvCodeWorldEnv("CF-EF_full-SNF", dataset=[humaneval["HumanEval/0"]], executor=executor, verbal_feedback=Teacher())
    env.reset()
    obs, *_, info = env.step("def has_close_elements(numbers, threshold):\n    return False")
    env.close()
    assert obs["verbal_feedback"] == "turn 0: look again"
    assert info["verbal_feedback_source"] == "teacher" and info["verbal_feedback_details"] == {}
