"""The agent noun: which agents hold memories on this machine, and their tiers' roots, for the operator's reads.

An agent's memories live in its two tiers (`agent:<name>:global`, `agent:<name>:workspace:<ulid>`). An operator who
lists memory without naming an agent sees every agent's tiers beside global and workspace memory, and can ask which
agents exist; an agent (an MCP tool call) sees only its own tiers, as the scope rules say."""

from __future__ import annotations

from django.db.models import Count, Q
from pydantic import Field

from memory.domain.enums import AgentTier, Origin, Scope
from memory.domain.models import ScopeRef
from memory.models import CatalogEntry

from .inputs import Caller, Input, all_workspaces_field
from .resolution import resolve_span
from .results import Result


class AgentListInput(Input):
    workspace: str | None = Field(default=None, description=(
        "The workspace, as its ULID or a directory inside it: agents with memories in it or in their global tier. "
        "Default: the caller's own workspace."))
    all_workspaces: bool = all_workspaces_field()


class AgentTierView(Result):
    agent_tier: AgentTier
    workspace_id: str | None = Field(description="The workspace of a workspace tier; null for the global tier.")
    memories: int


class AgentView(Result):
    agent_name: str
    memories: int
    tiers: list[AgentTierView]


class AgentList(Result):
    agents: list[AgentView]


def _tier_rows(workspace_ids: list[str], tier: AgentTier | None = None) -> list[dict]:
    rows = CatalogEntry.objects.filter(scope=Scope.AGENT.value, is_system=False)
    rows = rows.filter(Q(agent_tier=AgentTier.GLOBAL.value)
                       | Q(agent_tier=AgentTier.WORKSPACE.value, workspace_id__in=workspace_ids))
    if tier is not None:
        rows = rows.filter(agent_tier=tier.value)
    return list(rows.values("agent_name", "agent_tier", "workspace_id").annotate(memories=Count("id"))
                .order_by("agent_name", "agent_tier", "workspace_id"))


def agent_refs(workspace_ids: list[str], *, caller: Caller, tier: AgentTier | None = None) -> list[ScopeRef]:
    """Every agent tier holding memories and visible from these workspaces, for an operator's read that named no
    agent; none for an agent, which reads its own tiers only."""
    if caller.origin is Origin.TOOL:
        return []
    return [ScopeRef(scope=Scope.AGENT, agent_name=row["agent_name"], agent_tier=AgentTier(row["agent_tier"]),
                     workspace_id=row["workspace_id"] if row["agent_tier"] == AgentTier.WORKSPACE.value else "")
            for row in _tier_rows(workspace_ids, tier)]


def agent_list(*, data: AgentListInput, caller: Caller) -> AgentList:
    span = resolve_span(data.workspace, caller, all_workspaces=data.all_workspaces)
    agents: dict[str, AgentView] = {}
    for row in _tier_rows(span.workspace_ids):
        view = agents.setdefault(row["agent_name"], AgentView(agent_name=row["agent_name"], memories=0, tiers=[]))
        view.tiers.append(AgentTierView(agent_tier=AgentTier(row["agent_tier"]),
                                        workspace_id=row["workspace_id"] or None, memories=row["memories"]))
        view.memories += row["memories"]
    return AgentList(agents=list(agents.values()))
