"""Hand edits: a file created, changed or removed on disk outside the controller becomes a decision with origin
`file`, so the audit trail stays complete even for edits made in an editor. The prior content comes from the log.

`reconcile_file` handles one file before a write touches it; `reindex_root` handles a whole root in one batch:
one durable commit for all its hand-edit decisions, one catalog transaction, one MEMORY.md render.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import connection, transaction

from memory.catalog import sql
from memory.catalog.indexer import (
    ENTRY_COLUMNS,
    DiskFile,
    Row,
    advance_generation,
    delete_rows,
    derivation_current,
    entry_row,
    insert_new_rows,
    stored_rows,
    upsert_rows,
)
from memory.catalog.vectors import fill_missing
from memory.domain.document import Document, Limits, check_hand_edit, parse_document
from memory.domain.enums import Op, Origin
from memory.domain.errors import DOCUMENT_ERRORS
from memory.domain.models import ScopeRef, canonical_json, format_timestamp, sha256_text, utc_now
from memory.domain.scanner import scan
from memory.models import Decision
from memory.store import files

from . import faults
from .apply import apply_decision, apply_external, render_memory_index
from .decision_log import new_decision, persist_decisions, stamp_applied
from .events import decision_events_record

Progress = Callable[[int, int], None]
_SIZE = ENTRY_COLUMNS.index("size")
_MTIME = ENTRY_COLUMNS.index("mtime_ns")
_HASH = ENTRY_COLUMNS.index("content_hash")


@dataclass(frozen=True)
class ReconcileResult:
    decision: Decision | None = None
    invalid_reason: str | None = None


@dataclass
class RootReindex:
    root_key: str
    files: int = 0
    indexed: int = 0
    rewritten_rows: int = 0
    removed_rows: int = 0
    external_decisions: list[str] = field(default_factory=list)
    invalid: list[dict[str, str]] = field(default_factory=list)
    temp_files_removed: int = 0
    vectors_filled: int = 0


def _applied_writes(root_key: str, filenames: list[str], column: str) -> Iterator[tuple[str, str, Any]]:
    """(filename, op, `column`) of every applied add, update or delete of the files, oldest first."""
    with connection.cursor() as cursor:
        for start in range(0, len(filenames), 500):
            batch = filenames[start : start + 500]
            marks = ", ".join("%s" for _ in batch)
            cursor.execute(
                f"SELECT target_filename, op, {column} FROM memory_decisions WHERE root_key = %s "
                f"AND applied_at IS NOT NULL AND op IN ('add', 'update', 'delete') AND target_filename IN ({marks}) "
                "ORDER BY seq",
                [root_key, *batch],
            )
            yield from cursor.fetchall()


def hand_edited(root_key: str, filenames: list[str]) -> set[str]:
    """The files whose newest applied decision is a hand edit of a known file (origin file, op update): the catalog
    dates them by their mtime. A file that appeared by hand (a copy, a checkout) keeps its frontmatter's date."""
    newest = {filename: (origin, op) for filename, op, origin in _applied_writes(root_key, filenames, "origin")}
    return {filename for filename, (origin, op) in newest.items() if (origin, op) == (Origin.FILE, Op.UPDATE)}


def last_known_contents(root_key: str, filenames: list[str]) -> dict[str, str | None]:
    """Each file's content as the decision log last left it (None after a delete)."""
    return {filename: None if op == Op.DELETE else post
            for filename, op, post in _applied_writes(root_key, filenames, "post_content")}


_WHERE = {Origin.FILE: "the file changed on disk outside the controller",
          Origin.SYNC: "the file arrived from another machine through memory sync (git pull --rebase)"}


