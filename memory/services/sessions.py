"""The session noun: the ledger of what happens in a session, and what carries it to the next one.

- `session_start` freezes the session's snapshot (a sub-agent gets its parent's) and records the session row.
- `session_append` persists events in order (gap-free seq; an external key makes a re-import a no-op).
- `session_usage` records context usage; at `session.compaction.pressure_threshold` it runs pressure compaction.
- `session_stop` stops the session and queues the checkpoint update on the task cluster when it is eligible.
- `session_show`, `session_events`, `session_list` read the ledger back; archived rows stay readable.
- `session_resume` is the degraded-resume replay: notice, checkpoint block, unarchived rows.

The extractor and dreaming build on this module: `session_events` (rows after a seq) and `session_show` (type,
parent) are their reads; `memory.sessions.signals` are their hook points.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import Q
from pydantic import Field, field_validator, model_validator
from pydantic import ValidationError as PydanticValidationError
from ulid import ULID

from memory.controller.events import event_record
from memory.domain import jsondepth
from memory.domain.checkpoint import CHECKPOINT_FILENAME
from memory.domain.enums import EventOp, Scope, SessionEventKind, SessionStatus, SessionType
from memory.domain.errors import Conflict, NotFound
from memory.domain.models import ScopeRef, parse_timestamp, sha256_text, utc_now
from memory.domain.names import SESSION_ID_PATTERN
from memory.models import Decision, Event, Session
from memory.sessions import compaction, ledger, resume
from memory.sessions import signals as session_signals
from memory.sessions import snapshot as assembly

from . import checkpoints
from .events import EventFamily, EventItem, event_item, ops_of
from .inputs import Caller, Input, Selector, all_workspaces_field
from .paging import cursor_field, limit_field, page_of
from .resolution import Resolved, resolve, resolve_span
from .results import DecisionSummary, Page, Result, decision_summary, iso
from .snapshots import SessionFields, SnapshotInput, SnapshotResult, snapshot_assemble
from .timefilter import SINCE, parse_since

MAX_EVENT_BYTES = 1_048_576
MAX_BATCH = 10_000
DEFAULT_EVENTS_LIMIT = 500
MAX_EVENTS_LIMIT = 5_000


def _session_id_field() -> Any:
    return Field(pattern=SESSION_ID_PATTERN, description=(
        "The session's id: up to 128 letters, digits and . _ : @ - (a client's own id, such as Claude Code's "
        "session_id, or the ULID `start` made)."))


def _workspace_field() -> Any:
    return Field(default=None, description=(
        "The workspace, as its ULID or a directory inside it. Default: the caller's own workspace."))


# ----- inputs ---------------------------------------------------------------------------------------------------


class SessionIdInput(Input):
    session_id: str = _session_id_field()
    workspace: str | None = _workspace_field()


class SessionStartInput(Input):
    session_id: str | None = Field(default=None, pattern=SESSION_ID_PATTERN, description=(
        "The session's id (letters, digits and . _ : @ -). Omitted: a new ULID. Starting an existing session "
        "returns its frozen snapshot (and runs a stopped one again)."))
    workspace: str | None = _workspace_field()
    agent_name: str | None = Field(default=None, description=(
        "The agent running the session: its two agent tiers join the snapshot's indexes."))
    session_type: SessionType = Field(default=SessionType.USER, description=(
        "user, coordinator, dream or system. A stopped user, coordinator or dream session updates the workspace "
        "checkpoint; a system session never does."))
    parent_session_id: str | None = Field(default=None, pattern=SESSION_ID_PATTERN, description=(
        "A sub-agent's parent session: the sub-agent receives exactly the parent's snapshot and never updates "
        "the checkpoint."))
    context_window: int | None = Field(default=None, ge=1, description=(
        "The model's context window in tokens: usage over session.compaction.pressure_threshold of it compacts."))
    query: str | None = Field(default=None, max_length=4000, description=(
        "The task at hand, in words: adds a recall block to the snapshot."))


class EventInput(Input):
    kind: SessionEventKind = Field(description=(
        "user_message, assistant_message, tool_call, tool_result, usage, done or error. A turn is complete once "
        "a done or error row is persisted for it."))
    content: str = Field(default="", max_length=MAX_EVENT_BYTES, description="The event's text.")
    turn_id: str | None = Field(default=None, max_length=128, description="The turn the event belongs to.")
    agent_name: str | None = Field(default=None, max_length=64, description=(
        "The agent that produced it. Default: the session's agent."))
    external_key: str | None = Field(default=None, max_length=200, description=(
        "The caller's own id for the row (a transcript line's uuid): appending it again is a no-op."))
    data: dict[str, Any] | None = Field(default=None, description=(
        "Structured details, such as a tool call's name and input or a tool result's is_error."))
    ts: str | None = Field(default=None, description="When it happened, RFC 3339. Default: now.")

    @field_validator("ts")
    @classmethod
    def _timestamp(cls, value: str | None) -> str | None:
        return None if value is None else parse_timestamp(value)


class SessionAppendInput(SessionIdInput):
    """The events to append: a list (`events`), JSON lines (`jsonl`), or one event given by its fields."""

    events: list[EventInput] | None = Field(default=None, max_length=MAX_BATCH, description=(
        "The events, in order (at most 10,000 per call). Give events, jsonl or one event's kind."))
    jsonl: str | None = Field(default=None, description=(
        "The events as JSON lines, one object per line with the fields of an event. On the CLI, - reads them "
        "from stdin and @file from a file."))
    kind: SessionEventKind | None = Field(default=None, description=(
        "One event's kind (with content, turn_id, agent_name, external_key): user_message, assistant_message, "
        "tool_call, tool_result, usage, done or error."))
    content: str | None = Field(default=None, max_length=MAX_EVENT_BYTES, description=(
        "One event's text. On the CLI, - reads it from stdin and @file from a file."))
    turn_id: str | None = Field(default=None, max_length=128, description="One event's turn.")
    agent_name: str | None = Field(default=None, max_length=64, description=(
        "One event's agent. Default: the session's agent."))
    external_key: str | None = Field(default=None, max_length=200, description=(
        "One event's id in the caller's record: appending it again is a no-op."))
    ts: str | None = Field(default=None, description=(
        "When one event happened, ISO 8601 / RFC 3339 (an imported transcript's own time). Default: now. Extracted "
        "memories and checkpoint items are dated by it."))

    @field_validator("ts")
    @classmethod
    def _timestamp(cls, value: str | None) -> str | None:
        return None if value is None else parse_timestamp(value)

    @model_validator(mode="after")
    def _one_way(self) -> SessionAppendInput:
        given = [name for name in ("events", "jsonl", "kind") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of events, jsonl, or one event's kind")
        single = {"content": self.content, "turn_id": self.turn_id, "agent_name": self.agent_name,
                  "external_key": self.external_key, "ts": self.ts}
        if self.kind is None and any(value is not None for value in single.values()):
            raise ValueError("content, turn_id, agent_name, external_key and ts describe one event: give kind too")
        if self.jsonl is not None:
            self.events = _events_of_lines(self.jsonl)
        elif self.kind is not None:
            self.events = [EventInput.model_validate(
                {"kind": self.kind, **{k: v for k, v in single.items() if v is not None}})]
        if not self.events:
            raise ValueError("no events")
        return self


def _events_of_lines(text: str) -> list[EventInput]:
    events = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            events.append(EventInput.model_validate(jsondepth.loads(line)))
        except jsondepth.TooDeep:
            raise ValueError(f"line {number} of jsonl is nested more than {jsondepth.MAX_DEPTH} levels") from None
        except (ValueError, PydanticValidationError) as exc:
            reason = "not an event" if isinstance(exc, PydanticValidationError) else "not JSON"
            raise ValueError(f"line {number} of jsonl is {reason}") from None
    if len(events) > MAX_BATCH:
        raise ValueError(f"at most {MAX_BATCH} events per call")
    return events


class SessionUsageInput(SessionIdInput):
    used: int = Field(ge=0, description="Context tokens in use now.")
    window: int | None = Field(default=None, ge=1, description=(
        "The context window in tokens. Default: the session's."))
    turn_id: str | None = Field(default=None, max_length=128, description=(
        "The turn that reported the usage: compaction covers only complete turns before it."))


class SessionEventsInput(SessionIdInput):
    after_seq: int = Field(default=0, ge=0, description="Only rows with a greater seq (page with next_after_seq).")
    limit: int | None = Field(default=None, ge=1, description=(
        f"Rows to return: default {DEFAULT_EVENTS_LIMIT}, at most {MAX_EVENTS_LIMIT} (a larger value is lowered)."))
    kind: SessionEventKind | None = Field(default=None, description="Only rows of this kind.")
    include_archived: bool = Field(default=True, description=(
        "Archived rows too, marked archived (rows compaction summarised into the checkpoint)."))


class SessionHistoryInput(SessionIdInput):
    family: EventFamily | None = Field(default=None, description=(
        "Only operations of this family: session, write, rejected, recall, extractor, dream, provider, workspace "
        "or decisions."))
    since: str | None = Field(default=None, description=SINCE)
    cursor: str | None = cursor_field()
    limit: int | None = limit_field()


class SessionListInput(Input):
    workspace: str | None = _workspace_field()
    all_workspaces: bool = all_workspaces_field()
    status: SessionStatus | None = Field(default=None, description=(
        "Only running, only stopped, or only snapshot sessions (a snapshot was recorded for the id, no session "
        "was started)."))
    session_type: SessionType | None = Field(default=None, description="Only sessions of this type.")
    cursor: str | None = cursor_field()
    limit: int | None = limit_field()


class SessionCompactInput(SessionIdInput):
    turn_id: str | None = Field(default=None, max_length=128, description=(
        "The turn in progress: left out of the span, which holds complete turns only."))


# ----- results --------------------------------------------------------------------------------------------------


class SessionView(Result):
    session_id: str
    workspace_id: str | None
    agent_name: str | None
    type: str
    status: str
    parent_session_id: str | None
    started_at: str | None
    stopped_at: str | None
    context_window: int | None
    last_usage: int | None
    pressure: float | None
    events: int
    archived: int
    snapshot_sha256: str
    compaction_cooldown_until: str | None


class SessionStartResult(Result):
    session: SessionView
    created: bool
    snapshot: SnapshotResult


class AppendResult(Result):
    session_id: str
    appended: int
    duplicates: int
    first_seq: int | None
    last_seq: int


class SessionEventView(Result):
    seq: int
    turn_id: str | None
    kind: str
    agent_name: str | None
    content: str
    data: dict[str, Any]
    ts: str | None
    archived: bool
    external_key: str | None


class SessionEventList(Result):
    session_id: str
    events: list[SessionEventView]
    has_more: bool
    next_after_seq: int | None


class SessionHistory(Result):
    session_id: str
    rows: int  # ledger rows the session holds, archived included: compaction never deletes one
    archived: int
    events: list[EventItem]
    page: Page


class CoverageView(Result):
    from_seq: int
    to_seq: int
    decision_id: str | None
    created_at: str | None
    updated_at: str | None


class CompactionResult(Result):
    """`reason`: compacted, covered (an interrupted archive was finished), nothing_to_compact, cooldown,
    ineligible or failed."""

    compacted: bool
    reason: str
    from_seq: int | None
    to_seq: int | None
    archived: int
    decision_id: str | None
    coverage: list[CoverageView]


class UsageResult(Result):
    session: SessionView
    pressure: float | None
    threshold: float
    compaction: CompactionResult | None


class CheckpointQueued(Result):
    queued: bool
    reason: str  # eligible, already_stopped, or why it is not eligible (subagent, type_system, no_workspace)


class StopResult(Result):
    session: SessionView
    checkpoint: CheckpointQueued


class SessionSnapshotView(Result):
    sha256: str
    generation: int
    text: str


class SessionShow(Result):
    session: SessionView
    snapshot: SessionSnapshotView
    coverage: list[CoverageView]
    checkpoint_decisions: list[DecisionSummary]


class SessionList(Result):
    sessions: list[SessionView]
    page: Page


class ResumeResult(Result):
    session_id: str
    text: str
    sha256: str
    checkpoint: bool
    replayed: int
    left_out_archived: int
    left_out_older: int


# ----- helpers --------------------------------------------------------------------------------------------------


def _resolve(workspace: str | None, caller: Caller, *, create: bool = False) -> Resolved:
    return resolve(Selector(workspace=workspace), caller, create_workspace=create)


def _get(session_id: str, resolved: Resolved) -> Session:
    """A session, only from the workspace it ran in: another workspace's sessions do not exist here."""
    session = (Session.objects.select_related("snapshot")
               .filter(session_id=session_id, workspace_id=resolved.workspace_id).first())
    if session is None:
        # "here" alone did not say where a session was looked for (the inspector's page without ?workspace, or a
        # CLI run from another checkout): name the workspace, or say that none was found.
        named = (f"{resolved.workspace_dir.name} ({resolved.workspace_id})" if resolved.workspace_dir
                 else resolved.workspace_id)
        where = f"in workspace {named}" if resolved.workspace_id else "here: no workspace was given or found"
        raise NotFound(f"No session {session_id} {where}.",
                       details={"session_id": session_id, "workspace_id": resolved.workspace_id or None})
    return session


