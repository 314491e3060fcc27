"""Replay at start: every process that can write (CLI, server, task cluster) first finishes the decisions a
crashed writer left unapplied, in the order they were made (seq). Each apply step is idempotent, so replaying a decision
that had already partly landed leaves no duplicate, no loss and no half-written file. Writers also replay under
the lock before each decision (`core.exclusive`), so a long-running process never decides on stale state."""

from __future__ import annotations

from .core import clear_abandoned_reservation, replay_unapplied, reservation_abandoned
from .decision_log import unapplied_exist
from .lock import write_lock

DEFAULT_LOCK_TIMEOUT_MS = 60_000


def replay_pending(*, lock_timeout_ms: int = DEFAULT_LOCK_TIMEOUT_MS) -> list[str]:
    """The ids of the decisions replayed."""
    if not unapplied_exist() and not reservation_abandoned():
        return []
    with write_lock(lock_timeout_ms):
        clear_abandoned_reservation()
        return replay_unapplied()