def external_decision(ref: ScopeRef, filename: str, text: str | None, document: Document | None,
                      prior: str | None, *, had_row: bool, now=None, origin: Origin = Origin.FILE) -> Decision:
    now = now or utc_now()
    op = Op.DELETE if text is None else Op.UPDATE if had_row or prior is not None else Op.ADD
    post = text or ""
    post_hash = sha256_text(post) if post else ""
    candidate_hash = sha256_text(canonical_json(["external", ref.root_key, filename, post_hash, format_timestamp(now)]))
    notes = ""
    if document is not None:
        result = scan(document.frontmatter.name, document.frontmatter.description, document.body)
        if not result.clean:
            notes = "; scanner flagged " + ",".join(result.rejected_rules)
    return new_decision(
        ref=ref, origin=origin, op=op, candidate_hash=candidate_hash, targets=[filename],
        target_filename=filename, frontmatter=document.frontmatter.yaml_dict() if document is not None else None,
        post_content=post, prior_content=prior,
        rule_trace=[{"name": "external_change", "passed": True,
                     "reason": f"{_WHERE[origin]}{notes}", "target": filename}],
        reason=f"{'arrived through memory sync' if origin is Origin.SYNC else 'hand edit observed'}: {op.value}",
        base_state=None, decided_at=now,
    )


@dataclass(frozen=True)
class _Examined:
    """One file as found on disk, against its catalog row."""

    text: str | None = None  # None: the file is gone
    document: Document | None = None
    stat: tuple[int, int] | None = None  # (size, mtime_ns) of the read
    invalid_reason: str | None = None
    changed: bool = False  # its content differs from the row's (or the file or the row is new, or gone)


def _examine(path: Path, filename: str, entry: tuple[str, int, int] | None, limits: Limits | None) -> _Examined:
    """Read a file once and tell whether its content differs from its catalog row `entry` (content_hash, size,
    mtime_ns); a changed file is parsed and held to the limits of a controller write."""
    try:
        found = files.read_path(path, filename)
    except DOCUMENT_ERRORS as exc:  # a FIFO, a device or a link under a memory name: reported, never read
        return _Examined(invalid_reason=str(exc.details.get("reason", "invalid")))
    if found is None:
        return _Examined(changed=entry is not None)
    data, info = found
    stat = (info.st_size, info.st_mtime_ns)
    if entry is not None and stat == (entry[1], entry[2]):
        return _Examined(stat=stat)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return _Examined(stat=stat, invalid_reason="encoding")
    if entry is not None and files.sha256_bytes(data) == entry[0]:
        return _Examined(text=text, stat=stat)
    try:
        document = parse_document(text, filename=filename)
        if limits is not None:
            check_hand_edit(document, limits)
    except DOCUMENT_ERRORS as exc:
        # A broken or oversized hand edit is reported by health, never overwritten, deleted or indexed.
        return _Examined(stat=stat, invalid_reason=str(exc.details.get("reason", "invalid")))
    return _Examined(text=text, document=document, stat=stat, changed=True)


def _entries(root_key: str, filenames: list[str]) -> dict[str, tuple[str, int, int]]:
    """{filename: (content_hash, size, mtime_ns)} of the files' catalog rows."""
    found: dict[str, tuple[str, int, int]] = {}
    with sql.cursor() as cursor:
        for start in range(0, len(filenames), 500):
            batch = filenames[start : start + 500]
            marks = ", ".join("%s" for _ in batch)
            cursor.execute("SELECT filename, content_hash, size, mtime_ns FROM memory_catalog_entries "
                           f"WHERE root_key = %s AND filename IN ({marks})", [root_key, *batch])
            found.update((name, (digest, size, mtime)) for name, digest, size, mtime in cursor.fetchall())
    return found


def reconcile_file(ref: ScopeRef, root: Path, filename: str, limits: Limits | None = None, *,
                   origin: Origin = Origin.FILE) -> ReconcileResult:
    """Record a hand edit of one file, if there is one. Called under the write lock."""
    path = files.safe_path(root, filename)
    entry = _entries(ref.root_key, [filename]).get(filename)
    try:
        stat = os.lstat(path)
    except FileNotFoundError:
        stat = None
    if stat is None and entry is None:
        return ReconcileResult()
    if stat is not None and entry is not None and (stat.st_size, stat.st_mtime_ns) == (entry[1], entry[2]):
        return ReconcileResult()  # the common case before a write: one stat, nothing read
    found = _examine(path, filename, entry, limits)
    if not found.changed:
        return ReconcileResult(invalid_reason=found.invalid_reason)
    prior = last_known_contents(ref.root_key, [filename]).get(filename)
    decision = external_decision(ref, filename, found.text, found.document, prior, had_row=entry is not None,
                                 origin=origin)
    persist_decisions([decision])
    # The file was there before its row: MEMORY.md may already list it, so the index is checked, not appended to.
    apply_decision(decision, root=root, document=found.document, external=True)
    return ReconcileResult(decision=decision)


