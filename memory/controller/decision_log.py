"""The decision log: memory_decisions, the per-database write-ahead log. The one factory of a decision and its
identity, its durable commit before any file is touched, the lookups the controller makes against it, and its
applied_at stamp."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from memory.catalog import sql
from memory.domain.enums import DecisionSource, Op, Origin
from memory.domain.models import ScopeRef, canonical_json, sha256_text, utc_now
from memory.models import Decision

from . import faults
from .durable import durable_transaction


def decision_identity(candidate_hash: str, op: Op, targets: list[str], target_filename: str, post_hash: str,
                      frontmatter: dict[str, Any] | None, base_state: str | None) -> tuple[str, str]:
    """(idempotency_key, decision id). The key covers the spec's material plus the state it was decided
    against (the target's last decision), so the same candidate after its target changed is a new decision."""
    key = sha256_text(canonical_json([candidate_hash, op.value, targets, target_filename, post_hash,
                                      sha256_text(canonical_json(frontmatter)), base_state]))
    return key, "dec_" + sha256_text(key)[:24]


def new_decision(*, ref: ScopeRef, origin: Origin, op: Op, candidate_hash: str, targets: list[str],
                 target_filename: str, frontmatter: dict[str, Any] | None, post_content: str,
                 prior_content: str | None, rule_trace: list[dict[str, Any]], reason: str, base_state: str | None,
                 decided_at: datetime, confidence: float = 1.0, source: DecisionSource = DecisionSource.RULE,
                 llm_trace: dict[str, Any] | None = None, session_id: str = "", reverts: str | None = None) -> Decision:
    """A new, unapplied decision. Every decision (a candidate's, a revert's, a hand edit's) is made here,
    so its hashes, identity and root columns are derived one way. `base_state` is the target's last decision id
    when the decision depends on it (None for a hand edit, which is identified by its content and time)."""
    post_hash = sha256_text(post_content) if post_content else ""
    idempotency_key, decision_id = decision_identity(candidate_hash, op, targets, target_filename, post_hash,
                                                     frontmatter, base_state)
    return Decision(
        id=decision_id,
        candidate_hash=candidate_hash,
        idempotency_key=idempotency_key,
        workspace_id=ref.workspace_id,
        scope=ref.scope.value,
        agent_name=ref.agent_name,
        agent_tier=ref.agent_tier.value if ref.agent_tier else "",
        root_key=ref.root_key,
        origin=origin.value,
        op=op.value,
        targets=targets,
        target_filename=target_filename,
        frontmatter=frontmatter,
        post_content=post_content,
        post_content_hash=post_hash,
        prior_content=prior_content,
        prior_content_hash=sha256_text(prior_content) if prior_content is not None else "",
        confidence=confidence,
        source=source.value,
        rule_trace=rule_trace,
        llm_trace=llm_trace,
        reason=reason,
        session_id=session_id,
        reverts=reverts,
        decided_at=decided_at,
        applied_at=None,
    )


def last_decision_id(root_key: str, filename: str) -> str | None:
    if not filename:
        return None
    with sql.cursor() as cursor:
        cursor.execute(
            "SELECT id FROM memory_decisions WHERE root_key = %s AND target_filename = %s "
            "ORDER BY seq DESC LIMIT 1",
            [root_key, filename],
        )
        row = cursor.fetchone()
    return row[0] if row else None


def decision_exists(idempotency_key: str) -> bool:
    with sql.cursor() as cursor:
        cursor.execute("SELECT 1 FROM memory_decisions WHERE idempotency_key = %s", [idempotency_key])
        return cursor.fetchone() is not None


def unapplied_exist() -> bool:
    with sql.cursor() as cursor:
        cursor.execute("SELECT 1 FROM memory_decisions WHERE applied_at IS NULL LIMIT 1")
        return cursor.fetchone() is not None


_DECISION_COLUMNS = (
    "id", "candidate_hash", "idempotency_key", "workspace_id", "scope", "agent_name", "agent_tier", "root_key",
    "origin", "op", "targets", "target_filename", "frontmatter", "post_content", "post_content_hash",
    "prior_content", "prior_content_hash", "confidence", "source", "rule_trace", "llm_trace", "reason",
    "session_id", "reverts", "decided_at", "applied_at", "seq",
)
_JSON_COLUMNS = {"targets", "frontmatter", "rule_trace", "llm_trace"}
_INSERT_DECISION = (
    f"INSERT INTO memory_decisions ({', '.join(_DECISION_COLUMNS)}) "
    f"VALUES ({', '.join('%s' for _ in _DECISION_COLUMNS)})"
)


def _decision_values(decision: Decision) -> list[Any]:
    adapt = connection.ops.adapt_datetimefield_value
    values: list[Any] = []
    for column in _DECISION_COLUMNS:
        value = getattr(decision, column)
        if column in _JSON_COLUMNS:
            value = None if value is None and column in ("frontmatter", "llm_trace") else json.dumps(value)
        elif column in ("decided_at", "applied_at"):
            value = adapt(value) if value is not None else None
        values.append(value)
    return values


def persist_decision(decision: Decision) -> None:
    """Commit the decision row durably (synchronous=FULL) before any file is touched."""
    persist_decisions([decision])


def persist_decisions(decisions: list[Decision]) -> None:
    """Each decision gets the next `seq` inside the insert's own transaction (an IMMEDIATE one, so no other writer
    can take the same numbers): the order decisions were made in, whatever the wall clock says."""
    with durable_transaction() as cursor:
        cursor.execute("SELECT MAX(seq) FROM memory_decisions WHERE seq IS NOT NULL")
        last = cursor.fetchone()[0] or 0
        for offset, decision in enumerate(decisions, start=1):
            decision.seq = last + offset
        cursor.executemany(_INSERT_DECISION, [_decision_values(decision) for decision in decisions])
    faults.hit("after_decision_commit")


def stamp_applied(decisions: list[Decision]) -> None:
    now = utc_now()
    stamp = connection.ops.adapt_datetimefield_value(now)
    with transaction.atomic(savepoint=False), sql.cursor() as cursor:
        cursor.executemany("UPDATE memory_decisions SET applied_at = %s WHERE id = %s AND applied_at IS NULL",
                           [[stamp, decision.id] for decision in decisions])
    for decision in decisions:
        decision.applied_at = decision.applied_at or now
