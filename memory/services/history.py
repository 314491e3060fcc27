"""The history noun: `memory history` on every surface (CLI, `GET /api/memory/history`, the admin tool
`compozy__memory_admin_history`), what happened to memory in the spec's four operations (memory.write,
memory.delete, memory.search, memory.reindex), newest first. Each item is one memory event (`memory_events`) named
by its operation; every event with its own op and metadata is `events.py`'s `event_list`."""

from __future__ import annotations

from typing import Literal

from django.db.models import Q
from pydantic import Field

from memory.domain.enums import EventOp
from memory.models import Event

from .inputs import Caller, Selector
from .paging import cursor_field, limit_field, page_of
from .resolution import resolve
from .results import HistoryItem, HistoryList, Page, iso
from .timefilter import SINCE, parse_since

Operation = Literal["memory.write", "memory.delete", "memory.search", "memory.reindex"]


class HistoryInput(Selector):
    limit: int | None = limit_field()
    operation: Operation | None = Field(default=None, description=(
        "Only this operation: memory.write, memory.delete, memory.search or memory.reindex."))
    since: str | None = Field(default=None, description=SINCE)
    cursor: str | None = cursor_field()


def _operation_of(event: Event) -> str:
    if event.op in (EventOp.WRITE_COMMITTED, EventOp.WRITE_REVERTED):
        return "memory.delete" if event.metadata.get("decision_op") == "delete" else "memory.write"
    if event.op == EventOp.RECALL_EXECUTED:
        return "memory.search"
    return "memory.reindex"


_WRITES = Q(op__in=[EventOp.WRITE_COMMITTED.value, EventOp.WRITE_REVERTED.value])
_DELETE = Q(metadata__decision_op="delete")
_OPERATIONS = {
    "memory.write": _WRITES & ~_DELETE,
    "memory.delete": _WRITES & _DELETE,
    "memory.search": Q(op=EventOp.RECALL_EXECUTED.value),
    "memory.reindex": Q(op=EventOp.WRITE_REINDEX.value),
}


def history_list(*, data: HistoryInput, caller: Caller) -> HistoryList:
    resolved = resolve(data, caller)
    if data.operation:
        matching = _OPERATIONS[data.operation]
    else:
        matching = Q(pk__in=[])
        for condition in _OPERATIONS.values():
            matching |= condition
    queryset = Event.objects.filter(matching, workspace_id__in=resolved.event_workspace_ids)
    since = parse_since(data.since)
    if since is not None:
        queryset = queryset.filter(ts__gte=since)
    binding = {"operation": data.operation, "since": data.since, "workspace": resolved.workspace_id}
    events, page = page_of(queryset.order_by("-ts", "-id"), cursor=data.cursor, limit=data.limit, binding=binding)
    items = [HistoryItem(
        operation=_operation_of(event), event=event.op, filename=event.target, scope=event.scope,
        agent_name=event.agent_name or None, agent_tier=event.agent_tier or None,
        workspace_id=event.workspace_id or None, decision_id=event.decision_id, actor=event.actor, ts=iso(event.ts),
    ) for event in events]
    return HistoryList(history=items, page=Page(**page))
