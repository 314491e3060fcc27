"""The decision log (memory_decisions, the per-database WAL) and the event log (memory_events)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from django.db import OperationalError, connection, transaction

from memory.domain.enums import DECISION_EVENT, MUTATING_OPS, EventOp, Op
from memory.domain.models import canonical_json, sha256_text, utc_now
from memory.models import Decision

from . import faults

# The busy timeout every connection is opened with (settings.DATABASES init_command).
DEFAULT_BUSY_TIMEOUT_MS = 5000


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


def decision_event_op(decision: Decision) -> EventOp:
    if decision.reverts and decision.op in MUTATING_OPS:
        return EventOp.WRITE_REVERTED
    return DECISION_EVENT[Op(decision.op)]


def _event_values(decision: Decision) -> list[Any]:
    metadata: dict[str, Any] = {"decision_op": decision.op, "origin": decision.origin, "source": decision.source}
    if decision.op == Op.REJECT:
        metadata["rules"] = [e["reason"].removeprefix("rejected by ") for e in decision.rule_trace
                             if e["name"] == "scan" and not e["passed"]]
    if decision.reverts:
        metadata["reverts"] = decision.reverts
    return [decision_event_op(decision).value, decision.scope, decision.agent_name, decision.agent_tier,
            decision.workspace_id, decision.session_id, decision.origin, decision.id, decision.target_filename,
            json.dumps(metadata), connection.ops.adapt_datetimefield_value(utc_now())]


_INSERT_EVENT = (
    "INSERT OR IGNORE INTO memory_events (op, scope, agent_name, agent_tier, workspace_id, session_id, actor, "
    "decision_id, target, metadata, ts) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)


def record_decision_events(decisions: list[Decision]) -> None:
    """One event per decision; the unique (decision_id, op) index makes a replayed insert a no-op."""
    # savepoint=False: inside apply's transaction this joins it; alone it is one transaction for the batch.
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        cursor.executemany(_INSERT_EVENT, [_event_values(decision) for decision in decisions])


def stamp_applied(decisions: list[Decision]) -> None:
    now = utc_now()
    stamp = connection.ops.adapt_datetimefield_value(now)
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        cursor.executemany("UPDATE memory_decisions SET applied_at = %s WHERE id = %s AND applied_at IS NULL",
                           [[stamp, decision.id] for decision in decisions])
    for decision in decisions:
        decision.applied_at = decision.applied_at or now


def record_event(op: EventOp, **fields: Any) -> None:
    """A non-decision event (recall, reindex, relocation, ...)."""
    metadata = fields.pop("metadata", {}) or {}
    values = {"scope": "", "agent_name": "", "agent_tier": "", "workspace_id": "", "session_id": "", "actor": "",
              "decision_id": None, "target": ""}
    values.update(fields)
    with connection.cursor() as cursor:
        cursor.execute(
            _INSERT_EVENT,
            [op.value, values["scope"], values["agent_name"], values["agent_tier"], values["workspace_id"],
             values["session_id"], values["actor"], values["decision_id"], values["target"], json.dumps(metadata),
             connection.ops.adapt_datetimefield_value(utc_now())],
        )


# How long a best-effort write waits for another process's write lock before giving up.
BEST_EFFORT_WAIT_MS = 100
_log = logging.getLogger("compozy.memory")


def best_effort_write(write: Callable[[], None], *, what: str) -> bool:
    """Run `write` in a transaction, waiting at most BEST_EFFORT_WAIT_MS for the database's write lock. Returns
    whether it was written. For bookkeeping (recall signals, caches) that must never hold an answer back."""
    with connection.cursor() as cursor:
        cursor.execute(f"PRAGMA busy_timeout = {BEST_EFFORT_WAIT_MS}")
    try:
        with transaction.atomic():
            write()
        return True
    except OperationalError as exc:
        if "locked" not in str(exc) and "busy" not in str(exc):
            raise
        _log.warning("skipped %s: the database is busy with another writer", what)
        return False
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"PRAGMA busy_timeout = {DEFAULT_BUSY_TIMEOUT_MS}")