def _archived_counts(session_ids: list[str]) -> dict[str, int]:
    if not session_ids:
        return {}
    marks = ", ".join("%s" for _ in session_ids)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT session_id, SUM(archived) FROM memory_session_events WHERE session_id IN ({marks}) "
                       f"GROUP BY session_id", session_ids)
        return {session_id: int(total or 0) for session_id, total in cursor.fetchall()}


def _view(session: Session, archived: int | None = None) -> SessionView:
    if archived is None:
        archived = _archived_counts([session.session_id]).get(session.session_id, 0)
    pressure = None
    if session.last_usage is not None and session.context_window:
        pressure = round(session.last_usage / session.context_window, 4)
    return SessionView(
        session_id=session.session_id, workspace_id=session.workspace_id or None,
        agent_name=session.agent_name or None, type=session.type, status=session.status,
        parent_session_id=session.parent_session_id or None, started_at=iso(session.started_at),
        stopped_at=iso(session.stopped_at), context_window=session.context_window, last_usage=session.last_usage,
        pressure=pressure, events=session.last_seq, archived=archived, snapshot_sha256=session.snapshot.sha256,
        compaction_cooldown_until=iso(session.compaction_cooldown_until),
    )


def _event_view(row: ledger.EventRow) -> SessionEventView:
    return SessionEventView(seq=row.seq, turn_id=row.turn_id or None, kind=row.kind,
                            agent_name=row.agent_name or None, content=row.content, data=row.data, ts=iso(row.ts),
                            archived=row.archived, external_key=row.external_key or None)


