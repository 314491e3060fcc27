"""The event noun: memory_events read back, as a paged log and as hourly activity by op family; and the events a
surface records through the services (a provider's tool-name collision)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from django.db.models import Count
from django.db.models.functions import Substr
from pydantic import Field

from memory.controller.events import event_record
from memory.domain.enums import EventOp
from memory.domain.models import utc_now
from memory.models import Event

from .inputs import Caller, Input, all_workspaces_field
from .paging import cursor_field, limit_field, page_of
from .resolution import resolve_span
from .results import Page, Result, iso
from .timefilter import SINCE, parse_since

# An op's family is its second dotted part (`memory.recall.executed` → recall), except that a rejected write is
# its own family: operators watch rejections apart from the writes that landed.
EventFamily = Literal["write", "rejected", "recall", "dream", "extractor", "provider", "workspace", "decisions",
                      "session", "root"]
FAMILIES: tuple[str, ...] = EventFamily.__args__  # type: ignore[attr-defined]
ACTIVITY_FAMILIES = ("write", "recall", "rejected")


def family_of(op: str) -> str:
    if op == EventOp.WRITE_REJECTED:
        return "rejected"
    parts = op.split(".")
    return parts[1] if len(parts) > 2 else op


def ops_of(family: str) -> list[str]:
    return [op.value for op in EventOp if family_of(op.value) == family]


class EventListInput(Input):
    """Events of the global scope, plus one workspace's when a workspace is given (never another workspace's), or
    for an operator, with all_workspaces, those of every known workspace."""

    workspace: str | None = Field(default=None, description=(
        "The workspace, as its ULID or a directory inside it: its events join the global ones."))
    all_workspaces: bool = all_workspaces_field()
    family: EventFamily | None = Field(default=None, description=(
        "Only events of this family: write, rejected, recall, dream, extractor, provider, workspace or decisions."))
    since: str | None = Field(default=None, description=SINCE)
    cursor: str | None = cursor_field()
    limit: int | None = limit_field()


class EventItem(Result):
    id: int
    op: str
    family: str
    scope: str
    agent_name: str | None
    agent_tier: str | None
    workspace_id: str | None
    session_id: str | None
    actor: str
    decision_id: str | None
    target: str
    metadata: dict[str, Any]
    ts: str | None


class EventList(Result):
    events: list[EventItem]
    page: Page


class ActivityInput(Input):
    workspace: str | None = Field(default=None, description=(
        "The workspace, as its ULID or a directory inside it: its events join the global ones."))
    all_workspaces: bool = all_workspaces_field()
    hours: int = Field(default=168, ge=1, le=24 * 31, description=(
        "How many hours to count, ending with the current one: default 168 (a week), at most 744."))


class ActivityBucket(Result):
    hour: str
    counts: dict[str, int]


class Activity(Result):
    families: list[str]
    hours: int
    start: str
    buckets: list[ActivityBucket]
    totals: dict[str, int]


def _workspace_ids(data: EventListInput | ActivityInput, caller: Caller) -> list[str]:
    return resolve_span(data.workspace, caller, all_workspaces=data.all_workspaces).event_workspace_ids


def event_list(*, data: EventListInput, caller: Caller) -> EventList:
    workspace_ids = _workspace_ids(data, caller)
    queryset = Event.objects.filter(workspace_id__in=workspace_ids)
    if data.family is not None:
        queryset = queryset.filter(op__in=ops_of(data.family))
    since = parse_since(data.since)
    if since is not None:
        queryset = queryset.filter(ts__gte=since)
    binding = {"workspaces": workspace_ids, "family": data.family, "since": data.since}
    rows, page = page_of(queryset.order_by("-ts", "-id"), cursor=data.cursor, limit=data.limit, binding=binding)
    return EventList(events=[event_item(row) for row in rows], page=Page(**page))


def event_item(event: Event) -> EventItem:
    return EventItem(
        id=event.id, op=event.op, family=family_of(event.op), scope=event.scope,
        agent_name=event.agent_name or None, agent_tier=event.agent_tier or None,
        workspace_id=event.workspace_id or None, session_id=event.session_id or None, actor=event.actor,
        decision_id=event.decision_id, target=event.target, metadata=event.metadata, ts=iso(event.ts),
    )


def event_activity(*, data: ActivityInput, caller: Caller) -> Activity:
    """Events per hour over the last `hours` hours for the write, recall and rejected families; every hour is
    present, empty ones with zero counts, oldest first."""
    workspace_ids = _workspace_ids(data, caller)
    now = utc_now()
    end = now.replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(hours=data.hours - 1)
    family_by_op = {op: family for family in ACTIVITY_FAMILIES for op in ops_of(family)}
    # Grouped on the stored text's "YYYY-MM-DD HH" prefix (SQLite keeps UTC datetimes as text): Django's
    # TruncHour calls a Python function per row, ten times slower over a busy week.
    grouped = (
        Event.objects.filter(workspace_id__in=workspace_ids, ts__gte=start, op__in=list(family_by_op))
        .annotate(hour=Substr("ts", 1, 13))
        .values_list("hour", "op")
        .annotate(n=Count("*"))
    )
    buckets = {start + timedelta(hours=i): dict.fromkeys(ACTIVITY_FAMILIES, 0) for i in range(data.hours)}
    for hour_text, op, n in grouped:
        hour = datetime.strptime(hour_text, "%Y-%m-%d %H").replace(tzinfo=UTC)
        if hour in buckets:
            buckets[hour][family_by_op[op]] += n
    totals = {family: sum(b[family] for b in buckets.values()) for family in ACTIVITY_FAMILIES}
    return Activity(
        families=list(ACTIVITY_FAMILIES), hours=data.hours, start=iso(start) or "",
        buckets=[ActivityBucket(hour=iso(hour) or "", counts=counts) for hour, counts in buckets.items()],
        totals=totals,
    )


def provider_collision_record(*, tool: str, provider: str) -> None:
    """A provider tried to register a reserved tool name (memory.provider.collision)."""
    event_record(op=EventOp.PROVIDER_COLLISION, actor=provider, metadata={"tool": tool, "provider": provider})
