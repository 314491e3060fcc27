"""Pressure compaction coverage: which seq ranges of a session the workspace checkpoint already summarises.

The order is the invariant. The summary lands in the checkpoint (a controller decision), then the coverage row
is committed durably (synchronous=FULL), and only then are the covered rows marked archived. A process that dies
between the last two leaves every row unarchived and readable; the next run sees the coverage, asks the provider
for nothing, and finishes the archive. Nothing is ever archived first in the hope that a summary follows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import connection, transaction

from memory.controller import faults
from memory.controller.durable import durable_transaction
from memory.domain.enums import TURN_END_KINDS
from memory.domain.models import utc_now


@dataclass(frozen=True)
class Coverage:
    from_seq: int
    to_seq: int
    decision_id: str
    created_at: datetime
    updated_at: datetime


def _datetime(value: datetime | str) -> datetime:
    """Raw reads of a UTC column come back naive (or as text)."""
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def coverage(session_id: str) -> list[Coverage]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT from_seq, to_seq, decision_id, created_at, updated_at FROM memory_session_coverage "
                       "WHERE session_id = %s ORDER BY from_seq", [session_id])
        return [Coverage(a, b, d, _datetime(c), _datetime(u)) for a, b, d, c, u in cursor.fetchall()]


def covered_until(session_id: str) -> int:
    """The end of the covered prefix: compaction always continues right after it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT COALESCE(MAX(to_seq), 0) FROM memory_session_coverage WHERE session_id = %s",
                       [session_id])
        return int(cursor.fetchone()[0])


def select_span(session_id: str, *, trigger_seq: int, trigger_turn: str) -> tuple[int, int] | None:
    """The complete persisted turns before the triggering turn, after what is already covered: (from, to), or
    None. A turn is complete once a `done` or `error` row is persisted for it; rows without a turn id stand
    alone. The span stops before the first row of the triggering turn or of any turn still open, so it holds
    whole turns only."""
    start = covered_until(session_id) + 1
    ends = sorted(kind.value for kind in TURN_END_KINDS)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT MIN(seq) FROM memory_session_events WHERE session_id = %s AND seq >= %s AND seq < %s "
            "AND turn_id != '' AND (turn_id = %s OR turn_id NOT IN ("
            "  SELECT turn_id FROM memory_session_events WHERE session_id = %s AND kind IN (%s, %s)))",
            [session_id, start, trigger_seq, trigger_turn, session_id, *ends],
        )
        open_from = cursor.fetchone()[0]
        stop = (open_from if open_from is not None else trigger_seq) - 1
        if stop < start:
            return None
        # The span ends on a row that exists: trailing rows may be missing only if the trigger is far ahead.
        cursor.execute("SELECT MIN(seq), MAX(seq) FROM memory_session_events WHERE session_id = %s "
                       "AND seq BETWEEN %s AND %s", [session_id, start, stop])
        low, high = cursor.fetchone()
    if low is None:
        return None
    return int(low), int(high)


def record(workspace_id: str, session_id: str, from_seq: int, to_seq: int, decision_id: str) -> Coverage:
    """Commit the coverage of [from_seq, to_seq] durably, merged with every range it touches or adjoins."""
    now = utc_now()
    adapt = connection.ops.adapt_datetimefield_value
    with durable_transaction() as cursor:
        cursor.execute("SELECT id, from_seq, to_seq, created_at FROM memory_session_coverage "
                       "WHERE session_id = %s AND from_seq <= %s AND to_seq >= %s",
                       [session_id, to_seq + 1, from_seq - 1])
        touching = cursor.fetchall()
        low = min([from_seq, *(row[1] for row in touching)])
        high = max([to_seq, *(row[2] for row in touching)])
        created = min([now, *(_datetime(row[3]) for row in touching)])
        if touching:
            cursor.execute(f"DELETE FROM memory_session_coverage WHERE id IN "
                           f"({', '.join('%s' for _ in touching)})", [row[0] for row in touching])
        cursor.execute("INSERT INTO memory_session_coverage (workspace_id, session_id, from_seq, to_seq, "
                       "decision_id, created_at, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                       [workspace_id, session_id, low, high, decision_id, adapt(created), adapt(now)])
    faults.hit("after_coverage_commit")
    return Coverage(low, high, decision_id, created, now)


def archive_covered(session_id: str) -> int:
    """Mark every covered, still unarchived row archived; the number marked. Idempotent: it is how an archive
    interrupted after its coverage commit is finished."""
    marked = 0
    with transaction.atomic(), connection.cursor() as cursor:
        for span in coverage(session_id):
            cursor.execute("UPDATE memory_session_events SET archived = 1 WHERE session_id = %s AND archived = 0 "
                           "AND seq BETWEEN %s AND %s", [session_id, span.from_seq, span.to_seq])
            marked += cursor.rowcount
    return marked