def _coverage_views(session_id: str) -> list[CoverageView]:
    return [CoverageView(from_seq=c.from_seq, to_seq=c.to_seq, decision_id=c.decision_id or None,
                         created_at=iso(c.created_at), updated_at=iso(c.updated_at))
            for c in compaction.coverage(session_id)]


def _session_event(op: EventOp, session: Session, caller: Caller, **metadata: Any) -> None:
    event_record(op=op, scope=Scope.WORKSPACE.value if session.workspace_id else "", workspace_id=session.workspace_id,
                 session_id=session.session_id, agent_name=session.agent_name, actor=caller.origin.value,
                 metadata=metadata)


# ----- verbs ----------------------------------------------------------------------------------------------------


def session_start(*, data: SessionStartInput, caller: Caller) -> SessionStartResult:
    """Start (or look up) a session and return the frozen memory section its prompt begins with."""
    resolved = _resolve(data.workspace, caller, create=True)
    session_id = data.session_id or str(ULID())
    existing = Session.objects.filter(session_id=session_id).first()
    if existing is not None and existing.workspace_id != resolved.workspace_id:
        raise Conflict(f"Session {session_id} belongs to another workspace.",
                       details={"session_id": session_id, "reason": "other_workspace"})
    workspace = resolved.workspace.id if resolved.workspace else None
    snapshot = snapshot_assemble(
        data=SnapshotInput.parse({"session_id": session_id, "parent_session_id": data.parent_session_id,
                                  "query": data.query, "workspace": workspace, "agent_name": data.agent_name}),
        caller=caller, session=SessionFields(type=data.session_type.value, context_window=data.context_window,
                                             status=SessionStatus.RUNNING.value),
    )
    session = _get(session_id, resolved)
    if existing is None:
        _session_event(EventOp.SESSION_STARTED, session, caller, type=session.type,
                       parent_session_id=session.parent_session_id or None)
    elif session.status == SessionStatus.SNAPSHOT.value:
        # Only a snapshot was recorded for this id: the session starts now, with the snapshot it already has.
        Session.objects.filter(session_id=session_id).update(status=SessionStatus.RUNNING.value, started_at=utc_now())
        session.refresh_from_db()
        _session_event(EventOp.SESSION_STARTED, session, caller, type=session.type,
                       parent_session_id=session.parent_session_id or None, from_snapshot=True)
    elif session.status == SessionStatus.STOPPED.value:
        # The agent resumed a stopped session: it runs again with the snapshot it started with.
        Session.objects.filter(session_id=session_id).update(status=SessionStatus.RUNNING.value, stopped_at=None)
        session.refresh_from_db()
        _session_event(EventOp.SESSION_STARTED, session, caller, type=session.type, resumed=True)
    return SessionStartResult(session=_view(session), created=existing is None, snapshot=snapshot)


