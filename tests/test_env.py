"""ConvCodeWorldEnv: Gymnasium API, registered ids, bad actions, determinism, turn limits."""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import convcodeworld_gym  # noqa: F401 - registers the ids
from convcodeworld_gym import LIVE_IDS, ConvCodeWorldEnv, ResetNeeded
from convcodeworld_gym.env import OBSERVATION_KEYS
from convcodeworld_gym.sandbox import SandboxExecutor

NON_VERBAL_IDS = [i for i in LIVE_IDS if "SNF" not in i and "SEF" not in i]
VERBAL_IDS = [i for i in LIVE_IDS if i not in NON_VERBAL_IDS]


def test_nine_ids_registered():
    assert LIVE_IDS == (
        "ConvCodeWorld-CF-v0",
        "ConvCodeWorld-CF-EF_partial-v0",
        "ConvCodeWorld-CF-EF_full-v0",
        "ConvCodeWorld-CF-SNF-v0",
        "ConvCodeWorld-CF-EF_partial-SNF-v0",
        "ConvCodeWorld-CF-EF_full-SNF-v0",
        "ConvCodeWorld-CF-SEF-v0",
        "ConvCodeWorld-CF-EF_partial-SEF-v0",
        "ConvCodeWorld-CF-EF_full-SEF-v0",
    )
    assert all(i in gym.registry for i in LIVE_IDS)


@pytest.mark.parametrize("env_id", LIVE_IDS)
def test_check_env_humaneval(env_id, executor):
    # The first id runs on the default it registers (its own SandboxExecutor, closed with the env);
    # the others share the session's sandbox, so its profiles and cache are reused.
    default = env_id == LIVE_IDS[0]
    env = gym.make(env_id, dataset="humaneval", **({} if default else {"executor": executor}))
    assert isinstance(env.unwrapped.executor, SandboxExecutor)
    check_env(env.unwrapped)
    env.close()
    assert executor.run(env.unwrapped.task, env.unwrapped.task.ground_truth).passed  # a shared one stays open


@pytest.mark.parametrize("env_id", LIVE_IDS)
def test_check_env_bigcodebench(env_id, bigcodebench, executor):
    env = gym.make(env_id, dataset=bigcodebench.subset(stdlib_only=True, limit=20), executor=executor)
    check_env(env.unwrapped)
    env.close()


@pytest.mark.parametrize("env_id", VERBAL_IDS)
def test_verbal_ids_default_to_offline_simulator(env_id, monkeypatch, executor):
    for var in ("CONVCODEWORLD_SIMULATOR_MODEL", "CONVCODEWORLD_SIMULATOR_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-to-be-used")  # a key alone does not switch to the paid API
    env = gym.make(env_id, dataset="humaneval", executor=executor)
    env.reset(options={"task_id": "HumanEval/0"})
    obs, *_, info = env.step("def has_close_elements(numbers, threshold):\n    return (")
    novice = "SNF" in env_id
    assert bool(obs["verbal_feedback"]) is novice  # on a compile error the novice speaks, the expert is not asked
    assert info["verbal_feedback_source"] == ("offline" if novice else None)
    obs, *_, info = env.step("def has_close_elements(numbers, threshold):\n    return numbers[99]")
    speaks = not novice or "EF" in env_id  # a compiling program: the novice needs shown failing tests
    assert bool(obs["verbal_feedback"]) is speaks
    assert "```" not in obs["verbal_feedback"]
    env.close()


def test_verbal_kwargs_checked():
    with pytest.raises(ValueError, match="shows no verbal feedback"):
        ConvCodeWorldEnv("CF", dataset="humaneval", simulator_kwargs={"backend": "offline"})
    with pytest.raises(ValueError, match="needs a provider with expertise 'expert'"):
        from convcodeworld_gym.feedback.verbal import OfflineSimulator

        ConvCodeWorldEnv("CF-SEF", dataset="humaneval", verbal_feedback=OfflineSimulator("novice"))
    with pytest.raises(ValueError, match="backend must be"):
        ConvCodeWorldEnv("CF-SNF", dataset="humaneval", simulator_kwargs={"backend": "cloud"})


