"""Best-effort writes: bookkeeping (recall signals, the snapshot cache, a root's freshness stamp) that must never
hold an answer back waits only briefly for another process's write lock, then is skipped and logged; on a
read-only database it is skipped at once (reads keep working on a read-only home)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import OperationalError, connection, transaction

# The busy timeout every connection is opened with (settings.DATABASES init_command).
DEFAULT_BUSY_TIMEOUT_MS = 5000
# How long a best-effort write waits for another process's write lock before giving up.
BEST_EFFORT_WAIT_MS = 100
_log = logging.getLogger("compozy.memory")


def best_effort_write(write: Callable[[], None], *, what: str) -> bool:
    """Run `write` in a transaction, waiting at most BEST_EFFORT_WAIT_MS for the database's write lock. Returns
    whether it was written."""
    with connection.cursor() as cursor:
        cursor.execute(f"PRAGMA busy_timeout = {BEST_EFFORT_WAIT_MS}")
    try:
        with transaction.atomic():
            write()
        return True
    except OperationalError as exc:
        message = str(exc)
        if "readonly" in message or "read-only" in message:
            _log.warning("skipped %s: the database is read-only", what)
            return False
        if "locked" not in message and "busy" not in message:
            raise
        _log.warning("skipped %s: the database is busy with another writer", what)
        return False
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"PRAGMA busy_timeout = {DEFAULT_BUSY_TIMEOUT_MS}")