def _new_event(event: EventInput) -> ledger.NewEvent:
    return ledger.NewEvent(kind=event.kind.value, content=event.content, turn_id=event.turn_id or "",
                           agent_name=event.agent_name or "", data=event.data or {},
                           ts=datetime.fromisoformat(event.ts.replace("Z", "+00:00")) if event.ts else None,
                           external_key=event.external_key or "")


def _announce_turns(session_id: str, workspace_id: str, appended: ledger.Appended) -> None:
    latest: dict[str, int] = {}
    for turn_id, seq in appended.assistant_turns:
        latest[turn_id] = seq

    def send() -> None:
        turns = tuple(sorted(latest.items(), key=lambda item: item[1]))
        session_signals.assistant_turns_persisted.send(
            sender=Session, session_id=session_id, workspace_id=workspace_id, turns=turns)

    if latest:
        transaction.on_commit(send)


def session_append(*, data: SessionAppendInput, caller: Caller) -> AppendResult:
    resolved = _resolve(data.workspace, caller)
    # The ledger reads the session's head in the append's own transaction (another workspace's session is not
    # found there, a stopped one is a conflict, an event without an agent gets the session's): one lookup per
    # batch, since an import appends many.
    appended = ledger.append(data.session_id, resolved.workspace_id, [_new_event(event) for event in data.events])
    _announce_turns(data.session_id, resolved.workspace_id, appended)
    return AppendResult(session_id=data.session_id, appended=appended.appended, duplicates=appended.duplicates,
                        first_seq=appended.first_seq, last_seq=appended.last_seq)


