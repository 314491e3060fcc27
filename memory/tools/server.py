"""The MCP server: toolsets `compozy__memory` (list, show, search, propose, note) and `compozy__memory_admin`
(health, history, reindex, promote, decisions). Every tool calls the same service the CLI and HTTP call and returns
the same JSON document; errors come back as tool errors carrying `{code, message, details}`."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from memory.domain.enums import Origin
from memory.domain.errors import CompozyError
from memory.services import catalog, decisions, history, memories, promote, propose, recall
from memory.services.inputs import Caller

from .registry import ToolRegistry, ToolSpec

AGENT_TOOLSET = "compozy__memory"
ADMIN_TOOLSET = "compozy__memory_admin"


class Session:
    """Who the calling agent is: its session, its agent name, and (for a sub-agent) its parent session."""

    def __init__(self, session_id: str | None = None, agent: str | None = None,
                 parent_session_id: str | None = None, workspace: str | None = None) -> None:
        self.session_id = session_id
        self.agent = agent
        self.parent_session_id = parent_session_id
        self.workspace = workspace

    def caller(self) -> Caller:
        return Caller(origin=Origin.TOOL, cwd=None, session_id=self.session_id,
                      parent_session_id=self.parent_session_id)

    def fields(self, **given: Any) -> dict[str, Any]:
        """The call's arguments, with the session's workspace and agent as defaults."""
        values = {key: value for key, value in given.items() if value is not None}
        if self.workspace and "workspace" not in values:
            values["workspace"] = self.workspace
        if self.agent and values.get("scope") == "agent" and "agent_name" not in values:
            values["agent_name"] = self.agent
        return values


def _call(service: Callable[..., Any], model: Any, session: Session, **given: Any) -> dict[str, Any]:
    try:
        values = session.fields(**given)
        if "workspace" not in model.model_fields:
            values.pop("workspace", None)  # a database-wide verb (retention) takes no workspace default
        return service(data=model.parse(values), caller=session.caller()).to_json()
    except CompozyError as error:
        raise ToolError(json.dumps(error.to_dict())) from None


Scope = Literal["global", "workspace", "agent"]
Tier = Literal["workspace", "global"]


def build_registry(session: Session) -> ToolRegistry:
    registry = ToolRegistry()

    def memory_list(scope: Scope | None = None, agent_name: str | None = None, agent_tier: Tier | None = None,
                    workspace: str | None = None, type: str | None = None, sort: Literal["recent", "name"] = "recent",
                    cursor: str | None = None, limit: int | None = None, include_system: bool = False) -> dict[str, Any]:
        return _call(memories.memory_list, memories.ListInput, session, scope=scope, agent_name=agent_name,
                     agent_tier=agent_tier, workspace=workspace, type=type, sort=sort, cursor=cursor, limit=limit,
                     include_system=include_system or None)

    def memory_show(filename: str, scope: Scope | None = None, agent_name: str | None = None,
                    agent_tier: Tier | None = None, workspace: str | None = None,
                    include_system: bool = False) -> dict[str, Any]:
        return _call(memories.memory_show, memories.ShowInput, session, filename=filename, scope=scope,
                     agent_name=agent_name, agent_tier=agent_tier, workspace=workspace,
                     include_system=include_system or None)

    def memory_search(query: str, top_k: int | None = None, scope: Scope | None = None,
                      agent_name: str | None = None, agent_tier: Tier | None = None, workspace: str | None = None,
                      include_system: bool = False) -> dict[str, Any]:
        return _call(recall.memory_search, recall.SearchInput, session, query=query, top_k=top_k, scope=scope,
                     agent_name=agent_name, agent_tier=agent_tier, workspace=workspace,
                     include_system=include_system or None)

    def memory_propose(operation: Literal["add", "update", "delete"] | None = None, filename: str | None = None,
                       type: str | None = None, name: str | None = None, description: str | None = None,
                       content: str | None = None, operations: list[dict[str, Any]] | None = None,
                       scope: Scope | None = None, agent_name: str | None = None, agent_tier: Tier | None = None,
                       workspace: str | None = None, dry_run: bool = False) -> dict[str, Any]:
        return _call(propose.memory_propose, propose.ProposeInput, session, operation=operation, filename=filename,
                     type=type, name=name, description=description, content=content, operations=operations,
                     scope=scope, agent_name=agent_name, agent_tier=agent_tier, workspace=workspace,
                     dry_run=dry_run or None)

    def memory_note(title: str, content: str, type: str | None = None, scope: Scope | None = None,
                    agent_name: str | None = None, agent_tier: Tier | None = None,
                    workspace: str | None = None) -> dict[str, Any]:
        return _call(propose.memory_note, propose.NoteInput, session, title=title, content=content, type=type,
                     scope=scope, agent_name=agent_name, agent_tier=agent_tier, workspace=workspace)

    def memory_health(workspace: str | None = None, include_system: bool = False) -> dict[str, Any]:
        return _call(catalog.health_get, catalog.HealthInput, session, workspace=workspace,
                     include_system=include_system or None)

    def memory_admin_history(limit: int | None = None, operation: str | None = None, since: str | None = None,
                             workspace: str | None = None) -> dict[str, Any]:
        return _call(history.history_list, history.HistoryInput, session, limit=limit, operation=operation,
                     since=since, workspace=workspace)

    def memory_reindex(workspace: str | None = None, include_system: bool = False, rebuild: bool = False) -> dict[str, Any]:
        return _call(catalog.catalog_reindex, catalog.ReindexInput, session, workspace=workspace,
                     include_system=include_system or None, rebuild=rebuild or None)

    def memory_promote(filename: str, from_scope: str, to_scope: str, agent_name: str | None = None,
                       workspace: str | None = None, dry_run: bool = False) -> dict[str, Any]:
        return _call(promote.memory_promote, promote.PromoteInput, session, filename=filename,
                     from_scope=from_scope, to_scope=to_scope, agent_name=agent_name, workspace=workspace,
                     dry_run=dry_run or None)

    def memory_decisions_list(filename: str | None = None, op: str | None = None, origin: str | None = None,
                              since: str | None = None, cursor: str | None = None, limit: int | None = None, workspace: str | None = None,
                              scope: Scope | None = None, agent_name: str | None = None) -> dict[str, Any]:
        return _call(decisions.decision_list, decisions.DecisionListInput, session, filename=filename, op=op,
                     origin=origin, since=since, cursor=cursor, limit=limit, workspace=workspace, scope=scope,
                     agent_name=agent_name)

    def memory_decisions_show(decision_id: str, workspace: str | None = None) -> dict[str, Any]:
        return _call(decisions.decision_show, decisions.DecisionIdInput, session, decision_id=decision_id,
                     workspace=workspace)

    def memory_decisions_revert(decision_id: str, workspace: str | None = None, dry_run: bool = False) -> dict[str, Any]:
        return _call(decisions.decision_revert, decisions.RevertInput, session, decision_id=decision_id,
                     workspace=workspace, dry_run=dry_run or None)

    def memory_decisions_prune(dry_run: bool = False) -> dict[str, Any]:
        return _call(decisions.decision_prune, decisions.PruneInput, session, dry_run=dry_run or None)

    tools = [
        (AGENT_TOOLSET, "compozy__memory_list", memory_list,
         "List the memories visible from this workspace (global, workspace, and your agent's tiers with scope "
         "agent), newest first. Pages: pass page.next_cursor back as cursor with the same other arguments."),
        (AGENT_TOOLSET, "compozy__memory_show", memory_show,
         "Read one memory by filename (as listed). Give scope when the same filename exists in several scopes."),
        (AGENT_TOOLSET, "compozy__memory_search", memory_search,
         "Find memories relevant to a question or task in natural language. Returns ranked results with why each "
         "was recalled and a packaged recall block. Use this before asking the user something they may have told "
         "an earlier session."),
        (AGENT_TOOLSET, "compozy__memory_propose", memory_propose,
         "Propose a durable memory change; the write controller decides (add, update, delete, noop or reject). "
         "Single write: operation add|update|delete with type (user|feedback|project|reference), name, "
         "description and content (delete needs filename). Atomic batch on one document: filename plus "
         "operations, a list of {action: add|replace|remove, content, old_text}; old_text must occur exactly "
         "once; all operations land together or none does. Do not save code, git history, debugging recipes, "
         "ephemeral task state or secrets."),
        (AGENT_TOOLSET, "compozy__memory_note", memory_note,
         "Jot an ad-hoc note (kept under _system/ad_hoc, outside normal recall) for later curation."),
        (ADMIN_TOOLSET, "compozy__memory_health", memory_health,
         "Catalog health: drift between disk and catalog, unapplied decisions, counts."),
        (ADMIN_TOOLSET, "compozy__memory_admin_history", memory_admin_history,
         "Operation history (memory.write, memory.delete, memory.search, memory.reindex), newest first."),
        (ADMIN_TOOLSET, "compozy__memory_reindex", memory_reindex,
         "Re-derive the catalog from the Markdown on disk; hand edits are recorded as decisions."),
        (ADMIN_TOOLSET, "compozy__memory_promote", memory_promote,
         "Copy a memory into another scope (global, workspace, agent[:tier]) through the controller."),
        (ADMIN_TOOLSET, "compozy__memory_decisions_list", memory_decisions_list,
         "List controller decisions, newest first (contents redacted)."),
        (ADMIN_TOOLSET, "compozy__memory_decisions_show", memory_decisions_show,
         "Show one decision with its rule trace and contents."),
        (ADMIN_TOOLSET, "compozy__memory_decisions_revert", memory_decisions_revert,
         "Undo a decision with a new decision; refused when the file changed since."),
        (ADMIN_TOOLSET, "compozy__memory_decisions_prune", memory_decisions_prune,
         "Delete applied decisions older than memory.decisions.prune_after_applied_days, keeping each existing "
         "file's latest decisions and every unapplied one. dry_run counts without deleting."),
    ]
    for toolset, name, fn, description in tools:
        registry.add(ToolSpec(name=name, toolset=toolset, description=description, fn=fn))
    return registry


def build_server(session: Session, toolsets: tuple[str, ...] = (AGENT_TOOLSET, ADMIN_TOOLSET),
                 registry: ToolRegistry | None = None) -> MCPServer:
    registry = registry or build_registry(session)
    server = MCPServer(name="compozy-memory", instructions=(
        "Durable memory for this workspace. Search before asking; propose memories the user will want in later "
        "sessions; the write controller decides and logs every change."))
    for toolset in toolsets:
        for spec in registry.in_toolset(toolset):
            server.add_tool(spec.fn, name=spec.name, description=spec.description, structured_output=True)
    return server
