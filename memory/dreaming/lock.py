"""One runner per workspace: a row in memory_dream_locks with an owner and an expiry.

The row lives in the database rather than as an flock because runners are in different processes (the cluster, a
CLI trigger, the API) and a lock must survive being inspected: the gates report who holds it and until when. A
lock whose expiry has passed is stale (its runner hung or died) and the next runner takes it over, recording a
`memory.dream.run.failed` event for the run that held it. A runner killed outright is found at the next start-up
by its owner: the owner names the host, the pid and the process's start time, so a dead owner is certain even
when its pid has been reused.
"""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from django.db import transaction

from memory.domain.models import utc_now
from memory.models import DreamLock


def _process_start(pid: int) -> str:
    """The process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat), "" if unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    # The command name (field 2) may hold spaces and parentheses; the fields after it start past the last ")".
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else ""


def current_owner() -> str:
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_process_start(pid)}:{secrets.token_hex(4)}"


def owner_alive(owner: str) -> bool | None:
    """Whether the process named by `owner` still runs; None when it is on another host (cannot be known)."""
    try:
        host, pid_text, started, _token = owner.rsplit(":", 3)
        pid = int(pid_text)
    except ValueError:
        return None
    if host != socket.gethostname():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    return not started or _process_start(pid) == started


@dataclass(frozen=True)
class LockState:
    held: bool
    owner: str = ""
    run_id: str = ""
    acquired_at: datetime | None = None
    expires_at: datetime | None = None

    def stale(self, now: datetime) -> bool:
        return self.held and self.expires_at is not None and self.expires_at <= now


@dataclass(frozen=True)
class Acquired:
    acquired: bool
    state: LockState
    # The lock this acquisition took over, when it was stale.
    taken_over: LockState | None = None


def lock_state(workspace_id: str) -> LockState:
    row = DreamLock.objects.filter(workspace_id=workspace_id).first()
    if row is None:
        return LockState(held=False)
    return LockState(True, row.owner, row.run_id, row.acquired_at, row.expires_at)


def acquire(workspace_id: str, *, owner: str, run_id: str, ttl_ms: int, now: datetime | None = None) -> Acquired:
    """Take the workspace's lock if it is free or stale. The transaction is IMMEDIATE (settings), so two runners
    checking at once are serialized by SQLite's write lock: exactly one of them sees the row free."""
    now = now or utc_now()
    expires = now + timedelta(milliseconds=ttl_ms)
    with transaction.atomic():
        row = DreamLock.objects.filter(workspace_id=workspace_id).first()
        if row is None:
            DreamLock.objects.create(workspace_id=workspace_id, owner=owner, run_id=run_id, acquired_at=now,
                                     expires_at=expires)
            return Acquired(True, LockState(True, owner, run_id, now, expires))
        previous = LockState(True, row.owner, row.run_id, row.acquired_at, row.expires_at)
        if not previous.stale(now):
            return Acquired(False, previous)
        DreamLock.objects.filter(workspace_id=workspace_id, owner=row.owner).update(
            owner=owner, run_id=run_id, acquired_at=now, expires_at=expires)
        return Acquired(True, LockState(True, owner, run_id, now, expires), taken_over=previous)


def still_held(workspace_id: str, owner: str) -> bool:
    return DreamLock.objects.filter(workspace_id=workspace_id, owner=owner).exists()


def release(workspace_id: str, owner: str) -> bool:
    """Release the lock if `owner` still holds it (a runner whose lock was taken over releases nothing)."""
    deleted, _ = DreamLock.objects.filter(workspace_id=workspace_id, owner=owner).delete()
    return bool(deleted)
