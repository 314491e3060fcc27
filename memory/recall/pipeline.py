"""The recall pipeline: two FTS5 candidate lists, a weighted score, scope shadowing, top-K.

score = w_unicode·1/(rank_u+1) + w_trigram·1/(rank_t+1) + w_recency·0.5^(age/half_life) + w_signal·EMA
(ranks from 0; a list the entry is absent from contributes 0). Weights and sizes come from configuration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection

from compozy.config import Config
from memory.catalog import fts
from memory.domain.models import SCOPE_DEPTH, ScopeRef, utc_now

from .query import RecallQuery


@dataclass
class Candidate:
    entry_id: int
    root_key: str
    scope: str
    workspace_id: str
    agent_name: str
    agent_tier: str
    filename: str
    type: str
    slug: str
    name: str
    description: str
    body: str
    updated_at: datetime
    row: dict[str, Any]
    snippet: str = ""
    unicode_rank: int | None = None
    trigram_rank: int | None = None
    parts: dict[str, float] = field(default_factory=dict)
    score: float = 0.0
    shadowed_by: dict[str, Any] | None = None

    @property
    def key(self) -> str:
        return f"{self.type}::{self.slug}"

    @property
    def depth(self) -> int:
        return SCOPE_DEPTH[f"agent:{self.agent_tier}" if self.scope == "agent" else self.scope]

    def identity(self) -> dict[str, Any]:
        return {"scope": self.scope, "agent_name": self.agent_name or None, "agent_tier": self.agent_tier or None,
                "workspace_id": self.workspace_id or None, "filename": self.filename}


@dataclass
class Recall:
    query: RecallQuery
    winners: list[Candidate]
    shadowed: list[Candidate]


_ENTRY_COLUMNS = ("id", "root_key", "scope", "workspace_id", "agent_name", "agent_tier", "filename", "type", "slug",
                  "name", "description", "updated_at", "created_at", "size", "content_hash", "is_system", "body")


def _load(entry_ids: list[int]) -> dict[int, dict[str, Any]]:
    if not entry_ids:
        return {}
    marks = ", ".join("%s" for _ in entry_ids)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT e.id, e.root_key, e.scope, e.workspace_id, e.agent_name, e.agent_tier, e.filename, e.type, "
            f"e.slug, e.name, e.description, e.updated_at, e.created_at, e.size, e.content_hash, e.is_system, "
            f"c.body FROM memory_catalog_entries e JOIN memory_chunks c ON c.entry_id = e.id WHERE e.id IN ({marks})",
            entry_ids,
        )
        return {row[0]: dict(zip(_ENTRY_COLUMNS, row, strict=True)) for row in cursor.fetchall()}


def _signals(candidates: list[Candidate]) -> dict[tuple[str, str], float]:
    if not candidates:
        return {}
    clauses = " OR ".join("(root_key = %s AND filename = %s)" for _ in candidates)
    params = [value for c in candidates for value in (c.root_key, c.filename)]
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT root_key, filename, recall_score FROM memory_recall_signals WHERE {clauses}", params)
        return {(root_key, filename): score for root_key, filename, score in cursor.fetchall()}


def _winners_elsewhere(candidates: list[Candidate], root_keys: list[str]) -> dict[str, tuple[int, dict[str, Any]]]:
    """For each candidate's type::slug, the deepest visible entry holding it, matched by the query or not."""
    keys = sorted({(c.type, c.slug) for c in candidates})
    if not keys:
        return {}
    roots = ", ".join("%s" for _ in root_keys)
    clauses = " OR ".join("(type = %s AND slug = %s)" for _ in keys)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT scope, agent_name, agent_tier, workspace_id, filename, type, slug FROM memory_catalog_entries "
            f"WHERE root_key IN ({roots}) AND is_system = 0 AND ({clauses})",
            [*root_keys, *[v for key in keys for v in key]],
        )
        deepest: dict[str, tuple[int, dict[str, Any]]] = {}
        for scope, agent, tier, workspace, filename, memory_type, slug in cursor.fetchall():
            depth = SCOPE_DEPTH[f"agent:{tier}" if scope == "agent" else scope]
            key = f"{memory_type}::{slug}"
            if key not in deepest or depth > deepest[key][0]:
                deepest[key] = (depth, {"scope": scope, "agent_name": agent or None, "agent_tier": tier or None,
                                        "workspace_id": workspace or None, "filename": filename})
        return deepest  # type: ignore[return-value]


