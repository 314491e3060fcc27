"""The extractor noun: memories proposed from session transcripts, staged in the inbox, drained through the
controller, failures kept for replay.

- `extractor_request` is the hook: a persisted assistant turn of an eligible session queues one run on the task
  cluster. While a session's run is queued or in progress, further requests only raise its `pending` count (up to
  `memory.extractor.coalesce_max`; `memory.extractor.coalesced`), and the run queues one follow-up when it ends.
- `extractor_run` is that run (the task): the new turns since the session's last extracted seq, minus exchanges
  that already wrote memory explicitly, through `extract_turns`, within `memory.extractor.deadline`.
- `extractor_drain`, `extractor_status`, `extractor_failure_list`, `extractor_replay` (one dead letter by id, or
  every dead letter of a session) are the operator's verbs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

from django.db import connection, transaction
from pydantic import Field, model_validator
from ulid import ULID

from compozy.config import Config, get_config
from memory.controller.events import event_record
from memory.domain.dates import resolve_relative_dates
from memory.domain.enums import EventOp
from memory.domain.errors import CompozyError, NotFound, ValidationError
from memory.domain.extraction import FailureRecord, Turn
from memory.domain.models import utc_now
from memory.extractor import inbox
from memory.extractor.drain import DrainReport, drain_inbox
from memory.extractor.extraction import USER_ROLE, RunOutcome, SessionSource, extract_turns, projection
from memory.models import Decision, Event, ExtractorSession, Session, SessionEvent
from memory.sessions import ledger, signals
from memory.store.roots import global_root

from .inputs import Caller, Input
from .results import DecisionSummary, Result, decision_summary, iso

ACTOR = "extractor"
# The tools through which an agent writes memory explicitly. A turn that called one of them is not read again.
MEMORY_WRITE_TOOLS = ("compozy__memory_note", "compozy__memory_propose")
# What every name of MEMORY_WRITE_TOOLS contains: the trigger reads only the tool calls that contain it.
MEMORY_WRITE_NEEDLE = "compozy__memory_"
USER_KIND = "user_message"
ASSISTANT_KIND = "assistant_message"
TOOL_CALL_KIND = "tool_call"
SKIPPED_SESSION_TYPES = frozenset({"dream", "system"})
# Rows read to find the tool calls of one exchange (a user message and what followed it).
EXCHANGE_LIMIT = 1000


# ----- inputs ---------------------------------------------------------------------------------------------------


class ExtractorStatusInput(Input):
    pass


class FailureListInput(Input):
    limit: int = Field(default=50, ge=1, le=500, description="failures to return, newest first")


class ReplayInput(Input):
    """One dead letter by its id, or every dead letter of a session: exactly one of the two."""

    failure: str | None = Field(default=None, min_length=1, max_length=255, description=(
        "the failure's id: its file name under _system/extractor/failures/. Give this or session_id, not both."))
    session_id: str | None = Field(default=None, min_length=1, max_length=128, description=(
        "replay every dead letter of this session instead, oldest first, each as a replay by id would; one that "
        "cannot be replayed is reported and the rest still run. Give this or failure, not both."))

    @model_validator(mode="after")
    def _exactly_one(self) -> ReplayInput:
        if (self.failure is None) == (self.session_id is None):
            # Raised as the domain's error (pydantic passes it through): a stable reason every surface reports.
            raise ValidationError("Give exactly one of failure (a dead letter's id) or session_id (to replay every "
                                  "dead letter of that session).",
                                  details={"fields": ["failure", "session_id"], "reason": "exactly_one"})
        return self


class DrainInput(Input):
    pass


class FailureSessionsInput(Input):
    pass


class ExtractorSessionsInput(Input):
    limit: int = Field(default=50, ge=1, le=500, description="sessions to return, most recently extracted first")


class SessionCandidatesInput(Input):
    session_id: str = Field(min_length=1, max_length=128, description="the session whose candidates to show")


# ----- results --------------------------------------------------------------------------------------------------


class DrainedCandidateView(Result):
    file: str
    line: int
    session_id: str
    decision_id: str
    op: str
    applied: bool
    target_filename: str


class DrainResult(Result):
    files: list[str]
    candidates: list[DrainedCandidateView]
    failures: list[str]
    ops: dict[str, int]


class FailureSourceView(Result):
    session_id: str
    root_session_id: str
    from_seq: int
    until_seq: int
    workspace_id: str | None
    agent_name: str | None
    file: str | None


class FailureView(Result):
    id: str
    stage: str
    source: FailureSourceView
    error: str
    content: str
    recorded_at: str


class FailureList(Result):
    failures: list[FailureView]
    total: int


class FailureSessionView(Result):
    session_id: str
    failures: int
    oldest: str
    newest: str


class FailureSessionList(Result):
    # The sessions that have dead letters, the one with the newest first: what a session replay would take.
    sessions: list[FailureSessionView]


class ReplayError(Result):
    """Why one dead letter of a session replay was not replayed: the error a replay of it by id would return."""

    code: str
    message: str
    details: dict[str, Any]


class FailureReplay(Result):
    failure: str
    stage: str | None
    replayed: bool
    drain: DrainResult | None
    error: ReplayError | None


class ReplayResult(Result):
    # A replay by id: the dead letter, its stage and its drain, as before a session could be named. A session
    # replay leaves these null (stage, drain) and reports each dead letter in `replays`.
    failure: str | None
    stage: str | None
    # By id: always true (a replay that cannot run is an error). By session: true when none reported an error.
    replayed: bool
    drain: DrainResult | None
    session_id: str | None = None
    # Every dead letter this call replayed or tried to, oldest first: the one of a replay by id, or the session's.
    replays: list[FailureReplay] = Field(default_factory=list)


class QueueView(Result):
    inbox_files: int
    claimed_files: int
    sessions_queued: int
    sessions_running: int
    pending_requests: int


class LastRunView(Result):
    session_id: str
    outcome: str
    at: str | None
    error: str | None


class ExtractorCounts(Result):
    started: int
    completed: int
    failed: int
    dropped: int
    coalesced: int
    candidates: int
    failures: int


class ExtractorStatus(Result):
    enabled: bool
    provider: str
    queue: QueueView
    last_run: LastRunView | None
    counts: ExtractorCounts


class ExtractorSessionView(Result):
    session_id: str
    workspace_id: str | None
    status: str
    last_seq: int
    pending: int
    runs: int
    candidates: int
    last_outcome: str | None
    last_error: str | None
    last_run_at: str | None


class ExtractorSessionList(Result):
    sessions: list[ExtractorSessionView]
    total: int


class SessionCandidates(Result):
    session: ExtractorSessionView | None
    # Each candidate the drain submitted for the session, with the decision it got (contents redacted).
    decisions: list[DecisionSummary]


class RequestResult(Result):
    session_id: str
    outcome: Literal["queued", "coalesced", "dropped", "skipped", "disabled"]
    reason: str | None = None


class RunResult(Result):
    session_id: str
    outcome: Literal["completed", "failed", "dropped", "superseded"]
    from_seq: int | None = None
    until_seq: int | None = None
    candidate_count: int = 0
    staged_file: str | None = None
    failures: list[str] = Field(default_factory=list)
    reason: str | None = None


# ----- events -----------------------------------------------------------------------------------------------------


def _event(op: EventOp, session_id: str, workspace_id: str, **metadata: Any) -> None:
    event_record(op=op, session_id=session_id, workspace_id=workspace_id, actor=ACTOR, metadata=metadata)


# ----- the hook and the run -----------------------------------------------------------------------------------------


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


def extractor_request(*, session_id: str, turn_id: str = "", seq: int = 0,
                      turns: Sequence[tuple[str, int]] = (), config: Config | None = None) -> RequestResult:
    """Persisted assistant turns ask for extraction: one request for the turn (`turn_id`, `seq`) or for every turn
    one append persisted (`turns`), queued unless each of them wrote memory explicitly. Cheap: it runs inside the
    caller's append request, so the common case (a run already queued or running) is one indexed read and one
    indexed update."""
    config = config or get_config()
    settings = config.memory.extractor
    if not settings.enabled:
        return RequestResult(session_id=session_id, outcome="disabled")
    asked = list(turns) or ([(turn_id, seq)] if turn_id else [])
    if asked and _all_wrote_memory(session_id, [seq for _turn, seq in asked]):
        # Rare: the session's own skip reason comes first, as when it is checked before the turns.
        reason = skip_reason(_session_row(session_id)) or "wrote_memory"
        return RequestResult(session_id=session_id, outcome="skipped", reason=reason)
    coalesced = _coalesce(session_id, settings)
    if coalesced is not None:
        return coalesced
    session = _session_row(session_id)
    reason = skip_reason(session)
    if reason is not None:
        return RequestResult(session_id=session_id, outcome="skipped", reason=reason)
    now = utc_now()
    with transaction.atomic():
        state, _created = ExtractorSession.objects.select_for_update().get_or_create(
            session_id=session_id, defaults={"workspace_id": session.workspace_id, "updated_at": now})
        if state.status in ("queued", "running") and not _expired(state, now):
            # A run became active since `_coalesce` looked: coalesce into it the same way.
            return _coalesce_into(session_id, state.workspace_id, state.status, state.pending, settings, now)
        # Idle, or the run that owned it is past its deadline (its worker died): a new run takes over.
        state.status, state.run_id, state.pending = "queued", str(ULID()), 0
        state.deadline_at = now + timedelta(milliseconds=settings.deadline)
        state.updated_at = now
        state.save()
        _enqueue_run(session_id, state.run_id)
    return RequestResult(session_id=session_id, outcome="queued")


_ACTIVE_STATE = ("SELECT status, pending, workspace_id FROM memory_extractor_sessions WHERE session_id = %s "
                 "AND status IN ('queued', 'running') AND (deadline_at IS NULL OR deadline_at >= %s)")


def _coalesce(session_id: str, settings: Any) -> RequestResult | None:
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
                   now: datetime) -> RequestResult:
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
        return RequestResult(session_id=session_id, outcome="dropped", reason="coalesce_full")
    with connection.cursor() as cursor:
        cursor.execute("UPDATE memory_extractor_sessions SET pending = pending + 1, updated_at = %s "
                       "WHERE session_id = %s", [connection.ops.adapt_datetimefield_value(now), session_id])
    _event(EventOp.EXTRACTOR_COALESCED, session_id, workspace_id, pending=pending + 1, status=status)
    return RequestResult(session_id=session_id, outcome="coalesced")


def wrote_memory(session_id: str, *, turn_id: str = "", seq: int = 0) -> bool:
    """Whether the exchange holding this turn called a memory-writing tool."""
    return _all_wrote_memory(session_id, [seq])


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
        turns.extend(Turn(row.seq, "user" if row.kind == USER_KIND else "assistant",
                          resolve_relative_dates(row.content, row.ts))
                     for row in exchange if row.kind in (USER_KIND, ASSISTANT_KIND))
    return turns


def _context(session_id: str, last_seq: int, count: int) -> list[Turn]:
    if count == 0 or last_seq == 0:
        return []
    rows = (SessionEvent.objects.filter(session_id=session_id, seq__lte=last_seq, kind__in=[USER_KIND, ASSISTANT_KIND])
            .order_by("-seq").values_list("seq", "kind", "content")[:count])
    return [Turn(seq, "user" if kind == USER_KIND else "assistant", content) for seq, kind, content in reversed(rows)]


def extractor_run(*, session_id: str, run_id: str, config: Config | None = None) -> RunResult:
    """One run for one session (the task). A run whose claim was taken over (its deadline passed) does nothing."""
    config = config or get_config()
    settings = config.memory.extractor
    now = utc_now()
    with transaction.atomic():
        state = ExtractorSession.objects.select_for_update().filter(session_id=session_id).first()
        if state is None or state.run_id != run_id or state.status not in ("queued", "running"):
            return RunResult(session_id=session_id, outcome="superseded")
        state.status, state.pending = "running", 0
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
    return RunResult(session_id=session_id, outcome=outcome.status, from_seq=last_seq + 1, until_seq=until_seq,
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
            state.status, state.run_id, state.pending = "queued", str(ULID()), 0
            state.deadline_at = now + timedelta(milliseconds=settings.deadline)
            _enqueue_run(session_id, state.run_id)
        else:
            state.status, state.run_id, state.deadline_at = "idle", "", None
        state.save()


# ----- operator verbs -------------------------------------------------------------------------------------------


def _drain_result(report: DrainReport) -> DrainResult:
    return DrainResult(
        files=report.files,
        candidates=[DrainedCandidateView(file=c.file, line=c.line, session_id=c.session, decision_id=c.decision_id,
                                         op=c.op, applied=c.applied, target_filename=c.target_filename)
                    for c in report.candidates],
        failures=report.failures,
        ops=report.ops,
    )


def extractor_drain(*, data: DrainInput, caller: Caller) -> DrainResult:
    return _drain_result(drain_inbox(get_config()))


def _failure_view(name: str, record: FailureRecord) -> FailureView:
    source = record.source
    return FailureView(
        id=name, stage=record.stage, error=record.error, content=record.content, recorded_at=record.recorded_at,
        source=FailureSourceView(session_id=source.session, root_session_id=source.root_session,
                                 from_seq=source.from_seq, until_seq=source.until_seq,
                                 workspace_id=source.workspace_id or None, agent_name=source.agent_name or None,
                                 file=source.file or None))


def extractor_failure_list(*, data: FailureListInput, caller: Caller) -> FailureList:
    root = global_root()
    names = inbox.failure_names(root)
    views = []
    for name in reversed(names[-data.limit:]):
        try:
            views.append(_failure_view(name, inbox.read_failure(root, name)))
        except ValidationError:
            continue  # a record that is not ours (hand-made, or from a future version) is not listed
    return FailureList(failures=views, total=len(names))


def extractor_failure_get(*, name: str) -> FailureView:
    return _failure_view(name, inbox.read_failure(global_root(), name))


def extractor_replay(*, data: ReplayInput, caller: Caller) -> ReplayResult:
    """Replay a dead letter, or every dead letter of a session. A staged file's failure is staged again and
    drained; a run's failure (provider, validate) is extracted again from the same turns. Either way each
    candidate's earlier decision, if any, is returned rather than a second one (`submit(once=True)`). A record goes
    once its replay ran (a replay that fails again leaves a new one)."""
    root = global_root()
    config = get_config()
    if data.session_id is not None:
        return _replay_session(root, config, data.session_id)
    replay = _replay_one(root, config, str(data.failure))  # the input holds exactly one of the two
    return ReplayResult(failure=replay.failure, stage=replay.stage, replayed=True, drain=replay.drain,
                        replays=[replay])


def _replay_one(root: Any, config: Config, name: str) -> FailureReplay:
    record = inbox.read_failure(root, name)
    if record.stage in ("parse", "resolve", "submit", "stage"):
        lines = [line for line in record.content.splitlines() if line.strip()]
        if not lines:
            raise ValidationError("The failure holds no staged candidates to replay.",
                                  details={"failure": name, "stage": record.stage})
        prepare = _restage(root, record, lines)
    else:
        prepare = _reextract(root, name, record, config)
    report = drain_inbox(config, prepare=prepare)
    inbox.remove_failure(root, name)
    return FailureReplay(failure=name, stage=record.stage, replayed=True, drain=_drain_result(report), error=None)


def _replay_session(root: Any, config: Config, session_id: str) -> ReplayResult:
    """Every dead letter of the session, oldest first (their names begin with the time they were recorded). The
    list is taken once, before the first replay, so a replay that fails again (a new record of the same session)
    is reported in its drain and not replayed again by this call."""
    failures = [(name, record) for name, record in _readable_failures(root) if record.source.session == session_id]
    if not failures:
        # An error rather than an empty answer: a mistyped session id must not look like a replay that worked, and
        # a replay by id of a record that is gone is the same error.
        raise NotFound(f"Session {session_id} has no extractor failures to replay.",
                       details={"session_id": session_id, "reason": "no_failures"})
    replays = []
    for name, record in failures:
        try:
            replays.append(_replay_one(root, config, name))
        except CompozyError as error:
            # One dead letter that cannot be replayed (its turns are gone, it holds nothing, another replay took
            # it, the database is busy) is reported with the error its replay by id would return; the rest run.
            replays.append(FailureReplay(failure=name, stage=record.stage, replayed=False, drain=None,
                                         error=ReplayError(**error.to_dict())))
    return ReplayResult(failure=None, stage=None, replayed=all(replay.replayed for replay in replays), drain=None,
                        session_id=session_id, replays=replays)


def extractor_failure_sessions(*, data: FailureSessionsInput, caller: Caller) -> FailureSessionList:
    """Every dead letter grouped by its session (all of them, not a page): what `replay --session` would replay."""
    by_session: dict[str, list[FailureRecord]] = {}
    for _name, record in _readable_failures(global_root()):
        by_session.setdefault(record.source.session, []).append(record)
    views = [FailureSessionView(session_id=session, failures=len(records), oldest=records[0].recorded_at,
                                newest=records[-1].recorded_at) for session, records in by_session.items()]
    return FailureSessionList(sessions=sorted(views, key=lambda view: (view.newest, view.session_id), reverse=True))


def _readable_failures(root: Any) -> list[tuple[str, FailureRecord]]:
    """The dead letters, oldest first; a record that is not ours (hand-made, a future version's) is left out, as
    the failure list leaves it out."""
    found = []
    for name in inbox.failure_names(root):
        try:
            found.append((name, inbox.read_failure(root, name)))
        except (ValidationError, NotFound):
            continue  # not ours, or replayed meanwhile by another caller
    return found


def _restage(root: Any, record: FailureRecord, lines: list[str]) -> Callable[[], str | None]:
    def prepare() -> str | None:
        return inbox.stage(root, session=record.source.session, until_seq=record.source.until_seq,
                           lines=lines).relative
    return prepare


def _reextract(root: Any, name: str, record: FailureRecord, config: Config) -> Callable[[], str | None]:
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


def _requests_pending(pending: int) -> int:
    """Requests folded into a session's run, as shown: `pending` one past the limit only marks a drop recorded."""
    return min(pending, get_config().memory.extractor.coalesce_max)


def _session_view(state: ExtractorSession) -> ExtractorSessionView:
    return ExtractorSessionView(session_id=state.session_id, workspace_id=state.workspace_id or None,
                                status=state.status, last_seq=state.last_seq,
                                pending=_requests_pending(state.pending), runs=state.runs,
                                candidates=state.candidates, last_outcome=state.last_outcome or None,
                                last_error=state.last_error or None, last_run_at=iso(state.last_run_at))


def extractor_sessions(*, data: ExtractorSessionsInput, caller: Caller) -> ExtractorSessionList:
    states = ExtractorSession.objects.order_by("-last_run_at", "-updated_at", "session_id")
    return ExtractorSessionList(sessions=[_session_view(state) for state in states[:data.limit]],
                                total=states.count())


def extractor_candidates(*, data: SessionCandidatesInput, caller: Caller) -> SessionCandidates:
    """The candidates a session produced, as the decisions the controller made for them (origin extractor)."""
    state = ExtractorSession.objects.filter(session_id=data.session_id).first()
    decisions = Decision.objects.filter(origin="extractor", session_id=data.session_id).order_by("decided_at", "id")
    return SessionCandidates(session=_session_view(state) if state else None,
                             decisions=[DecisionSummary(**decision_summary(d)) for d in decisions])


def extractor_health() -> dict[str, Any]:
    """What `memory health` says of the extractor: cheap counts only (no event scan)."""
    config = get_config()
    root = global_root()
    files = inbox.inbox_files(root)
    return {"status": "enabled" if config.memory.extractor.enabled else "disabled",
            "provider": config.memory.provider.kind,
            "inbox_files": sum(not f.claimed for f in files), "claimed_files": sum(f.claimed for f in files),
            "sessions_queued": ExtractorSession.objects.filter(status__in=("queued", "running")).count(),
            "failures": len(inbox.failure_names(root))}


def extractor_status(*, data: ExtractorStatusInput, caller: Caller) -> ExtractorStatus:
    config = get_config()
    root = global_root()
    files = inbox.inbox_files(root)
    states = ExtractorSession.objects
    last = states.exclude(last_run_at__isnull=True).order_by("-last_run_at").first()
    counts: dict[str, int] = {}
    for op, name in ((EventOp.EXTRACTOR_STARTED, "started"), (EventOp.EXTRACTOR_COMPLETED, "completed"),
                     (EventOp.EXTRACTOR_FAILED, "failed"), (EventOp.EXTRACTOR_DROPPED, "dropped"),
                     (EventOp.EXTRACTOR_COALESCED, "coalesced")):
        counts[name] = Event.objects.filter(op=op.value).count()
    candidates = sum(states.values_list("candidates", flat=True))
    return ExtractorStatus(
        enabled=config.memory.extractor.enabled,
        provider=config.memory.provider.kind,
        queue=QueueView(inbox_files=sum(not f.claimed for f in files), claimed_files=sum(f.claimed for f in files),
                        sessions_queued=states.filter(status="queued").count(),
                        sessions_running=states.filter(status="running").count(),
                        pending_requests=sum(_requests_pending(pending)
                                             for pending in states.values_list("pending", flat=True))),
        last_run=LastRunView(session_id=last.session_id, outcome=last.last_outcome, at=iso(last.last_run_at),
                             error=last.last_error or None) if last else None,
        counts=ExtractorCounts(**counts, candidates=candidates, failures=len(inbox.failure_names(root))),
    )


# ----- the hook -------------------------------------------------------------------------------------------------


def _on_assistant_turns(sender: Any, *, session_id: str, workspace_id: str = "",
                        turns: Sequence[tuple[str, int]] = (), **_: Any) -> None:
    # Sent after the ledger's commit, inside the caller's append request, once per append (an import of many turns
    # is one request, not one a turn): queue, coalesce or skip, never run here.
    if turns:
        extractor_request(session_id=session_id, turns=turns)


def _has_unseen_messages(session_id: str) -> bool:
    """Whether the session holds a user or assistant message past the last seq the extractor read."""
    last_seq = (ExtractorSession.objects.filter(session_id=session_id).values_list("last_seq", flat=True).first()
                or 0)
    return SessionEvent.objects.filter(session_id=session_id, seq__gt=last_seq,
                                       kind__in=[USER_KIND, ASSISTANT_KIND]).exists()


def _on_session_stopped(sender: Any, *, session_id: str, **_: Any) -> None:
    # A stop flushes what the extractor has not read, whatever its kinds, through the same trigger, run and drain:
    # a session of only user messages (two people, or a client that records only the user's side) never sent an
    # assistant turn, and without this it would end with turns nobody read.
    if _has_unseen_messages(session_id):
        extractor_request(session_id=session_id)


def connect_signals() -> None:
    signals.assistant_turns_persisted.connect(_on_assistant_turns, dispatch_uid="compozy-extractor-request")
    signals.session_stopped.connect(_on_session_stopped, dispatch_uid="compozy-extractor-stop")
