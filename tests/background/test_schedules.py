"""The cluster's recurring work: schedules created at cluster start, kept in line with the configuration."""

from __future__ import annotations

import pytest
from django_q.models import Schedule

from memory.background import tasks
from memory.background.schedules import PRUNE_SCHEDULE, ensure_schedules
from memory.domain.enums import EventOp
from memory.models import Event

pytestmark = pytest.mark.django_db


def test_the_cluster_start_creates_the_daily_retention_schedule_once(home):
    ensure_schedules()
    ensure_schedules()
    (schedule,) = Schedule.objects.filter(name=PRUNE_SCHEDULE)
    assert schedule.schedule_type == Schedule.DAILY
    assert schedule.func == "memory.background.tasks.prune_decisions"
    assert schedule.repeats == -1


def test_the_retention_task_prunes_and_records_its_run_as_the_schedule(home):
    result = tasks.prune_decisions()
    assert result["dry_run"] is False
    event = Event.objects.get(op=EventOp.DECISIONS_PRUNED.value)
    assert event.actor == tasks.SCHEDULE_ACTOR
