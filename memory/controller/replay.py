"""Replay at start: every process that can write (CLI, server, task cluster) first finishes the decisions a
crashed writer left unapplied, in decided_at, id order. Each apply step is idempotent, so replaying a decision
that had already partly landed leaves no duplicate, no loss and no half-written file."""

from __future__ import annotations

from dataclasses import dataclass, field

from memory.models import Decision
from memory.store.files import remove_stale_temp_files

from .core import apply_decision
from .lock import write_lock
from .roots import ref_from_row, resolve_root

DEFAULT_LOCK_TIMEOUT_MS = 60_000


@dataclass
class ReplayReport:
    replayed: list[str] = field(default_factory=list)
    unresolvable: list[str] = field(default_factory=list)
    temp_files_removed: int = 0


def pending_decisions_exist() -> bool:
    return Decision.objects.filter(applied_at__isnull=True).exists()


def replay_pending(*, lock_timeout_ms: int = DEFAULT_LOCK_TIMEOUT_MS) -> ReplayReport:
    report = ReplayReport()
    if not pending_decisions_exist():
        return report
    with write_lock(lock_timeout_ms):
        cleaned: set[str] = set()
        for decision in Decision.objects.filter(applied_at__isnull=True).order_by("decided_at", "id").iterator():
            ref = ref_from_row(decision.scope, decision.workspace_id, decision.agent_name, decision.agent_tier)
            root = resolve_root(ref)
            if root is None:
                # Its workspace is not on this machine (yet); health keeps reporting it as unapplied.
                report.unresolvable.append(decision.id)
                continue
            if ref.root_key not in cleaned:
                report.temp_files_removed += remove_stale_temp_files(root)
                cleaned.add(ref.root_key)
            apply_decision(decision, root=root)
            report.replayed.append(decision.id)
    return report
