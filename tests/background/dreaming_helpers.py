"""A workspace with memories and fixed recall signals, for the dreaming tests."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from django.db import connection

from memory.domain.enums import Origin
from memory.domain.models import utc_now
from memory.models import RecallSignal
from memory.services import dreams
from memory.services.inputs import Caller
from tests import helpers as h
from tests.sessions import helpers as session

# Distinct subjects, so the controller adds each memory rather than merging them.
SUBJECTS = [
    ("Deploy Pipeline", "Releases pass staging before production on weekdays."),
    ("Test Runner", "The suite runs under pytest with xdist across two workers."),
    ("Cache Policy", "Edge caches keep static assets for one hour."),
    ("Schema Owner", "The billing team owns the invoices schema and its migrations."),
    ("Review Style", "Reviewers want blocking findings listed first with file references."),
    ("Queue Retries", "Workers retry failed jobs three times with exponential backoff."),
    ("Docs Location", "Runtime docs live under packages/site/content/runtime."),
    ("Lint Gate", "Ruff must pass before merging; formatting is enforced in CI."),
]


def write_memories(ws: Path, count: int, *, memory_type: str = "project", start: int = 0) -> list[str]:
    names = []
    for index in range(start, start + count):
        name, body = (SUBJECTS[index] if index < len(SUBJECTS)
                      else (f"Topic {index:03d}", f"Fact number {index:03d} about zq{index:03d}x."))
        result = h.write(ws, name=name, content=body, type=memory_type)
        names.append(result["decision"]["target_filename"])
    return names


def root_key(ws: Path) -> str:
    return f"workspace:{workspace_id(ws)}"


def workspace_id(ws: Path) -> str:
    return (ws / ".compozy" / "workspace.toml").read_text().split('"')[1]


def signal(root: str, filename: str, *, count: int = 3, ema: float = 0.8, days_ago: float = 0.0,
           promoted: bool = False) -> None:
    moment = connection.ops.adapt_datetimefield_value(utc_now() - timedelta(days=days_ago))
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO memory_recall_signals (root_key, filename, recall_count, recall_score, first_recalled_at, "
            "last_recalled_at, promoted_at, promoted_run) VALUES (%s, %s, %s, %s, %s, %s, %s, '')",
            [root, filename, count, ema, moment, moment, moment if promoted else None],
        )


def sessions(ws: Path, count: int, *, prefix: str = "s") -> None:
    """`count` completed user sessions of the workspace, as the session ledger records them: started, stopped."""
    for index in range(count):
        session.start(ws, f"{prefix}{index}")
        session.stop(ws, f"{prefix}{index}")


def ready(ws: Path, count: int = 6) -> list[str]:
    """Every gate passes: `count` memories with strong signals and three sessions."""
    files = write_memories(ws, count)
    for filename in files:
        signal(root_key(ws), filename)
    sessions(ws, 3)
    return files


def trigger(ws: Path, *, force: bool = False, origin: Origin = Origin.CLI) -> dict[str, Any]:
    data = dreams.DreamTriggerInput(force=force)
    return dreams.dream_trigger(data=data, caller=Caller(origin=origin, cwd=ws)).to_json()


def status(ws: Path) -> dict[str, Any]:
    return dreams.dream_status(data=dreams.DreamStatusInput(), caller=Caller(origin=Origin.CLI, cwd=ws)).to_json()


def show(ws: Path, run_id: str) -> dict[str, Any]:
    caller = Caller(origin=Origin.CLI, cwd=ws)
    return dreams.dream_show(data=dreams.DreamIdInput(run_id=run_id), caller=caller).to_json()


def retry(ws: Path, run_id: str) -> dict[str, Any]:
    caller = Caller(origin=Origin.CLI, cwd=ws)
    return dreams.dream_retry(data=dreams.DreamIdInput(run_id=run_id), caller=caller).to_json()


def stamped() -> list[tuple[str, str]]:
    return list(RecallSignal.objects.filter(promoted_at__isnull=False).values_list("filename", "promoted_run"))
