"""A catalog indexed before a schema change keeps working after the upgrade, with no reindex needed."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE_SESSIONS = ("memory", "0004_jobs")
WITH_SESSIONS = ("memory", "0005_catalog_origin_session")


def migrate_to(target: tuple[str, str]) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([target])


def old_row(filename: str, frontmatter: dict) -> list[object]:
    return ["workspace:01TEST", "workspace", "01TEST", "", "", filename, "project", filename[:-3], filename[:-3],
            "Name", "Description", "body", "hash", 10, 0, 0, json.dumps(frontmatter), "2026-11-01 10:00:00",
            "2026-11-01 10:00:00"]


def test_rows_indexed_before_origin_sessions_existed_take_theirs_from_their_frontmatter():
    migrate_to(BEFORE_SESSIONS)
    try:
        with connection.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO memory_catalog_entries (root_key, scope, workspace_id, agent_name, agent_tier, filename, "
                "type, slug, entity_key, name, description, body_key, content_hash, size, mtime_ns, is_system, "
                "frontmatter, created_at, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, "
                "%s, %s, %s, %s, %s, %s)",
                [old_row("project_a.md", {"provenance": {"source_sessions": ["first", "later"]}}),
                 old_row("project_b.md", {"provenance": {"source_actor": "cli"}}),
                 old_row("project_c.md", {})],
            )
        migrate_to(WITH_SESSIONS)
        with connection.cursor() as cursor:
            cursor.execute("SELECT filename, origin_session FROM memory_catalog_entries ORDER BY filename")
            assert cursor.fetchall() == [("project_a.md", "first"), ("project_b.md", ""), ("project_c.md", "")]
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
