"""The catalog noun: health (drift in both directions, unapplied decisions; of one workspace or, for an
operator, of the whole home with a row per workspace), reindex, the refresh of stale vectors and the compaction of
the full-text indexes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import transaction
from pydantic import Field

from compozy.config import get_config
from memory.catalog import fts, sql
from memory.catalog.drift import RootDrift, drift_for_root
from memory.catalog.indexer import advance_generation, current_generation, mark_derivation_current
from memory.catalog.vectors import fill_missing, model_id, stale_roots, vector_state
from memory.controller.core import exclusive
from memory.controller.events import event_record
from memory.controller.holds import held_roots
from memory.controller.reconcile import reindex_root
from memory.domain.document import Limits
from memory.domain.enums import EventOp, Scope
from memory.domain.models import ScopeRef
from memory.models import CatalogEntry, Consolidation, Decision, Event, Workspace
from memory.store import files
from memory.store import roots as store_roots

from .extractor import extractor_health
from .inputs import Caller, Input, Selector, all_workspaces_field
from .resolution import KnownWorkspace, Span, resolve_span
from .results import (
    CompactResult,
    Health,
    HeldRootReport,
    IndexCompaction,
    ReindexResult,
    ReindexRoot,
    WorkspaceHealth,
    iso,
)
from .root_discovery import administered_refs_across, workspace_refs


class HealthInput(Selector):
    all_workspaces: bool = all_workspaces_field()


class ReindexInput(Selector):
    rebuild: bool = Field(default=False, description=(
        "Drop and re-insert every catalog row instead of writing only the rows that differ."))
    all_workspaces: bool = all_workspaces_field()


class CompactInput(Input):
    """Compaction is of the whole database, like the catalog's full-text indexes themselves: no selector."""


@dataclass
class _Totals:
    """Drift summed over the roots a health report checks."""

    include_system: bool
    limits: Limits | None = None
    global_files: int = 0
    workspace_files: int = 0
    indexed: int = 0
    orphaned: int = 0
    unindexed: int = 0
    modified: int = 0
    invalid: list[dict[str, str]] = field(default_factory=list)
    file_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    drift: list[dict[str, Any]] = field(default_factory=list)
    chunks: int = 0
    missing_vectors: int = 0
    other_model: int = 0
    missing_tokens: int = 0

    def check(self, ref: ScopeRef, root: Path) -> RootDrift:
        state = vector_state(ref.root_key, include_system=self.include_system)
        self.chunks += state.chunks
        self.missing_vectors += state.missing
        self.other_model += state.other_model
        self.missing_tokens += state.missing_tokens
        report = drift_for_root(ref.root_key, root, include_system=self.include_system, limits=self.limits)
        by_type = self.file_counts.setdefault(ref.scope.value, {})
        for memory_type, count in report.files_by_type.items():
            by_type[memory_type] = by_type.get(memory_type, 0) + count
        if ref.scope is Scope.GLOBAL:
            self.global_files += report.disk_files
        elif ref.scope is Scope.WORKSPACE:
            self.workspace_files += report.disk_files
        self.indexed += report.indexed_files
        self.orphaned += len(report.orphaned)
        self.unindexed += len(report.unindexed)
        self.modified += len(report.modified)
        self.invalid.extend({"root_key": ref.root_key, **item} for item in report.invalid)
        if not report.clean:
            self.drift.append({"root_key": ref.root_key, "unindexed": report.unindexed, "orphaned": report.orphaned,
                               "modified": report.modified, "invalid": report.invalid})
        return report


def held_root_reports(root_keys: list[str] | None = None) -> list[HeldRootReport]:
    """The held roots among `root_keys` (every one when None), as health and the retry report them."""
    return [HeldRootReport(root_key=h.root_key, workspace_id=h.workspace_id, reason=h.reason, message=h.message,
                           decision_id=h.decision_id, since=iso(h.since), last_attempt_at=iso(h.last_attempt_at),
                           attempts=h.attempts)
            for h in held_roots(root_keys)]

