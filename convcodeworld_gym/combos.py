"""The 9 feedback combinations of ConvCodeWorld, and the length of its episodes.

Compilation feedback (CF) is always on; execution feedback (EF) is none, partial or
full; verbal feedback is none, novice (SNF) or expert (SEF). An episode is turn 0 and up to
``DEFAULT_MAX_TURNS`` feedback turns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["FeedbackConfig", "ALL_CONFIGS", "ExecutionMode", "VerbalMode", "DEFAULT_MAX_TURNS"]

#: Feedback turns after turn 0 in the paper (so at most 11 programs a task, turns 0..10).
DEFAULT_MAX_TURNS = 10

ExecutionMode = Literal["none", "partial", "full"]
VerbalMode = Literal["none", "novice", "expert"]

_EF_PART = {"none": "", "partial": "EF_partial", "full": "EF_full"}
_VF_PART = {"none": "", "novice": "SNF", "expert": "SEF"}
_EF_PAPER = {"none": "", "partial": "EF(partial)", "full": "EF(full)"}


@dataclass(frozen=True)
class FeedbackConfig:
    """One feedback combination.

    >>> FeedbackConfig("full", "novice").name
    'CF-EF_full-SNF'
    >>> FeedbackConfig.parse("CF-EF_partial-SEF").paper_name
    'CF EF(partial) SEF'
    >>> FeedbackConfig.parse("CF")
    FeedbackConfig(execution='none', verbal='none')
    """

    execution: ExecutionMode = "none"
    verbal: VerbalMode = "none"

    def __post_init__(self) -> None:
        if self.execution not in _EF_PART:
            raise ValueError(f"execution feedback must be one of {sorted(_EF_PART)}, got {self.execution!r}")
        if self.verbal not in _VF_PART:
            raise ValueError(f"verbal feedback must be one of {sorted(_VF_PART)}, got {self.verbal!r}")

    @property
    def name(self) -> str:
        """Id part, e.g. ``CF-EF_full-SNF``."""
        return "-".join(p for p in ("CF", _EF_PART[self.execution], _VF_PART[self.verbal]) if p)

    @property
    def paper_name(self) -> str:
        """The paper's label, e.g. ``CF EF(full) SNF``."""
        return " ".join(p for p in ("CF", _EF_PAPER[self.execution], _VF_PART[self.verbal]) if p)

    @classmethod
    def parse(cls, name: str | FeedbackConfig) -> FeedbackConfig:
        """Accept an id part (``CF-EF_full-SNF``) or a :class:`FeedbackConfig`."""
        if isinstance(name, FeedbackConfig):
            return name
        for config in ALL_CONFIGS:
            if name in (config.name, config.paper_name):
                return config
        raise ValueError(
            f"unknown feedback combination {name!r}; choose one of: {', '.join(c.name for c in ALL_CONFIGS)}"
        )


ALL_CONFIGS: tuple[FeedbackConfig, ...] = tuple(
    FeedbackConfig(ef, vf)  # type: ignore[arg-type]
    for vf in ("none", "novice", "expert")
    for ef in ("none", "partial", "full")
)
