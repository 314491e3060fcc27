"""The session noun: snapshot assembly, its cache, sub-agent inheritance and the injection log."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, connection, models, transaction
from pydantic import Field

from compozy.config import compozy_home, get_config
from memory.catalog.indexer import current_generation
from memory.controller.best_effort import best_effort_write
from memory.domain.enums import AgentTier, Scope
from memory.domain.errors import NotFound, ScopeInvalid, ValidationError
from memory.domain.models import ScopeRef, canonical_json, needs_workspace, sha256_text, utc_now
from memory.domain.names import SESSION_ID_PATTERN, validate_filename
from memory.models import Injection, Session, Snapshot
from memory.recall.ledger import ledger_turns
from memory.recall.pipeline import recall
from memory.recall.query import parse_query
from memory.sessions import snapshot as assembly

from .inputs import Caller, Input, ReadSelector, Selector, all_workspaces_field
from .paging import cursor_field, limit_field, normalize_limit, page_of
from .recall import record_recall
from .resolution import Resolved, resolve, resolve_span
from .results import Page, Result, iso
from .scopes import file_ref, visible_refs

# Assemblies keep being retried while a concurrent write moves the generation under them.
MAX_ATTEMPTS = 5
# Ledger turns read for a question: more than a budget holds, so the packing can skip long ones and still fill it.
LEDGER_HITS = 60
_memo: dict[tuple[str, str, int], tuple[int, str, str, list[dict[str, Any]]]] = {}


class SnapshotInput(ReadSelector):
    # The ids `session start` accepts: a snapshot for a session records that session, and a row that the session
    # verbs and the inspector's session page refuse to name could never be shown or stopped.
    session_id: str | None = Field(default=None, pattern=SESSION_ID_PATTERN, description=(
        "The session the snapshot is for: its first snapshot is recorded and every later call returns those same "
        "bytes."))
    parent_session_id: str | None = Field(default=None, pattern=SESSION_ID_PATTERN, description=(
        "For a sub-agent: the parent session, whose snapshot is returned unchanged."))
    query: str | None = Field(default=None, max_length=4000, description=(
        "The session's task or question: adds a block of the memories recalled for it."))


class SnapshotLogInput(Selector):
    session_id: str = Field(pattern=SESSION_ID_PATTERN, description="The session whose injected memories to list.")


class SnapshotEntry(Result):
    """One memory placed in the snapshot, in order: from a scope's index, the recall block or the checkpoint."""

    root_key: str
    scope: str
    workspace_id: str | None
    agent_name: str | None
    agent_tier: str | None
    filename: str
    source: str
    position: int


class SnapshotResult(Result):
    text: str
    generation: int
    sha256: str
    session_id: str | None
    parent_session_id: str | None
    cached: bool
    entries: list[SnapshotEntry]
    # How the section's tokens were spent, by part (index, recall, checkpoint), against memory.snapshot.budget_tokens.
    budget: dict[str, Any] = Field(default_factory=dict)


class SnapshotLog(Result):
    session_id: str
    parent_session_id: str | None
    generation: int
    sha256: str
    text: str
    injections: list[dict[str, Any]]
    budget: dict[str, Any] = Field(default_factory=dict)


class SnapshotUsageInput(Selector):
    filename: str = Field(description="The memory's file name.")
    limit: int | None = Field(default=None, ge=1, description="How many sessions to list: default 50, at most 200.")


class SnapshotUsage(Result):
    filename: str
    root_key: str
    sessions: list[dict[str, Any]]


def _memo_scope() -> str:
    # One process may serve several homes (tests do); the memo must never cross them.
    return f"{compozy_home()}|{connection.settings_dict['NAME']}"


def _request_hash(data: SnapshotInput, resolved: Resolved) -> str:
    return sha256_text(canonical_json({
        "workspace": resolved.workspace_id, "scope": data.scope, "agent": data.agent_name,
        "tier": data.agent_tier, "query": (data.query or "").strip(),
    }))


@dataclass(frozen=True)
class SessionFields:
    """What a session row records beside its snapshot when assembling the snapshot starts the session."""

    type: str = "user"
    context_window: int | None = None
    # A snapshot alone records the session as `snapshot`, not `running`: only session_start runs a session.
    status: str = "snapshot"


