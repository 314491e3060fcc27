"""The state a crash, a replay or a load must never break, checked from the outside (sqlite3 and the files, no
Django), so a parent process can check what its children left. Used by the crash tests, `bench/crash_loop.py`
and `bench/soak.py` (and their bounded runs in the suite).

`violations(home)` returns a list of sentences, empty when everything holds:
- no temp file is left under the home or any workspace's `.compozy`
- every decision is applied, and has exactly one event
- per root: the memory documents on disk are exactly the catalog's rows, with the same content hash
- per root: each file holds the post content of the last applied decision that wrote it, and no file exists whose
  last applied decision deleted it (disk = catalog = applied decisions)
- per root: MEMORY.md lists exactly the documents on disk, each once
- every document parses (strict frontmatter)
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

TEMP_SUFFIX = ".compozy-tmp"
INDEX_LINE = re.compile(r"^- \[(?P<name>[^\]]*)\]\((?P<filename>[^)]+)\) — (?P<description>.*)$")
DOCUMENT = re.compile(r"^((user|feedback|project|reference)_[a-z0-9_.-]+|ad_hoc_\d{8}T\d{6}Z_[a-z0-9_.-]+)\.md$")


def query(home: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    connection = sqlite3.connect(home / "compozy.db", timeout=60)
    try:
        return connection.execute(sql, params).fetchall()
    finally:
        connection.close()


def temp_files(*bases: Path) -> list[str]:
    found = []
    for base in bases:
        for dirpath, _dirs, names in os.walk(base):
            found.extend(os.path.join(dirpath, n) for n in names if n.endswith(TEMP_SUFFIX))
    return found


def parse_index(text: str) -> list[dict[str, str]] | None:
    """The entries of a rendered MEMORY.md, or None when a line is not an index line."""
    lines = text.splitlines()
    if not lines or lines[0] != "# Memory Index":
        return None
    entries = []
    for line in lines[1:]:
        if not line:
            continue
        match = INDEX_LINE.match(line)
        if not match:
            return None
        entries.append(match.groupdict())
    return entries


def root_dirs(home: Path) -> dict[str, Path]:
    """Every root the database knows of (catalog rows or decisions), mapped to its directory."""
    workspaces = dict(query(home, "SELECT id, path FROM memory_workspaces"))
    keys = {key for (key,) in query(home, "SELECT DISTINCT root_key FROM memory_catalog_entries UNION "
                                          "SELECT DISTINCT root_key FROM memory_decisions")}
    keys.add("global")
    roots = {}
    for key in sorted(keys):
        parts = key.split(":")
        if parts[0] == "global":
            roots[key] = home / "memory"
        elif parts[0] == "workspace" and parts[1] in workspaces:
            roots[key] = Path(workspaces[parts[1]]) / ".compozy" / "memory"
        elif parts[0] == "agent" and parts[2] == "global":
            roots[key] = home / "agents" / parts[1] / "memory"
        elif parts[0] == "agent" and parts[3] in workspaces:
            roots[key] = Path(workspaces[parts[3]]) / ".compozy" / "agents" / parts[1] / "memory"
    return roots


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def violations(home: Path) -> list[str]:
    from memory.domain.document import parse_document

    found: list[str] = []
    roots = root_dirs(home)
    workspace_dirs = {root.parent for root in roots.values() if root.parent.name == ".compozy"}
    leftovers = temp_files(home, *workspace_dirs)
    if leftovers:
        found.append(f"temp files left: {leftovers}")
    unapplied = query(home, "SELECT id FROM memory_decisions WHERE applied_at IS NULL")
    if unapplied:
        found.append(f"unapplied decisions: {[row[0] for row in unapplied]}")
    events = query(home, "SELECT d.id, count(ev.id) FROM memory_decisions d LEFT JOIN memory_events ev "
                         "ON ev.decision_id = d.id GROUP BY d.id HAVING count(ev.id) != 1")
    if events:
        found.append(f"decisions without exactly one event: {events[:5]}")
    for root_key, root in roots.items():
        on_disk: dict[str, bytes] = {}
        if root.is_dir():
            for name in sorted(os.listdir(root)):
                path = root / name
                if DOCUMENT.match(name) and path.is_file() and not path.is_symlink():
                    on_disk[name] = path.read_bytes()
        catalog = dict(query(home, "SELECT filename, content_hash FROM memory_catalog_entries "
                                   "WHERE root_key = ? AND is_system = 0", (root_key,)))
        if set(on_disk) != set(catalog):
            found.append(f"{root_key}: disk and catalog differ: only on disk {sorted(set(on_disk) - set(catalog))}, "
                         f"only in the catalog {sorted(set(catalog) - set(on_disk))}")
        for name, data in on_disk.items():
            if name in catalog and sha256(data) != catalog[name]:
                found.append(f"{root_key}: {name} differs from its catalog row")
            try:
                parse_document(data.decode("utf-8"))
            except Exception as exc:  # noqa: BLE001 - any failure to parse is the violation reported
                found.append(f"{root_key}: {name} does not parse: {type(exc).__name__}: {exc}")
        last = {}
        for filename, op, post_hash in query(
                home, "SELECT target_filename, op, post_content_hash FROM memory_decisions WHERE root_key = ? "
                      "AND op IN ('add', 'update', 'delete') AND applied_at IS NOT NULL ORDER BY decided_at, id",
                (root_key,)):
            last[filename] = (op, post_hash)
        for filename, (op, post_hash) in last.items():
            if "/" in filename:
                continue  # _system/ artifacts are outside the curated listing checked here
            if op == "delete" and filename in on_disk:
                found.append(f"{root_key}: {filename} exists though its last decision deleted it")
            elif op != "delete" and filename not in on_disk:
                found.append(f"{root_key}: {filename} is missing though its last decision wrote it")
            elif op != "delete" and sha256(on_disk[filename]) != post_hash:
                found.append(f"{root_key}: {filename} is not the content its last decision wrote")
        undecided = sorted(set(on_disk) - set(last))
        if undecided:
            found.append(f"{root_key}: files no applied decision wrote: {undecided}")
        index = root / "MEMORY.md"
        if on_disk or index.exists():
            text = index.read_text("utf-8") if index.is_file() and not index.is_symlink() else None
            entries = parse_index(text) if text is not None else None
            if entries is None:
                found.append(f"{root_key}: MEMORY.md is missing or not in the rendered form")
            else:
                listed = [entry["filename"] for entry in entries]
                if len(listed) != len(set(listed)) or set(listed) != set(on_disk):
                    found.append(f"{root_key}: MEMORY.md lists {sorted(listed)} but the disk holds {sorted(on_disk)}")
    return found