@pytest.fixture
def make_env(executor):
    """HumanEval envs on the session's shared sandbox (its profiles and result cache are reused)."""

    def make(feedback: str = "CF-EF_full", **kwargs) -> ConvCodeWorldEnv:
        return ConvCodeWorldEnv(feedback, dataset="humaneval", executor=executor, **kwargs)

    return make


@pytest.mark.parametrize(
    "action",
    [
        "",
        "I think you should sort the list first and then compare neighbours.",
        "x" * (5 * 1024 * 1024),
        "def has_close_elements(numbers, threshold):\n    return \x00False",
        "def has_close_elements(numbers, threshold):\n    return False",  # no fenced block
        "```python\nimport os\nos._exit(0)\n```",
        "```python\nimport sys\nsys.exit(0)\n```",
        "\udcff\ud800 lone surrogates",
    ],
    ids=["empty", "prose", "5MB", "nul", "no-fence", "os_exit", "sys_exit", "surrogates"],
)
def test_bad_actions_give_failed_turn(action, make_env):
    env = make_env()
    obs, _ = env.reset(options={"task_id": "HumanEval/0"})
    obs, reward, terminated, truncated, info = env.step(action)
    assert reward == 0.0 and not terminated and not truncated
    assert not info["passed"]
    assert obs in env.observation_space
    shown = obs["compilation_feedback"] + obs["execution_feedback"]
    assert shown.strip(), "a failed turn must say why"
    # the env keeps working: the right answer still passes
    obs, reward, terminated, _, _ = env.step(env.task.ground_truth)
    assert reward == 1.0 and terminated
    env.close()


def test_oversized_reply_explained(make_env):
    env = make_env(max_reply_chars=1000)
    env.reset(options={"task_id": "HumanEval/0"})
    obs, reward, *_ , info = env.step("y" * 1001)
    assert reward == 0.0 and not info["compile_ok"]
    assert "1001 characters, more than the limit of 1000" in obs["compilation_feedback"]
    assert obs["execution_feedback"] == ""


@pytest.mark.parametrize("action", [None, 42, b"bytes", ["code"]])
def test_non_str_action_is_type_error(action, make_env):
    env = make_env()
    env.reset(seed=0)
    with pytest.raises(TypeError, match=type(action).__name__):
        env.step(action)  # type: ignore[arg-type]


def test_reward_judged_on_all_tests_under_partial_feedback(make_env):
    env = make_env("CF-EF_partial")
    env.reset(options={"task_id": "HumanEval/0"})
    # right on the first 3 asserts of HumanEval/0, wrong on the 4th and later
    code = (
        "def has_close_elements(numbers, threshold):\n"
        "    return threshold in (0.3, 0.95)"
    )
    obs, reward, terminated, _, info = env.step(code)
    assert obs["execution_feedback"] == "Passed all test runs"
    assert reward == 0.0 and not terminated
    assert info["pass_fraction"] < 1.0


def test_compile_error_turn(make_env):
    env = make_env()
    env.reset(options={"task_id": "HumanEval/0"})
    obs, reward, _, _, info = env.step("def has_close_elements(:\n  pass")
    assert reward == 0.0 and not info["compile_ok"]
    assert obs["compilation_feedback"].startswith("Traceback (most recent call last):")
    # the reference ran it anyway and reported ALL and the SyntaxError's text (line 4: the header has 3)
    assert obs["execution_feedback"] == "ALL\ninvalid syntax (__test__.py, line 4)\n"
    assert {t["outcome"] for t in info["tests"]} == {"not_run"}  # never run here
    assert info["actionable"] and not info["shown_compiles"]
    rich = make_env(feedback_style="rich")
    rich.reset(options={"task_id": "HumanEval/0"})
    obs, _, _, _, info = rich.step("def has_close_elements(:\n  pass")
    assert obs["execution_feedback"] == "" and info["feedback_shown"]["execution"] is None  # CF says it all
    with pytest.raises(ValueError, match="feedback_style must be one of"):
        make_env(feedback_style="fancy")


