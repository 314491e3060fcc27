"""The dream noun: trigger a gated dreaming run, see the gates and the runs, retry a failed run, and the
scheduled pass the cluster runs for every workspace with activity."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any, Literal

from django.db.models import Max
from pydantic import Field

from memory.controller.artifacts import read_artifact
from memory.domain.dreaming import Gate, RunStatus
from memory.domain.errors import CompozyError, Conflict, NotFound, ValidationError, WorkspaceRequired
from memory.domain.models import utc_now
from memory.dreaming import gates as g
from memory.dreaming.candidates import Selection, count_candidates
from memory.dreaming.lock import lock_state
from memory.dreaming.run import Attempt, attempt, gate_json
from memory.models import Consolidation, Decision, Event, Workspace

from .inputs import Caller, Input, Selector
from .paging import cursor_field, limit_field, page_of
from .resolution import Resolved, resolve
from .results import DecisionSummary, Page, Result, decision_summary, iso

_log = logging.getLogger("compozy.memory.dreaming")
# The actor of scheduled runs in events and rows; surfaces record their origin (cli, http, uds, tool).
SCHEDULE_ACTOR = "schedule"
DREAM_SCHEDULE = "compozy-dream-check"
GateName = Literal["time", "sessions", "lock", "signal", "disabled"]


class DreamTriggerInput(Input):
    workspace: str | None = Field(None, description=(
        "The workspace, as its ULID or a directory inside it. Default: the caller's own workspace."))
    force: bool = Field(False, description="Skip the time and sessions gates; never the lock or the signal.")


class DreamStatusInput(Input):
    workspace: str | None = Field(None, description=(
        "The workspace, as its ULID or a directory inside it. Default: the caller's own workspace."))


class DreamListInput(Input):
    workspace: str | None = Field(None, description=(
        "The workspace, as its ULID or a directory inside it. Default: the caller's own workspace."))
    status: Literal["running", "completed", "failed", "canceled"] | None = Field(None, description=(
        "Only runs in this state."))
    cursor: str | None = cursor_field()
    limit: int | None = limit_field()


class DreamIdInput(Input):
    workspace: str | None = Field(None, description=(
        "The workspace, as its ULID or a directory inside it. Default: the caller's own workspace."))
    run_id: str = Field(description="The run id: drm_ followed by a lowercase ULID.")


class GateView(Result):
    gate: GateName
    passed: bool
    skipped: bool
    detail: str
    waiting_for: str


class CandidateParts(Result):
    frequency: float
    relevance: float
    recency: float
    freshness: float


class DreamCandidateView(Result):
    root_key: str
    filename: str
    name: str
    type: str
    scope: str
    agent_name: str | None
    agent_tier: str | None
    recall_count: int
    recall_score: float
    last_recalled_at: str
    updated_at: str
    score: float
    parts: CandidateParts
    snippet: str


class DreamRunSummary(Result):
    id: str
    workspace_id: str
    status: Literal["running", "completed", "failed", "canceled"]
    trigger: str
    actor: str
    forced: bool
    retry_of: str | None
    step: str
    eligible: int
    candidate_count: int
    promoted: int
    synthesis_filename: str
    decision_id: str | None
    decision_op: str | None
    error: dict[str, Any] | None
    recovered: bool
    started_at: str | None
    finished_at: str | None


class DreamRun(DreamRunSummary):
    gates: list[GateView]
    candidates: list[DreamCandidateView]
    artifact: str
    synthesis: dict[str, Any] | None
    timings: dict[str, float]


class DreamTriggerResult(Result):
    triggered: bool
    reason: GateName | None
    detail: str
    dream: DreamRun | None


class DreamSchedule(Result):
    every_minutes: int
    next_check_at: str | None


class DreamStatus(Result):
    workspace_id: str
    enabled: bool
    gates: list[GateView]
    ready: bool
    last_success_at: str | None
    running: DreamRunSummary | None
    latest: DreamRunSummary | None
    schedule: DreamSchedule


class DreamList(Result):
    dreams: list[DreamRunSummary]
    page: Page


class DreamShow(Result):
    dream: DreamRun
    artifact_text: str | None
    decision: DecisionSummary | None


class DreamPassItem(Result):
    workspace_id: str
    triggered: bool
    reason: GateName | None
    detail: str
    run_id: str | None
    status: str | None


class DreamPass(Result):
    checked: list[DreamPassItem]


# --- views of rows -----------------------------------------------------------------------------------------------


def _summary_fields(run: Consolidation) -> dict[str, Any]:
    return {
        "id": run.id, "workspace_id": run.workspace_id, "status": run.status, "trigger": run.trigger,
        "actor": run.actor, "forced": run.forced, "retry_of": run.retry_of, "step": run.step,
        "eligible": run.eligible, "candidate_count": len(run.candidates or []), "promoted": run.promoted,
        "synthesis_filename": run.synthesis_filename, "decision_id": run.decision_id,
        "decision_op": run.decision_op or None, "error": run.error, "recovered": run.recovered,
        "started_at": iso(run.started_at), "finished_at": iso(run.finished_at),
    }


def run_summary(run: Consolidation) -> DreamRunSummary:
    return DreamRunSummary(**_summary_fields(run))


def run_view(run: Consolidation) -> DreamRun:
    return DreamRun(
        **_summary_fields(run),
        gates=[GateView(**check) for check in run.gates or []],
        candidates=[DreamCandidateView(**{**c, "snippet": c.get("snippet", "")}) for c in run.candidates or []],
        artifact=run.artifact, synthesis=run.synthesis, timings=run.timings or {},
    )


def _gate_view(check: g.GateCheck) -> GateView:
    return GateView(**gate_json(check))


def _trigger_result(outcome: Attempt) -> DreamTriggerResult:
    return DreamTriggerResult(triggered=outcome.triggered, reason=outcome.reason.value if outcome.reason else None,
                              detail=outcome.detail, dream=run_view(outcome.run) if outcome.run else None)


# --- resolution --------------------------------------------------------------------------------------------------


def _workspace(spec: str | None, caller: Caller) -> Resolved:
    resolved = resolve(Selector(workspace=spec), caller)
    if resolved.workspace is None:
        raise WorkspaceRequired("Dreaming runs per workspace: run inside one, set COMPOZY_WORKSPACE, or name the "
                                "workspace.", details={"reason": "no_workspace", "field": "workspace"})
    return resolved


def _root(resolved: Resolved):  # noqa: ANN202
    from memory.dreaming.run import workspace_ref

    return resolved.root(workspace_ref(resolved.workspace_id))


def _run(data: DreamIdInput, caller: Caller) -> tuple[Resolved, Consolidation]:
    if not data.run_id.startswith("drm_") or len(data.run_id) != 30:
        raise ValidationError("Dreaming run ids look like drm_ followed by a lowercase ULID.",
                              details={"field": "run_id", "reason": "format"})
    resolved = _workspace(data.workspace, caller)
    run = Consolidation.objects.filter(id=data.run_id, workspace_id=resolved.workspace_id).first()
    if run is None:
        raise NotFound(f"No dreaming run {data.run_id} in this workspace.", details={"run_id": data.run_id})
    return resolved, run


# --- services ----------------------------------------------------------------------------------------------------


def dream_trigger(*, data: DreamTriggerInput, caller: Caller) -> DreamTriggerResult:
    """Check the gates now and run when they pass. `reason` names the gate that blocked (None when it ran)."""
    resolved = _workspace(data.workspace, caller)
    outcome = attempt(workspace_id=resolved.workspace_id, root=_root(resolved), config=resolved.config,
                      trigger="manual", actor=caller.origin.value, force=data.force)
    return _trigger_result(outcome)


def dream_retry(*, data: DreamIdInput, caller: Caller) -> DreamTriggerResult:
    """Run again after a failed or canceled run: a new run (pointing at the old one) that skips the time and
    sessions gates like --force, never the lock or the signal."""
    resolved, run = _run(data, caller)
    if run.status not in (RunStatus.FAILED.value, RunStatus.CANCELED.value):
        raise Conflict(f"Run {run.id} is {run.status}; only a failed or canceled run can be retried.",
                       details={"run_id": run.id, "status": run.status, "reason": "not_retryable"})
    outcome = attempt(workspace_id=resolved.workspace_id, root=_root(resolved), config=resolved.config,
                      trigger="retry", actor=caller.origin.value, force=True, retry_of=run.id)
    return _trigger_result(outcome)


def dream_status(*, data: DreamStatusInput, caller: Caller) -> DreamStatus:
    """Every gate's current state (none short-circuits here), what each waits for, and the latest runs."""
    resolved = _workspace(data.workspace, caller)
    workspace_id, dream = resolved.workspace_id, resolved.config.memory.dream
    now = utc_now()
    last = g.last_success(workspace_id)
    checks = [
        g.check_enabled(dream),
        g.check_time(dream, last, now, force=False),
        g.check_sessions(dream, g.sessions_since(workspace_id, last), force=False),
        g.check_lock(lock_state(workspace_id), now),
        # The status only counts the eligible candidates; choosing them is the run's work.
        g.check_signal(dream, Selection(eligible=count_candidates(workspace_id, dream, now=now), chosen=[])),
    ]
    runs = Consolidation.objects.filter(workspace_id=workspace_id)
    running = runs.filter(status=RunStatus.RUNNING.value).order_by("-started_at").first()
    latest = runs.order_by("-started_at").first()
    return DreamStatus(
        workspace_id=workspace_id, enabled=dream.enabled, gates=[_gate_view(c) for c in checks],
        ready=all(c.passed for c in checks), last_success_at=iso(last),
        running=run_summary(running) if running else None, latest=run_summary(latest) if latest else None,
        schedule=DreamSchedule(every_minutes=dream.check_every_minutes, next_check_at=iso(_next_check())),
    )


