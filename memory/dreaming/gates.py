"""The gates, cheapest first: configuration switch, time, sessions, lock, signal. Each check says whether it
passes, what it saw and what it is waiting for; a run checks them in order and stops at the first that blocks,
the status page shows them all."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from compozy.config import DreamConfig
from memory.domain.dreaming import Gate, RunStatus
from memory.domain.enums import SessionStatus, SessionType
from memory.models import Consolidation, Session

from .candidates import Selection
from .lock import LockState

# The sessions that count toward the sessions gate.
GATE_SESSION_TYPES = (SessionType.USER, SessionType.COORDINATOR)


@dataclass(frozen=True)
class GateCheck:
    gate: Gate
    passed: bool
    detail: str
    # What the gate waits for, when it blocks ("" when it passes).
    waiting_for: str = ""
    # --force skipped it (time and sessions only); a skipped gate counts as passed.
    skipped: bool = False


def last_success(workspace_id: str) -> datetime | None:
    return (Consolidation.objects.filter(workspace_id=workspace_id, status=RunStatus.COMPLETED.value)
            .order_by("-finished_at").values_list("finished_at", flat=True).first())


def sessions_since(workspace_id: str, since: datetime | None) -> int:
    """Completed sessions of the workspace since `since`, from the session ledger: user and coordinator sessions
    that stopped after it. Dream and system sessions are the machine's own work (dreaming counting its own runs
    would trigger itself), and a sub-agent is part of its parent's session, not a session of its own."""
    stopped = Session.objects.filter(workspace_id=workspace_id, status=SessionStatus.STOPPED.value,
                                     type__in=[kind.value for kind in GATE_SESSION_TYPES], parent_session_id="")
    if since is not None:
        stopped = stopped.filter(stopped_at__gt=since)
    return stopped.count()


def check_enabled(dream: DreamConfig) -> GateCheck:
    if dream.enabled:
        return GateCheck(Gate.DISABLED, True, "dreaming is enabled")
    return GateCheck(Gate.DISABLED, False, "memory.dream.enabled is false",
                     "memory.dream.enabled to be set to true")


def check_time(dream: DreamConfig, last: datetime | None, now: datetime, *, force: bool) -> GateCheck:
    if last is None:
        return GateCheck(Gate.TIME, True, "no successful run yet", skipped=force)
    due = last + timedelta(hours=dream.min_hours)
    seen = f"last successful run at {_ts(last)}; {dream.min_hours:g} h between runs"
    if now >= due or force:
        return GateCheck(Gate.TIME, True, seen, skipped=force and now < due)
    return GateCheck(Gate.TIME, False, seen, f"{_ts(due)} ({_hours(due - now)} from now)")


def check_sessions(dream: DreamConfig, sessions: int, *, force: bool) -> GateCheck:
    seen = f"{sessions} completed session(s) since the last successful run; {dream.min_sessions} needed"
    if sessions >= dream.min_sessions or force:
        return GateCheck(Gate.SESSIONS, True, seen, skipped=force and sessions < dream.min_sessions)
    return GateCheck(Gate.SESSIONS, False, seen, f"{dream.min_sessions - sessions} more completed session(s)")


def check_lock(state: LockState, now: datetime) -> GateCheck:
    if not state.held:
        return GateCheck(Gate.LOCK, True, "no runner holds the workspace's lock")
    if state.stale(now):
        return GateCheck(Gate.LOCK, True, f"run {state.run_id} held the lock until {_ts(state.expires_at)}; "
                                          "it is stale and will be taken over")
    return GateCheck(Gate.LOCK, False, f"run {state.run_id} holds the lock",
                     f"run {state.run_id} to finish (its lock goes stale at {_ts(state.expires_at)})")


def check_signal(dream: DreamConfig, selection: Selection) -> GateCheck:
    gates = dream.gates
    seen = (f"{selection.eligible} unpromoted memor{'y' if selection.eligible == 1 else 'ies'} recalled at least "
            f"{gates.min_recall_count} times scoring at least {gates.min_score:g}; {gates.min_unpromoted} needed")
    if selection.eligible >= gates.min_unpromoted:
        return GateCheck(Gate.SIGNAL, True, seen)
    missing = gates.min_unpromoted - selection.eligible
    return GateCheck(Gate.SIGNAL, False, seen, f"{missing} more such candidate(s): agents recalling them again")


def _ts(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value else "-"


def _hours(delta: timedelta) -> str:
    hours = delta.total_seconds() / 3600
    return f"{hours:.1f} h" if hours >= 1 else f"{max(1, round(hours * 60))} min"
