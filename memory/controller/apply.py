"""Applying a decision: the file mutation, the catalog, MEMORY.md, the event, applied_at. Every step is
idempotent, so this is also the replay path."""

from __future__ import annotations

import os
from pathlib import Path

from django.db import transaction

from memory.catalog.indexer import (
    DiskFile,
    advance_generation,
    delete_rows,
    entry_row,
    index_entries,
    upsert_rows,
)
from memory.domain.document import Document, parse_document
from memory.domain.enums import MUTATING_OPS, Op
from memory.domain.models import ScopeRef, sha256_text
from memory.domain.names import INDEX_FILENAME, is_system_path
from memory.models import Decision
from memory.store import files
from memory.store.index_md import index_line, render_index, splice_index

from . import faults
from .log import record_decision_events, stamp_applied
from .roots import ref_from_row


def _file_matches(path: Path, text: str, digest: str) -> bool:
    try:
        if os.stat(path).st_size != len(text.encode("utf-8")):
            return False
        return sha256_text(path.read_bytes().decode("utf-8", "replace")) == digest
    except FileNotFoundError:
        return False


def apply_decision(decision: Decision, *, root: Path, document: Document | None = None) -> None:
    ref = ref_from_row(decision.scope, decision.workspace_id, decision.agent_name, decision.agent_tier)
    filename = decision.target_filename
    if decision.op in (Op.ADD, Op.UPDATE):
        path = files.safe_path(root, filename)
        if not _file_matches(path, decision.post_content, decision.post_content_hash):
            if not root.is_dir():
                files.make_scope_dirs(root, with_inbox=ref.scope.value == "global")
            files.atomic_write(path, decision.post_content, step=faults.hit)
        stat = os.stat(path)
        disk = DiskFile(filename, decision.post_content, decision.post_content_hash, stat.st_size, stat.st_mtime_ns)
        row = entry_row(ref, disk, document or parse_document(decision.post_content))
        with transaction.atomic():
            upsert_rows([row])
            advance_generation()
        if not is_system_path(filename):
            update_memory_index(ref.root_key, root, filename, index_line(filename, row.name, row.description))
    elif decision.op == Op.DELETE:
        files.remove_file(files.safe_path(root, filename), step=faults.hit)
        with transaction.atomic():
            delete_rows(ref.root_key, [filename])
            advance_generation()
        if not is_system_path(filename):
            update_memory_index(ref.root_key, root, filename, None)
    faults.hit("after_reindex")
    record_decision_events([decision])
    faults.hit("before_applied")
    stamp_applied([decision])


def update_memory_index(root_key: str, root: Path, filename: str, line: str | None) -> None:
    """Splice one file's line into MEMORY.md; render it whole from the catalog when it is missing or not in the
    rendered form."""
    path = root / INDEX_FILENAME
    try:
        current = path.read_text("utf-8")
    except (FileNotFoundError, UnicodeDecodeError):
        current = None
    text = splice_index(current, filename, line) if current is not None else None
    if text is None:
        text = render_index(index_entries(root_key))
    if text != current:
        files.atomic_write(path, text)


def render_memory_index(root_key: str, root: Path) -> None:
    """Render MEMORY.md whole from the catalog (reindex, repair)."""
    text = render_index(index_entries(root_key))
    path = root / INDEX_FILENAME
    try:
        if path.read_text("utf-8") == text:
            return
    except (FileNotFoundError, UnicodeDecodeError):
        pass
    if root.is_dir() or text != render_index([]):
        files.atomic_write(path, text)


__all__ = ["apply_decision", "update_memory_index", "render_memory_index", "MUTATING_OPS", "ScopeRef"]