def _next_check() -> datetime | None:
    from django_q.models import Schedule

    return Schedule.objects.filter(name=DREAM_SCHEDULE).values_list("next_run", flat=True).first()


def dream_list(*, data: DreamListInput, caller: Caller) -> DreamList:
    resolved = _workspace(data.workspace, caller)
    queryset = Consolidation.objects.filter(workspace_id=resolved.workspace_id)
    if data.status:
        queryset = queryset.filter(status=data.status)
    binding = {"workspace": resolved.workspace_id, "status": data.status}
    rows, page = page_of(queryset.order_by("-started_at", "-id"), cursor=data.cursor, limit=data.limit,
                         binding=binding)
    return DreamList(dreams=[run_summary(row) for row in rows], page=Page(**page))


def dream_show(*, data: DreamIdInput, caller: Caller) -> DreamShow:
    resolved, run = _run(data, caller)
    text = read_artifact(_root(resolved), run.artifact) if run.artifact else None
    decision = Decision.objects.filter(id=run.decision_id).first() if run.decision_id else None
    return DreamShow(dream=run_view(run), artifact_text=text,
                     decision=DecisionSummary(**decision_summary(decision)) if decision else None)


def active_workspaces() -> list[str]:
    """Workspaces with an event since their last run started (any event at all when they never ran)."""
    last_runs = dict(Consolidation.objects.values("workspace_id").annotate(last=Max("started_at"))
                     .values_list("workspace_id", "last"))
    active = []
    for workspace_id in Workspace.objects.order_by("id").values_list("id", flat=True):
        events = Event.objects.filter(workspace_id=workspace_id)
        since = last_runs.get(workspace_id)
        if since is not None:
            events = events.filter(ts__gt=since)
        if events.exists():
            active.append(workspace_id)
    return active