@dataclass
class BatchReconcile:
    decisions: list[Decision] = field(default_factory=list)
    invalid: dict[str, str] = field(default_factory=dict)  # filename -> reason: refused, its previous version kept


def reconcile_files(ref: ScopeRef, root: Path, filenames: list[str], limits: Limits | None = None, *,
                    origin: Origin = Origin.FILE) -> BatchReconcile:
    """Record what changed in many files of one root at once (a pull, a checkout): each changed file its own
    decision, as `reconcile_file` would record it, for a cost that grows with the files named, not with the root.
    Called under the write lock.

    The order of invariant 3 holds for the batch: every decision is committed in one durable transaction before
    anything they describe changes, then `apply_external` applies them all in one transaction (rows, chunks,
    vectors in one embedding call, MEMORY.md written once, events, applied_at). A kill between the two is
    repaired by replay, which applies each decision on its own and ends in the same state. A file whose content
    is unchanged but whose size or mtime moved gets its row's stat refreshed, so it is not read again."""
    report = BatchReconcile()
    entries = _entries(ref.root_key, filenames)
    changed: list[tuple[str, _Examined]] = []
    restated: list[tuple[str, _Examined]] = []
    for filename in filenames:
        found = _examine(files.safe_path(root, filename), filename, entries.get(filename), limits)
        if found.invalid_reason is not None:
            report.invalid[filename] = found.invalid_reason
        elif found.changed:
            changed.append((filename, found))
        elif found.text is not None and found.stat is not None:
            restated.append((filename, found))
    if changed:
        priors = last_known_contents(ref.root_key, [filename for filename, _found in changed])
        now = utc_now()
        report.decisions = [
            external_decision(ref, filename, found.text, found.document, priors.get(filename),
                              had_row=filename in entries, now=now, origin=origin)
            for filename, found in changed]
        persist_decisions(report.decisions)
        apply_external(report.decisions, root=root,
                       documents={filename: found.document for filename, found in changed if found.document},
                       stats={filename: found.stat for filename, found in changed if found.stat})
    if restated:
        _restate(ref, restated)
    return report


def _restate(ref: ScopeRef, found: list[tuple[str, _Examined]]) -> None:
    """Rows of files rewritten with the bytes they already had: re-derived with the new stat (a hand-edited
    memory is dated by its mtime), the chunks untouched since their text is the same."""
    by_hand = hand_edited(ref.root_key, [filename for filename, _found in found])
    rows = []
    for filename, examined in found:
        assert examined.text is not None and examined.stat is not None
        try:
            document = parse_document(examined.text, filename=filename)
        except DOCUMENT_ERRORS:
            continue  # its row is already this content's; an invalid file never had one refreshed
        size, mtime_ns = examined.stat
        rows.append(entry_row(ref, DiskFile(filename, examined.text, sha256_text(examined.text), size, mtime_ns),
                              document, hand_edited=filename in by_hand))
    with transaction.atomic():
        upsert_rows(rows)


def _previous_rows(ref: ScopeRef, filenames: list[str]) -> list[Row]:
    rows: list[Row] = []
    for filename, text in last_known_contents(ref.root_key, filenames).items():
        if text:
            rows.append(entry_row(ref, DiskFile(filename, text, sha256_text(text), -1, 0), parse_document(text)))
    return rows


