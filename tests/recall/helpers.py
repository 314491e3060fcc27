"""Recall and snapshot helpers: call the real services the way a surface would, and lay memory files on disk by
hand (then `tests.helpers.reindex`) when a test needs exact bodies, ages or many similar memories."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from memory.domain.models import utc_now
from memory.models import Event
from memory.services import recall, snapshots
from memory.services.inputs import Selector
from memory.services.resolution import resolve
from tests import helpers as h


def search(cwd: Path, query: str, *, session_id: str | None = None, **fields: Any) -> dict[str, Any]:
    data = recall.SearchInput.parse({"query": query, **fields})
    return recall.memory_search(data=data, caller=h.caller(cwd, session_id=session_id)).to_json()


def snapshot(cwd: Path, **fields: Any) -> dict[str, Any]:
    data = snapshots.SnapshotInput.parse(fields)
    return snapshots.snapshot_assemble(data=data, caller=h.caller(cwd, session_id=fields.get("session_id"))).to_json()


def snapshot_log(cwd: Path, session_id: str, **fields: Any) -> dict[str, Any]:
    data = snapshots.SnapshotLogInput.parse({"session_id": session_id, **fields})
    return snapshots.snapshot_log(data=data, caller=h.caller(cwd)).to_json()


def ensure_workspace(cwd: Path) -> str:
    """Create (or find) the workspace at cwd and return its id, without writing any memory."""
    workspace = resolve(Selector(), h.caller(cwd), create_workspace=True).workspace
    assert workspace is not None
    return workspace.id


def filenames(result: dict[str, Any]) -> list[str]:
    return [hit["memory"]["filename"] for hit in result["results"]]


def events(op: str) -> list[Event]:
    return list(Event.objects.filter(op=op).order_by("id"))


# --- roots on disk ---------------------------------------------------------------------------------------------

def global_root(home: Path) -> Path:
    return home / "memory"


def agent_global_root(home: Path, agent: str) -> Path:
    return home / "agents" / agent / "memory"


def agent_workspace_root(ws: Path, agent: str) -> Path:
    return ws / ".compozy" / "agents" / agent / "memory"


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def put(root: Path, filename: str, *, name: str, body: str, description: str | None = None,
        scope: str = "workspace", agent: str | None = None, agent_tier: str | None = None,
        age: timedelta = timedelta(0), memory_type: str | None = None, session: str | None = None) -> Path:
    """Write one memory document by hand, with provenance dated `age` ago (and recorded in `session` when given).
    Index it with tests.helpers.reindex."""
    if memory_type is None:
        prefix = filename.rsplit("/", 1)[-1].split("_", 1)[0]
        memory_type = prefix if prefix in ("user", "feedback", "project", "reference") else "project"
    moment = stamp(utc_now() - age)
    lines = ["---", f"name: {name}", f"description: {description or 'About ' + name}", f"type: {memory_type}",
             f"scope: {scope}"]
    if agent is not None:
        lines += [f"agent: {agent}", f"agent_tier: {agent_tier}"]
    lines += ["provenance:", "  source_actor: cli", f"  created_at: {moment}", f"  updated_at: {moment}"]
    if session is not None:
        lines += ["  source_sessions:", f"  - {session}"]
    lines += ["---", "", body]
    path = root / filename
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", "utf-8")
    return path


# A small library for search tests: the question shares only "runtime" and "docs" with its answer.
QUESTION = "where do the runtime docs live and how are they built?"

# The answer shares only "runtime" and "docs" with QUESTION; "live" and "built" appear in no memory.
LIBRARY = {
    "project_runtime_docs.md": ("Runtime docs", "Location of the runtime docs",
                                "The runtime docs sit in docs/runtime and mkdocs renders them into site/ on merge."),
    "project_runtime_versions.md": ("Python versions", "Interpreter versions",
                                    "Python 3.12 is the runtime of the service; Node 20 serves the frontend."),
    "project_api_reference.md": ("API reference", "Generated reference",
                                 "The API reference docs are generated from OpenAPI schemas in api/schema."),
    "project_release_process.md": ("Release process", "Tagging and publishing",
                                   "Releases are tagged from main and published to PyPI by the release workflow."),
    "project_dashboards.md": ("Dashboards", "Grafana boards", "Grafana dashboards chart request latency per region."),
    "project_database.md": ("Database", "Storage engine", "Postgres 16 stores the orders; backups run nightly."),
    "project_code_style.md": ("Code style", "Formatting", "Ruff formats the code and mypy checks the types."),
}


def put_library(ws, library=LIBRARY):
    for filename, (name, description, body) in library.items():
        put(h.workspace_root(ws), filename, name=name, description=description, body=body)
    h.reindex(ws)


def hit(result, filename):
    return next(item for item in result["results"] if item["memory"]["filename"] == filename)


class RecordingCursor:
    """Django's cursor, remembering each statement it runs."""

    def __init__(self, cursor) -> None:  # noqa: ANN001
        self.cursor = cursor
        self.statements: list[str] = []

    def execute(self, sql: str, params=()) -> None:  # noqa: ANN001
        self.statements.append(sql if not params else f"{sql} -- {params[0]}")
        self.cursor.execute(sql, params)

    def fetchall(self) -> list[tuple]:
        return self.cursor.fetchall()

    def fetchone(self) -> tuple | None:
        return self.cursor.fetchone()
