"""From a scope reference (or a stored root key) to the directory on disk."""

from __future__ import annotations

from pathlib import Path

from memory.catalog import sql
from memory.domain.enums import AgentTier, Scope
from memory.domain.models import ScopeRef, needs_workspace
from memory.models import Workspace
from memory.store.roots import root_path


def ref_from_row(scope: str, workspace_id: str, agent_name: str, agent_tier: str) -> ScopeRef:
    return ScopeRef(
        scope=Scope(scope),
        workspace_id=workspace_id,
        agent_name=agent_name,
        agent_tier=AgentTier(agent_tier) if agent_tier else None,
    )


def ref_from_root_key(root_key: str) -> ScopeRef:
    parts = root_key.split(":")
    if parts[0] == "global":
        return ScopeRef(scope=Scope.GLOBAL)
    if parts[0] == "workspace":
        return ScopeRef(scope=Scope.WORKSPACE, workspace_id=parts[1])
    if parts[2] == "global":
        return ScopeRef(scope=Scope.AGENT, agent_name=parts[1], agent_tier=AgentTier.GLOBAL)
    return ScopeRef(scope=Scope.AGENT, agent_name=parts[1], agent_tier=AgentTier.WORKSPACE, workspace_id=parts[3])


_WORKSPACE_PATH = f"SELECT path FROM {Workspace._meta.db_table} WHERE id = %s"


def workspace_directory(workspace_id: str) -> Path | None:
    if not workspace_id:
        return None
    # Plain SQL: the extractor's drain resolves the root of every workspace candidate, and compiling the ORM
    # query took about twenty times as long as running it.
    with sql.cursor() as cursor:
        cursor.execute(_WORKSPACE_PATH, [workspace_id])
        found = cursor.fetchone()
    return Path(found[0]) if found and found[0] else None


def resolve_root(ref: ScopeRef) -> Path | None:
    """The directory of a root, or None when its workspace is not known on this machine."""
    in_workspace = needs_workspace(ref.scope, ref.agent_tier)
    directory = workspace_directory(ref.workspace_id) if in_workspace else None
    if in_workspace and directory is None:
        return None
    return root_path(ref, directory)