def dream_scheduled_pass(*, caller: Caller) -> DreamPass:
    """The schedule's pass: the gates of every workspace with activity, and a run where they all pass. A
    workspace that is not on this machine any more is skipped."""
    checked = []
    for workspace_id in active_workspaces():
        try:
            resolved = _workspace(workspace_id, caller)
            outcome = attempt(workspace_id=workspace_id, root=_root(resolved), config=resolved.config,
                              trigger="schedule", actor=SCHEDULE_ACTOR)
        except WorkspaceRequired:
            continue  # not on this machine any more
        except CompozyError as exc:
            # One workspace's broken configuration must not keep the others from dreaming.
            _log.warning("dreaming check of workspace %s failed: %s", workspace_id, exc.message)
            continue
        checked.append(DreamPassItem(
            workspace_id=workspace_id, triggered=outcome.triggered,
            reason=outcome.reason.value if outcome.reason else None, detail=outcome.detail,
            run_id=outcome.run.id if outcome.run else None, status=outcome.run.status if outcome.run else None))
    return DreamPass(checked=checked)


__all__ = ["dream_trigger", "dream_retry", "dream_status", "dream_list", "dream_show", "dream_scheduled_pass",
           "DreamTriggerInput", "DreamStatusInput", "DreamListInput", "DreamIdInput", "Gate"]
