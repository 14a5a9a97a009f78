"""The command-line flags every training program shares, and how a flag is renamed without breaking a command line.

Each program in ``training/`` plays one feedback combination, and names it with one flag, ``--feedback``, which takes
the combination (``CF-EF_full-SNF``, or the paper's ``"CF EF(full) SNF"``) or its gym id
(``ConvCodeWorld-CF-EF_full-SNF-v0``); a program's former spelling (``--env-id``, ``--combination``, ``--gym-id``)
still works, warns (:class:`DeprecatedFlagWarning`) and is left out of ``--help``. ``--canary SHARE`` (with
``--canary-seed N``) mixes canary twins into the tasks a program trains on (docs/canary.md); a program reports their
pass rate beside its reward, never in it.

Importing this module imports neither TRL nor torch.

Holds:
    feedback_name          a combination named by its id part, paper name or gym id, as its id part
    add_feedback_argument  ``--feedback`` (and a program's former spellings of it), added to a parser
    add_deprecated_alias   an old flag that sets a new one's value, warns, and is hidden from ``--help``
    DeprecatedFlagWarning  a command line used a flag's old name
    FEEDBACK_FLAG          the flag's name, ``--feedback``
    canary_share           ``--canary``'s value: a share in [0, 1), checked
    add_canary_arguments   ``--canary`` and ``--canary-seed``, added to a parser
    canary_tasks           a task set with the twins those flags ask for mixed in, or the flags' error
    CANARY_FLAG            the flag's name, ``--canary``
    add_perturb_arguments  ``--perturb`` and ``--perturb-seed``: perturbed public tests in what the feedback shows
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Sequence
from typing import Any

from ..combos import ALL_CONFIGS, FeedbackConfig
from ..registration import ENV_PREFIX
from ..tasks import TaskSet, with_canaries
from ..tasks.perturb import PERTURBATIONS

__all__ = ["feedback_name", "add_feedback_argument", "add_deprecated_alias", "DeprecatedFlagWarning", "FEEDBACK_FLAG",
           "canary_share", "add_canary_arguments", "canary_tasks", "CANARY_FLAG", "add_perturb_arguments"]

#: The one spelling of the feedback-combination flag.
FEEDBACK_FLAG = "--feedback"
#: The flag that mixes canary twins into the tasks trained on.
CANARY_FLAG = "--canary"


class DeprecatedFlagWarning(FutureWarning):
    """A command line used a flag's old name; the message names the new one. A FutureWarning, so Python shows it to
    whoever runs the program."""


def feedback_name(text: str) -> str:
    """The combination ``text`` names, as its id part: ``text`` is the id part, the paper's name, or a live gym id.

    >>> feedback_name("CF-EF_full"), feedback_name("ConvCodeWorld-CF-EF_full-SNF-v0"), feedback_name("CF EF(partial)")
    ('CF-EF_full', 'CF-EF_full-SNF', 'CF-EF_partial')

    Raises:
        argparse.ArgumentTypeError: ``text`` names no combination (the message lists both forms).
    """
    prefix, suffix = f"{ENV_PREFIX}-", "-v0"
    inner = text[len(prefix):-len(suffix)] if text.startswith(prefix) and text.endswith(suffix) else text
    try:
        return FeedbackConfig.parse(inner).name
    except ValueError:
        names = ", ".join(c.name for c in ALL_CONFIGS)
        raise argparse.ArgumentTypeError(
            f"{text!r} is no feedback combination: give one of {names}, or its gym id, e.g. "
            f"{ENV_PREFIX}-CF-EF_full-v0") from None


class _DeprecatedAlias(argparse.Action):
    """Stores its value where the new flag does, after a :class:`DeprecatedFlagWarning` naming the new flag."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, replacement: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.replacement = replacement

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        warnings.warn(f"{option_string} is deprecated and will be removed: use {self.replacement} (same value)",
                      DeprecatedFlagWarning, stacklevel=2)
        setattr(namespace, self.dest, values)


def add_deprecated_alias(parser: argparse.ArgumentParser, old: str, new: str, **kwargs: Any) -> None:
    """Make ``old`` set the value of the flag ``new`` already on ``parser`` (its ``type`` applies), with a
    :class:`DeprecatedFlagWarning` naming ``new``; ``old`` is left out of ``--help``. ``kwargs`` overrides what is
    copied from ``new`` (``type``, ``metavar``).

    >>> p = argparse.ArgumentParser()
    >>> _ = p.add_argument("--max-feedback-chars", type=int, default=4000)
    >>> add_deprecated_alias(p, "--max-feedback-tokens", "--max-feedback-chars")
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     p.parse_args(["--max-feedback-tokens", "512"]).max_feedback_chars, str(caught[0].message)
    (512, '--max-feedback-tokens is deprecated and will be removed: use --max-feedback-chars (same value)')
    """
    target = next((a for a in parser._actions if new in a.option_strings), None)  # noqa: SLF001 - argparse's own list
    if target is None:
        raise ValueError(f"add_deprecated_alias: the parser has no {new} to make {old} an alias of; add {new} first")
    settings: dict[str, Any] = {"type": target.type, "metavar": target.metavar, **kwargs}
    parser.add_argument(old, dest=target.dest, action=_DeprecatedAlias, replacement=new, default=argparse.SUPPRESS,
                        help=argparse.SUPPRESS, **settings)