def session_usage(*, data: SessionUsageInput, caller: Caller) -> UsageResult:
    """Record how much of the context window is in use; at the pressure threshold, compact."""
    resolved = _resolve(data.workspace, caller)
    session = _get(data.session_id, resolved)
    window = data.window or session.context_window
    usage = ledger.NewEvent(kind=SessionEventKind.USAGE.value, turn_id=data.turn_id or "",
                            agent_name=session.agent_name, content=f"{data.used}/{window or '?'}",
                            data={"used": data.used, "window": window})
    appended = ledger.append(session.session_id, session.workspace_id, [usage])
    Session.objects.filter(session_id=session.session_id).update(
        last_usage=data.used, context_window=window, last_usage_at=utc_now())
    session.refresh_from_db()
    threshold = resolved.config.session.compaction.pressure_threshold
    pressure = data.used / window if window else None
    result = None
    if pressure is not None and pressure >= threshold:
        result = _compact(session, resolved, caller, trigger_seq=appended.last_seq, trigger_turn=data.turn_id or "")
        session.refresh_from_db()
    return UsageResult(session=_view(session), pressure=round(pressure, 4) if pressure is not None else None,
                       threshold=threshold, compaction=result)


def session_compact(*, data: SessionCompactInput, caller: Caller) -> CompactionResult:
    """Compact every complete turn persisted so far (a client's own compaction is about to happen)."""
    resolved = _resolve(data.workspace, caller)
    session = _get(data.session_id, resolved)
    return _compact(session, resolved, caller, trigger_seq=session.last_seq + 1, trigger_turn=data.turn_id or "")