def recall(query: RecallQuery, *, refs: list[ScopeRef], config: Config, top_k: int, include_system: bool,
           now: datetime | None = None) -> Recall:
    settings = config.memory.recall
    weights = settings.weights
    root_keys = [ref.root_key for ref in refs]
    pool = settings.raw_candidates
    with connection.cursor() as cursor:
        unknown = {term for term in query.terms if len(term) >= 5} - fts.known_terms(
            cursor, [term for term in query.terms if len(term) >= 5])
        unicode_rows = fts.recall_unicode(cursor, expression=query.unicode_expression() or '""',
                                          root_keys=root_keys, include_system=include_system, limit=pool)
        trigram_expression = query.trigram_expression(unknown)
        trigram_rows = fts.recall_trigram(cursor, expression=trigram_expression, root_keys=root_keys,
                                          include_system=include_system, limit=pool) if trigram_expression else []
    rows = _load(list(dict.fromkeys([row[0] for row in unicode_rows] + [row[0] for row in trigram_rows])))
    candidates: dict[int, Candidate] = {}
    for entry_id, data in rows.items():
        candidates[entry_id] = Candidate(
            entry_id=entry_id, root_key=data["root_key"], scope=data["scope"], workspace_id=data["workspace_id"],
            agent_name=data["agent_name"], agent_tier=data["agent_tier"], filename=data["filename"],
            type=data["type"], slug=data["slug"], name=data["name"], description=data["description"],
            body=data["body"], updated_at=data["updated_at"], row=data)
    for rank, (entry_id, _score, snippet) in enumerate(unicode_rows):
        candidates[entry_id].unicode_rank = rank
        candidates[entry_id].snippet = snippet
    for rank, (entry_id, _score, snippet) in enumerate(trigram_rows):
        candidates[entry_id].trigram_rank = rank
        candidates[entry_id].snippet = candidates[entry_id].snippet or snippet

    now = now or utc_now()
    signals = _signals(list(candidates.values()))
    for candidate in candidates.values():
        updated = candidate.updated_at if candidate.updated_at.tzinfo else candidate.updated_at.replace(tzinfo=now.tzinfo)
        age_days = max(0.0, (now - updated).total_seconds() / 86_400)
        candidate.parts = {
            "unicode": round(weights.unicode * _rank_score(candidate.unicode_rank), 6),
            "trigram": round(weights.trigram * _rank_score(candidate.trigram_rank), 6),
            "recency": round(weights.recency * 0.5 ** (age_days / settings.recency_half_life_days), 6),
            "signal": round(weights.signal * signals.get((candidate.root_key, candidate.filename), 0.0), 6),
        }
        candidate.score = round(sum(candidate.parts.values()), 6)

    ranked = sorted(candidates.values(), key=lambda c: (-c.score, c.filename, c.root_key))
    deepest = _winners_elsewhere(ranked, root_keys)
    winners: list[Candidate] = []
    shadowed: list[Candidate] = []
    # Walk down the ranking until top-K winners are found; a shadowed entry met on the way would have been a
    # result, so it is reported beside them (never silently dropped), but it is not a winner.
    for candidate in ranked:
        if len(winners) >= top_k:
            break
        depth, identity = deepest.get(candidate.key, (candidate.depth, candidate.identity()))
        if depth > candidate.depth:
            candidate.shadowed_by = identity
            shadowed.append(candidate)
        else:
            winners.append(candidate)
    return Recall(query, winners, shadowed)


def _rank_score(rank: int | None) -> float:
    return 0.0 if rank is None else 1.0 / (rank + 1)
