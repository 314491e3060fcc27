"""The extractor noun's verbs: the operator's (status, drain, the dead letters and their replay, the sessions and
their candidates) and the two the trigger is driven through (`extractor_request`, the hook a persisted assistant
turn calls; `extractor_run`, the task). When and what to extract is the engine's, `memory/extractor/`: these verbs
declare their inputs and results and turn the engine's dataclasses into them, as `dreams.py` does for dreaming.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import Field, model_validator

from compozy.config import Config, get_config
from memory.domain.enums import EventOp, ExtractorState, Origin
from memory.domain.errors import CompozyError, NotFound, ValidationError
from memory.domain.extraction import STAGED_FILE_STAGES, FailureRecord
from memory.extractor import inbox, trigger
from memory.extractor.drain import DrainedCandidate, DrainReport, drain_inbox
from memory.models import Decision, Event, ExtractorSession
from memory.sessions import signals
from memory.store.roots import global_root

from .inputs import Caller, Input
from .results import DecisionSummary, Result, decision_summary, iso

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


class DrainResult(Result):
    files: list[str]
    # The drain's own record of each candidate (`memory/extractor/drain.py`), declared once.
    candidates: list[DrainedCandidate]
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


# ----- the trigger and the run (the engine's, as the verbs' results) --------------------------------------------


def extractor_request(*, session_id: str, turn_id: str = "", seq: int = 0,
                      turns: Sequence[tuple[str, int]] = (), config: Config | None = None) -> trigger.Requested:
    """Persisted assistant turns ask for extraction (see `memory/extractor/trigger.py: request`). No surface
    declares this verb (the ledger's signal and the tests call it), so it answers with the engine's own record."""
    return trigger.request(session_id=session_id, turn_id=turn_id, seq=seq, turns=turns, config=config)


def extractor_run(*, session_id: str, run_id: str, config: Config | None = None) -> trigger.RunReport:
    """One run for one session (the task; see `memory/extractor/trigger.py: run`), answered with the engine's own
    record as `extractor_request` is."""
    return trigger.run(session_id=session_id, run_id=run_id, config=config)


# ----- operator verbs -------------------------------------------------------------------------------------------


def _drain_result(report: DrainReport) -> DrainResult:
    return DrainResult(files=report.files, candidates=report.candidates, failures=report.failures, ops=report.ops)


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
    if record.stage in STAGED_FILE_STAGES:
        lines = [line for line in record.content.splitlines() if line.strip()]
        if not lines:
            raise ValidationError("The failure holds no staged candidates to replay.",
                                  details={"failure": name, "stage": record.stage})
        prepare = _restage(root, record, lines)
    else:
        prepare = trigger.extract_again(name, record, config)
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
    decisions = Decision.objects.filter(origin=Origin.EXTRACTOR, session_id=data.session_id).order_by("seq", "id")
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
            "sessions_queued": ExtractorSession.objects.filter(status__in=trigger.ACTIVE_STATES).count(),
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
                        sessions_queued=states.filter(status=ExtractorState.QUEUED).count(),
                        sessions_running=states.filter(status=ExtractorState.RUNNING).count(),
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


def _on_session_stopped(sender: Any, *, session_id: str, **_: Any) -> None:
    # A stop flushes what the extractor has not read, whatever its kinds, through the same trigger, run and drain:
    # a session of only user messages (two people, or a client that records only the user's side) never sent an
    # assistant turn, and without this it would end with turns nobody read.
    if trigger.has_unseen_messages(session_id):
        extractor_request(session_id=session_id)


def connect_signals() -> None:
    signals.assistant_turns_persisted.connect(_on_assistant_turns, dispatch_uid="compozy-extractor-request")
    signals.session_stopped.connect(_on_session_stopped, dispatch_uid="compozy-extractor-stop")
