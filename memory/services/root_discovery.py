"""Root discovery: the roots an operator command (health, reindex, decisions) covers. That is global, every
agent's global tier, and this workspace with its agents' workspace tiers; other workspaces stay out unless the
operator asked for every known workspace (`administered_refs_across`). An agent is found from its directory on
disk or from the catalog (its files may have vanished since)."""

from __future__ import annotations

from pathlib import Path

from django.db.models import QuerySet

from memory.domain.enums import AgentTier, Scope
from memory.domain.errors import ScopeInvalid
from memory.domain.models import ScopeRef
from memory.domain.names import validate_agent_name
from memory.models import CatalogEntry
from memory.store import roots as store_roots

from .resolution import KnownWorkspace


def administered_refs_across(workspaces: list[KnownWorkspace]) -> list[ScopeRef]:
    """Global, every agent's global tier, then for each workspace (in the order given) its root and its agents'
    workspace tiers. A workspace whose directory is gone contributes the agents its catalog rows name."""
    refs = [ScopeRef(scope=Scope.GLOBAL)]
    # A key range instead of startswith: SQLite serves a range from the index, a LIKE scans every row.
    agent_rows = CatalogEntry.objects.filter(root_key__gte="agent:", root_key__lt="agent;")
    for agent in _agent_names(store_roots.agents_home(), agent_rows.filter(root_key__endswith=":global")):
        refs.append(ScopeRef(scope=Scope.AGENT, agent_name=agent, agent_tier=AgentTier.GLOBAL))
    for workspace in workspaces:
        refs.extend(workspace_refs(workspace, agent_rows))
    return refs


def workspace_refs(workspace: KnownWorkspace, agent_rows: QuerySet[CatalogEntry] | None = None) -> list[ScopeRef]:
    """One workspace's roots: its own and its agents' workspace tiers."""
    if agent_rows is None:
        agent_rows = CatalogEntry.objects.filter(root_key__gte="agent:", root_key__lt="agent;")
    refs = [ScopeRef(scope=Scope.WORKSPACE, workspace_id=workspace.id)]
    rows = agent_rows.filter(root_key__endswith=f":workspace:{workspace.id}")
    agents_dir = workspace.directory / ".compozy" / "agents" if workspace.directory is not None else None
    for agent in _agent_names(agents_dir, rows):
        refs.append(ScopeRef(scope=Scope.AGENT, agent_name=agent, agent_tier=AgentTier.WORKSPACE,
                             workspace_id=workspace.id))
    return refs


def _agent_names(agents_dir: Path | None, rows: QuerySet[CatalogEntry]) -> list[str]:
    """Agents with a memory directory under `agents_dir` or catalog rows among `rows`, sorted; a name that is
    not a valid agent name (a stray directory) is skipped."""
    names: set[str] = set()
    if agents_dir is not None and agents_dir.is_dir():
        names = {p.name for p in agents_dir.iterdir() if (p / "memory").is_dir()}
    names |= {key.split(":")[1] for key in rows.values_list("root_key", flat=True).distinct()}
    return [name for name in sorted(names) if _is_agent_name(name)]


def _is_agent_name(name: str) -> bool:
    try:
        validate_agent_name(name)
    except ScopeInvalid:
        return False
    return True
