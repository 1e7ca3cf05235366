"""The shapes a profile's Filter and Score plugins take in the runtime, and a Score's result.

A Filter or Score plugin comes in two shapes. Which one is decided once, when the framework is
built: isinstance() against a runtime-checkable Protocol is slow, against these classes it is
not, and it narrows the plugin's type for mypy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from koordsched.framework.interface import (
    BatchFilterPlugin,
    BatchScorePlugin,
    FilterPlugin,
    NormalizeScorePlugin,
    RowLocalScorePlugin,
    ScorePlugin,
    Scores,
)


@dataclass
class ScoreBreakdown:
    """Per-plugin scores of the feasible rows, kept for ``--explain``."""

    plugin: str
    weight: int
    raw: Scores
    normalized: Scores


@dataclass
class ScoreResult:
    total: Scores
    breakdown: list[ScoreBreakdown] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class BatchFilter:
    plugin: BatchFilterPlugin


@dataclass(frozen=True, slots=True)
class PerNodeFilter:
    plugin: FilterPlugin


#: A Filter plugin of the profile, in profile order.
FilterStep = BatchFilter | PerNodeFilter


@dataclass(frozen=True, slots=True)
class BatchScorer:
    plugin: BatchScorePlugin
    weight: int
    #: The plugin itself when it also implements NormalizeScore.
    normalizer: NormalizeScorePlugin | None
    #: The plugin itself when it is a RowLocalScorePlugin (and has no NormalizeScore).
    row_local: RowLocalScorePlugin | None = None


@dataclass(frozen=True, slots=True)
class PerNodeScorer:
    plugin: ScorePlugin
    weight: int
    normalizer: NormalizeScorePlugin | None


#: A Score plugin of the profile with its weight, in profile order.
ScoreStep = BatchScorer | PerNodeScorer
