"""The projection from Markdown on disk to catalog rows, chunks and (through triggers) the FTS5 tables.

Incremental indexing after a write and a full reindex from disk both go through `entry_fields`, so they end in
identical rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.db.models import F

from memory.domain.document import Document, body_fingerprint, parse_document
from memory.domain.models import ScopeRef, sha256_text
from memory.domain.names import entity_key, is_system_path, parse_filename
from memory.models import CatalogEntry, Chunk, MemoryState

GENERATION_KEY = "generation"


@dataclass(frozen=True)
class DiskFile:
    filename: str
    text: str
    content_hash: str
    size: int
    mtime_ns: int


def _timestamp(value: str | None, fallback_ns: int) -> datetime:
    if value:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return datetime.fromtimestamp(fallback_ns / 1e9, tz=UTC).replace(microsecond=0)


def entry_fields(ref: ScopeRef, disk: DiskFile, document: Document) -> dict[str, Any]:
    front = document.frontmatter
    _type, slug = parse_filename(disk.filename)
    provenance = front.provenance
    created = _timestamp(provenance.created_at if provenance else None, disk.mtime_ns)
    updated = _timestamp(provenance.updated_at if provenance else None, disk.mtime_ns)
    return {
        "root_key": ref.root_key,
        "scope": ref.scope.value,
        "workspace_id": ref.workspace_id,
        "agent_name": ref.agent_name,
        "agent_tier": ref.agent_tier.value if ref.agent_tier else "",
        "filename": disk.filename,
        "type": front.type.value,
        "slug": slug,
        "entity_key": entity_key(slug),
        "name": front.name,
        "description": front.description,
        "body_key": sha256_text(body_fingerprint(document.body)),
        "content_hash": disk.content_hash,
        "size": disk.size,
        "mtime_ns": disk.mtime_ns,
        "is_system": is_system_path(disk.filename),
        "frontmatter": front.yaml_dict(),
        "created_at": created,
        "updated_at": max(updated, created),
    }


def read_disk_file(root: Path, filename: str) -> DiskFile | None:
    path = root / filename
    try:
        data = path.read_bytes()
        stat = path.stat()
    except FileNotFoundError:
        return None
    text = data.decode("utf-8")
    return DiskFile(filename, text, sha256_text(text), len(data), stat.st_mtime_ns)


def upsert_entry(ref: ScopeRef, disk: DiskFile, document: Document) -> CatalogEntry:
    fields = entry_fields(ref, disk, document)
    entry = CatalogEntry.objects.filter(root_key=ref.root_key, filename=disk.filename).first()
    if entry is None:
        entry = CatalogEntry.objects.create(**fields)
        Chunk.objects.create(
            entry=entry, ordinal=0, name=fields["name"], description=fields["description"], body=document.body
        )
        return entry
    for key, value in fields.items():
        setattr(entry, key, value)
    entry.save()
    # The update trigger re-indexes both FTS tables from the new chunk text.
    Chunk.objects.filter(entry=entry).update(name=fields["name"], description=fields["description"], body=document.body)
    return entry


def remove_entry(ref: ScopeRef, filename: str) -> bool:
    entry = CatalogEntry.objects.filter(root_key=ref.root_key, filename=filename).first()
    if entry is None:
        return False
    # Chunks first, by queryset, so the FTS delete triggers see the old text.
    Chunk.objects.filter(entry=entry).delete()
    entry.delete()
    return True


def index_file(ref: ScopeRef, root: Path, filename: str) -> CatalogEntry | None:
    """Bring one file's rows in line with the disk. A missing file removes its rows."""
    disk = read_disk_file(root, filename)
    if disk is None:
        remove_entry(ref, filename)
        return None
    return upsert_entry(ref, disk, parse_document(disk.text))


def advance_generation() -> None:
    updated = MemoryState.objects.filter(key=GENERATION_KEY).update(value=F("value") + 1)
    if not updated:
        MemoryState.objects.get_or_create(key=GENERATION_KEY, defaults={"value": 1})


def current_generation() -> int:
    row = MemoryState.objects.filter(key=GENERATION_KEY).values_list("value", flat=True).first()
    return int(row or 0)
