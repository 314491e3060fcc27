"""The workspace noun: the workspaces this machine has seen, for surfaces that let a person pick one, and what to
do with a copied checkout (its workspace.toml carries the original's identity): adopt it (the workspace moved
here) or fork it (the copy becomes a workspace of its own)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Literal

from pydantic import Field

from memory.domain.errors import Conflict, WorkspaceRequired
from memory.models import Workspace
from memory.store.workspace import WorkspaceIdentity, create_identity, find_workspace_dir, read_identity

from .catalog import ReindexInput, catalog_reindex
from .inputs import Caller, Input
from .resolution import copied_from, register_workspace, relocate
from .results import Result, iso

COPIED = "memory.workspace.copied"


class WorkspaceListInput(Input):
    pass


class WorkspacePathInput(Input):
    workspace: str | None = Field(default=None, description=(
        "A directory inside the workspace (a checkout). Default: the caller's working directory."))


class WorkspaceItem(Result):
    id: str
    path: str
    last_seen_at: str | None
    status: Literal["ok", "missing"] = Field(description=(
        "ok: the registered path holds this workspace; missing: it does not any more (moved or removed)."))


class WorkspaceHere(Result):
    """The workspace a directory holds, against where its identity is registered."""

    id: str
    path: str
    registered_path: str | None
    status: Literal["registered", "copied", "unregistered"] = Field(description=(
        "registered: this is the workspace's registered path; copied: its identity is registered at another path "
        "that still holds it (adopt or fork it); unregistered: not seen by this machine yet."))
    code: str | None = Field(description="memory.workspace.copied for a copy, else null.")


class WorkspaceList(Result):
    workspaces: list[WorkspaceItem]
    here: WorkspaceHere | None


class WorkspaceAdoptResult(Result):
    id: str
    path: str
    previous_path: str | None


class WorkspaceForkResult(Result):
    id: str
    forked_from: str
    path: str
    readded: list[str] = Field(description="The ids of the decisions that re-added the copy's memories under it.")


def _holds(path: str, workspace_id: str) -> bool:
    try:
        return read_identity(Path(path)).id == workspace_id
    except Exception:  # noqa: BLE001 - unreadable or gone: it does not hold the workspace
        return False


def _identity_at(spec: str | None, caller: Caller, *, required: bool) -> WorkspaceIdentity | None:
    start = Path(spec).expanduser() if spec else caller.cwd
    if start is not None and not start.is_absolute() and caller.cwd is not None:
        start = caller.cwd / start
    found = find_workspace_dir(start) if start is not None and start.is_dir() else None
    if found is None:
        if required:
            raise WorkspaceRequired(f"{start} holds no workspace (.compozy/workspace.toml).",
                                    details={"field": "workspace", "workspace": str(start), "reason": "no_workspace"})
        return None
    return read_identity(found)


def _here(identity: WorkspaceIdentity | None) -> WorkspaceHere | None:
    if identity is None:
        return None
    path = str(identity.directory.resolve())
    registered = Workspace.objects.filter(id=identity.id).values_list("path", flat=True).first()
    copied = copied_from(identity)
    status = "copied" if copied else "registered" if registered == path else "unregistered"
    return WorkspaceHere(id=identity.id, path=path, registered_path=registered, status=status,
                         code=COPIED if copied else None)


def workspace_list(*, data: WorkspaceListInput, caller: Caller) -> WorkspaceList:
    rows = Workspace.objects.order_by("path", "id").values_list("id", "path", "last_seen_at")
    return WorkspaceList(
        workspaces=[WorkspaceItem(id=id_, path=path, last_seen_at=iso(seen),
                                  status="ok" if _holds(path, id_) else "missing") for id_, path, seen in rows],
        here=_here(_identity_at(None, caller, required=False)))


def workspace_show(*, data: WorkspacePathInput, caller: Caller) -> WorkspaceHere:
    here = _here(_identity_at(data.workspace, caller, required=True))
    assert here is not None  # required=True raised otherwise
    return here


def workspace_adopt(*, data: WorkspacePathInput, caller: Caller) -> WorkspaceAdoptResult:
    """This directory is the workspace now (it was moved, and the old directory is a stale copy): the registration
    moves here, recorded as a relocation. Memory stays keyed by the workspace's id."""
    identity = _identity_at(data.workspace, caller, required=True)
    assert identity is not None
    registered = Workspace.objects.filter(id=identity.id).values_list("path", flat=True).first()
    if registered != str(identity.directory.resolve()):
        relocate(identity, registered, adopted=True)
    return WorkspaceAdoptResult(id=identity.id, path=str(identity.directory.resolve()), previous_path=registered)


def workspace_fork(*, data: WorkspacePathInput, caller: Caller) -> WorkspaceForkResult:
    """This copy becomes a workspace of its own: a new identity in its workspace.toml, and the memory files it was
    copied with re-added as decisions under that identity (the original keeps its own, untouched)."""
    identity = _identity_at(data.workspace, caller, required=True)
    assert identity is not None
    if copied_from(identity) is None:
        raise Conflict(
            f"{identity.directory} is not a copy: workspace {identity.id} is registered here (or nowhere else "
            "holds it). Fork a copied checkout from inside the copy.",
            details={"reason": "not_a_copy", "workspace": identity.id, "path": str(identity.directory)})
    forked = create_identity(identity.directory, replace=True)
    register_workspace(forked)
    report = catalog_reindex(data=ReindexInput.parse({"workspace": str(forked.directory)}),
                             caller=replace(caller, cwd=forked.directory))
    readded = [decision for root in report.roots for decision in root.external_decisions]
    return WorkspaceForkResult(id=forked.id, forked_from=identity.id, path=str(forked.directory.resolve()),
                               readded=readded)
