"""`memory history`: the legacy summary shape, a thin compatibility view over memory_events."""

from __future__ import annotations

from typing import Literal

from memory.domain.enums import EventOp
from memory.models import Event

from .inputs import Caller, Selector
from .paging import normalize_limit
from .resolution import resolve
from .results import HistoryItem, HistoryList, iso
from .timefilter import parse_since

LegacyOperation = Literal["memory.write", "memory.delete", "memory.search", "memory.reindex"]


class HistoryInput(Selector):
    limit: int | None = None
    operation: LegacyOperation | None = None
    since: str | None = None


def _legacy_operation(event: Event) -> str | None:
    if event.op in (EventOp.WRITE_COMMITTED, EventOp.WRITE_REVERTED):
        return "memory.delete" if event.metadata.get("decision_op") == "delete" else "memory.write"
    if event.op == EventOp.RECALL_EXECUTED:
        return "memory.search"
    if event.op == EventOp.WRITE_REINDEX:
        return "memory.reindex"
    return None


_EVENT_OPS = {
    "memory.write": [EventOp.WRITE_COMMITTED, EventOp.WRITE_REVERTED],
    "memory.delete": [EventOp.WRITE_COMMITTED, EventOp.WRITE_REVERTED],
    "memory.search": [EventOp.RECALL_EXECUTED],
    "memory.reindex": [EventOp.WRITE_REINDEX],
}


def history_list(*, data: HistoryInput, caller: Caller) -> HistoryList:
    resolved = resolve(data, caller)
    workspace_ids = resolved.event_workspace_ids
    ops = _EVENT_OPS[data.operation] if data.operation else sorted({op for ops in _EVENT_OPS.values() for op in ops})
    queryset = Event.objects.filter(op__in=[op.value if hasattr(op, "value") else op for op in ops],
                                    workspace_id__in=workspace_ids)
    since = parse_since(data.since)
    if since is not None:
        queryset = queryset.filter(ts__gte=since)
    limit = normalize_limit(data.limit)
    items: list[HistoryItem] = []
    for event in queryset.order_by("-ts", "-id").iterator(chunk_size=500):
        operation = _legacy_operation(event)
        if operation is None or (data.operation and operation != data.operation):
            continue
        items.append(HistoryItem(
            operation=operation, event=event.op, filename=event.target, scope=event.scope,
            agent_name=event.agent_name or None, agent_tier=event.agent_tier or None,
            workspace_id=event.workspace_id or None, decision_id=event.decision_id, actor=event.actor,
            ts=iso(event.ts),
        ))
        if len(items) >= limit:
            break
    return HistoryList(history=items)