def _compaction_result(session: Session, reason: str, *, archived: int, span: tuple[int, int] | None = None,
                       decision_id: str | None = None) -> CompactionResult:
    return CompactionResult(compacted=reason == "compacted", reason=reason, from_seq=span[0] if span else None,
                            to_seq=span[1] if span else None, archived=archived, decision_id=decision_id,
                            coverage=_coverage_views(session.session_id))


def _compact(session: Session, resolved: Resolved, caller: Caller, *, trigger_seq: int,
             trigger_turn: str) -> CompactionResult:
    """Summarise the complete turns before the trigger into the checkpoint, commit their coverage, then archive.

    Coverage already recorded means the provider is not asked again; archiving it (again) is how a run that died
    after its coverage commit is finished."""
    if checkpoints.ineligible_reason(session) is not None:
        return _compaction_result(session, "ineligible", archived=0)
    finished = compaction.archive_covered(session.session_id)
    if finished:
        _session_event(EventOp.SESSION_COMPACTION_ARCHIVED, session, caller, archived=finished, resumed=True)
    span = compaction.select_span(session.session_id, trigger_seq=trigger_seq, trigger_turn=trigger_turn)
    if span is None:
        return _compaction_result(session, "covered" if finished else "nothing_to_compact", archived=finished)
    now = utc_now()
    if session.compaction_cooldown_until is not None and session.compaction_cooldown_until > now:
        return _compaction_result(session, "cooldown", archived=finished, span=span)
    limits = resolved.config.session.projection
    projection = ledger.projection(session.session_id, max_messages=limits.max_messages,
                                   max_bytes=limits.max_bytes, from_seq=span[0], to_seq=span[1])
    update = checkpoints.checkpoint_update(session=session, resolved=resolved, projection=projection,
                                           source="compaction")
    if update.reason == "failed":
        cooldown = timedelta(milliseconds=resolved.config.session.compaction.cooldown)
        Session.objects.filter(session_id=session.session_id).update(compaction_cooldown_until=now + cooldown)
        _session_event(EventOp.SESSION_COMPACTION_FAILED, session, caller, from_seq=span[0], to_seq=span[1],
                       reason=update.failure.reason if update.failure else "failed")
        return _compaction_result(session, "failed", archived=finished, span=span)
    decision_id = update.decision.id if update.decision else ""
    compaction.record(session.workspace_id, session.session_id, span[0], span[1], decision_id)
    _session_event(EventOp.SESSION_COMPACTION_COVERED, session, caller, from_seq=span[0], to_seq=span[1],
                   decision_id=decision_id or None)
    archived = compaction.archive_covered(session.session_id)
    _session_event(EventOp.SESSION_COMPACTION_ARCHIVED, session, caller, archived=archived)
    return _compaction_result(session, "compacted", archived=finished + archived, span=span,
                              decision_id=decision_id or None)


def session_stop(*, data: SessionIdInput, caller: Caller) -> StopResult:
    """Stop the session; an eligible one queues its checkpoint update on the task cluster."""
    resolved = _resolve(data.workspace, caller)
    session = _get(data.session_id, resolved)
    if session.status == SessionStatus.STOPPED.value:
        return StopResult(session=_view(session), checkpoint=CheckpointQueued(queued=False, reason="already_stopped"))
    if session.status == SessionStatus.SNAPSHOT.value:
        return StopResult(session=_view(session), checkpoint=CheckpointQueued(queued=False, reason="never_started"))
    return _stop(session, caller)


