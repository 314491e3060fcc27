"""The import noun's verbs: `compozy import claude-code`, REST `POST /api/import/claude-code` and the admin tool
`compozy__import_claude_code`, generated from this table."""

from __future__ import annotations

import sys
from typing import Any

from memory.domain.errors import ControllerTimeout
from memory.services import imports

from . import ADMIN_TOOLSET, Route, Tool, Verb
from .human import table

GROUPS = {("import",): "Bring in memory and history another tool kept before Compozy (Claude Code)."}


def import_progress(options: dict[str, Any]) -> dict[str, Any]:
    """A progress line on a terminal, for a person waiting on months of sessions."""
    if not (sys.stderr.isatty() and options["output"] == "human"):
        return {}

    def progress(done: int, total: int) -> None:
        width = 30
        filled = width * done // max(total, 1)
        sys.stderr.write(f"\rimporting [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return {"progress": progress}


def human_import(document: dict[str, Any]) -> str:
    lines = []
    for project in document["projects"]:
        where = project["checkout"] or "checkout not on this machine: its project and reference memories are skipped"
        lines.append(f"{project['source']} -> {where} ({project['memories']} memories, "
                     f"{project['transcripts']} transcripts)")
    rows = [(f["outcome"], f["source"], f["scope"] or "-", f["workspace"] or "-", f["filename"] or "-",
             f["reason"] or "") for f in document["files"]]
    if rows:
        lines.append(table(rows, ["outcome", "source", "scope", "workspace", "file", "reason"]))
    sessions = [(s["outcome"], s["session_id"], s["workspace"] or "-", s["turns"], s["rows"], s["reason"] or "")
                for s in document["sessions"]]
    if sessions:
        lines.append(table(sessions, ["outcome", "session", "workspace", "turns", "rows", "reason"]))
    for problem in document["problems"]:
        lines.append(f"not imported: {problem['source']}: {problem['reason']}"
                     + (f" ({problem['detail']})" if problem["detail"] else ""))
    s = document["summary"]
    verb = "would import" if document["dry_run"] else "imported"
    lines.append(f"{verb}: {s['files']} files ({s['added']} added, {s['updated']} updated, {s['unchanged']} unchanged, "
                 f"{s['refused']} refused, {s['skipped']} skipped), {s['sessions']} sessions, {s['turns']} turns, "
                 f"{s['candidates']} candidates")
    if not document["dry_run"] and (s["added"] or s["updated"]):
        lines.append("undo one with: compozy memory decisions revert <decision id> "
                     "(compozy memory decisions list -o json names them; origin import)")
    return "\n".join(lines)


VERBS = [
    Verb(
        command=("import", "claude-code"), input=imports.ClaudeCodeImportInput, service=imports.import_claude_code,
        human=human_import, items_key="files", cli_kwargs=import_progress, errors=(ControllerTimeout,),
        summary="Import Claude Code's auto-memory (and, with --sessions, its past sessions) into Compozy.",
        routes=(Route("POST", "/api/import/claude-code"),),
        tool=Tool("compozy__import_claude_code", ADMIN_TOOLSET, idempotent=True, description=(
            "Import Claude Code's auto-memory files (~/.claude/projects/*/memory) as memories, origin import, in "
            "the scope each type defaults to; with sessions, its transcripts into the session ledger. Running it "
            "again adds nothing; dry_run writes nothing. Returns each file's outcome and a summary.")),
    ),
]
