"""The workspace noun: the workspaces this machine has seen, for surfaces that let a person pick one."""

from __future__ import annotations

from memory.models import Workspace

from .inputs import Caller, Input
from .results import Result, iso


class WorkspaceListInput(Input):
    pass


class WorkspaceItem(Result):
    id: str
    path: str
    last_seen_at: str | None


class WorkspaceList(Result):
    workspaces: list[WorkspaceItem]


def workspace_list(*, data: WorkspaceListInput, caller: Caller) -> WorkspaceList:
    rows = Workspace.objects.order_by("path", "id").values_list("id", "path", "last_seen_at")
    return WorkspaceList(workspaces=[WorkspaceItem(id=id_, path=path, last_seen_at=iso(seen))
                                     for id_, path, seen in rows])
