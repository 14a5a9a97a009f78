"""The command-line flags every training program shares, and how a flag is renamed without breaking a command line.

Each program in ``training/`` plays one feedback combination, and names it with one flag, ``--feedback``, which takes
the combination (``CF-EF_full-SNF``, or the paper's ``"CF EF(full) SNF"``) or its gym id
(``ConvCodeWorld-CF-EF_full-SNF-v0``); a program's former spelling (``--env-id``, ``--combination``, ``--gym-id``)
still works, warns (:class:`DeprecatedFlagWarning`) and is left out of ``--help``.

Importing this module imports neither TRL nor torch.

Holds:
    feedback_name          a combination named by its id part, paper name or gym id, as its id part
    add_feedback_argument  ``--feedback`` (and a program's former spellings of it), added to a parser
    add_deprecated_alias   an old flag that sets a new one's value, warns, and is hidden from ``--help``
    DeprecatedFlagWarning  a command line used a flag's old name
    FEEDBACK_FLAG          the flag's name, ``--feedback``
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Sequence
from typing import Any

from ..combos import ALL_CONFIGS, FeedbackConfig
from ..registration import ENV_PREFIX

__all__ = ["feedback_name", "add_feedback_argument", "add_deprecated_alias", "DeprecatedFlagWarning", "FEEDBACK_FLAG"]

#: The one spelling of the feedback-combination flag.
FEEDBACK_FLAG = "--feedback"


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
