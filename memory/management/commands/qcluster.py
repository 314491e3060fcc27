"""django-q2's `qcluster`, preceded by the bootstrap every writing process runs (migrate, then replay) and by the
creation of the cluster's recurring schedules (memory.background.schedules)."""

from __future__ import annotations

from typing import Any

from django_q.management.commands.qcluster import Command as ClusterCommand


class Command(ClusterCommand):
    # Internal: `compozy serve` starts it; `compozy --help` does not list it.
    listed = False

    def handle(self, *args: Any, **options: Any) -> None:
        from memory.bootstrap import bootstrap

        bootstrap()
        from memory.background.schedules import ensure_schedules

        ensure_schedules()
        super().handle(*args, **options)