def _stop(session: Session, caller: Caller, **metadata: Any) -> StopResult:
    Session.objects.filter(session_id=session.session_id).update(status=SessionStatus.STOPPED.value,
                                                                 stopped_at=utc_now())
    session.refresh_from_db()
    _session_event(EventOp.SESSION_STOPPED, session, caller, events=session.last_seq, **metadata)
    ineligible = checkpoints.ineligible_reason(session)
    if ineligible is None:
        transaction.on_commit(lambda: checkpoints.checkpoint_queue(session_id=session.session_id))
    transaction.on_commit(lambda: session_signals.session_stopped.send(
        sender=Session, session_id=session.session_id, workspace_id=session.workspace_id,
        session_type=session.type, parent_session_id=session.parent_session_id or None))
    return StopResult(session=_view(session),
                      checkpoint=CheckpointQueued(queued=ineligible is None, reason=ineligible or "eligible"))


class IdleCloseResult(Result):
    closed: list[str]
    idle_close_after_ms: int


def session_close_idle(*, caller: Caller, now: datetime | None = None) -> IdleCloseResult:
    """Stop every running session with no activity (its start, its newest ledger row, its last usage report) for
    `session.idle_close_after`: clients that never send their end (an MCP agent, a killed terminal) would otherwise
    stay running for ever. Each is stopped as `session_stop` stops it (the checkpoint queued when eligible), its
    `memory.session.stopped` event saying `reason: idle`. The task cluster runs it on a schedule."""
    from compozy.config import get_config

    after = get_config(None).session.idle_close_after
    if after <= 0:
        return IdleCloseResult(closed=[], idle_close_after_ms=after)
    cutoff = (now or utc_now()) - timedelta(milliseconds=after)
    closed = []
    candidates = Session.objects.filter(status=SessionStatus.RUNNING.value, started_at__lt=cutoff).filter(
        Q(last_usage_at__isnull=True) | Q(last_usage_at__lt=cutoff))
    for session in candidates.order_by("started_at", "session_id"):
        latest = ledger.latest_ts(session.session_id)
        if latest is not None and latest >= cutoff:
            continue
        idle_since = max(filter(None, [session.started_at, session.last_usage_at, latest]))
        _stop(session, caller, reason="idle", idle_since=iso(idle_since))
        closed.append(session.session_id)
    return IdleCloseResult(closed=closed, idle_close_after_ms=after)


def session_show(*, data: SessionIdInput, caller: Caller) -> SessionShow:
    resolved = _resolve(data.workspace, caller)
    session = _get(data.session_id, resolved)
    root_key = ScopeRef(scope=Scope.WORKSPACE, workspace_id=session.workspace_id).root_key
    decisions = (Decision.objects.filter(root_key=root_key, target_filename=CHECKPOINT_FILENAME,
                                         session_id=session.session_id)
                 .order_by("seq", "id").defer("post_content", "prior_content"))
    return SessionShow(
        session=_view(session),
        snapshot=SessionSnapshotView(sha256=session.snapshot.sha256, generation=session.snapshot.generation,
                                     text=session.snapshot.text),
        coverage=_coverage_views(session.session_id),
        checkpoint_decisions=[DecisionSummary(**decision_summary(d)) for d in decisions],
    )


def session_events(*, data: SessionEventsInput, caller: Caller) -> SessionEventList:
    """Rows after `after_seq`, in order, archived ones included and marked (unless left out)."""
    resolved = _resolve(data.workspace, caller)
    session = _get(data.session_id, resolved)
    limit = min(data.limit or DEFAULT_EVENTS_LIMIT, MAX_EVENTS_LIMIT)
    rows = ledger.page(session.session_id, after_seq=data.after_seq, limit=limit + 1,
                       kind=data.kind.value if data.kind else None, include_archived=data.include_archived)
    has_more = len(rows) > limit
    rows = rows[:limit]
    return SessionEventList(session_id=session.session_id, events=[_event_view(row) for row in rows],
                            has_more=has_more, next_after_seq=rows[-1].seq if has_more else None)


