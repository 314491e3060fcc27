"""When and what the extractor reads: the request a persisted assistant turn makes, coalescing, one run over a
session's new turns, and its finish.

- `request` is the hook: a persisted assistant turn of an eligible session queues one run on the task cluster.
  While a session's run is queued or in progress, further requests only raise its `pending` count (up to
  `memory.extractor.coalesce_max`; `memory.extractor.coalesced`), and the run queues one follow-up when it ends.
- `run` is that run (the task): the new turns since the session's last extracted seq, minus exchanges that already
  wrote memory explicitly, through `extract_turns`, within `memory.extractor.deadline`.
- `extract_again` re-runs the extraction of a dead letter's turns (a replay of a `provider` or `validate` failure).

Each returns a plain dataclass; `memory/services/extractor.py` turns them into the verbs' results.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from django.db import connection, transaction
from ulid import ULID

from compozy.config import Config, get_config
from memory.controller.events import event_record
from memory.domain.dates import resolve_relative_dates
from memory.domain.enums import EventOp, ExtractorState, SessionEventKind, SessionType
from memory.domain.errors import NotFound
from memory.domain.extraction import FailureRecord, Turn
from memory.domain.models import format_timestamp, utc_now
from memory.models import ExtractorSession, Session, SessionEvent
from memory.sessions import ledger

from .extraction import USER_ROLE, RunOutcome, SessionSource, extract_turns, projection

ACTOR = "extractor"
# The tools through which an agent writes memory explicitly. A turn that called one of them is not read again.
MEMORY_WRITE_TOOLS = ("compozy__memory_note", "compozy__memory_propose")
# What every name of MEMORY_WRITE_TOOLS contains: the trigger reads only the tool calls that contain it.
MEMORY_WRITE_NEEDLE = "compozy__memory_"
USER_KIND = SessionEventKind.USER_MESSAGE
ASSISTANT_KIND = SessionEventKind.ASSISTANT_MESSAGE
TOOL_CALL_KIND = SessionEventKind.TOOL_CALL
SKIPPED_SESSION_TYPES = frozenset({SessionType.DREAM, SessionType.SYSTEM})
# Rows read to find the tool calls of one exchange (a user message and what followed it).
EXCHANGE_LIMIT = 1000
ACTIVE_STATES = (ExtractorState.QUEUED, ExtractorState.RUNNING)


@dataclass(frozen=True)
class Requested:
    session_id: str
    outcome: Literal["queued", "coalesced", "dropped", "skipped", "disabled"]
    reason: str | None = None


@dataclass(frozen=True)
class RunReport:
    session_id: str
    outcome: Literal["completed", "failed", "dropped", "superseded"]
    from_seq: int | None = None
    until_seq: int | None = None
    candidate_count: int = 0
    staged_file: str | None = None
    failures: list[str] = field(default_factory=list)
    reason: str | None = None


def _event(op: EventOp, session_id: str, workspace_id: str, **metadata: Any) -> None:
    event_record(op=op, session_id=session_id, workspace_id=workspace_id, actor=ACTOR, metadata=metadata)


def _session_row(session_id: str) -> Session | None:
    return Session.objects.filter(session_id=session_id).first()


def skip_reason(session: Any) -> str | None:
    """Why a session is never extracted: dream and system sessions (the machine's own work) and sub-agents
    (their parent's transcript carries what matters, and they cannot write memory)."""
    if session is None:
        return "unknown_session"
    if session.type in SKIPPED_SESSION_TYPES:
        return f"{session.type}_session"
    if session.parent_session_id:
        return "subagent"
    return None


def _expired(state: ExtractorSession, now: datetime) -> bool:
    return state.deadline_at is not None and state.deadline_at < now


def _enqueue_run(session_id: str, run_id: str) -> None:
    from django_q.tasks import async_task

    transaction.on_commit(lambda: async_task("memory.background.tasks.run_extraction", session_id, run_id,
                                             task_name=f"extract-{session_id}-{run_id}"))


def _enqueue_drain() -> None:
    from django_q.tasks import async_task

    async_task("memory.background.tasks.drain_extractor_inbox", task_name="extractor-drain")


def request(*, session_id: str, turn_id: str = "", seq: int = 0,
            turns: Sequence[tuple[str, int]] = (), config: Config | None = None) -> Requested:
    """Persisted assistant turns ask for extraction: one request for the turn (`turn_id`, `seq`) or for every turn
    one append persisted (`turns`), queued unless each of them wrote memory explicitly. Cheap: it runs inside the
    caller's append request, so the common case (a run already queued or running) is one indexed read and one
    indexed update."""
    config = config or get_config()
    settings = config.memory.extractor
    if not settings.enabled:
        return Requested(session_id=session_id, outcome="disabled")
    asked = list(turns) or ([(turn_id, seq)] if turn_id else [])
    if asked and _all_wrote_memory(session_id, [seq for _turn, seq in asked]):
        # Rare: the session's own skip reason comes first, as when it is checked before the turns.
        reason = skip_reason(_session_row(session_id)) or "wrote_memory"
        return Requested(session_id=session_id, outcome="skipped", reason=reason)
    coalesced = _coalesce(session_id, settings)
    if coalesced is not None:
        return coalesced
    session = _session_row(session_id)
    reason = skip_reason(session)
    if reason is not None:
        return Requested(session_id=session_id, outcome="skipped", reason=reason)
    now = utc_now()
    with transaction.atomic():
        state, _created = ExtractorSession.objects.select_for_update().get_or_create(
            session_id=session_id, defaults={"workspace_id": session.workspace_id, "updated_at": now})
        if state.status in ACTIVE_STATES and not _expired(state, now):
            # A run became active since `_coalesce` looked: coalesce into it the same way.
            return _coalesce_into(session_id, state.workspace_id, state.status, state.pending, settings, now)
        # Idle, or the run that owned it is past its deadline (its worker died): a new run takes over.
        state.status, state.run_id, state.pending = ExtractorState.QUEUED, str(ULID()), 0
        state.deadline_at = now + timedelta(milliseconds=settings.deadline)
        state.updated_at = now
        state.save()
        _enqueue_run(session_id, state.run_id)
    return Requested(session_id=session_id, outcome="queued")


_ACTIVE_STATE = ("SELECT status, pending, workspace_id FROM memory_extractor_sessions WHERE session_id = %s "
                 f"AND status IN ('{ExtractorState.QUEUED}', '{ExtractorState.RUNNING}') "
                 "AND (deadline_at IS NULL OR deadline_at >= %s)")


def _coalesce(session_id: str, settings: Any) -> Requested | None:
    """Fold the request into the session's queued or running run (not past its deadline), or None when there is
    none. A row only exists for a session that was eligible when it was created, and a session's type, parent and
    workspace never change, so the session itself is not read again here."""
    now = utc_now()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_ACTIVE_STATE, [session_id, connection.ops.adapt_datetimefield_value(now)])
        found = cursor.fetchone()
        if found is None:
            return None
        status, pending, workspace_id = found
        return _coalesce_into(session_id, workspace_id, status, pending, settings, now)


def _coalesce_into(session_id: str, workspace_id: str, status: str, pending: int, settings: Any,
                   now: datetime) -> Requested:
    """Inside the caller's transaction, with the session's active state just read (`status`, `pending`)."""
    if pending >= settings.coalesce_max:
        # Nothing is lost: the follow-up run reads every turn after the last extracted seq. The drop is recorded
        # once per run: `pending` goes one past the limit to say so, and later requests write nothing, or a fast
        # agent whose run waits would write one identical event per turn.
        if pending == settings.coalesce_max:
            with connection.cursor() as cursor:
                cursor.execute("UPDATE memory_extractor_sessions SET pending = pending + 1 WHERE session_id = %s",
                               [session_id])
            _event(EventOp.EXTRACTOR_DROPPED, session_id, workspace_id, reason="coalesce_full", pending=pending)
        return Requested(session_id=session_id, outcome="dropped", reason="coalesce_full")
    with connection.cursor() as cursor:
        cursor.execute("UPDATE memory_extractor_sessions SET pending = pending + 1, updated_at = %s "
                       "WHERE session_id = %s", [connection.ops.adapt_datetimefield_value(now), session_id])
    _event(EventOp.EXTRACTOR_COALESCED, session_id, workspace_id, pending=pending + 1, status=str(status))
    return Requested(session_id=session_id, outcome="coalesced")


def _all_wrote_memory(session_id: str, seqs: list[int]) -> bool:
    """Whether the exchange holding each of these turns (a user message and what follows it until the next one,
    at most `EXCHANGE_LIMIT` rows) called a memory-writing tool. One read for the lot, of the exchanges' bounds and
    the tool calls that could be memory writes only."""
    start = ledger.last_seq_of_kind(session_id, kind=USER_KIND, at_most=min(seqs)) or 1
    marks = ledger.exchange_marks(session_id, from_seq=start, until_seq=max(seqs) + EXCHANGE_LIMIT,
                                  opener=USER_KIND, call=TOOL_CALL_KIND, needle=MEMORY_WRITE_NEEDLE)
    starts = [seq for seq, kind, _name in marks if kind == USER_KIND]
    writes = [seq for seq, kind, name in marks if kind == TOOL_CALL_KIND and name.endswith(MEMORY_WRITE_TOOLS)]
    for seq in seqs:
        first = max((begin for begin in starts if begin <= seq), default=start)
        after = min((begin for begin in starts if begin > seq), default=None)
        if not any(first <= at < first + EXCHANGE_LIMIT and (after is None or at < after) for at in writes):
            return False
    return True


def _is_memory_write(row: Any) -> bool:
    if row.kind != TOOL_CALL_KIND:
        return False
    name = str((row.data or {}).get("name") or row.content or "")
    # MCP clients prefix server names ("mcp__compozy__compozy__memory_note"); the tool's own name ends it.
    return name.endswith(MEMORY_WRITE_TOOLS)


def readable_turns(rows: list[Any]) -> list[Turn]:
    """The user and assistant messages of the rows, without the exchanges that wrote memory explicitly (a user
    message and everything until the next one)."""
    exchanges: list[list[Any]] = []
    for row in rows:
        if row.kind == USER_KIND or not exchanges:
            exchanges.append([])
        exchanges[-1].append(row)
    turns: list[Turn] = []
    for exchange in exchanges:
        if any(_is_memory_write(row) for row in exchange):
            continue
        # Relative dates read against the turn's own time ("yesterday" said on 8 May 2023 is 7 May 2023), so a
        # memory made from it still says when, read a month later.
        turns.extend(Turn(row.seq, USER_ROLE if row.kind == USER_KIND else "assistant",
                          resolve_relative_dates(row.content, row.ts), format_timestamp(row.ts))
                     for row in exchange if row.kind in (USER_KIND, ASSISTANT_KIND))
    return turns


def has_unseen_messages(session_id: str) -> bool:
    """Whether the session holds a user or assistant message past the last seq the extractor read."""
    last_seq = (ExtractorSession.objects.filter(session_id=session_id).values_list("last_seq", flat=True).first()
                or 0)
    return SessionEvent.objects.filter(session_id=session_id, seq__gt=last_seq,
                                       kind__in=[USER_KIND, ASSISTANT_KIND]).exists()


def _context(session_id: str, last_seq: int, count: int) -> list[Turn]:
    if count == 0 or last_seq == 0:
        return []
    rows = (SessionEvent.objects.filter(session_id=session_id, seq__lte=last_seq, kind__in=[USER_KIND, ASSISTANT_KIND])
            .order_by("-seq").values_list("seq", "kind", "content")[:count])
    return [Turn(seq, USER_ROLE if kind == USER_KIND else "assistant", content)
            for seq, kind, content in reversed(rows)]


def run(*, session_id: str, run_id: str, config: Config | None = None) -> RunReport:
    """One run for one session (the task). A run whose claim was taken over (its deadline passed) does nothing."""
    config = config or get_config()
    settings = config.memory.extractor
    now = utc_now()
    with transaction.atomic():
        state = ExtractorSession.objects.select_for_update().filter(session_id=session_id).first()
        if state is None or state.run_id != run_id or state.status not in ACTIVE_STATES:
            return RunReport(session_id=session_id, outcome="superseded")
        state.status, state.pending = ExtractorState.RUNNING, 0
        state.deadline_at = now + timedelta(milliseconds=settings.deadline)
        state.updated_at = now
        state.save(update_fields=["status", "pending", "deadline_at", "updated_at"])
        last_seq, workspace_id = state.last_seq, state.workspace_id
    deadline = time.monotonic() + settings.deadline / 1000
    session = _session_row(session_id)
    reason = skip_reason(session)
    rows = ledger.page(session_id, after_seq=last_seq, limit=settings.max_turns) if reason is None else []
    until_seq = rows[-1].seq if rows else last_seq
    backlog = len(rows) == settings.max_turns
    source = SessionSource(session_id, _root_session(session) or session_id, workspace_id,
                           session.agent_name if session else "")
    turns = readable_turns(rows)
    if any(turn.role == USER_ROLE for turn in projection(turns)):
        # A run with nothing the user said is only `dropped`: it never starts provider work.
        _event(EventOp.EXTRACTOR_STARTED, session_id, workspace_id, from_seq=last_seq + 1, until_seq=until_seq,
               turns=len(turns))
    try:
        outcome = extract_turns(source=source, turns=turns,
                                context=_context(session_id, last_seq, settings.context_turns),
                                config=config, until_seq=until_seq, deadline=deadline)
    except Exception as exc:
        _finish_run(session_id, run_id, last_seq, None, f"{type(exc).__name__}", backlog, settings)
        _event(EventOp.EXTRACTOR_FAILED, session_id, workspace_id, error=type(exc).__name__)
        raise
    _finish_run(session_id, run_id, until_seq, outcome, outcome.error, backlog, settings)
    _record_outcome(session_id, workspace_id, outcome)
    if outcome.staged_file:
        _enqueue_drain()
    return RunReport(session_id=session_id, outcome=outcome.status, from_seq=last_seq + 1, until_seq=until_seq,
                     candidate_count=outcome.candidate_count, staged_file=outcome.staged_file or None,
                     failures=outcome.failures, reason=outcome.reason or outcome.error or None)


def _root_session(session: Any) -> str:
    """The top of the session's parent chain (a session a sub-agent was started from)."""
    if session is None:
        return ""
    seen = {session.session_id}
    while session.parent_session_id and session.parent_session_id not in seen:
        parent = Session.objects.filter(session_id=session.parent_session_id).first()
        if parent is None:
            break
        seen.add(parent.session_id)
        session = parent
    return session.session_id


def _record_outcome(session_id: str, workspace_id: str, outcome: RunOutcome) -> None:
    if outcome.status == "dropped":
        # Counters only: nothing about what the turns said.
        _event(EventOp.EXTRACTOR_DROPPED, session_id, workspace_id, reason=outcome.reason, **outcome.counters)
    elif outcome.status == "failed":
        _event(EventOp.EXTRACTOR_FAILED, session_id, workspace_id, error=outcome.error, failures=outcome.failures,
               from_seq=outcome.from_seq, until_seq=outcome.until_seq)
    else:
        _event(EventOp.EXTRACTOR_COMPLETED, session_id, workspace_id, candidate_count=outcome.candidate_count,
               staged_file=outcome.staged_file, failures=outcome.failures, from_seq=outcome.from_seq,
               until_seq=outcome.until_seq, **{k: v for k, v in outcome.counters.items() if k != "turns"})


def _finish_run(session_id: str, run_id: str, until_seq: int, outcome: RunOutcome | None, error: str,
                backlog: bool, settings: Any) -> None:
    now = utc_now()
    with transaction.atomic():
        state = ExtractorSession.objects.select_for_update().get(session_id=session_id)
        if state.run_id != run_id:
            return  # taken over after our deadline; the new run reads from the last seq it saw
        state.last_seq = max(state.last_seq, until_seq)
        state.runs += 1
        state.candidates += outcome.candidate_count if outcome else 0
        state.last_outcome = outcome.status if outcome else "failed"
        state.last_error = (error or "")[:500]
        state.last_run_at = now
        state.updated_at = now
        if state.pending > 0 or backlog:
            # One follow-up for everything that arrived meanwhile (or the rest of a long backlog).
            state.status, state.run_id, state.pending = ExtractorState.QUEUED, str(ULID()), 0
            state.deadline_at = now + timedelta(milliseconds=settings.deadline)
            _enqueue_run(session_id, state.run_id)
        else:
            state.status, state.run_id, state.deadline_at = ExtractorState.IDLE, "", None
        state.save()




def extract_again(name: str, record: FailureRecord, config: Config) -> Callable[[], str | None]:
    """A replay of a run's dead letter (`provider`, `validate`): the same turns extracted again, as `prepare` for
    `drain_inbox` (it runs under the drain lock and returns the file it staged, if any)."""
    source = record.source
    rows = [row for row in ledger.page(source.session, after_seq=source.from_seq - 1,
                                       limit=source.until_seq - source.from_seq + 1)
            if row.seq <= source.until_seq]
    if not rows:
        raise NotFound(f"The turns {source.from_seq}-{source.until_seq} of session {source.session} are gone.",
                       details={"failure": name, "session_id": source.session, "reason": "turns_gone"})

    def prepare() -> str | None:
        outcome = extract_turns(
            source=SessionSource(source.session, source.root_session, source.workspace_id, source.agent_name),
            turns=readable_turns(rows), context=_context(source.session, source.from_seq - 1,
                                                         config.memory.extractor.context_turns),
            config=config, until_seq=source.until_seq)
        _record_outcome(source.session, source.workspace_id, outcome)
        return outcome.staged_file or None
    return prepare
