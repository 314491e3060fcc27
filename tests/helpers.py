"""Thin wrappers that call the real services the way a surface would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memory.domain.enums import Origin
from memory.services import catalog, decisions, memories
from memory.services.inputs import Caller


def workspace_root(workspace: Path) -> Path:
    """A workspace's memory root: <workspace>/.compozy/memory."""
    return workspace / ".compozy" / "memory"


def caller(cwd: Path, origin: Origin = Origin.CLI, session_id: str | None = None) -> Caller:
    return Caller(origin=origin, cwd=cwd, session_id=session_id)


def write(cwd: Path, *, origin: Origin = Origin.CLI, **fields: Any) -> dict[str, Any]:
    fields.setdefault("type", "project")
    fields.setdefault("description", f"About {fields.get('name', 'something')}")
    return memories.memory_write(data=memories.WriteInput.parse(fields), caller=caller(cwd, origin)).to_json()


def edit(cwd: Path, **fields: Any) -> dict[str, Any]:
    return memories.memory_edit(data=memories.EditInput.parse(fields), caller=caller(cwd)).to_json()


def delete(cwd: Path, **fields: Any) -> dict[str, Any]:
    return memories.memory_delete(data=memories.DeleteInput.parse(fields), caller=caller(cwd)).to_json()


def listing(cwd: Path, **fields: Any) -> dict[str, Any]:
    return memories.memory_list(data=memories.ListInput.parse(fields), caller=caller(cwd)).to_json()


def show(cwd: Path, **fields: Any) -> dict[str, Any]:
    return memories.memory_show(data=memories.ShowInput.parse(fields), caller=caller(cwd)).to_json()


def revert(cwd: Path, decision_id: str, **fields: Any) -> dict[str, Any]:
    data = decisions.RevertInput.parse({"decision_id": decision_id, **fields})
    return decisions.decision_revert(data=data, caller=caller(cwd)).to_json()


def decision_list(cwd: Path, **fields: Any) -> dict[str, Any]:
    return decisions.decision_list(data=decisions.DecisionListInput.parse(fields), caller=caller(cwd)).to_json()


def decision_show(cwd: Path, decision_id: str) -> dict[str, Any]:
    data = decisions.DecisionIdInput.parse({"decision_id": decision_id})
    return decisions.decision_show(data=data, caller=caller(cwd)).to_json()


def health(cwd: Path, **fields: Any) -> dict[str, Any]:
    return catalog.health_get(data=catalog.HealthInput.parse(fields), caller=caller(cwd)).to_json()


def reindex(cwd: Path, **fields: Any) -> dict[str, Any]:
    return catalog.catalog_reindex(data=catalog.ReindexInput.parse(fields), caller=caller(cwd)).to_json()


def tool_document(result: Any) -> tuple[bool, Any]:
    """An MCP tool call's result as (ok, document): its structured content, for an error the {code, message,
    details} document."""
    if result.is_error:
        if result.structured_content is not None:  # every CompozyError travels structured
            return False, result.structured_content
        text = result.content[0].text  # an error the MCP SDK raised itself
        return False, json.loads(text[text.index("{"):])
    return True, result.structured_content
