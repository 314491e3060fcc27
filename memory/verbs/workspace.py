"""The workspace noun's verbs: `compozy workspace list|show|adopt|fork`, REST `/api/workspaces…` and the admin
tools `compozy__workspace_*`, generated from this table. Adopt and fork settle a copied checkout (its
workspace.toml carries another directory's identity: memory.workspace.copied)."""

from __future__ import annotations

from typing import Any

from memory.domain.errors import Conflict, ControllerTimeout
from memory.services import workspaces

from . import ADMIN_TOOLSET, Route, Tool, Verb
from .human import table

GROUPS = {("workspace",): "The workspaces this machine knows, and a copied checkout's adopt or fork."}


def _here_line(here: dict[str, Any] | None) -> str:
    if here is None:
        return "here: no workspace"
    line = f"here: {here['id']} at {here['path']} ({here['status']})"
    if here["status"] == "copied":
        line += (f"\n  a copy of the workspace registered at {here['registered_path']}: run `compozy workspace "
                 f"adopt` (it moved here) or `compozy workspace fork` (a workspace of its own)\n  code: {here['code']}")
    return line


def human_list(document: dict[str, Any]) -> str:
    rows = [(w["id"], w["status"], w["path"]) for w in document["workspaces"]]
    return "\n".join([table(rows, ["id", "status", "path"]), _here_line(document["here"])])


def human_show(document: dict[str, Any]) -> str:
    return _here_line(document)


def human_adopt(document: dict[str, Any]) -> str:
    return f"workspace {document['id']} is now at {document['path']} (was {document['previous_path'] or '-'})"


def human_fork(document: dict[str, Any]) -> str:
    return (f"workspace {document['id']} forked from {document['forked_from']} at {document['path']}; "
            f"{len(document['readded'])} memories re-added under it")


READ = {"read_only": True, "idempotent": True}

VERBS = [
    Verb(
        command=("workspace", "list"), input=workspaces.WorkspaceListInput, service=workspaces.workspace_list,
        human=human_list, items_key="workspaces",
        summary="The workspaces this machine has seen, whether each is still at its path, and the one here.",
        routes=(Route("GET", "/api/workspaces"),),
        tool=Tool("compozy__workspace_list", ADMIN_TOOLSET, **READ, description=(
            "The workspaces this machine has seen (status ok or missing) and the one at the caller's directory "
            "(here: registered, copied or unregistered; a copy carries code memory.workspace.copied).")),
    ),
    Verb(
        command=("workspace", "show"), input=workspaces.WorkspacePathInput, service=workspaces.workspace_show,
        human=human_show, summary="The workspace a directory holds, against where its identity is registered.",
        positionals=("workspace",),
        routes=(Route("GET", "/api/workspaces/here"),),
        tool=Tool("compozy__workspace_show", ADMIN_TOOLSET, **READ, description=(
            "The workspace a directory holds and where its identity is registered; status copied (code "
            "memory.workspace.copied) means adopt or fork it.")),
    ),
    Verb(
        command=("workspace", "adopt"), input=workspaces.WorkspacePathInput, service=workspaces.workspace_adopt,
        human=human_adopt, errors=(ControllerTimeout,), positionals=("workspace",),
        summary="This directory is the workspace now (it was moved here): its registration moves here.",
        routes=(Route("POST", "/api/workspaces/adopt"),),
        tool=Tool("compozy__workspace_adopt", ADMIN_TOOLSET, idempotent=True, description=(
            "Move a workspace's registration to this directory (the checkout was moved; the old directory is a "
            "stale copy). Its memories stay keyed by its id.")),
    ),
    Verb(
        command=("workspace", "fork"), input=workspaces.WorkspacePathInput, service=workspaces.workspace_fork,
        human=human_fork, errors=(Conflict, ControllerTimeout), positionals=("workspace",),
        summary="Give a copied checkout an identity of its own, its memory files re-added under it.",
        routes=(Route("POST", "/api/workspaces/fork"),),
        tool=Tool("compozy__workspace_fork", ADMIN_TOOLSET, description=(
            "Give a copied checkout a new workspace identity; the memory files it was copied with are re-added "
            "as decisions under it and the original keeps its own. Refused (memory.conflict) where the directory "
            "is not a copy.")),
    ),
]
