"""Candidates: the memories of one workspace that agents keep recalling and dreaming has not promoted yet.

A candidate is a recall signal that is unpromoted, has `recall_count >= gates.min_recall_count`, belongs to one of
the workspace's own roots (the workspace scope and its agents' workspace tiers), names a memory still in the
catalog outside `_system/`, was not itself written by dreaming (a synthesis is never re-synthesized), and scores at
least `gates.min_score`. Global memories are not candidates: a signal does not record which workspace recalled
it, and promoting it from one workspace would hide it from every other workspace's dreaming.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import OperationalError, connection

from compozy.config import DreamConfig
from memory.domain.dreaming import (
    FULL_FREQUENCY_COUNT,
    WEIGHT_FREQUENCY,
    WEIGHT_FRESHNESS,
    WEIGHT_RECENCY,
    WEIGHT_RELEVANCE,
    ScoreParts,
    candidate_score,
)
from memory.domain.enums import Origin

_WHERE = """
FROM memory_recall_signals s
JOIN memory_catalog_entries e ON e.root_key = s.root_key AND e.filename = s.filename
WHERE s.promoted_at IS NULL AND s.recall_count >= %s
  AND (s.root_key = %s OR (s.root_key >= 'agent:' AND s.root_key < 'agent;' AND s.root_key LIKE %s))
  AND e.is_system = 0
  AND COALESCE(json_extract(e.frontmatter, '$.provenance.source_actor'), '') != %s
"""
_COLUMNS = ("s.root_key, s.filename, s.recall_count, s.recall_score, s.last_recalled_at, e.updated_at, e.name, "
            "e.type, e.scope, e.agent_name, e.agent_tier, e.id")

# The score computed by SQLite over every eligible signal (1,000 signals in a few milliseconds, where building
# them in Python took tens), with the weights and half-life of memory.domain.dreaming.candidate_score, which
# remains the reference (tests compare the two). Only the chosen rows come back to Python.
_PARTS = """
         MIN(1.0, s.recall_count * 1.0 / %s) AS frequency,
         MAX(0.0, MIN(1.0, s.recall_score)) AS relevance,
         pow(0.5, MAX(0.0, (%s - julianday(s.last_recalled_at)) / %s)) AS recency,
         pow(0.5, MAX(0.0, (%s - julianday(e.updated_at)) / %s)) AS freshness
"""
_SCORE = "%s * frequency + %s * relevance + %s * recency + %s * freshness"
_SCORED = f"""
WITH parts AS (
  SELECT {_COLUMNS}, {_PARTS}
  {_WHERE}
), scored AS (
  SELECT *, {_SCORE} AS score FROM parts
)
SELECT root_key, filename, recall_count, recall_score, last_recalled_at, updated_at, name, type, scope, agent_name,
       agent_tier, id, frequency, relevance, recency, freshness, COUNT(*) OVER () AS eligible
FROM scored WHERE score >= %s ORDER BY score DESC, root_key, filename LIMIT %s
"""
# The signal gate needs only how many are eligible: an aggregate over the score, with none of the rows' columns
# and no window over them (which made SQLite keep every scored row to count it), about half the work.
_COUNTED = f"""
SELECT COUNT(*) FROM (SELECT {_PARTS} {_WHERE})
WHERE {_SCORE} >= %s
"""
_sql_math: bool | None = None


def moment(value: Any) -> datetime:
    """A timestamp read by raw SQL (naive UTC datetime or its text) as an aware UTC datetime."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=UTC)


@dataclass(frozen=True)
class DreamCandidate:
    root_key: str
    filename: str
    name: str
    type: str
    scope: str
    agent_name: str
    agent_tier: str
    recall_count: int
    recall_score: float
    last_recalled_at: datetime
    updated_at: datetime
    parts: ScoreParts
    entry_id: int

    @property
    def score(self) -> float:
        return self.parts.score

    def as_json(self, *, snippet: str = "") -> dict[str, Any]:
        return {
            "root_key": self.root_key, "filename": self.filename, "name": self.name, "type": self.type,
            "scope": self.scope, "agent_name": self.agent_name or None, "agent_tier": self.agent_tier or None,
            "recall_count": self.recall_count, "recall_score": round(self.recall_score, 6),
            "last_recalled_at": self.last_recalled_at.isoformat().replace("+00:00", "Z"),
            "updated_at": self.updated_at.isoformat().replace("+00:00", "Z"),
            "score": round(self.score, 6),
            "parts": {"frequency": round(self.parts.frequency, 6), "relevance": round(self.parts.relevance, 6),
                      "recency": round(self.parts.recency, 6), "freshness": round(self.parts.freshness, 6)},
            "snippet": snippet,
        }