def test_truncation_after_max_turns_and_reset_needed(make_env):
    env = make_env(max_turns=2)
    obs, _ = env.reset(options={"task_id": "HumanEval/1"})
    flags = []
    for expected_turn in range(3):
        assert obs["turn"] == expected_turn
        obs, reward, terminated, truncated, info = env.step("def f(): pass")
        flags.append((terminated, truncated))
    assert flags == [(False, False), (False, False), (False, True)]
    assert info["episode_end"] == "max_turns" and obs["turn"] == 3
    with pytest.raises(ResetNeeded):
        env.step("x")


def test_step_before_reset(make_env):
    with pytest.raises(ResetNeeded):
        make_env().step("x = 1")


def test_same_seed_same_actions_identical(make_env):
    actions = ["def f(:", "```python\ndef x():\n    return 1\n```", "", "import math"]

    def play(seed: int):
        env = make_env()
        obs, info = env.reset(seed=seed)
        trace = [(obs, info)]
        for action in actions:
            trace.append(env.step(action))
        env.close()
        return trace

    first, second = play(7), play(7)
    assert first == second  # infos compare equal: timings are excluded from equality
    assert first[1][4]["timings"].step_s > 0
    seeds_tasks = {play_task for play_task in (make_env().reset(seed=s)[1]["task_id"] for s in range(8))}
    assert len(seeds_tasks) > 1


def test_reset_options(make_env):
    env = make_env()
    assert env.reset(options={"task_index": 3})[1]["task_id"] == "HumanEval/3"
    with pytest.raises(ValueError, match="unknown reset option"):
        env.reset(options={"taskid": "HumanEval/3"})
    with pytest.raises(KeyError, match="HumanEval/9999"):
        env.reset(options={"task_id": "HumanEval/9999"})


def test_observation_fields_and_info(make_env):
    env = make_env("CF-EF_full")
    obs, info = env.reset(options={"task_id": "HumanEval/2"})
    assert tuple(obs) == OBSERVATION_KEYS
    assert obs["task"] == env.task.prompt and obs["code"] == "" and obs["turn"] == 0
    assert info["test_names"] == list(env.task.test_names)
    obs, reward, terminated, truncated, info = env.step(env.task.ground_truth)
    assert obs["code"] == env.task.ground_truth
    assert info["feedback_shown"] == {"compilation": True, "execution": "full", "verbal": None}
    assert all(t["outcome"] == "passed" for t in info["tests"])
    assert info["episode_end"] == "passed"


def test_render_ansi(make_env):
    env = make_env(render_mode="ansi")
    env.reset(options={"task_id": "HumanEval/0"})
    assert "HumanEval/0" in env.render()
    env.step("def has_close_elements(a, b):\n    return None")
    text = env.render()
    assert "execution_feedback" in text and "TEST_1" in text


def test_bad_constructor_arguments(make_env):
    with pytest.raises(ValueError, match="unknown feedback combination"):
        ConvCodeWorldEnv("CF-EF_most", dataset="humaneval")
    with pytest.raises(ValueError, match="max_turns"):
        make_env(max_turns=-1)
    with pytest.raises(ValueError, match="empty"):
        make_env(task_ids=[], limit=0)


def test_reset_prepares_the_task_so_that_its_first_step_calibrates_nothing(humaneval):
    """An unseen task is calibrated (its canonical solution run) when its episode begins, not in its first step."""
    from convcodeworld_gym.sandbox.host.profile import profile_key

    task = humaneval["HumanEval/7"]
    with SandboxExecutor(workers=1, shipped=False, cache=False) as ex:
        env = ConvCodeWorldEnv("CF-EF_full", dataset=humaneval, executor=ex)
        key = profile_key(task, ex.fingerprint())
        assert ex.profiles.get(key) is None
        env.reset(options={"task_id": task.task_id})
        profile = ex.profiles.get(key)
        assert profile is not None and profile.canonical_passed
        _, reward, *_ = env.step(task.ground_truth)
        assert reward == 1.0 and ex.profiles.get(key) == profile
