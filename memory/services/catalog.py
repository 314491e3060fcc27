"""The catalog noun: health (drift in both directions, unapplied decisions) and reindex."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import Field

from memory.catalog.drift import drift_for_root
from memory.catalog.indexer import current_generation, mark_derivation_current
from memory.catalog.vectors import model_id, vector_state
from memory.controller.core import exclusive
from memory.controller.events import event_record
from memory.controller.reconcile import reindex_root
from memory.domain.enums import EventOp, Scope
from memory.models import Decision, Event, Workspace
from memory.store import files

from .inputs import Caller, Selector
from .resolution import resolve
from .results import Health, ReindexResult, ReindexRoot, iso
from .root_discovery import administered_refs


class HealthInput(Selector):
    pass


class ReindexInput(Selector):
    rebuild: bool = Field(default=False, description=(
        "Drop and re-insert every catalog row instead of writing only the rows that differ."))


def health_get(*, data: HealthInput, caller: Caller) -> Health:
    resolved = resolve(data, caller)
    refs = administered_refs(resolved)
    drift = []
    global_files = workspace_files = indexed = orphaned = unindexed = modified = 0
    invalid: list[dict[str, str]] = []
    file_counts: dict[str, dict[str, int]] = {}
    chunks = missing_vectors = other_model = 0
    for ref in refs:
        state = vector_state(ref.root_key, include_system=data.include_system)
        chunks += state.chunks
        missing_vectors += state.missing
        other_model += state.other_model
        report = drift_for_root(ref.root_key, resolved.root(ref), include_system=data.include_system)
        by_type = file_counts.setdefault(ref.scope.value, {})
        for memory_type, count in report.files_by_type.items():
            by_type[memory_type] = by_type.get(memory_type, 0) + count
        if ref.scope is Scope.GLOBAL:
            global_files += report.disk_files
        elif ref.scope is Scope.WORKSPACE:
            workspace_files += report.disk_files
        indexed += report.indexed_files
        orphaned += len(report.orphaned)
        unindexed += len(report.unindexed)
        modified += len(report.modified)
        invalid.extend({"root_key": ref.root_key, **item} for item in report.invalid)
        if not report.clean:
            drift.append({"root_key": ref.root_key, "unindexed": report.unindexed, "orphaned": report.orphaned,
                          "modified": report.modified, "invalid": report.invalid})
    root_keys = [ref.root_key for ref in refs]
    unapplied = Decision.objects.filter(applied_at__isnull=True, root_key__in=root_keys).count()
    reasons = []
    if unindexed or modified:
        reasons.append(f"{unindexed + modified} file(s) on disk not matched by the catalog")
    if orphaned:
        reasons.append(f"{orphaned} catalog row(s) without a file")
    if invalid:
        reasons.append(f"{len(invalid)} file(s) that are not valid memory documents")
    if unapplied:
        reasons.append(f"{unapplied} unapplied decision(s)")
    if missing_vectors:
        reasons.append(f"{missing_vectors} chunk(s) without a vector")
    if other_model:
        reasons.append(f"{other_model} chunk(s) with a vector from another model than {model_id()}")
    if reasons:
        repair = unindexed or modified or orphaned or missing_vectors or other_model
        reasons.append("run `compozy memory reindex` to repair drift" if repair else "")
    workspace_ids = resolved.event_workspace_ids
    events = Event.objects.filter(workspace_id__in=workspace_ids)
    last_reindex = events.filter(op=EventOp.WRITE_REINDEX.value).order_by("-ts").values_list("ts", flat=True).first()
    last_operation = events.order_by("-ts").values_list("ts", flat=True).first()
    return Health(
        status="degraded" if reasons else "ok",
        reason="; ".join(r for r in reasons if r) or "catalog matches disk and every decision is applied",
        global_files=global_files,
        workspace_files=workspace_files,
        workspace_count=Workspace.objects.count(),
        file_counts=file_counts,
        indexed_files=indexed,
        orphaned_files=orphaned,
        unindexed_files=unindexed,
        modified_files=modified,
        invalid_files=invalid,
        drift=drift,
        unapplied_decisions=unapplied,
        last_reindex=iso(last_reindex),
        operation_count=events.count(),
        last_operation_at=iso(last_operation),
        generation=current_generation(),
        dream=_dream_health(resolved),
        extractor={"status": "not_configured"},
        vectors={"model": model_id(), "chunks": chunks, "missing": missing_vectors, "other_model": other_model},
    )


def _dream_health(resolved) -> dict:  # noqa: ANN001 - a context.Resolved
    """Dreaming in one line of health: enabled or not, and this workspace's last run and last success."""
    from memory.models import Consolidation

    enabled = resolved.config.memory.dream.enabled
    summary: dict = {"status": "enabled" if enabled else "disabled"}
    if resolved.workspace_id:
        runs = Consolidation.objects.filter(workspace_id=resolved.workspace_id)
        latest = runs.order_by("-started_at").values("id", "status", "started_at").first()
        success = runs.filter(status="completed").order_by("-finished_at").values_list("finished_at", flat=True).first()
        summary.update(latest_run=latest["id"] if latest else None, latest_status=latest["status"] if latest else None,
                       last_success_at=iso(success))
    return summary


def catalog_reindex(*, data: ReindexInput, caller: Caller,
                    progress: Callable[[int, int], None] | None = None) -> ReindexResult:
    resolved = resolve(data, caller)
    refs = administered_refs(resolved)
    roots = [(ref, resolved.root(ref)) for ref in refs]
    total = sum(len(files.list_document_names(root, include_system=data.include_system)) for _ref, root in roots)
    reports = []
    done = 0
    with exclusive(resolved.config):
        for ref, root in roots:
            report = reindex_root(ref, root, include_system=data.include_system, rebuild=data.rebuild,
                                  progress=progress,
                                  done_before=done, total=total)
            done += report.files
            reports.append(ReindexRoot(**report.__dict__))
        mark_derivation_current()
        event_record(
            op=EventOp.WRITE_REINDEX,
            scope="",
            workspace_id=resolved.workspace_id,
            session_id=caller.session_id or "",
            actor=caller.origin.value,
            metadata={"roots": len(reports), "files": done, "indexed": sum(r.indexed for r in reports),
                      "external_decisions": sum(len(r.external_decisions) for r in reports)},
        )
    return ReindexResult(
        roots=reports,
        files=done,
        indexed=sum(r.indexed for r in reports),
        external_decisions=sum(len(r.external_decisions) for r in reports),
        invalid=[{"root_key": r.root_key, **item} for r in reports for item in r.invalid],
        generation=current_generation(),
    )