@dataclass(frozen=True)
class Selection:
    """Every eligible candidate's count, and the ones chosen: the best `max_candidates`, best first."""

    eligible: int
    chosen: list[DreamCandidate]


def _julian(moment_: datetime) -> float:
    return moment_.timestamp() / 86400.0 + 2440587.5


def _where_params(workspace_id: str, dream: DreamConfig) -> list[object]:
    return [dream.gates.min_recall_count, f"workspace:{workspace_id}", f"agent:%:workspace:{workspace_id}",
            Origin.DREAMING.value]


def _score_params(workspace_id: str, dream: DreamConfig, now: datetime) -> list[object]:
    """The parameters of _PARTS, _WHERE, _SCORE and the minimum score, in that order."""
    julian, half_life = _julian(now), dream.half_life_days
    return [FULL_FREQUENCY_COUNT, julian, half_life, julian, half_life, *_where_params(workspace_id, dream),
            WEIGHT_FREQUENCY, WEIGHT_RELEVANCE, WEIGHT_RECENCY, WEIGHT_FRESHNESS, dream.gates.min_score]


def _scored_rows(sql: str, params: list[object]) -> list[tuple] | None:
    """The rows of a scoring query, or None when SQLite has no math functions (then the caller scores in Python)."""
    global _sql_math
    if _sql_math is False:
        return None
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
    except OperationalError as exc:
        if "no such function" not in str(exc):
            raise
        _sql_math = False  # an SQLite built without its math functions: score in Python
        return None
    _sql_math = True
    return rows


def count_candidates(workspace_id: str, dream: DreamConfig, *, now: datetime) -> int:
    """How many candidates are eligible, without choosing any: what the signal gate's check needs."""
    rows = _scored_rows(_COUNTED, _score_params(workspace_id, dream, now))
    if rows is None:
        return _select_in_python(workspace_id, dream, now=now).eligible
    return int(rows[0][0])


def select_candidates(workspace_id: str, dream: DreamConfig, *, now: datetime) -> Selection:
    rows = _scored_rows(_SCORED, [*_score_params(workspace_id, dream, now), dream.max_candidates])
    if rows is None:
        return _select_in_python(workspace_id, dream, now=now)
    chosen = [DreamCandidate(root, filename, name, kind, scope, agent, tier, count, ema, moment(last),
                             moment(updated), ScoreParts(frequency, relevance, recency, freshness), entry)
              for (root, filename, count, ema, last, updated, name, kind, scope, agent, tier, entry,
                   frequency, relevance, recency, freshness, _eligible) in rows]
    return Selection(eligible=rows[0][-1] if rows else 0, chosen=chosen)


def _select_in_python(workspace_id: str, dream: DreamConfig, *, now: datetime) -> Selection:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {_COLUMNS} {_WHERE}", _where_params(workspace_id, dream))
        rows = cursor.fetchall()
    scored = []
    for root_key, filename, count, ema, last, updated, name, kind, scope, agent, tier, entry_id in rows:
        parts = candidate_score(recall_count=count, recall_ema=ema, last_recalled_at=moment(last),
                                updated_at=moment(updated), now=now, half_life_days=dream.half_life_days)
        if parts.score >= dream.gates.min_score:
            scored.append(DreamCandidate(root_key, filename, name, kind, scope, agent, tier, count, ema, moment(last),
                                         moment(updated), parts, entry_id))
    scored.sort(key=lambda c: (-c.score, c.root_key, c.filename))
    return Selection(eligible=len(scored), chosen=scored[: dream.max_candidates])


def candidate_bodies(candidates: list[DreamCandidate]) -> dict[int, str]:
    """The indexed body of each chosen candidate (its one chunk), by catalog entry id."""
    if not candidates:
        return {}
    ids = [c.entry_id for c in candidates]
    marks = ", ".join("%s" for _ in ids)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT entry_id, body FROM memory_chunks WHERE entry_id IN ({marks}) ORDER BY ordinal", ids)
        bodies: dict[int, str] = {}
        for entry_id, body in cursor.fetchall():
            bodies.setdefault(entry_id, body)
    return bodies
