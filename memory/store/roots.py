"""Where each scope's memory lives on disk."""

from __future__ import annotations

from pathlib import Path

from compozy.config import compozy_home
from memory.domain.enums import AgentTier, Scope
from memory.domain.models import ScopeRef


def global_root() -> Path:
    return compozy_home() / "memory"


def agents_home() -> Path:
    return compozy_home() / "agents"


def root_path(ref: ScopeRef, workspace_dir: Path | None) -> Path:
    """The directory of a memory root. Workspace-keyed roots need the workspace's current directory."""
    if ref.scope is Scope.GLOBAL:
        return global_root()
    if ref.scope is Scope.AGENT and ref.agent_tier is AgentTier.GLOBAL:
        return agents_home() / ref.agent_name / "memory"
    if workspace_dir is None:
        raise ValueError(f"root {ref.root_key} needs its workspace directory")
    if ref.scope is Scope.WORKSPACE:
        return workspace_dir / ".compozy" / "memory"
    return workspace_dir / ".compozy" / "agents" / ref.agent_name / "memory"
