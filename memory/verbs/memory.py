"""The memory noun's verbs, each declared once: CLI `compozy memory …`, REST `/api/memory…` and the MCP toolsets
`compozy__memory` (agents) and `compozy__memory_admin` (operators) are generated from this table."""

from __future__ import annotations

import sys
from typing import Any

from memory.domain.document import decode_utf8
from memory.domain.errors import (
    Conflict,
    ControllerTimeout,
    NotFound,
    Rejected,
    SyncFailed,
    ValidationError,
)
from memory.services import (
    agents,
    catalog,
    conflicts,
    decisions,
    history,
    memories,
    promote,
    propose,
    recall,
    snapshots,
    sync,
    tokens,
)

from . import ADMIN_TOOLSET, AGENT_TOOLSET, Route, Switch, Tool, Verb, human

WRITE_ERRORS = (Rejected, Conflict, ControllerTimeout)


def read_content(value: str) -> str:
    """`--content` takes text, `@file` or `-` (stdin). Bytes must be UTF-8."""
    from pathlib import Path

    if value == "-":
        return decode_utf8(sys.stdin.buffer.read())
    if value.startswith("@"):
        path = Path(value[1:]).expanduser()
        try:
            return decode_utf8(path.read_bytes())
        except OSError as exc:
            raise ValidationError(f"Cannot read {path}: {exc.strerror}.",
                                  details={"field": "content", "reason": "unreadable"}) from None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        # Bytes that are not UTF-8 arrive from argv as lone surrogates.
        raise ValidationError("The input is not valid UTF-8.",
                              details={"field": "content", "reason": "encoding"}) from None
    return value


def reindex_progress(options: dict[str, Any]) -> dict[str, Any]:
    """A progress line on a terminal, for a person waiting on a large reindex."""
    if not (sys.stderr.isatty() and options["output"] == "human"):
        return {}

    def progress(done: int, total: int) -> None:
        sys.stderr.write(f"\rreindexing {done}/{total} files")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return {"progress": progress}


def human_agents(document: dict[str, Any]) -> str:
    if not document["agents"]:
        return "No agent holds memories here (an agent's memories are written with --scope agent --agent <name>)."
    rows = [(agent["agent_name"], tier["agent_tier"], tier["workspace_id"] or "-", tier["memories"])
            for agent in document["agents"] for tier in agent["tiers"]]
    return human.table(rows, ["agent", "tier", "workspace", "memories"])


def human_token(document: dict[str, Any]) -> str:
    return ("New token written to " if document["rotated"] else "The token is in ") + document["path"]


CONTENT = {"content": read_content}

snapshot_log = Verb(
    input=snapshots.SnapshotLogInput, service=snapshots.snapshot_log, human=human.human_snapshot_log,
    summary="The memories injected into a session's snapshot, in order.", items_key="injections",
    errors=(NotFound,),
)

GROUPS = {("memory", "decisions"): "Controller decisions: list, show, revert, prune."}

