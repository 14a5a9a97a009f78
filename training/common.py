"""What the SB3 and bandit programs share: headless plotting and the feedback check.

The programs run as scripts (``python training/<name>.py``), so this module is imported
from their own directory.

Holds:
    pyplot             matplotlib's pyplot on the headless Agg backend (the report's)
    save_figure        lay out, write a PNG and close
    require_no_verbal  refuse a combination with verbal feedback (a simulated user every turn)
    base_parser        the arguments both programs take: --smoke, --feedback (--combination: its deprecated spelling), --out,
                       --canary and --canary-seed
    canary_text        a canary pass rate as the programs print it beside a reward
"""

from __future__ import annotations

import argparse
from typing import Any

from convcodeworld_gym.combos import FeedbackConfig
from convcodeworld_gym.runs.report import headless_pyplot as pyplot
from convcodeworld_gym.training.flags import add_canary_arguments, add_feedback_argument

__all__ = ["pyplot", "save_figure", "require_no_verbal", "base_parser", "canary_text"]


def save_figure(fig: Any, path: str) -> None:
    """Tight layout, write ``path`` (PNG, 120 dpi), close the figure."""
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    pyplot().close(fig)


def require_no_verbal(combination: str) -> None:
    """Exit with a message naming ``--feedback`` unless it is a valid combination without verbal feedback."""
    try:
        config = FeedbackConfig.parse(combination)
    except ValueError as exc:
        raise SystemExit(f"--feedback {combination!r}: {exc}") from None
    if config.verbal != "none":
        raise SystemExit(f"--feedback {combination}: use one without verbal feedback (e.g. CF-EF_full); "
                         "a simulated user would be asked every turn")


def base_parser(doc: str, smoke_help: str, out_default: str) -> argparse.ArgumentParser:
    """A parser described by ``doc``'s first paragraph, with ``--smoke``, ``--feedback`` (a combination without verbal
    feedback, or its gym id; ``--combination``: its deprecated spelling), ``--out``, and ``--canary`` with
    ``--canary-seed`` (:func:`~convcodeworld_gym.training.flags.add_canary_arguments`)."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help=smoke_help)
    add_feedback_argument(p, deprecated=["--combination"], help_note="; one without verbal feedback")
    p.add_argument("--out", default=out_default, help=f"output directory (default {out_default})")
    add_canary_arguments(p)
    return p


def canary_text(rate: float | None, twins: int) -> str:
    """A canary pass rate (:func:`~convcodeworld_gym.training.grpo.canary_pass_rate`'s ``(rate, twins)``) as the
    programs print it beside a reward; ``-`` when no twin was played.

    >>> canary_text(0.25, 4), canary_text(None, 0)
    ('0.250 of 4', '- of 0')
    """
    return f"{'-' if rate is None else f'{rate:.3f}'} of {twins}"
