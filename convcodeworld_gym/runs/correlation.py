"""Do ConvCodeBench (static) rankings agree with ConvCodeWorld (live) ones?

Several policies are each run live and statically (against one reference log). Per feedback
combination, the policies' live MRR and static MRR are ranked and compared with Spearman's
rank correlation, and likewise Recall. The paper reports 0.82 to 0.99 for real models.

Live and static run directories are paired by position: ``live_dirs[k]`` and
``static_dirs[k]`` are the same policy. The live run's turn-0 rows serve as the model's own
turn-0 program in its static Recall, as the paper uses the model's single-turn result.

Holds:
    Correlation         one combination: the policies, their live and static Scores, the two rhos
    correlate           run directories -> one Correlation per combination they share
    format_correlations a plain-text table
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..reference import ReferenceSpec
from ..errors import ReferenceLogError
from ..metrics import DEFAULT_MAX_TURNS, Scores, spearman
from ..records import TurnRecord, read_turns
from .log_scores import combinations, live_run_scores, static_run_scores

__all__ = ["Correlation", "correlate", "format_correlations"]


@dataclass(frozen=True)
class Correlation:
    """Live-vs-static agreement over policies for one combination.

    Attributes:
        feedback: the combination's id part.
        policies: one name per policy (the rows' ``policy``, else the live directory's name).
        live, static: each policy's Scores, in ``policies`` order.
        mrr_rho, recall_rho: Spearman's rho of live vs static MRR, and of Recall (NaN when a
            side has no variation: scipy cannot rank constants).
    """

    feedback: str
    policies: tuple[str, ...]
    live: tuple[Scores, ...]
    static: tuple[Scores, ...]
    mrr_rho: float
    recall_rho: float


def _policy_name(rows: Sequence[TurnRecord], directory: Path) -> str:
    names = {row.policy for row in rows if row.policy}
    return names.pop() if len(names) == 1 else directory.name


def correlate(
    live_dirs: Sequence[str | os.PathLike[str]],
    static_dirs: Sequence[str | os.PathLike[str]],
    *,
    reference: ReferenceSpec | None = None,
    max_turns: int = DEFAULT_MAX_TURNS,
) -> list[Correlation]:
    """Spearman correlations of live and static MRR and Recall, per combination all runs share.

    Args:
        live_dirs, static_dirs: run directories (or logs), paired by position, at least 2 pairs.
        reference: the reference log of the static runs; by default the one their rows name.

    Raises:
        ValueError: unequal lists or fewer than 2 policies; ReferenceLogError: no shared
            combination, or a run's rows are incomplete (see :mod:`.log_scores`).
    """
    if len(live_dirs) != len(static_dirs) or len(live_dirs) < 2:
        raise ValueError(
            f"correlate needs the same number (>= 2) of live and static runs, one pair per policy; got {len(live_dirs)} and {len(static_dirs)}"
        )
    live_rows = [read_turns(d) for d in live_dirs]
    static_rows = [read_turns(d) for d in static_dirs]
    shared = set(combinations(live_rows[0]))
    for rows in live_rows[1:] + static_rows:
        shared &= set(combinations(rows))
    if not shared:
        raise ReferenceLogError("the live and static runs share no feedback combination; run the same combinations in both")
    policies = tuple(_policy_name(rows, Path(d)) for rows, d in zip(live_rows, live_dirs))
    results = []
    for feedback in [name for name in combinations(live_rows[0]) if name in shared]:
        live = tuple(live_run_scores(rows, feedback, max_turns) for rows in live_rows)
        static = tuple(
            static_run_scores(s_rows, feedback, reference, turn0=l_rows, max_turns=max_turns)
            for s_rows, l_rows in zip(static_rows, live_rows)
        )
        results.append(
            Correlation(
                feedback=feedback,
                policies=policies,
                live=live,
                static=static,
                mrr_rho=spearman([s.mrr for s in live], [s.mrr for s in static]),
                recall_rho=spearman([s.recall for s in live], [s.recall for s in static]),
            )
        )
    return results


def _rho(value: float) -> str:
    return "n/a (constant)" if math.isnan(value) else f"{value:.3f}"


def format_correlations(results: Sequence[Correlation]) -> str:
    """A plain-text table: per combination, each policy's live/static MRR and Recall (%), then the rhos."""
    lines = []
    for result in results:
        width = max(len("policy"), *(len(name) for name in result.policies))
        lines.append(f"{result.feedback}: Spearman MRR {_rho(result.mrr_rho)}, Recall {_rho(result.recall_rho)}")
        lines.append(f"  {'policy':<{width}} {'live MRR':>9} {'static MRR':>11} {'live Rec':>9} {'static Rec':>11}")
        for name, live, static in zip(result.policies, result.live, result.static):
            lines.append(
                f"  {name:<{width}} {100 * live.mrr:>9.1f} {100 * static.mrr:>11.1f} {100 * live.recall:>9.1f} {100 * static.recall:>11.1f}"
            )
    return "\n".join(lines)
