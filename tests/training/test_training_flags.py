"""The training programs' shared flags (convcodeworld_gym.training.flags): one spelling of the feedback combination,
``--feedback``, in every program, taking a combination or its gym id, with each program's former spelling a warning
alias; and grpo_trl.py's lengths (``--max-feedback-chars`` counts characters and stays out of the token budget of a
model call). No TRL or torch needed: only the programs' parsers are built."""

from __future__ import annotations

import contextlib
import io
import warnings

import pytest

from convcodeworld_gym.training.flags import DeprecatedFlagWarning
from convcodeworld_gym.training.grpo import REVISE, feedback_message

#: Each training program and the spelling it used for the feedback combination before --feedback.
PROGRAMS = {"grpo_trl": None, "grpo_trl_tools": "--env-id", "sb3_ppo": "--combination", "bandit": "--combination",
            "verifiers_rollouts": "--gym-id"}



def _parse(parser, argv):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        args = parser.parse_args(argv)
    return args, [w for w in caught if issubclass(w.category, DeprecatedFlagWarning)]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_every_program_takes_feedback_as_a_combination_or_a_gym_id(name, training_program):
    parser = training_program(name).build_parser()
    for given in ("CF-EF_partial", "ConvCodeWorld-CF-EF_partial-v0", "CF EF(partial)"):
        args, warned = _parse(parser, ["--feedback", given])
        assert args.feedback == "CF-EF_partial" and not warned, given
    assert _parse(parser, [])[0].feedback == "CF-EF_full"  # every program's default
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), pytest.raises(SystemExit):
        parser.parse_args(["--feedback", "ConvCodeWorld-EF-v0"])
    assert "--feedback: 'ConvCodeWorld-EF-v0' is no feedback combination: give one of CF, " in stderr.getvalue()
    assert "or its gym id, e.g. ConvCodeWorld-CF-EF_full-v0" in stderr.getvalue()


@pytest.mark.parametrize("name", sorted(n for n, old in PROGRAMS.items() if old))
def test_a_programs_former_spelling_still_works_warns_and_is_not_in_help(name, training_program):
    old = PROGRAMS[name]
    parser = training_program(name).build_parser()
    args, warned = _parse(parser, [old, "ConvCodeWorld-CF-EF_full-SNF-v0"])
    assert args.feedback == "CF-EF_full-SNF"
    assert [str(w.message) for w in warned] == [f"{old} is deprecated and will be removed: use --feedback (same value)"]
    assert issubclass(DeprecatedFlagWarning, FutureWarning)  # shown to whoever runs the program
    assert "--feedback" in parser.format_help() and old not in parser.format_help()


def test_grpo_trl_max_feedback_chars_is_no_token_count(training_program):
    """--max-feedback-tokens counted characters, and grpo_trl.py added it to GRPOConfig.max_completion_length, which
    TRL 1.16 gives its vLLM generation as each call's max_tokens: a call's length is --max-new-tokens alone."""
    grpo = training_program("grpo_trl")
    parser = grpo.build_parser()
    args, warned = _parse(parser, ["--max-new-tokens", "256", "--turns", "3", "--max-feedback-chars", "900"])
    assert args.max_feedback_chars == 900 and not warned
    assert grpo.program_settings(args)["max_completion_length"] == 256
    args, warned = _parse(parser, ["--max-feedback-tokens", "300"])
    assert args.max_feedback_chars == 300 and len(warned) == 1 and "--max-feedback-chars" in str(warned[0].message)
    assert "--max-feedback-tokens" not in parser.format_help()


def test_a_cut_feedback_turn_keeps_its_closing_instruction():
    obs = {"compilation_feedback": "The code compiles.", "execution_feedback": "Traceback ...\n" * 200,
           "verbal_feedback": "Check the empty list."}
    whole = feedback_message(obs)
    assert whole.endswith(REVISE) and "Check the empty list." in whole
    cut = feedback_message(obs, max_chars=100)
    assert cut.endswith("\n...\n\n" + REVISE) and len(cut) == 100 + len("\n...\n\n") + len(REVISE)
    assert cut.startswith(whole[:100])


#: The programs that take --canary from convcodeworld_gym.training.flags (verifiers_rollouts.py defines its own).
CANARY_PROGRAMS = ("bandit", "grpo_trl", "grpo_trl_tools", "sb3_ppo")


@pytest.mark.parametrize("name", CANARY_PROGRAMS)
def test_every_training_program_takes_a_canary_share_and_rejects_one_outside_0_1_naming_the_flag(name, training_program):
    parser = training_program(name).build_parser()
    args, _ = _parse(parser, [])
    assert (args.canary, args.canary_seed) == (0.0, 0)  # no twins unless asked for
    args, _ = _parse(parser, ["--canary", "0.25", "--canary-seed", "3"])
    assert (args.canary, args.canary_seed) == (0.25, 3)
    for bad in ("1", "1.5", "-0.1", "nan", "tenth"):
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr), pytest.raises(SystemExit):
            parser.parse_args(["--canary", bad])
        assert (f"argument --canary: {bad!r} is no share: --canary takes the share of the tasks trained on that are "
                "canary twins, a number in [0, 1), e.g. --canary 0.1") in stderr.getvalue(), bad
    assert "--canary SHARE" in parser.format_help() and "--canary-seed N" in parser.format_help()


def test_a_canary_share_the_tasks_cannot_give_exits_naming_the_flag_and_the_most_it_can_be():
    from convcodeworld_gym.tasks import is_canary, load_tasks
    from convcodeworld_gym.training.flags import canary_tasks

    tasks = load_tasks("humaneval", limit=2)
    assert canary_tasks(tasks, 0.0) is tasks
    assert [is_canary(t) for t in canary_tasks(tasks, 0.5, replace=True)].count(True) == 1
    with pytest.raises(SystemExit, match=r"^--canary 0\.9: canary=0\.9 asks for 18 twins, but only 2 of the set's 2 "
                                         r"tasks have a verified twin; pass canary <= 0\.5"):
        canary_tasks(tasks, 0.9)