def health_get(*, data: HealthInput, caller: Caller) -> Health:
    span = resolve_span(data.workspace, caller, all_workspaces=data.all_workspaces, fresh=False)
    totals = _Totals(include_system=data.include_system, limits=span.resolved.limits)
    shared = administered_refs_across([])  # global and every agent's global tier
    for ref in shared:
        totals.check(ref, store_roots.root_path(ref, None))
    root_keys = [ref.root_key for ref in shared]
    rows = []
    for workspace in span.workspaces:
        refs = workspace_refs(workspace)
        root_keys += [ref.root_key for ref in refs]
        rows.append(_workspace_health(workspace, refs, totals))
    unapplied = Decision.objects.filter(applied_at__isnull=True, root_key__in=root_keys).count()
    reasons = []
    if totals.unindexed or totals.modified:
        reasons.append(f"{totals.unindexed + totals.modified} file(s) on disk not matched by the catalog")
    if totals.orphaned:
        reasons.append(f"{totals.orphaned} catalog row(s) without a file")
    if totals.invalid:
        reasons.append(f"{len(totals.invalid)} file(s) that are not valid memory documents")
    if unapplied:
        reasons.append(f"{unapplied} unapplied decision(s)")
    held = held_root_reports(root_keys)
    for root in held:
        reasons.append(f"{root.root_key} is held ({root.reason}): its decisions wait until it can be written")
    if totals.missing_vectors:
        reasons.append(f"{totals.missing_vectors} chunk(s) without a vector")
    if totals.other_model:
        reasons.append(f"{totals.other_model} chunk(s) with a vector from another model than {model_id()}")
    if totals.missing_tokens:
        reasons.append(f"{totals.missing_tokens} chunk(s) without a token set (stored before recall's token match)")
    if reasons and (totals.unindexed or totals.modified or totals.orphaned or totals.missing_vectors
                    or totals.other_model or totals.missing_tokens):
        reasons.append("run `compozy memory reindex` to repair drift")
    events = Event.objects.filter(workspace_id__in=span.event_workspace_ids)
    last_reindex = events.filter(op=EventOp.WRITE_REINDEX.value).order_by("-ts").values_list("ts", flat=True).first()
    last_operation = events.order_by("-ts").values_list("ts", flat=True).first()
    with sql.cursor() as cursor:
        segments = {table: fts.segment_count(cursor, table) for table in fts.MEMORY_INDEXES}
    return Health(
        status="degraded" if reasons else "ok",
        reason="; ".join(reasons) or "catalog matches disk and every decision is applied",
        global_files=totals.global_files,
        workspace_files=totals.workspace_files,
        workspace_count=Workspace.objects.count(),
        file_counts=totals.file_counts,
        indexed_files=totals.indexed,
        orphaned_files=totals.orphaned,
        unindexed_files=totals.unindexed,
        modified_files=totals.modified,
        invalid_files=totals.invalid,
        drift=totals.drift,
        unapplied_decisions=unapplied,
        held_roots=held,
        last_reindex=iso(last_reindex),
        operation_count=events.count(),
        last_operation_at=iso(last_operation),
        generation=current_generation(),
        all_workspaces=span.across,
        workspaces=rows,
        dream=_dream_health(span),
        extractor=extractor_health(),
        vectors={"model": model_id(), "chunks": totals.chunks, "missing": totals.missing_vectors,
                 "other_model": totals.other_model, "missing_tokens": totals.missing_tokens},
        fts_segments=segments,
    )


def _dream_health(span: Span) -> dict:
    """Dreaming in one line of health: enabled or not, and the covered workspaces' last run and last success."""

    enabled = span.config.memory.dream.enabled
    summary: dict = {"status": "enabled" if enabled else "disabled"}
    if span.workspace_ids:
        runs = Consolidation.objects.filter(workspace_id__in=span.workspace_ids)
        latest = runs.order_by("-started_at").values("id", "status", "started_at").first()
        success = runs.filter(status="completed").order_by("-finished_at").values_list("finished_at", flat=True).first()
        summary.update(latest_run=latest["id"] if latest else None, latest_status=latest["status"] if latest else None,
                       last_success_at=iso(success))
    return summary


def _workspace_health(workspace: KnownWorkspace, refs: list[ScopeRef], totals: _Totals) -> WorkspaceHealth:
    """One workspace's row: its roots checked against the disk (and added to the totals), or, when its directory
    is gone, only what the catalog still holds for it: no drift is claimed about files nobody can see."""
    keys = [ref.root_key for ref in refs]
    unapplied = Decision.objects.filter(applied_at__isnull=True, root_key__in=keys).count()
    last = Event.objects.filter(workspace_id=workspace.id).order_by("-ts").values_list("ts", flat=True).first()
    if workspace.directory is None:
        rows = CatalogEntry.objects.filter(root_key__in=keys)
        if not totals.include_system:
            rows = rows.filter(is_system=False)
        return WorkspaceHealth(id=workspace.id, path=workspace.path, status="missing", files=0,
                               indexed_files=rows.count(), drift_files=0, invalid_files=0,
                               unapplied_decisions=unapplied, last_operation_at=iso(last))
    on_disk = indexed = drift = invalid = 0
    for ref in refs:
        report = totals.check(ref, store_roots.root_path(ref, workspace.directory))
        on_disk += report.disk_files
        indexed += report.indexed_files
        drift += len(report.unindexed) + len(report.orphaned) + len(report.modified)
        invalid += len(report.invalid)
    return WorkspaceHealth(id=workspace.id, path=workspace.path,
                           status="degraded" if (drift or invalid or unapplied) else "ok", files=on_disk,
                           indexed_files=indexed, drift_files=drift, invalid_files=invalid,
                           unapplied_decisions=unapplied, last_operation_at=iso(last))


