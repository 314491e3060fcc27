"""Sessions whose client never sent its end are stopped by the task cluster after session.idle_close_after."""

from __future__ import annotations

from datetime import timedelta

import pytest

from memory.background import tasks
from memory.background.schedules import IDLE_SCHEDULE, wanted
from memory.domain.enums import Origin
from memory.domain.models import utc_now
from memory.models import Event, Session
from memory.services.inputs import Caller
from memory.services.sessions import (
    SessionAppendInput,
    SessionStartInput,
    session_append,
    session_close_idle,
    session_start,
)
from memory.services.snapshots import SnapshotInput, snapshot_assemble

pytestmark = pytest.mark.django_db


@pytest.fixture
def caller(home, workspace_dir):
    return Caller(origin=Origin.CLI, cwd=workspace_dir)


def start(caller: Caller, session_id: str) -> None:
    session_start(data=SessionStartInput(session_id=session_id), caller=caller)
    session_append(data=SessionAppendInput.parse({"session_id": session_id, "kind": "user_message",
                                                  "content": "hello"}), caller=caller)


def test_a_session_idle_past_the_configured_time_is_stopped_with_an_idle_event_and_an_active_one_is_not(caller):
    start(caller, "idle-one")
    Session.objects.filter(session_id="idle-one").update(started_at=utc_now() - timedelta(hours=5))
    from memory.models import SessionEvent

    SessionEvent.objects.filter(session_id="idle-one").update(ts=utc_now() - timedelta(hours=5))
    start(caller, "busy-one")
    snapshot_assemble(data=SnapshotInput.parse({"session_id": "snapshot-only"}), caller=caller)
    Session.objects.filter(session_id="snapshot-only").update(started_at=utc_now() - timedelta(hours=5))

    result = tasks.close_idle_sessions()
    assert result["closed"] == ["idle-one"] and result["idle_close_after_ms"] == 4 * 3_600_000
    statuses = dict(Session.objects.values_list("session_id", "status"))
    assert statuses == {"idle-one": "stopped", "busy-one": "running", "snapshot-only": "snapshot"}
    [stopped] = Event.objects.filter(session_id="idle-one", op="memory.session.stopped")
    assert stopped.metadata["reason"] == "idle"
    assert tasks.close_idle_sessions()["closed"] == []  # once


def test_the_idle_time_is_configured_and_zero_never_stops_a_session(caller, monkeypatch):
    start(caller, "quiet")
    later = utc_now() + timedelta(minutes=45)
    monkeypatch.setenv("COMPOZY_SESSION__IDLE_CLOSE_AFTER", "30m")
    assert session_close_idle(caller=caller, now=later).closed == ["quiet"]
    start(caller, "quiet-2")
    monkeypatch.setenv("COMPOZY_SESSION__IDLE_CLOSE_AFTER", "0")
    assert session_close_idle(caller=caller, now=later + timedelta(days=30)).closed == []


def test_the_cluster_runs_the_idle_close_on_a_schedule():
    [item] = [item for item in wanted() if item.name == IDLE_SCHEDULE]
    assert item.func == "memory.background.tasks.close_idle_sessions" and item.minutes == 15
