"""What a training program prints of the metrics its doors log beside the reward, read back from a TRL trainer's
``log_history`` (a step is an entry with ``reward``; a metric missing from a step prints ``-``).

Holds:
    per_step_line   one logged rate and its count, per step, as the line a program prints
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["per_step_line"]


def per_step_line(log_history: Sequence[Mapping[str, Any]], rate_key: str, count_key: str, *, rate_name: str,
                  count_name: str) -> str:
    """``rate_name`` of each logged step (``rate_key``, three decimals) and ``count_name`` (``count_key``).

    >>> per_step_line([{"reward": 0.5}, {"reward": 0.0, "r": 0.25, "n": 4.0}], "r", "n", rate_name="x rate",
    ...               count_name="programs per step")
    'x rate per step (never in the reward): -, 0.250; programs per step: -, 4'
    """
    steps = [entry for entry in log_history if "reward" in entry]
    rates = ", ".join(f"{entry[rate_key]:.3f}" if rate_key in entry else "-" for entry in steps) or "-"
    counts = ", ".join(f"{entry[count_key]:g}" if count_key in entry else "-" for entry in steps) or "-"
    return f"{rate_name} per step (never in the reward): {rates}; {count_name}: {counts}"