def catalog_reindex(*, data: ReindexInput, caller: Caller,
                    progress: Callable[[int, int], None] | None = None) -> ReindexResult:
    span = resolve_span(data.workspace, caller, all_workspaces=data.all_workspaces, fresh=False)
    roots = [(ref, store_roots.root_path(ref, None)) for ref in administered_refs_across([])]
    for workspace in span.workspaces:
        if workspace.directory is not None:  # a workspace whose directory is gone has no files to read
            roots += [(ref, store_roots.root_path(ref, workspace.directory)) for ref in workspace_refs(workspace)]
    total = sum(len(files.list_document_names(root, include_system=data.include_system)) for _ref, root in roots)
    reports = []
    done = 0
    with exclusive(span.config):
        for ref, root in roots:
            report = reindex_root(ref, root, include_system=data.include_system, rebuild=data.rebuild,
                                  limits=span.resolved.limits,
                                  progress=progress,
                                  done_before=done, total=total)
            done += report.files
            reports.append(ReindexRoot(**report.__dict__))
        mark_derivation_current()
        event_record(
            op=EventOp.WRITE_REINDEX,
            scope="",
            workspace_id=span.resolved.workspace_id,
            session_id=caller.session_id or "",
            actor=caller.origin.value,
            metadata={"roots": len(reports), "files": done, "indexed": sum(r.indexed for r in reports),
                      "external_decisions": sum(len(r.external_decisions) for r in reports)},
        )
    if any(report.rewritten_rows or report.removed_rows for report in reports):
        # A reindex writes in batches, each a b-tree of its own in both indexes (16 of each after 1,000 memories).
        catalog_compact(data=CompactInput(), caller=caller)
    return ReindexResult(
        roots=reports,
        files=done,
        indexed=sum(r.indexed for r in reports),
        external_decisions=sum(len(r.external_decisions) for r in reports),
        invalid=[{"root_key": r.root_key, **item} for r in reports for item in r.invalid],
        generation=current_generation(),
    )




def catalog_compact(*, data: CompactInput, caller: Caller) -> CompactResult:  # noqa: ARG001 (no selector: one database)
    """Merge each full-text index of the memories into one b-tree, the form FTS5 answers fastest (the note on
    fts.MEMORY_INDEXES says why it matters), by bounded steps, each under the write lock in its own transaction,
    so a write waiting meanwhile never reaches its lock timeout however large the index. An index already in one
    b-tree costs one statement. Run by the cluster's schedule (after writes have added b-trees), at the end of a
    reindex that wrote rows, and by an operator (`compozy memory compact`); health shows the b-tree counts."""
    config = get_config(None)
    done: list[IndexCompaction] = []
    for table in fts.MEMORY_INDEXES:
        with sql.cursor() as cursor:
            before = fts.segment_count(cursor, table)
        steps = 0
        if before > 1:
            while True:
                with exclusive(config), transaction.atomic(), sql.cursor() as cursor:
                    worked = fts.merge_step(cursor, table, first=steps == 0)
                steps += 1
                if not worked:
                    break
        with sql.cursor() as cursor:
            after = fts.segment_count(cursor, table) if steps else before
        done.append(IndexCompaction(index=table, segments_before=before, segments_after=after, steps=steps))
    return CompactResult(indexes=done)


REFRESH_BATCH = 1000


def catalog_refresh_vectors() -> int:
    """Give every chunk of the catalog whose vector is missing, from another model or without its token set a new
    one (what a reindex does for them, without reading a file), root by root under the write lock, a batch at a time,
    each batch one transaction that advances the memory generation. Returns how many chunks it filled.

    `compozy serve` runs it at start-up, in the background: an upgrade that changes how vectors are made (another
    model, or how passages are weighed, which the model id records) would otherwise leave the semantic and
    token-match lists blind to every older memory until someone ran `compozy memory reindex`. Finding nothing stale
    costs one statement and takes no lock."""
    roots = stale_roots()
    if not roots:
        return 0
    config = get_config(None)
    filled = 0
    for root_key in roots:
        while True:
            # REFRESH_BATCH chunks per hold of the write lock (well under a second of embedding), so a write waiting
            # for it meanwhile never reaches its lock timeout, however large the root.
            with exclusive(config), transaction.atomic():
                count = fill_missing(root_key=root_key, limit=REFRESH_BATCH)
                if count:
                    advance_generation()
            filled += count
            if count < REFRESH_BATCH:
                break
    return filled