def session_workspace(*, session_id: str) -> str | None:
    """The workspace a session ran in, by its id alone (ids are unique on this machine), or None. For the
    operator's inspector, where a session's address may come without its workspace; the verbs still look a
    session up only in the caller's workspace."""
    return Session.objects.filter(session_id=session_id).values_list("workspace_id", flat=True).first()


def session_history(*, data: SessionHistoryInput, caller: Caller) -> SessionHistory:
    """What happened to a session, oldest first: the operations recorded for it (start and stop, snapshot and
    recalls, the memories it wrote, checkpoint updates, compaction, extraction runs), beside how many ledger rows
    it keeps. The rows themselves, archived ones included, are `session_events`."""
    resolved = _resolve(data.workspace, caller)
    session = _get(data.session_id, resolved)
    queryset = Event.objects.filter(session_id=session.session_id)
    if data.family is not None:
        queryset = queryset.filter(op__in=ops_of(data.family))
    since = parse_since(data.since)
    if since is not None:
        queryset = queryset.filter(ts__gte=since)
    binding = {"session": session.session_id, "family": data.family, "since": data.since}
    events, page = page_of(queryset.order_by("ts", "id"), cursor=data.cursor, limit=data.limit, binding=binding)
    rows, archived = ledger.counts(session.session_id)
    return SessionHistory(session_id=session.session_id, rows=rows, archived=archived,
                          events=[event_item(event) for event in events], page=Page(**page))


def session_list(*, data: SessionListInput, caller: Caller) -> SessionList:
    span = resolve_span(data.workspace, caller, all_workspaces=data.all_workspaces)
    # Across workspaces (the operator's view, the inspector's default) every row still names its workspace.
    scope = span.event_workspace_ids if span.across else [span.resolved.workspace_id]
    queryset = Session.objects.select_related("snapshot").filter(workspace_id__in=scope)
    filters = Q()
    if data.status is not None:
        filters &= Q(status=data.status.value)
    if data.session_type is not None:
        filters &= Q(type=data.session_type.value)
    binding = {"workspace": scope, "status": data.status, "type": data.session_type}
    rows, page = page_of(queryset.filter(filters).order_by("-started_at", "-session_id"), cursor=data.cursor,
                         limit=data.limit, binding=binding)
    archived = _archived_counts([row.session_id for row in rows])
    return SessionList(sessions=[_view(row, archived.get(row.session_id, 0)) for row in rows], page=Page(**page))


def _checkpoint_block(resolved: Resolved) -> str | None:
    workspace_root = resolved.root(ScopeRef(scope=Scope.WORKSPACE, workspace_id=resolved.workspace_id)) \
        if resolved.workspace else None
    return assembly.checkpoint_section(workspace_root)


def session_context_after_compaction(*, data: SessionIdInput, caller: Caller, frozen: str) -> str:
    """What a session's context starts with again after its client compacted it (or resumed it): the frozen
    section, byte for byte, then the workspace checkpoint as it is now, which is what compaction just wrote. The
    block is left out when the frozen section already holds the same one (no checkpoint was written since)."""
    block = _checkpoint_block(_resolve(data.workspace, caller))
    if block is None or block in frozen:
        return frozen
    return f"{frozen}{block}\n"


def session_resume(*, data: SessionIdInput, caller: Caller) -> ResumeResult:
    """The degraded-resume replay: the same bytes for the same state."""
    resolved = _resolve(data.workspace, caller)
    session = _get(data.session_id, resolved)
    block = _checkpoint_block(resolved)
    limits = resolved.config.session.projection
    replay = ledger.projection(session.session_id, max_messages=limits.max_messages, max_bytes=limits.max_bytes,
                               kinds=[kind.value for kind in SessionEventKind])
    archived = ledger.counts(session.session_id)[1]
    text = resume.render(session.session_id, block, replay, archived=archived)
    return ResumeResult(session_id=session.session_id, text=text, sha256=sha256_text(text),
                        checkpoint=block is not None, replayed=len(replay.messages), left_out_archived=archived,
                        left_out_older=replay.omitted_messages)


__all__ = ["session_start", "session_append", "session_usage", "session_compact", "session_stop", "session_close_idle",
           "session_show", "session_events", "session_list", "session_resume"]
