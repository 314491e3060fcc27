"""The cluster's recurring work, as django-q2 schedules (rows of django_q's Schedule table in the same database).

`ensure_schedules` runs when the cluster starts (`compozy serve` starts it, so nothing else needs running). It
creates each schedule once and afterwards only brings its function and period in line with the code and the
configuration, leaving its next run alone, so a restart neither skips nor repeats a run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from memory.services.dreams import DREAM_SCHEDULE

PRUNE_SCHEDULE = "compozy-decisions-prune"
IDLE_SCHEDULE = "compozy-sessions-idle-close"
HELD_SCHEDULE = "compozy-held-roots-retry"
# How often a held root (a full or read-only filesystem) is retried: its decision lands within this long after
# space returns. A retry with nothing unapplied is one indexed query.
HELD_RETRY_MINUTES = 1
SYNC_SCHEDULE = "compozy-memory-sync"
COMPACT_SCHEDULE = "compozy-catalog-compact"
# How often the full-text indexes are merged back into one b-tree each (memory.services.catalog.catalog_compact):
# each write adds one, and a question looks each of its terms up in every one. With nothing written since, a run is
# two statements.
COMPACT_MINUTES = 10
# How often idle sessions are looked for: a session closes within this long after its idle time ran out.
IDLE_CHECK_MINUTES = 15


@dataclass(frozen=True)
class Recurring:
    name: str
    func: str
    schedule_type: str
    minutes: int | None = None


def wanted() -> list[Recurring]:
    from django_q.models import Schedule

    from compozy.config import get_config

    config = get_config(None)
    every = config.memory.dream.check_every_minutes
    sync_every = config.memory.sync.every_minutes
    syncing = [Recurring(SYNC_SCHEDULE, "memory.background.tasks.sync_global", Schedule.MINUTES, sync_every)]
    return [
        Recurring(PRUNE_SCHEDULE, "memory.background.tasks.prune_decisions", Schedule.DAILY),
        Recurring(DREAM_SCHEDULE, "memory.background.tasks.dream_check", Schedule.MINUTES, every),
        Recurring(IDLE_SCHEDULE, "memory.background.tasks.close_idle_sessions", Schedule.MINUTES, IDLE_CHECK_MINUTES),
        Recurring(HELD_SCHEDULE, "memory.background.tasks.retry_held_roots", Schedule.MINUTES, HELD_RETRY_MINUTES),
        Recurring(COMPACT_SCHEDULE, "memory.background.tasks.compact_catalog", Schedule.MINUTES, COMPACT_MINUTES),
        *(syncing if sync_every else []),
    ]


def ensure_schedules() -> list[str]:
    """Create or update the schedules; returns their names."""
    from django_q.models import Schedule

    names = []
    items = wanted()
    if SYNC_SCHEDULE not in {item.name for item in items}:
        # Turned off (every_minutes = 0) since the cluster last started: the schedule goes too.
        Schedule.objects.filter(name=SYNC_SCHEDULE).delete()
    for item in items:
        schedule = Schedule.objects.filter(name=item.name).first()
        if schedule is None:
            Schedule.objects.create(name=item.name, func=item.func, schedule_type=item.schedule_type,
                                    minutes=item.minutes, repeats=-1, next_run=timezone.now())
        elif (schedule.func, schedule.schedule_type, schedule.minutes) != (item.func, item.schedule_type, item.minutes):
            changes = {"func": item.func, "schedule_type": item.schedule_type, "minutes": item.minutes}
            if schedule.minutes != item.minutes and item.minutes:
                # A shorter period takes effect now rather than after the old, longer one runs out.
                changes["next_run"] = min(schedule.next_run, timezone.now() + timedelta(minutes=item.minutes))
            Schedule.objects.filter(pk=schedule.pk).update(**changes)
        names.append(item.name)
    return names
