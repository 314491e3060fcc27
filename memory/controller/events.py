"""The event log: memory_events. One typed, keyword-only writer for every event a service records, and the
events the controller records for its own decisions (one per decision and op, so a replay adds none)."""

from __future__ import annotations

import json
from typing import Any

from django.db import connection, transaction

from memory.catalog import sql
from memory.domain.enums import DECISION_EVENT, MUTATING_OPS, EventOp, Op
from memory.domain.models import utc_now
from memory.models import Decision

from .rules import scan_rejections

_INSERT_EVENT = (
    "INSERT OR IGNORE INTO memory_events (op, scope, agent_name, agent_tier, workspace_id, session_id, actor, "
    "decision_id, target, metadata, ts) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)


def _event_values(*, op: EventOp, workspace_id: str, session_id: str, actor: str, scope: str, agent_name: str,
                  agent_tier: str, decision_id: str | None, target: str, metadata: dict[str, Any]) -> list[Any]:
    return [op.value, scope, agent_name, agent_tier, workspace_id, session_id, actor, decision_id, target,
            json.dumps(metadata), connection.ops.adapt_datetimefield_value(utc_now())]


def event_record(*, op: EventOp, workspace_id: str = "", session_id: str = "", actor: str = "", scope: str = "",
                 agent_name: str = "", agent_tier: str = "", decision_id: str | None = None, target: str = "",
                 metadata: dict[str, Any] | None = None) -> None:
    """A non-decision event (recall, reindex, relocation, ...). Keyword-only and typed, so a misspelled field
    is a TypeError at the call, never a column silently left empty."""
    values = _event_values(op=op, workspace_id=workspace_id, session_id=session_id, actor=actor, scope=scope,
                           agent_name=agent_name, agent_tier=agent_tier, decision_id=decision_id, target=target,
                           metadata=metadata or {})
    with sql.cursor() as cursor:
        cursor.execute(_INSERT_EVENT, values)


def decision_event_op(decision: Decision) -> EventOp:
    if decision.reverts and decision.op in MUTATING_OPS:
        return EventOp.WRITE_REVERTED
    return DECISION_EVENT[Op(decision.op)]


def _decision_event_values(decision: Decision) -> list[Any]:
    metadata: dict[str, Any] = {"decision_op": decision.op, "origin": decision.origin, "source": decision.source}
    if decision.op == Op.REJECT:
        metadata["rules"] = scan_rejections(decision.rule_trace)
    if decision.reverts:
        metadata["reverts"] = decision.reverts
    return _event_values(op=decision_event_op(decision), workspace_id=decision.workspace_id,
                         session_id=decision.session_id, actor=decision.origin, scope=decision.scope,
                         agent_name=decision.agent_name, agent_tier=decision.agent_tier, decision_id=decision.id,
                         target=decision.target_filename, metadata=metadata)


def decision_events_record(decisions: list[Decision]) -> None:
    """One event per decision; the unique (decision_id, op) index makes a replayed insert a no-op."""
    # savepoint=False: inside apply's transaction this joins it; alone it is one transaction for the batch.
    with transaction.atomic(savepoint=False), sql.cursor() as cursor:
        cursor.executemany(_INSERT_EVENT, [_decision_event_values(decision) for decision in decisions])