def add_feedback_argument(parser: argparse.ArgumentParser, *, default: str = "CF-EF_full",
                          deprecated: Sequence[str] = (), help_note: str = "") -> argparse.ArgumentParser:
    """Add ``--feedback`` to ``parser`` (dest ``feedback``: the combination's id part, whatever form was given; a gym
    id for it is :func:`~convcodeworld_gym.registration.env_id`), and each of ``deprecated`` as its alias
    (:func:`add_deprecated_alias`). Returns ``parser``.

    >>> p = add_feedback_argument(argparse.ArgumentParser(), deprecated=["--env-id"])
    >>> p.parse_args([]).feedback, p.parse_args(["--feedback", "ConvCodeWorld-CF-EF_partial-SEF-v0"]).feedback
    ('CF-EF_full', 'CF-EF_partial-SEF')
    """
    parser.add_argument(FEEDBACK_FLAG, type=feedback_name, default=feedback_name(default), metavar="COMBINATION",
                        help=f"feedback combination, e.g. CF-EF_full-SNF, or its gym id ConvCodeWorld-CF-EF_full-SNF-v0 "
                             f"(default {feedback_name(default)}){help_note}")
    for old in deprecated:
        add_deprecated_alias(parser, old, FEEDBACK_FLAG)
    return parser


def canary_share(text: str) -> float:
    """``--canary``'s value: the share of the tasks trained on that are canary twins, a number in [0, 1) (0: none).

    >>> canary_share("0.1"), canary_share("0")
    (0.1, 0.0)

    Raises:
        argparse.ArgumentTypeError: ``text`` is no number, or one outside [0, 1) (the message names ``--canary`` and
            what to give).
    """
    try:
        share = float(text)
    except ValueError:
        share = None
    if share is None or not 0.0 <= share < 1.0:  # also nan and inf
        raise argparse.ArgumentTypeError(
            f"{text!r} is no share: {CANARY_FLAG} takes the share of the tasks trained on that are canary twins, a "
            f"number in [0, 1), e.g. {CANARY_FLAG} 0.1 (0: no twins)")
    return share


def add_canary_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``--canary SHARE`` (dest ``canary``: a share in [0, 1), :func:`canary_share`; default 0.0, no twins) and
    ``--canary-seed N`` (dest ``canary_seed``, default 0: which tasks are twinned, as
    :func:`~convcodeworld_gym.tasks.with_canaries` draws them). Returns ``parser``.

    >>> p = add_canary_arguments(argparse.ArgumentParser())
    >>> p.parse_args([]).canary, p.parse_args(["--canary", "0.2", "--canary-seed", "3"]).canary_seed
    (0.0, 3)
    """
    parser.add_argument(CANARY_FLAG, type=canary_share, default=0.0, metavar="SHARE",
                        help="mix canary twins into the tasks trained on: the share of them that are twins, in [0, 1) "
                             "(default 0: none); their pass rate is reported beside the reward, never in it "
                             "(docs/canary.md)")
    parser.add_argument("--canary-seed", type=int, default=0, metavar="N",
                        help=f"which tasks a {CANARY_FLAG} share twins (default 0)")
    return parser


def canary_tasks(tasks: TaskSet, share: float, seed: int = 0, *, replace: bool = False) -> TaskSet:
    """``tasks`` with the canary twins ``--canary SHARE --canary-seed SEED`` ask for mixed in
    (:func:`~convcodeworld_gym.tasks.with_canaries`: added after the tasks, or with ``replace`` each in its task's
    place, for doors that tell tasks apart by their prompt); ``tasks`` itself when ``share`` is 0.

    >>> from convcodeworld_gym.tasks import load_tasks
    >>> [t.task_id for t in canary_tasks(load_tasks("humaneval", limit=2), 0.5)][-2:]
    ['HumanEval/0/canary', 'HumanEval/1/canary']

    Raises:
        SystemExit: the share asks for more twins than the tasks have (the message names ``--canary`` and the most
            it can be).
    """
    try:
        return with_canaries(tasks, share or None, seed=seed, replace=replace)
    except ValueError as exc:
        raise SystemExit(f"{CANARY_FLAG} {share:g}: {exc}") from None


def add_perturb_arguments(parser: argparse.ArgumentParser) -> None:
    """``--perturb KIND`` (default: none) and ``--perturb-seed N``: the envs' ``perturb=`` and ``perturb_seed=``
    (:mod:`~convcodeworld_gym.tasks.perturb`): two public tests of a task swap their expected values in what the
    feedback shows, the reward stays on the true tests, and the program reports the share of programs that followed
    the swap beside the reward, never in it.

    >>> p = argparse.ArgumentParser(); add_perturb_arguments(p)
    >>> p.parse_args(["--perturb", "swap_public_outputs"]).perturb, p.parse_args([]).perturb
    ('swap_public_outputs', None)
    """
    parser.add_argument("--perturb", choices=PERTURBATIONS, default=None,
                        help="perturb the public tests the feedback shows (two expected values swapped); the "
                             "perturbation-following rate is reported beside the reward (default: none)")
    parser.add_argument("--perturb-seed", type=int, default=0, help="seed of the perturbation's draw (default 0)")