def snapshot_assemble(*, data: SnapshotInput, caller: Caller, session: SessionFields | None = None) -> SnapshotResult:
    if data.include_system:
        raise ValidationError("_system/ artifacts never enter a snapshot.", details={"field": "include_system"})
    resolved = resolve(data, caller)
    if data.parent_session_id:
        return _inherit(data, resolved, session or SessionFields(), caller)
    if data.session_id:
        frozen = _own_session(_session(data.session_id, resolved), caller, "session_id")
        if frozen is not None:
            # A delivered prompt is never rewritten: the session keeps the snapshot it started with.
            return _result(frozen.snapshot, data.session_id, frozen.parent_session_id or None, cached=True)
    request_hash = _request_hash(data, resolved)
    for _attempt in range(MAX_ATTEMPTS):
        generation = current_generation()
        memo = _memo.get((_memo_scope(), request_hash, generation))
        if memo is not None and not data.session_id:
            snapshot_id, text, digest, entries = memo
            return SnapshotResult(text=text, generation=generation, sha256=digest, session_id=None,
                                  parent_session_id=None, cached=True, entries=entries, budget=_budget(text))
        stored = _cached(request_hash, generation)
        cached = stored is not None
        if stored is None:
            built = _build(data, resolved, caller)
            if current_generation() != generation:
                continue  # a write landed while assembling: capture the new state instead
            stored = _store(request_hash, generation, built)
        _memo[(_memo_scope(), request_hash, generation)] = (
            stored.id, stored.text, stored.sha256, list(stored.entries))
        if data.session_id:
            _record_session(data.session_id, "", resolved, stored, data.agent_name or caller.agent or "",
                            session or SessionFields())
        return _result(stored, data.session_id, None, cached=cached)
    raise ValidationError("Memory kept changing while the snapshot was assembled; try again.",
                          details={"reason": "unstable_generation"})


def _cached(request_hash: str, generation: int) -> Snapshot | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, text, sha256, entries FROM memory_snapshots WHERE request_hash = %s "
                       "AND generation = %s", [request_hash, generation])
        row = cursor.fetchone()
    if row is None:
        return None
    return Snapshot(id=row[0], request_hash=request_hash, generation=generation, text=row[1], sha256=row[2],
                    entries=json.loads(row[3]))


