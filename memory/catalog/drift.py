"""Drift between the disk (the truth) and the catalog (its projection), in both directions."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from memory.domain.document import parse_document
from memory.domain.errors import DOCUMENT_ERRORS
from memory.domain.models import sha256_text
from memory.domain.names import parse_filename
from memory.models import CatalogEntry
from memory.store import files


@dataclass
class RootDrift:
    root_key: str
    disk_files: int = 0
    indexed_files: int = 0
    unindexed: list[str] = field(default_factory=list)
    orphaned: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    invalid: list[dict[str, str]] = field(default_factory=list)
    files_by_type: Counter[str] = field(default_factory=Counter)

    @property
    def clean(self) -> bool:
        return not (self.unindexed or self.orphaned or self.modified or self.invalid)


def invalid_reason(root: Path, filename: str) -> str | None:
    try:
        raw = files.read_bytes(root, filename)
        if raw is None:
            return None
        parse_document(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return "encoding"
    except DOCUMENT_ERRORS as exc:
        return str(exc.details.get("reason", "invalid"))
    return None


def drift_for_root(root_key: str, root: Path, *, include_system: bool = False) -> RootDrift:
    report = RootDrift(root_key)
    rows = CatalogEntry.objects.filter(root_key=root_key)
    if not include_system:
        rows = rows.filter(is_system=False)
    catalog = {filename: (size, mtime, digest) for filename, size, mtime, digest
               in rows.values_list("filename", "size", "mtime_ns", "content_hash")}
    on_disk = files.list_document_names(root, include_system=include_system)
    report.disk_files = len(on_disk)
    for filename in on_disk:
        # The filename carries the type; an ad-hoc note's type lives only in its frontmatter.
        memory_type, _slug = parse_filename(filename)
        report.files_by_type[memory_type.value if memory_type else "ad_hoc"] += 1
    report.indexed_files = len(catalog)
    for filename in on_disk:
        known = catalog.get(filename)
        if known is None:
            reason = invalid_reason(root, filename)
            if reason:
                report.invalid.append({"filename": filename, "reason": reason})
            else:
                report.unindexed.append(filename)
            continue
        try:
            stat = os.stat(root / filename)
        except OSError:
            report.orphaned.append(filename)
            continue
        if (stat.st_size, stat.st_mtime_ns) != known[:2]:
            raw = files.read_bytes(root, filename) or b""
            if sha256_text(raw.decode("utf-8", "replace")) != known[2]:
                reason = invalid_reason(root, filename)
                if reason:
                    report.invalid.append({"filename": filename, "reason": reason})
                else:
                    report.modified.append(filename)
    disk_set = set(on_disk)
    report.orphaned.extend(sorted(name for name in catalog if name not in disk_set))
    for name in files.list_other_files(root):
        report.invalid.append({"filename": name, "reason": "not_a_memory_filename"})
    return report