VERBS = [
    Verb(
        command=("memory", "write"), input=memories.WriteInput, service=memories.memory_write,
        human=human.human_write, summary="Write a memory through the controller.", readers=CONTENT,
        routes=(Route("POST", "/api/memory"),), errors=WRITE_ERRORS,
    ),
    Verb(
        command=("memory", "edit"), input=memories.EditInput, service=memories.memory_edit, positionals=("filename",),
        human=human.human_write, summary="Change a memory's content, name or description.", readers=CONTENT,
        routes=(Route("PATCH", "/api/memory/{filename}"),), errors=(NotFound, *WRITE_ERRORS),
    ),
    Verb(
        command=("memory", "resolve"), input=conflicts.ResolveInput, service=conflicts.conflict_resolve,
        positionals=("filename",), human=human.human_resolve, readers=CONTENT,
        summary="Resolve a memory file left with git merge-conflict markers: keep ours, theirs, both, or an edit.",
        routes=(Route("POST", "/api/memory/resolve"),), errors=(NotFound, *WRITE_ERRORS),
        tool=Tool("compozy__memory_resolve", ADMIN_TOOLSET, destructive=True, description=(
            "Resolve a memory file that holds git merge-conflict markers (health lists it as invalid, reason "
            "conflict_markers): keep ours, keep theirs, keep both as two memories, or edit (give the body). Each "
            "written file is a controller decision; the conflicted text is kept as the first one's prior content.")),
    ),
    Verb(
        command=("memory", "sync"), input=sync.SyncInput, service=sync.memory_sync, human=human.human_sync,
        summary="Sync global memory (and agents' global tiers) with a git remote: commit each decision, pull "
                "--rebase, reconcile, push.",
        routes=(Route("POST", "/api/memory/sync"),), errors=(SyncFailed, ControllerTimeout),
        # A conflict waiting for `memory resolve` is not pushed: the sync did less than asked.
        incomplete=lambda document: bool(document["conflicts"]) or any(a["conflicts"] for a in document["agents"]),
        tool=Tool("compozy__memory_sync", ADMIN_TOOLSET, destructive=False, description=(
            "Sync global memory ($COMPOZY_HOME/memory) with its git remote: one commit per decision applied since "
            "the last sync, git pull --rebase, what arrived recorded as decisions of origin sync, then push. Give "
            "remote the first time. Each agent's global tier ($COMPOZY_HOME/agents/<name>/memory) syncs the same way "
            "with the same remote, on branch agents/<name>. A conflict is reported (and not pushed) until "
            "compozy__memory_resolve resolves it.")),
    ),
    Verb(
        command=("memory", "delete"), input=memories.DeleteInput, service=memories.memory_delete,
        positionals=("filename",), human=human.human_write, summary="Delete a memory through the controller.",
        routes=(Route("DELETE", "/api/memory/{filename}"),), errors=(NotFound, *WRITE_ERRORS),
    ),
    Verb(
        command=("memory", "list"), input=memories.ListInput, service=memories.memory_list, human=human.human_list,
        summary="List memories, newest first, in cursor pages.", items_key="memories",
        routes=(Route("GET", "/api/memory"),),
        tool=Tool("compozy__memory_list", AGENT_TOOLSET, read_only=True, idempotent=True, description=(
            "List the memories visible here: global, this workspace and (when you run as an agent) your own two "
            "agent tiers, newest first. Each item carries filename, name, description, type, scope and "
            "updated_at; detail: true adds hashes, sizes and ids. Pages: pass page.next_cursor back as cursor "
            "with the same other arguments.")),
    ),
    Verb(
        command=("memory", "agents"), input=agents.AgentListInput, service=agents.agent_list,
        human=human_agents, summary="The agents holding memories here, with each tier's count.", items_key="agents",
        routes=(Route("GET", "/api/memory/agents"),),
        tool=Tool("compozy__memory_agents", ADMIN_TOOLSET, read_only=True, idempotent=True, description=(
            "The agents that hold memories in this workspace or in their global tier (all_workspaces: anywhere on "
            "this machine), each with its tiers and counts.")),
    ),
    Verb(
        command=("memory", "search"), input=recall.SearchInput, service=recall.memory_search, positionals=("query",),
        human=human.human_search, summary="Recall: rank memories for a question or task in the visible scopes.",
        items_key="results", routes=(Route("POST", "/api/memory/search"),),
        tool=Tool("compozy__memory_search", AGENT_TOOLSET, read_only=True, description=(
            "Find the memories relevant to a question, a task or a single keyword, among those visible here "
            "(global, this workspace and your own agent tiers). Returns ranked results with why each was "
            "recalled, and a recall block ready for a prompt. Use it before asking the user something an earlier "
            "session may have learnt. A query with no meaningful word (only stopwords) is not run: the result "
            "then has skipped: true and skip_reason says why.")),
    ),
    Verb(
        command=("memory", "snapshot"), input=snapshots.SnapshotInput, service=snapshots.snapshot_assemble,
        human=human.human_snapshot, summary="The frozen memory section a session's prompt starts with.",
        routes=(Route("POST", "/api/memory/snapshot"),), errors=(NotFound,),
        switch=Switch("show_log", "List the memories injected into --session instead.", snapshot_log),
        tool=Tool("compozy__memory_snapshot", AGENT_TOOLSET, read_only=True, description=(
            "The memory section a session starts with: each visible scope's MEMORY.md index (global, this "
            "workspace and your agent tiers), a recall block when query is given, and the workspace checkpoint "
            "summary. With session_id the first snapshot is kept and returned again, byte for byte.")),
    ),
    Verb(
        command=("memory", "promote"), input=promote.PromoteInput, service=promote.memory_promote,
        positionals=("filename",), human=human.human_write,
        summary="Copy a memory into another scope (--to-scope) through the controller.",
        routes=(Route("POST", "/api/memory/promote"),), errors=(NotFound, *WRITE_ERRORS),
        tool=Tool("compozy__memory_promote", ADMIN_TOOLSET, destructive=True, idempotent=True, description=(
            "Copy a memory into another scope through the write controller. The memory is found by filename "
            "and the usual scope, agent_name and agent_tier; to_scope (and to_agent_name, to_agent_tier) say "
            "where the copy goes.")),
    ),
    Verb(
        command=("memory", "token"), input=tokens.TokenInput, service=tokens.token_manage, positionals=("action",),
        human=human_token, summary="The API bearer token in $COMPOZY_HOME/token: rotate it or show where it is.",
    ),
    Verb(
        command=("memory", "show"), input=memories.ShowInput, service=memories.memory_show, positionals=("filename",),
        human=human.human_show, summary="Print one memory.", routes=(Route("GET", "/api/memory/{filename}"),),
        errors=(NotFound,),
        tool=Tool("compozy__memory_show", AGENT_TOOLSET, read_only=True, idempotent=True, description=(
            "Read one memory by its filename, as listed or found by search. Give scope (and agent_tier) when the "
            "same filename exists in several scopes; without it the memory type picks the scope.")),
    ),
    Verb(
        command=("memory", "decisions", "list"), input=decisions.DecisionListInput, service=decisions.decision_list,
        human=human.human_decisions, summary="List controller decisions, newest first (contents redacted).",
        items_key="decisions", routes=(Route("GET", "/api/memory/decisions"),),
        tool=Tool("compozy__memory_decisions_list", ADMIN_TOOLSET, read_only=True, idempotent=True, description=(
            "List the write controller's decisions, newest first, without their contents. Filter by filename, "
            "op, origin or since; page with cursor.")),
    ),
    Verb(
        command=("memory", "decisions", "show"), input=decisions.DecisionIdInput, service=decisions.decision_show,
        positionals=("decision_id",), human=human.human_decision,
        summary="Show one decision with its contents and rule trace.",
        routes=(Route("GET", "/api/memory/decisions/{decision_id}"),), errors=(NotFound,),
        tool=Tool("compozy__memory_decisions_show", ADMIN_TOOLSET, read_only=True, idempotent=True, description=(
            "Show one controller decision with its rule trace, its contents before and after, and its reason.")),
    ),
    Verb(
        command=("memory", "decisions", "revert"), input=decisions.RevertInput, service=decisions.decision_revert,
        positionals=("decision_id",), human=human.human_revert, summary="Undo a decision with a new decision.",
        routes=(Route("POST", "/api/memory/decisions/{decision_id}/revert"),), errors=(NotFound, *WRITE_ERRORS),
        tool=Tool("compozy__memory_decisions_revert", ADMIN_TOOLSET, destructive=True, idempotent=True,
                  description=(
                      "Undo a decision with a new decision (an add is deleted, an update restored, a delete "
                      "recreated). Refused with memory.conflict when the file changed since.")),
    ),
    Verb(
        command=("memory", "decisions", "prune"), input=decisions.PruneInput, service=decisions.decision_prune,
        human=human.human_prune, items_key="roots",
        summary="Delete applied decisions older than memory.decisions.prune_after_applied_days, keeping each "
                "existing file's latest ones and every unapplied one.",
        routes=(Route("POST", "/api/memory/decisions/prune"),), errors=(ControllerTimeout,),
        tool=Tool("compozy__memory_decisions_prune", ADMIN_TOOLSET, destructive=True, idempotent=True, description=(
            "Delete applied decisions older than memory.decisions.prune_after_applied_days, keeping each existing "
            "file's latest decisions and every unapplied one. dry_run counts without deleting.")),
    ),
    Verb(
        command=("memory", "history"), input=history.HistoryInput, service=history.history_list,
        human=human.human_history, items_key="history",
        summary="Operation history: memory.write, memory.delete, memory.search, memory.reindex.",
        routes=(Route("GET", "/api/memory/history"),),
        # The spec forbids compozy__memory_history, so the admin toolset's name carries its prefix.
        tool=Tool("compozy__memory_admin_history", ADMIN_TOOLSET, read_only=True, idempotent=True, description=(
            "Operation history (memory.write, memory.delete, memory.search, memory.reindex), newest first.")),
    ),
    Verb(
        command=("memory", "health"), input=catalog.HealthInput, service=catalog.health_get,
        human=human.human_health, summary="Catalog drift, unapplied decisions and counts.",
        routes=(Route("GET", "/api/memory/health"),),
        tool=Tool("compozy__memory_health", ADMIN_TOOLSET, read_only=True, idempotent=True, description=(
            "Catalog health: drift between the Markdown on disk and the catalog, unapplied decisions, counts.")),
    ),
    Verb(
        command=("memory", "reindex"), input=catalog.ReindexInput, service=catalog.catalog_reindex,
        human=human.human_reindex, summary="Re-derive the catalog from disk; hand edits become decisions.",
        cli_kwargs=reindex_progress, routes=(Route("POST", "/api/memory/reindex"),), errors=(ControllerTimeout,),
        tool=Tool("compozy__memory_reindex", ADMIN_TOOLSET, idempotent=True, description=(
            "Re-derive the catalog from the Markdown on disk; hand edits found there are recorded as "
            "decisions.")),
    ),
    Verb(
        command=("memory", "compact"), input=catalog.CompactInput, service=catalog.catalog_compact,
        human=human.human_compact, items_key="indexes",
        summary="Merge the full-text indexes back into one b-tree each (health shows how many they hold).",
        routes=(Route("POST", "/api/memory/compact"),), errors=(ControllerTimeout,),
        tool=Tool("compozy__memory_compact", ADMIN_TOOLSET, idempotent=True, description=(
            "Merge each full-text index of the catalog back into one b-tree (writes add one each; a question "
            "looks its words up in every one). Changes no memory and no ranking.")),
    ),
    Verb(
        input=propose.ProposeInput, service=propose.memory_propose, summary="Propose a memory change.",
        errors=(NotFound, *WRITE_ERRORS),
        tool=Tool("compozy__memory_propose", AGENT_TOOLSET, destructive=True, idempotent=True, description=(
            "Propose a durable memory change; the write controller decides (add, update, delete, noop or reject) "
            "and logs it. Single write: operation add (type, name, description, content), update (filename or "
            "the same name, with content) or delete (filename). Atomic batch on one document: filename plus "
            "operations, each {action: add|replace|remove, content?, old_text?}; all land together or none "
            "does. Without a scope, project and reference memories go to this workspace and user and feedback "
            "memories to your agent's workspace tier (or this workspace when you have no agent name); never "
            "global. Do not save code, git history, debugging recipes, ephemeral task state or secrets.")),
    ),
    Verb(
        input=propose.NoteInput, service=propose.memory_note, summary="Write an ad-hoc note.",
        routes=(Route("POST", "/api/memory/ad-hoc"),), errors=WRITE_ERRORS,
        tool=Tool("compozy__memory_note", AGENT_TOOLSET, description=(
            "Jot an ad-hoc note for later curation; it is kept under _system/ad_hoc, outside normal recall. "
            "Without a scope it goes where propose would put a memory of its type: never global.")),
    ),
]
