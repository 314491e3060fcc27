"""Decision retention: applied decisions older than `memory.decisions.prune_after_applied_days` are deleted from
the write-ahead log, except the ones the controller still reads.

Kept, whatever their age:
- every decision that is not applied: replay owns it (the filter is `applied_at < cutoff`, so NULL never matches)
- for every file that still exists on disk, its latest decision (the base state of the next decision's identity)
  and its latest applied add, update or delete (the prior content of the next hand edit, and what a revert checks
  the file against)
- every decision of a root whose workspace is not on this machine: whether its files exist cannot be known

Each pruned id leaves a tombstone (id, root, file, op, times; no content) in memory_pruned_decisions, so a show or
revert of it answers "pruned by retention" instead of "no such decision".
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from django.db import connection, transaction

from memory.domain.models import utc_now
from memory.models import PrunedDecision

from .roots import ref_from_root_key, resolve_root

_BATCH = 500


@dataclass
class PruneReport:
    cutoff: datetime
    days: int
    dry_run: bool
    # root_key -> decisions pruned (or that would be, on a dry run)
    pruned: dict[str, int] = field(default_factory=dict)
    # root_key -> decisions past the cutoff kept because their file still needs them
    kept: dict[str, int] = field(default_factory=dict)
    # root_key -> workspace_id, for recording one event per workspace
    workspaces: dict[str, str] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.pruned.values())


# For each applied decision older than the cutoff: is it the latest decision of its file, and is it the latest
# applied mutation of its file. One pass with window functions; the partition covers every decision of the file
# (recent ones included), so "latest" is judged against the whole log.
_CANDIDATES = """
SELECT id, root_key, workspace_id, target_filename, op, decided_at, applied_at, latest, latest_mutation, mutation
FROM (
  SELECT id, root_key, workspace_id, target_filename, op, decided_at, applied_at,
         ROW_NUMBER() OVER (PARTITION BY root_key, target_filename ORDER BY seq DESC) AS latest,
         ROW_NUMBER() OVER (PARTITION BY root_key, target_filename,
                                         (op IN ('add', 'update', 'delete') AND applied_at IS NOT NULL)
                            ORDER BY seq DESC) AS latest_mutation,
         (op IN ('add', 'update', 'delete') AND applied_at IS NOT NULL) AS mutation
  FROM memory_decisions
  WHERE (root_key, target_filename) IN (
    SELECT DISTINCT root_key, target_filename FROM memory_decisions WHERE applied_at < %s)
)
WHERE applied_at < %s
"""


class _Roots:
    """Root directories by key, resolved once; None when the workspace is not on this machine."""

    def __init__(self) -> None:
        self._known: dict[str, Path | None] = {}

    def exists(self, root_key: str, filename: str) -> bool | None:
        if root_key not in self._known:
            self._known[root_key] = resolve_root(ref_from_root_key(root_key))
        root = self._known[root_key]
        if root is None:
            return None
        return bool(filename) and os.path.lexists(root / filename)


def prune_decisions(*, days: int, dry_run: bool = False, now: datetime | None = None) -> PruneReport:
    """Delete (or count, with `dry_run`) the prunable decisions. The caller holds the write lock, so no decision
    is being made or applied meanwhile."""
    now = now or utc_now()
    cutoff = now - timedelta(days=days)
    report = PruneReport(cutoff=cutoff, days=days, dry_run=dry_run)
    stamp = connection.ops.adapt_datetimefield_value(cutoff)
    with connection.cursor() as cursor:
        cursor.execute(_CANDIDATES, [stamp, stamp])
        rows = cursor.fetchall()
    roots = _Roots()
    doomed: list[tuple] = []
    pruned: dict[str, int] = defaultdict(int)
    kept: dict[str, int] = defaultdict(int)
    for row in rows:
        _id, root_key, workspace_id, filename, _op, _decided, _applied, latest, latest_mutation, mutation = row
        report.workspaces[root_key] = workspace_id
        exists = roots.exists(root_key, filename)
        needed = latest == 1 or (mutation and latest_mutation == 1)
        # An unknown workspace (exists is None) keeps its whole history.
        if exists is None or (needed and exists):
            kept[root_key] += 1
            continue
        doomed.append(row)
        pruned[root_key] += 1
    report.pruned, report.kept = dict(pruned), dict(kept)
    if dry_run or not doomed:
        return report
    pruned_at = connection.ops.adapt_datetimefield_value(now)
    with transaction.atomic(), connection.cursor() as cursor:
        for start in range(0, len(doomed), _BATCH):
            batch = doomed[start : start + _BATCH]
            cursor.executemany(
                "INSERT OR REPLACE INTO memory_pruned_decisions (id, root_key, workspace_id, target_filename, op, "
                "decided_at, applied_at, pruned_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                [[r[0], r[1], r[2], r[3], r[4], _text(r[5]), _text(r[6]), pruned_at] for r in batch],
            )
            marks = ", ".join("%s" for _ in batch)
            cursor.execute(f"DELETE FROM memory_decisions WHERE id IN ({marks})", [r[0] for r in batch])
    return report


def _text(value: object) -> object:
    return connection.ops.adapt_datetimefield_value(value) if isinstance(value, datetime) else value


def pruned_record(decision_id: str, root_keys: list[str]) -> PrunedDecision | None:
    """The tombstone of a decision retention deleted, if it belonged to one of `root_keys`."""
    return PrunedDecision.objects.filter(id=decision_id, root_key__in=root_keys).first()
