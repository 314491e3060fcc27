"""Held roots: a root whose decisions cannot be applied now (its filesystem is full or read-only, or its workspace
is no longer at the path it is registered at). One such root must never stop the home: replay leaves its
decisions unapplied (in order), goes on with the other roots, and retries on its next run; health reports it.

Recording a hold is itself a write to the database, which may be the thing that is full or read-only: then the
hold is simply not recorded (replay finds the decision unapplied again next time), and nothing is raised."""

from __future__ import annotations

import logging

from django.db import DatabaseError, transaction

from memory.domain.enums import EventOp
from memory.domain.models import utc_now
from memory.models import HeldRoot

from .events import event_record

log = logging.getLogger("compozy.controller")


def hold_root(root_key: str, *, workspace_id: str, reason: str, message: str, decision_id: str) -> None:
    now = utc_now()
    log.warning("memory root %s held (%s): %s; decision %s waits for the next replay",
                root_key, reason, message, decision_id)
    try:
        with transaction.atomic():
            held = HeldRoot.objects.select_for_update().filter(root_key=root_key).first()
            if held is None:
                HeldRoot.objects.create(root_key=root_key, workspace_id=workspace_id, reason=reason,
                                        message=message, decision_id=decision_id, since=now, last_attempt_at=now)
                # Once per hold, not per retry: an operator follows when a root stopped and when it came back.
                # The decision is named in metadata, not decision_id: each decision has exactly one event.
                event_record(op=EventOp.ROOT_HELD, workspace_id=workspace_id, target=root_key,
                             metadata={"reason": reason, "message": message, "decision_id": decision_id})
            else:
                HeldRoot.objects.filter(root_key=root_key).update(
                    reason=reason, message=message, decision_id=decision_id, last_attempt_at=now,
                    attempts=held.attempts + 1)
    except DatabaseError as exc:
        log.warning("could not record the hold of %s: %s", root_key, exc)


def release_root(root_key: str, *, applied: list[str] | None = None) -> None:
    """The root could be written again: its hold (if any) is lifted, with an event naming the decisions that
    waited for it and landed in this replay (`applied`)."""
    try:
        with transaction.atomic():
            held = HeldRoot.objects.select_for_update().filter(root_key=root_key).first()
            if held is None:
                return
            HeldRoot.objects.filter(root_key=root_key).delete()
            event_record(op=EventOp.ROOT_RELEASED, workspace_id=held.workspace_id, target=root_key,
                         metadata={"reason": held.reason, "attempts": held.attempts, "decision_id": held.decision_id,
                                   "since": held.since.isoformat(), "applied": applied or []})
        log.info("memory root %s released (was held: %s)", root_key, held.reason)
    except DatabaseError as exc:
        log.warning("could not release the hold of %s: %s", root_key, exc)


def held_roots(root_keys: list[str] | None = None) -> list[HeldRoot]:
    rows = HeldRoot.objects.order_by("root_key")
    if root_keys is not None:
        rows = rows.filter(root_key__in=root_keys)
    return list(rows)
