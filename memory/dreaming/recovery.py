"""Start-up recovery of runs whose process died (kill -9, power loss) in the middle of a run.

It runs in every process's bootstrap, after replay has applied any decision a crashed writer left unapplied. A
`running` row whose owner process is gone is finished when its decision is durable (an add or update stamps the
signals exactly as the run would have; a noop completes without stamping), and failed otherwise (with its failure
record and event). A lock whose owner is gone is released. A run of a live process is never touched, and neither
is one whose owner ran on another host until its lock goes stale.
"""

from __future__ import annotations

import logging
from datetime import datetime

from memory.controller.roots import resolve_root
from memory.domain.dreaming import RunStatus, RunStep
from memory.domain.enums import Op
from memory.domain.models import utc_now
from memory.models import Consolidation, DreamLock

from .lock import lock_state, owner_alive, release
from .run import _decision_of, fail, finish, workspace_ref

_log = logging.getLogger("compozy.memory.dreaming")
RECOVERY_ACTOR = "recovery"


def _abandoned(run: Consolidation, now: datetime) -> bool:
    alive = owner_alive(run.owner)
    if alive is not None:
        return not alive
    state = lock_state(run.workspace_id)
    return not state.held or state.owner != run.owner or state.stale(now)


def recover_interrupted_runs(now: datetime | None = None) -> list[str]:
    """Finish or fail every abandoned running row and release locks of dead owners; returns the run ids handled."""
    now = now or utc_now()
    handled = []
    for run in Consolidation.objects.filter(status=RunStatus.RUNNING.value).order_by("started_at"):
        if not _abandoned(run, now):
            continue
        root = resolve_root(workspace_ref(run.workspace_id))
        decision = _decision_of(run)
        try:
            if decision is not None and decision.applied_at is not None and decision.op != Op.REJECT:
                run.decision_id, run.decision_op = decision.id, decision.op
                finish(run, Op(decision.op), actor=RECOVERY_ACTOR, recovered=True)
            else:
                run.recovered = True
                if decision is not None:
                    run.decision_id, run.decision_op = decision.id, decision.op
                fail(run, RunStep(run.step) if run.step else None,
                     f"the process running it stopped during the {run.step or 'start'} step before its "
                                "decision was durable", root=root)
        finally:
            release(run.workspace_id, run.owner)
        handled.append(run.id)
    for lock in DreamLock.objects.all():
        if owner_alive(lock.owner) is False:
            release(lock.workspace_id, lock.owner)
    return handled