def _build(data: SnapshotInput, resolved: Resolved, caller: Caller) -> assembly.Assembly:
    """The sections within `memory.snapshot.budget_tokens`: the checkpoint whole (the spec keeps it complete), the
    recall block the room its question needs less the indexes' share, the indexes what is left, most useful
    entries first. Same request at the same generation: same inputs, same bytes (and the cache serves them)."""
    now = utc_now()
    config = resolved.config
    refs = visible_refs(Selector(scope=data.scope, agent_name=data.agent_name, agent_tier=data.agent_tier,
                                 workspace=data.workspace), resolved)
    workspace_ref = ScopeRef(scope=Scope.WORKSPACE, workspace_id=resolved.workspace_id)
    checkpoint = assembly.checkpoint_section(resolved.root(workspace_ref) if resolved.workspace else None)
    room = assembly.section_room(config.memory.snapshot.budget_tokens)
    if checkpoint is not None:
        room -= len(checkpoint) + len(assembly.SEPARATOR)
    entries = [(ref, assembly.index_entries(ref, resolved.root(ref), config, now)) for ref in refs]
    recall_part = None
    if data.query and data.query.strip():
        query = parse_query(data.query)
        if not query.trivial:
            settings = config.memory.recall
            outcome = recall(query, refs=refs, config=config, top_k=settings.top_k, include_system=False, now=now)
            record_recall(outcome, data.query, caller, resolved, now, top_k=settings.top_k, scope=data.scope)
            wanted = sum(items.size + assembly.INDEX_MIN_ROOM for _ref, items in entries if items.entries)
            # Every scope with memories keeps at least the room to say how many it holds and how to find them.
            floor = assembly.INDEX_MIN_ROOM * sum(1 for _ref, items in entries if items.entries)
            index_room = min(wanted, max(floor, int(room * config.memory.snapshot.index_share_with_query)))
            hits = ledger_turns(query, workspace_id=resolved.workspace_id, limit=LEDGER_HITS,
                                context=settings.context, exclude_session=data.session_id or "") \
                if resolved.workspace else []
            recall_part = assembly.recall_section(
                outcome, config, now, {ref.root_key: ref for ref in refs}, room=room - index_room, hits=hits,
                workspace_ref=workspace_ref if resolved.workspace else None)
    if recall_part is not None:
        room -= len(recall_part[0]) + len(assembly.SEPARATOR)
    sections: list[tuple[str, list[assembly.Injected]]] = []
    scopes_left = sum(1 for _ref, items in entries if items.entries)
    for ref, items in entries:
        if not items.entries:
            continue
        # Each scope's index may take an even share of what is left; what one leaves goes to the next.
        section = assembly.index_section(ref, items, max(0, room // scopes_left - len(assembly.SEPARATOR)))
        scopes_left -= 1
        if section is not None:
            sections.append(section)
            room -= len(section[0]) + len(assembly.SEPARATOR)
    if recall_part is not None:
        sections.append(recall_part)
    if checkpoint is not None:
        sections.append((checkpoint, [assembly.Injected(workspace_ref, assembly.CHECKPOINT_FILENAME, "checkpoint")]))
    return assembly.assemble(sections)


def _store(request_hash: str, generation: int, built: assembly.Assembly) -> Snapshot:
    snapshot = Snapshot(request_hash=request_hash, generation=generation, text=built.text,
                        sha256=sha256_text(built.text), entries=built.entries, created_at=utc_now())
    try:
        # The cache is bookkeeping: a busy database must not hold a session's prompt back.
        best_effort_write(lambda: snapshot.save(force_insert=True), what="the snapshot cache")
    except IntegrityError:
        # Another process assembled the same request at the same generation first: its bytes are the snapshot.
        return Snapshot.objects.get(request_hash=request_hash, generation=generation)
    return snapshot


def _record_session(session_id: str, parent: str, resolved: Resolved, stored: Snapshot, agent: str,
                    fields: SessionFields) -> None:
    now = utc_now()
    try:
        with transaction.atomic():
            if stored.pk is None:
                stored.save(force_insert=True)  # the cache write was skipped while the database was busy
            Session.objects.create(session_id=session_id, parent_session_id=parent, type=fields.type,
                                   status=fields.status,
                                   context_window=fields.context_window, workspace_id=resolved.workspace_id,
                                   agent_name=agent, snapshot=stored, started_at=now)
            Injection.objects.bulk_create([
                Injection(session_id=session_id, generation=stored.generation, root_key=entry["root_key"],
                          scope=entry["scope"], agent_name=entry["agent_name"] or "",
                          agent_tier=entry["agent_tier"] or "", filename=entry["filename"], source=entry["source"],
                          position=entry["position"], created_at=now)
                for entry in stored.entries
            ])
    except IntegrityError:
        pass  # the same session started twice at once; the first record stands


def _own_session(row: Session | None, caller: Caller, field: str) -> Session | None:
    """A session row, refused to an agent when another agent ran it: its frozen snapshot holds that agent's
    private tiers. Refused like naming the agent itself (memory.scope.invalid, reason other_agent); a session that
    ran for no agent holds no agent tier and stays readable in its workspace."""
    if row is not None and caller.agent and row.agent_name and row.agent_name != caller.agent:
        raise ScopeInvalid(f"This session acts for agent '{caller.agent}': {field} names a session of another "
                           "agent, whose snapshot holds that agent's private memory.",
                           details={"field": field, "reason": "other_agent", "agent": caller.agent})
    return row


def _inherit(data: SnapshotInput, resolved: Resolved, fields: SessionFields, caller: Caller) -> SnapshotResult:
    parent = _own_session(_session(data.parent_session_id or "", resolved), caller, "parent_session_id")
    if parent is None:
        raise NotFound(f"Parent session {data.parent_session_id} has no snapshot.",
                       details={"parent_session_id": data.parent_session_id})
    if data.session_id:
        existing = _own_session(Session.objects.filter(session_id=data.session_id).first(), caller, "session_id")
        if existing is None:
            _record_session(data.session_id, data.parent_session_id or "", resolved, parent.snapshot,
                            data.agent_name or caller.agent or "", fields)
    # A sub-agent receives exactly its parent's bytes, read-only.
    return _result(parent.snapshot, data.session_id, data.parent_session_id, cached=True)


def _result(stored: Snapshot, session_id: str | None, parent: str | None, *, cached: bool) -> SnapshotResult:
    return SnapshotResult(text=stored.text, generation=stored.generation, sha256=stored.sha256,
                          session_id=session_id, parent_session_id=parent, cached=cached,
                          entries=list(stored.entries), budget=_budget(stored.text))


def _budget(text: str) -> dict[str, Any]:
    return assembly.budget_report(text, get_config().memory.snapshot.budget_tokens)


def _session(session_id: str, resolved: Resolved) -> Session | None:
    """A session's record, only from the workspace it ran in: another workspace's sessions do not exist here."""
    return (Session.objects.select_related("snapshot")
            .filter(session_id=session_id, workspace_id=resolved.workspace_id).first())


def snapshot_log(*, data: SnapshotLogInput, caller: Caller) -> SnapshotLog:
    session = _session(data.session_id, resolve(data, caller))
    if session is None:
        raise NotFound(f"Session {data.session_id} has no snapshot.", details={"session_id": data.session_id})
    rows = Injection.objects.filter(session_id=data.session_id).order_by("position")
    return SnapshotLog(
        session_id=session.session_id, parent_session_id=session.parent_session_id or None,
        generation=session.snapshot.generation, sha256=session.snapshot.sha256, text=session.snapshot.text,
        injections=[{"root_key": r.root_key, "scope": r.scope, "agent_name": r.agent_name or None,
                     "workspace_id": session.workspace_id if _in_workspace(r) else None,
                     "agent_tier": r.agent_tier or None, "filename": r.filename, "source": r.source,
                     "position": r.position, "generation": r.generation} for r in rows],
        budget=_budget(session.snapshot.text),
    )


def _in_workspace(injection: Injection) -> bool:
    tier = AgentTier(injection.agent_tier) if injection.agent_tier else None
    return needs_workspace(Scope(injection.scope), tier)


def snapshot_usage(*, data: SnapshotUsageInput, caller: Caller) -> SnapshotUsage:
    """Which sessions of this workspace had one memory placed in their snapshot, newest first."""
    resolved = resolve(data, caller)
    ref = file_ref(data, validate_filename(data.filename, include_system=True), resolved)
    sessions_here = Session.objects.filter(workspace_id=resolved.workspace_id).values("session_id")
    rows = (Injection.objects.filter(root_key=ref.root_key, filename=data.filename, session_id__in=sessions_here)
            .order_by("-created_at", "-id")[: normalize_limit(data.limit)])
    return SnapshotUsage(
        filename=data.filename, root_key=ref.root_key,
        sessions=[{"session_id": r.session_id, "generation": r.generation, "source": r.source,
                   "position": r.position, "injected_at": iso(r.created_at)} for r in rows],
    )


class SnapshotListInput(Input):
    workspace: str | None = Field(default=None, description=(
        "The workspace whose sessions to list, as its ULID or a directory inside it. Default: the caller's own "
        "workspace."))
    all_workspaces: bool = all_workspaces_field()
    cursor: str | None = cursor_field()
    limit: int | None = limit_field()


class SnapshotSession(Result):
    """A session that received a snapshot: where it ran, from which generation, and how many memories it got."""

    session_id: str
    parent_session_id: str | None
    workspace_id: str | None
    agent_name: str | None
    generation: int
    injections: int
    created_at: str | None


class SnapshotList(Result):
    sessions: list[SnapshotSession]
    page: Page


def snapshot_list(*, data: SnapshotListInput, caller: Caller) -> SnapshotList:
    """The sessions with a snapshot, newest first: of the caller's workspace or, with all_workspaces, of every
    known one (and those that ran outside any workspace)."""
    span = resolve_span(data.workspace, caller, all_workspaces=data.all_workspaces)
    rows = Session.objects.select_related("snapshot").filter(
        workspace_id__in=span.event_workspace_ids if span.across else [span.resolved.workspace_id])
    binding = {"workspaces": span.workspace_ids, "across": span.across}
    page_rows, page = page_of(rows.order_by("-started_at", "-session_id"), cursor=data.cursor, limit=data.limit,
                              binding=binding)
    counts = dict(Injection.objects.filter(session_id__in=[row.session_id for row in page_rows])
                  .values_list("session_id").annotate(count=models.Count("id")))
    return SnapshotList(sessions=[SnapshotSession(
        session_id=row.session_id, parent_session_id=row.parent_session_id or None,
        workspace_id=row.workspace_id or None, agent_name=row.agent_name or None,
        generation=row.snapshot.generation, injections=counts.get(row.session_id, 0),
        created_at=iso(row.started_at)) for row in page_rows], page=Page(**page))
