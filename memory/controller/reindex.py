"""`memory reindex`: re-derive the catalog of a root from disk.

Hand edits found on the way (a new, changed or vanished file) are first recorded as decisions with origin
`file`, so the audit trail stays complete even for edits made in an editor. Then the root's rows are rebuilt
from the files through the same `entry_fields` that incremental indexing uses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.db import connection, transaction

from memory.catalog.indexer import DiskFile, advance_generation, entry_fields
from memory.domain.document import parse_document
from memory.domain.errors import ValidationError
from memory.domain.models import ScopeRef, sha256_text
from memory.domain.names import is_system_path
from memory.models import CatalogEntry, Chunk
from memory.store import files

from .core import reconcile_file, render_memory_index

Progress = Callable[[int, int], None]


@dataclass
class RootReindex:
    root_key: str
    files: int = 0
    indexed: int = 0
    removed_rows: int = 0
    external_decisions: list[str] = field(default_factory=list)
    invalid: list[dict[str, str]] = field(default_factory=list)
    temp_files_removed: int = 0


def reindex_root(ref: ScopeRef, root: Path, *, include_system: bool = False,
                 progress: Progress | None = None, done_before: int = 0, total: int = 0) -> RootReindex:
    """Must be called under the write lock."""
    report = RootReindex(ref.root_key)
    report.temp_files_removed = files.remove_stale_temp_files(root)
    names = files.list_document_names(root, include_system=include_system)
    report.files = len(names)
    rows = CatalogEntry.objects.filter(root_key=ref.root_key)
    if not include_system:
        rows = rows.filter(is_system=False)
    known = dict(rows.values_list("filename", "content_hash"))

    parsed: list[tuple[DiskFile, object]] = []
    for position, filename in enumerate(names, start=1):
        disk = _read(root, filename, report)
        if disk is not None:
            if known.get(filename) != disk.content_hash:
                result = reconcile_file(ref, root, filename)
                if result.decision is not None:
                    report.external_decisions.append(result.decision.id)
            try:
                parsed.append((disk, parse_document(disk.text)))
            except ValidationError as exc:
                report.invalid.append({"filename": filename, "reason": str(exc.details.get("reason", "invalid"))})
        if progress is not None and (position % 200 == 0 or position == len(names)):
            progress(done_before + position, total)
    on_disk = set(names)
    for filename in sorted(set(known) - on_disk):
        result = reconcile_file(ref, root, filename)
        if result.decision is not None:
            report.external_decisions.append(result.decision.id)

    with transaction.atomic():
        report.removed_rows = _delete_rows(ref.root_key, include_system)
        _insert_rows(ref, parsed)
        advance_generation()
    report.indexed = len(parsed)
    render_memory_index(ref.root_key, root)
    return report


def _read(root: Path, filename: str, report: RootReindex) -> DiskFile | None:
    try:
        path = files.safe_path(root, filename)
        data = path.read_bytes()
        stat = path.stat()
        text = data.decode("utf-8")
    except ValidationError as exc:
        report.invalid.append({"filename": filename, "reason": str(exc.details.get("reason", "invalid"))})
        return None
    except UnicodeDecodeError:
        report.invalid.append({"filename": filename, "reason": "encoding"})
        return None
    except FileNotFoundError:
        return None
    return DiskFile(filename, text, sha256_text(text), len(data), stat.st_mtime_ns)


def _delete_rows(root_key: str, include_system: bool) -> int:
    system_clause = "" if include_system else " AND is_system = 0"
    with connection.cursor() as cursor:
        # Chunks first so the FTS delete triggers see the old text.
        cursor.execute(
            "DELETE FROM memory_chunks WHERE entry_id IN "
            f"(SELECT id FROM memory_catalog_entries WHERE root_key = %s{system_clause})",
            [root_key],
        )
        cursor.execute(f"DELETE FROM memory_catalog_entries WHERE root_key = %s{system_clause}", [root_key])
        return cursor.rowcount


def _insert_rows(ref: ScopeRef, parsed: list) -> None:
    entries = [CatalogEntry(**entry_fields(ref, disk, document)) for disk, document in parsed]
    created = CatalogEntry.objects.bulk_create(entries, batch_size=500)
    Chunk.objects.bulk_create(
        [
            Chunk(entry_id=entry.pk, ordinal=0, name=entry.name, description=entry.description, body=document.body)
            for entry, (_disk, document) in zip(created, parsed, strict=True)
        ],
        batch_size=500,
    )


def is_curated(filename: str) -> bool:
    return not is_system_path(filename)
