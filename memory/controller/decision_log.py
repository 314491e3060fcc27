"""The decision log: memory_decisions, the per-database write-ahead log. A decision's identity, its durable
commit before any file is touched, the lookups the controller makes against it, and its applied_at stamp."""

from __future__ import annotations

import json
from typing import Any

from django.db import connection, transaction

from memory.domain.enums import Op
from memory.domain.models import canonical_json, sha256_text, utc_now
from memory.models import Decision

from . import faults


def decision_identity(candidate_hash: str, op: Op, targets: list[str], target_filename: str, post_hash: str,
                      frontmatter: dict[str, Any] | None, base_state: str | None) -> tuple[str, str]:
    """(idempotency_key, decision id). The key covers the spec's material plus the state it was decided
    against (the target's last decision), so the same candidate after its target changed is a new decision."""
    key = sha256_text(canonical_json([candidate_hash, op.value, targets, target_filename, post_hash,
                                      sha256_text(canonical_json(frontmatter)), base_state]))
    return key, "dec_" + sha256_text(key)[:24]


def last_decision_id(root_key: str, filename: str) -> str | None:
    if not filename:
        return None
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id FROM memory_decisions WHERE root_key = %s AND target_filename = %s "
            "ORDER BY decided_at DESC, id DESC LIMIT 1",
            [root_key, filename],
        )
        row = cursor.fetchone()
    return row[0] if row else None


def decision_exists(idempotency_key: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM memory_decisions WHERE idempotency_key = %s", [idempotency_key])
        return cursor.fetchone() is not None


def unapplied_exist() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM memory_decisions WHERE applied_at IS NULL LIMIT 1")
        return cursor.fetchone() is not None


_DECISION_COLUMNS = (
    "id", "candidate_hash", "idempotency_key", "workspace_id", "scope", "agent_name", "agent_tier", "root_key",
    "origin", "op", "targets", "target_filename", "frontmatter", "post_content", "post_content_hash",
    "prior_content", "prior_content_hash", "confidence", "source", "rule_trace", "llm_trace", "reason",
    "session_id", "reverts", "decided_at", "applied_at",
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
    durable = not connection.in_atomic_block
    if durable:
        connection.ensure_connection()
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA synchronous=FULL")
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.executemany(_INSERT_DECISION, [_decision_values(decision) for decision in decisions])
    finally:
        if durable:
            with connection.cursor() as cursor:
                cursor.execute("PRAGMA synchronous=NORMAL")
    faults.hit("after_decision_commit")


def stamp_applied(decisions: list[Decision]) -> None:
    now = utc_now()
    stamp = connection.ops.adapt_datetimefield_value(now)
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        cursor.executemany("UPDATE memory_decisions SET applied_at = %s WHERE id = %s AND applied_at IS NULL",
                           [[stamp, decision.id] for decision in decisions])
    for decision in decisions:
        decision.applied_at = decision.applied_at or now