def reindex_root(ref: ScopeRef, root: Path, *, include_system: bool = False, rebuild: bool = False,
                 limits: Limits | None = None, origin: Origin = Origin.FILE,
                 progress: Progress | None = None, done_before: int = 0, total: int = 0) -> RootReindex:
    """Re-derive every row of a root from its files; write only the rows that differ (all of them with
    `rebuild`). Must be called under the write lock."""
    report = RootReindex(ref.root_key)
    report.temp_files_removed = files.remove_stale_temp_files(root)
    names = files.list_document_names(root, include_system=include_system)
    report.files = len(names)
    stored = stored_rows(ref.root_key, include_system=include_system)
    rows: list[Row] = []
    edits: list[tuple[str, str | None, Document | None, bool]] = []
    stale: list[str] = []
    rederive = rebuild or not derivation_current()
    by_hand = hand_edited(ref.root_key, names)
    for position, filename in enumerate(names, start=1):
        if progress is not None and (position % 500 == 0 or position == len(names)):
            progress(done_before + position, total)
        try:
            found = files.read_file(root, filename)
        except DOCUMENT_ERRORS as exc:
            report.invalid.append({"filename": filename, "reason": str(exc.details.get("reason", "invalid"))})
            stale.append(filename)
            continue
        if found is None:
            continue
        data, stat = found
        digest = files.sha256_bytes(data)
        existing = stored.get(filename)
        if (not rederive and existing is not None and existing[0][_HASH] == digest
                and (existing[0][_SIZE], existing[0][_MTIME]) == (len(data), stat.st_mtime_ns)):
            # Rows are a pure function of the file's bytes and mtime (and the derivation version, checked
            # above): the same bytes re-derive the same row, so there is nothing to parse or write.
            report.indexed += 1
            continue
        try:
            text = data.decode("utf-8")
            document = parse_document(text, filename=filename)
            if limits is not None:
                check_hand_edit(document, limits)
            # A changed file is a hand edit recorded below; an unchanged one is by hand if its last decision is.
            changed = existing is not None and existing[0][_HASH] != digest
            row = entry_row(ref, DiskFile(filename, text, digest, len(data), stat.st_mtime_ns), document,
                            hand_edited=changed or filename in by_hand)
        except DOCUMENT_ERRORS as exc:
            report.invalid.append({"filename": filename, "reason": str(exc.details.get("reason", "invalid"))})
            stale.append(filename)
            continue
        except UnicodeDecodeError:
            report.invalid.append({"filename": filename, "reason": "encoding"})
            stale.append(filename)
            continue
        report.indexed += 1
        if existing is None or existing[0][_HASH] != digest:
            edits.append((filename, text, document, existing is not None))
        if rebuild or existing is None or existing != (row.values, row.chunks):
            rows.append(row)
    on_disk = set(names)
    vanished = sorted(name for name in stored if name not in on_disk)
    edits.extend((name, None, None, True) for name in vanished)

    decisions: list[Decision] = []
    if edits:
        priors = last_known_contents(ref.root_key, [edit[0] for edit in edits])
        now = utc_now()
        decisions = [external_decision(ref, name, text, document, priors.get(name), had_row=had_row, now=now,
                                        origin=origin)
                     for name, text, document, had_row in edits]
        persist_decisions(decisions)
        faults.hit("after_decision_commit")
    with transaction.atomic():
        if rebuild:
            report.removed_rows = delete_rows(ref.root_key, list(stored))
            # An invalid file (a merge conflict, broken YAML) is never memory, but its previous version stays
            # recalled until it is resolved: rebuilt from the decision log, with a size no file has so the next
            # reconcile still sees the file as changed.
            rows.extend(_previous_rows(ref, [name for name in stale if name in stored]))
        else:
            # Rows of invalid files are kept as they are: the previous version stays in the catalog.
            report.removed_rows = delete_rows(ref.root_key, vanished)
        fresh = set() if not rebuild else set(stored)
        insert_new_rows([row for row in rows if row.filename not in stored or row.filename in fresh])
        upsert_rows([row for row in rows if row.filename in stored and row.filename not in fresh])
        # Chunks left without a vector (the embedder failed when they were written) or with another model's.
        report.vectors_filled = fill_missing(root_key=ref.root_key)
        advance_generation()
        faults.hit("inside_reindex")
    report.rewritten_rows = len(rows)
    render_memory_index(ref.root_key, root)
    if decisions:
        # The same boundaries as a single apply, so the crash loop can kill a reindex that recorded hand edits;
        # the events and applied_at commit together, as in apply_decision.
        faults.hit("after_reindex")
        with transaction.atomic():
            decision_events_record(decisions)
            faults.hit("before_applied")
            stamp_applied(decisions)
        report.external_decisions = [decision.id for decision in decisions]
    return report
