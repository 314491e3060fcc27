"""Dreaming's pure parts: the candidate score, the gate vocabulary and the run statuses. No Django, no clock."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

# The weights of the candidate score: how often and how well a memory was recalled weigh most, then how recently,
# then how new it is. They sum to 1, so a score is in [0, 1].
WEIGHT_FREQUENCY = 0.30
WEIGHT_RELEVANCE = 0.35
WEIGHT_RECENCY = 0.20
WEIGHT_FRESHNESS = 0.15
# recall_count at which frequency is full.
FULL_FREQUENCY_COUNT = 2


class Gate(StrEnum):
    """The gates in the order they are checked, cheapest first; `disabled` is the configuration switch."""

    DISABLED = "disabled"
    TIME = "time"
    SESSIONS = "sessions"
    LOCK = "lock"
    SIGNAL = "signal"


class RunStatus(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELED = "canceled"


class RunStep(StrEnum):
    """A run's steps, in order. A failure names the step it happened in."""

    CANDIDATES = "candidates"
    ARTIFACT = "artifact"
    SYNTHESIS = "synthesis"
    SUBMIT = "submit"
    STAMP = "stamp"


def half_life_decay(age_days: float, half_life_days: float) -> float:
    """0.5^(age/half-life): 1 now, 0.5 after one half-life. A future time (clock skew) counts as now."""
    return 0.5 ** (max(0.0, age_days) / half_life_days)


@dataclass(frozen=True)
class ScoreParts:
    frequency: float
    relevance: float
    recency: float
    freshness: float

    @property
    def score(self) -> float:
        return (WEIGHT_FREQUENCY * self.frequency + WEIGHT_RELEVANCE * self.relevance
                + WEIGHT_RECENCY * self.recency + WEIGHT_FRESHNESS * self.freshness)


def days_between(earlier: datetime, later: datetime) -> float:
    return (later - earlier).total_seconds() / 86400.0


def candidate_score(*, recall_count: int, recall_ema: float, last_recalled_at: datetime, updated_at: datetime,
                    now: datetime, half_life_days: float) -> ScoreParts:
    """`0.30·min(1, count/2) + 0.35·relevance + 0.20·recency + 0.15·freshness`.

    relevance is the recall signal's EMA (clamped to [0, 1]); recency decays with the time since the memory was
    last recalled, freshness with the time since it was last updated, both with the same half-life.
    """
    return ScoreParts(
        frequency=min(1.0, recall_count / FULL_FREQUENCY_COUNT),
        relevance=min(1.0, max(0.0, recall_ema)),
        recency=half_life_decay(days_between(last_recalled_at, now), half_life_days),
        freshness=half_life_decay(days_between(updated_at, now), half_life_days),
    )
