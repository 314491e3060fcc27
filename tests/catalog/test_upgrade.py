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


def migrate_to_latest() -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


# The catalog entry columns every schema has had; a later one is named by the test that needs it.
OLD_COLUMNS = ("root_key", "scope", "workspace_id", "agent_name", "agent_tier", "filename", "type", "slug",
               "entity_key", "name", "description", "body_key", "content_hash", "size", "mtime_ns", "is_system",
               "frontmatter", "created_at", "updated_at")


def insert_old_rows(cursor, rows: list[list[object]], extra_columns: tuple[str, ...] = ()) -> None:  # noqa: ANN001
    columns = OLD_COLUMNS + extra_columns
    cursor.executemany(f"INSERT INTO memory_catalog_entries ({', '.join(columns)}) "
                       f"VALUES ({', '.join('%s' for _ in columns)})", rows)


def old_row(filename: str, frontmatter: dict) -> list[object]:
    return ["workspace:01TEST", "workspace", "01TEST", "", "", filename, "project", filename[:-3], filename[:-3],
            "Name", "Description", "body", "hash", 10, 0, 0, json.dumps(frontmatter), "2026-11-01 10:00:00",
            "2026-11-01 10:00:00"]


def test_rows_indexed_before_origin_sessions_existed_take_theirs_from_their_frontmatter():
    migrate_to(BEFORE_SESSIONS)
    try:
        with connection.cursor() as cursor:
            insert_old_rows(cursor, [old_row("project_a.md", {"provenance": {"source_sessions": ["first", "later"]}}),
                                     old_row("project_b.md", {"provenance": {"source_actor": "cli"}}),
                                     old_row("project_c.md", {})])
        migrate_to(WITH_SESSIONS)
        with connection.cursor() as cursor:
            cursor.execute("SELECT filename, origin_session FROM memory_catalog_entries ORDER BY filename")
            assert cursor.fetchall() == [("project_a.md", "first"), ("project_b.md", ""), ("project_c.md", "")]
    finally:
        migrate_to_latest()


BEFORE_STEMMING = ("memory", "0018_decision_seq_held_roots")
WITH_STEMMING = ("memory", "0019_word_index_porter")


def _matches(expression: str) -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT rowid FROM memory_fts_unicode WHERE memory_fts_unicode MATCH %s", [expression])
        return [row[0] for row in cursor.fetchall()]


def _generation() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT value FROM memory_state WHERE key = 'generation'")
        row = cursor.fetchone()
        return row[0] if row else 0


def test_a_word_index_built_unstemmed_is_rebuilt_stemmed_by_the_upgrade_and_back_by_its_reverse():
    migrate_to(BEFORE_STEMMING)
    try:
        with connection.cursor() as cursor:
            insert_old_rows(cursor, [[*old_row("project_gateway.md", {}), ""]], ("origin_session",))
            cursor.execute("SELECT id FROM memory_catalog_entries WHERE filename = 'project_gateway.md'")
            entry = cursor.fetchone()[0]
            cursor.execute("INSERT INTO memory_chunks (entry_id, ordinal, name, description, body, vector_model) "
                           "VALUES (%s, 0, 'Gateway', 'Setup', %s, '')",
                           [entry, "The gateway configuration lives in the infra repo."])
            chunk = cursor.lastrowid
        assert _matches('"configured"') == [] and _matches('"configuration"') == [chunk]
        before = _generation()
        migrate_to(WITH_STEMMING)
        # The rows indexed before are found by any inflection, with no reindex; what was cached is not served.
        assert _matches('"configured"') == [chunk] and _matches('"lived"') == [chunk]
        assert _generation() == before + 1
        migrate_to(BEFORE_STEMMING)
        assert _matches('"configured"') == [] and _matches('"configuration"') == [chunk]
    finally:
        migrate_to_latest()
