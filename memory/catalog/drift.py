"""Drift between the disk (the truth) and the catalog (its projection), in both directions."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from django.db import connection

from memory.domain.document import Limits, check_hand_edit, parse_document
from memory.domain.errors import DOCUMENT_ERRORS, ValidationError
from memory.domain.models import sha256_text
from memory.domain.names import INDEX_FILENAME
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


def invalid_reason(root: Path, filename: str, limits: Limits | None = None) -> str | None:
    """Why the file is not a valid memory document (unreadable, a link, broken, or over the size caps), or None."""
    try:
        raw = files.read_bytes(root, filename)
        if raw is None:
            return None
        document = parse_document(raw.decode("utf-8"), filename=filename)
        if limits is not None:
            # A hand edit is held to the caps a controller-authored body is: an oversized file is as invalid as a
            # broken one, so it is never indexed, recalled or injected.
            check_hand_edit(document, limits)
    except UnicodeDecodeError:
        return "encoding"
    except DOCUMENT_ERRORS as exc:
        return str(exc.details.get("reason", "invalid"))
    return None


def _catalog_state(root_key: str, *, include_system: bool) -> dict[str, tuple[int, int]]:
    # A plain cursor and no hashes: health reads every row of a root on each call; the few rows whose size or
    # mtime differ from the disk have their hash read afterwards.
    sql = "SELECT filename, size, mtime_ns FROM memory_catalog_entries WHERE root_key = %s"
    if not include_system:
        sql += " AND is_system = 0"
    with connection.cursor() as cursor:
        cursor.execute(sql, [root_key])
        return {filename: (size, mtime) for filename, size, mtime in cursor.fetchall()}


def _catalog_hash(root_key: str, filename: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT content_hash FROM memory_catalog_entries WHERE root_key = %s AND filename = %s",
                       [root_key, filename])
        row = cursor.fetchone()
    return row[0] if row else ""


def drift_for_root(root_key: str, root: Path, *, include_system: bool = False,
                   limits: Limits | None = None) -> RootDrift:
    report = RootDrift(root_key)
    catalog = _catalog_state(root_key, include_system=include_system)
    listing = files.scan_root(root, include_system=include_system, with_stat=True)
    report.disk_files = len(listing.documents)
    # The filename carries the type; an ad-hoc note's type lives only in its frontmatter.
    report.files_by_type.update(listing.kinds.values())
    report.indexed_files = len(catalog)
    try:
        files.check_root(root)
    except ValidationError as exc:
        report.invalid.append({"filename": str(exc.details["filename"]), "reason": files.SYMLINK_REASON})
    if (root / INDEX_FILENAME).is_symlink():
        # Never read or appended through; the next write or reindex renders the index whole over the link.
        report.invalid.append({"filename": INDEX_FILENAME, "reason": files.SYMLINK_REASON})
    for filename, stat in listing.documents.items():
        known = catalog.get(filename)
        if filename in listing.links:
            # A link in place of a memory (indexed or not) is drift to report, never a reason to fail the report.
            report.invalid.append({"filename": filename, "reason": files.SYMLINK_REASON})
            continue
        if known is None:
            reason = invalid_reason(root, filename, limits)
            if reason:
                report.invalid.append({"filename": filename, "reason": reason})
            else:
                report.unindexed.append(filename)
        elif stat is None:
            report.orphaned.append(filename)
        elif stat != known:
            try:
                raw = files.read_bytes(root, filename) or b""
            except ValidationError as exc:  # a link or a FIFO put there since the listing
                report.invalid.append({"filename": filename, "reason": str(exc.details.get("reason", "invalid"))})
                continue
            if sha256_text(raw.decode("utf-8", "replace")) != _catalog_hash(root_key, filename):
                reason = invalid_reason(root, filename, limits)
                if reason:
                    report.invalid.append({"filename": filename, "reason": reason})
                else:
                    report.modified.append(filename)
    report.orphaned.extend(name for name in catalog if name not in listing.documents)
    report.invalid.extend({"filename": name, "reason": "not_a_memory_filename"} for name in listing.others)
    report.unindexed.sort()
    report.modified.sort()
    report.orphaned.sort()
    report.invalid.sort(key=lambda item: item["filename"])
    return report
