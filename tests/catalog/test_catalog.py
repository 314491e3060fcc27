"""The catalog is a projection of the disk: reindex re-derives it, health reports drift, hand edits are audited."""

from __future__ import annotations

import os

import pytest
from django.db import connection

from memory.models import CatalogEntry, Chunk, Decision
from tests import helpers as h

pytestmark = pytest.mark.django_db

ROW_FIELDS = ("root_key", "scope", "workspace_id", "agent_name", "agent_tier", "filename", "type", "slug",
              "entity_key", "name", "description", "body_key", "content_hash", "size", "mtime_ns", "is_system",
              "frontmatter", "created_at", "updated_at")


def catalog_rows():
    entries = sorted(CatalogEntry.objects.values_list(*ROW_FIELDS), key=lambda row: (row[0], row[5]))
    chunks = sorted(Chunk.objects.values_list("entry__root_key", "entry__filename", "name", "description", "body"))
    return entries, chunks


def fts_rows(table):
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT c.body FROM {table} f JOIN memory_chunks c ON c.id = f.rowid "
                       f"WHERE {table} MATCH %s ORDER BY c.body", ['"zebra"'])
        return [row[0] for row in cursor.fetchall()]


@pytest.fixture
def ws_with_memories(home, workspace_dir):
    """The workspace directory with four memories written: two in the workspace, two in the reviewer's tiers."""
    h.write(workspace_dir, name="Zebra Crossing", content="The zebra crossing is near the office.")
    h.write(workspace_dir, name="Coffee", type="user", content="The user drinks espresso with zebra mugs.")
    h.write(workspace_dir, name="Tone", scope="agent", agent_name="reviewer",
            content="Keep review comments terse.", type="feedback")
    h.write(workspace_dir, name="Lang", scope="agent", agent_name="reviewer", agent_tier="global",
            content="Reviews are written in English.", type="feedback")
    return workspace_dir


def test_the_migrations_create_both_fts5_tables_with_their_tokenizers(ws_with_memories):
    with connection.cursor() as cursor:
        cursor.execute("SELECT sql FROM sqlite_master WHERE name IN ('memory_fts_unicode', 'memory_fts_trigram')")
        sql = " ".join(row[0] for row in cursor.fetchall())
    assert "unicode61 remove_diacritics 2" in sql and "trigram" in sql


def test_incremental_indexing_and_a_full_reindex_produce_identical_rows(ws_with_memories):
    incremental = catalog_rows()
    fts_before = (fts_rows("memory_fts_unicode"), fts_rows("memory_fts_trigram"))
    report = h.reindex(ws_with_memories)
    assert report["external_decisions"] == 0
    assert catalog_rows() == incremental
    assert (fts_rows("memory_fts_unicode"), fts_rows("memory_fts_trigram")) == fts_before
    assert len(fts_before[0]) == 2


def test_health_reports_drift_both_ways_and_reindex_repairs_it(ws_with_memories, memory_root):
    assert h.health(ws_with_memories)["status"] == "ok"
    memory_dir = memory_root
    # A row without a file:
    (memory_dir / "project_zebra_crossing.md").unlink()
    # A file without a row (copied in by hand):
    source = (memory_dir / "MEMORY.md").parent
    text = ("---\nname: Handmade\ndescription: Written in an editor\ntype: project\nscope: workspace\n---\n\n"
            "Typed by a person in vim.\n")
    (source / "project_handmade.md").write_text(text)
    report = h.health(ws_with_memories)
    assert report["status"] == "degraded"
    assert report["orphaned_files"] == 1 and report["unindexed_files"] == 1
    h.reindex(ws_with_memories)
    after = h.health(ws_with_memories)
    assert after["status"] == "ok", after
    assert set(CatalogEntry.objects.filter(root_key__startswith="workspace:").values_list("filename", flat=True)) == {
        "project_handmade.md"}
    index = (memory_dir / "MEMORY.md").read_text()
    assert "project_handmade.md" in index and "project_zebra_crossing.md" not in index


def test_a_hand_edit_becomes_a_file_origin_decision_whose_prior_content_comes_from_the_log(ws_with_memories,
                                                                                           memory_root):
    path = memory_root / "project_zebra_crossing.md"
    original = path.read_text()
    path.write_text(original.replace("near the office", "behind the station"))
    report = h.reindex(ws_with_memories)
    assert report["external_decisions"] == 1
    decision = Decision.objects.get(origin="file")
    assert decision.op == "update"
    assert decision.prior_content == original
    assert decision.post_content == path.read_text()
    assert decision.applied_at is not None
    shown = h.show(ws_with_memories, filename="project_zebra_crossing.md")["memory"]["content"]
    assert "behind the station" in shown
    # A deletion in the file manager is audited too.
    path.unlink()
    h.reindex(ws_with_memories)
    deletion = Decision.objects.filter(origin="file", op="delete").get()
    assert "behind the station" in deletion.prior_content
    events = h.decision_list(ws_with_memories, filename="project_zebra_crossing.md")["decisions"]
    assert [d["origin"] for d in events] == ["file", "file", "cli"]


def test_a_hand_edit_before_a_write_is_recorded_before_the_write(ws_with_memories, memory_root):
    path = memory_root / "project_zebra_crossing.md"
    path.write_text(path.read_text().replace("near the office", "by the river"))
    edited = path.read_text()
    result = h.write(ws_with_memories, name="Zebra Crossing", content="The zebra crossing moved to the park.")
    write = Decision.objects.get(id=result["decision"]["id"])
    assert write.prior_content == edited
    assert Decision.objects.filter(origin="file").count() == 1


def test_a_symlink_pointing_outside_the_root_is_refused_everywhere(ws_with_memories, tmp_path, memory_root):
    outside = tmp_path / "outside.md"
    outside.write_text("---\nname: X\ndescription: Y\ntype: project\nscope: workspace\n---\n\nsecret\n")
    link = memory_root / "project_link.md"
    os.symlink(outside, link)
    from memory.domain.errors import ValidationError

    with pytest.raises(ValidationError) as error:
        h.show(ws_with_memories, filename="project_link.md")
    assert error.value.details["reason"] == "symlink_escape"
    with pytest.raises(ValidationError):
        h.write(ws_with_memories, name="Link", content="Overwrite through the link.")
    with pytest.raises(ValidationError):
        h.delete(ws_with_memories, filename="project_link.md")
    assert outside.read_text().endswith("secret\n")
    report = h.reindex(ws_with_memories)
    assert {"root_key": report["roots"][2]["root_key"], "filename": "project_link.md", "reason": "symlink_escape"} in \
        report["invalid"] or any(i["filename"] == "project_link.md" for i in report["invalid"])
    assert not CatalogEntry.objects.filter(filename="project_link.md").exists()


def test_a_file_already_listed_in_memory_md_is_not_listed_twice_when_its_hand_edit_is_recorded(
        home, workspace_dir, memory_root):
    h.write(workspace_dir, name="Seed", content="Creates the workspace and its index.")
    memory_dir = memory_root
    text = ("---\nname: Carried Over\ndescription: From an earlier database\ntype: project\nscope: workspace\n---\n\n"
            "Written before this database existed.\n")
    (memory_dir / "project_carried_over.md").write_text(text)
    index = memory_dir / "MEMORY.md"
    index.write_text(index.read_text() + "- [Carried Over](project_carried_over.md) — From an earlier database\n")
    h.write(workspace_dir, name="Carried Over", description="From an earlier database",
            content="Updated through the controller now.")
    listed = [line for line in index.read_text().splitlines() if "(project_carried_over.md)" in line]
    assert len(listed) == 1


@pytest.mark.parametrize("frontmatter", [
    "name: No scope\ndescription: d\ntype: project",  # a missing scope used to abort the whole reindex
    "name: Bad tier\ndescription: d\ntype: project\nscope: agent\nagent: reviewer",
    "name: Bad type\ndescription: d\ntype: nonsense\nscope: workspace",
])
def test_a_file_with_invalid_frontmatter_is_reported_and_never_stops_reindex_or_health(ws_with_memories, frontmatter,
                                                                                       memory_root):
    (memory_root / "project_broken.md").write_text(f"---\n{frontmatter}\n---\nBody.\n")
    h.write(ws_with_memories, name="Later Write", content="A write after the broken file appeared.")
    report = h.reindex(ws_with_memories)
    assert [item["filename"] for item in report["invalid"]] == ["project_broken.md"]
    assert report["indexed"] >= 2
    health = h.health(ws_with_memories)
    assert [item["filename"] for item in health["invalid_files"]] == ["project_broken.md"]
    assert not CatalogEntry.objects.filter(filename="project_broken.md").exists()


def test_recall_reads_through_the_fast_cursor_give_what_django_s_cursor_gives(ws_with_memories):
    # Recall reads through memory.catalog.sql's cursor: the same rows and converted values (timestamps as
    # datetimes), a literal %% rewritten as Django does, Django's exceptions, and the same connection, so the
    # caller's uncommitted rows are seen (these tests run inside a transaction).
    from django.db import OperationalError

    from memory.catalog import fts, sql

    statement = ("SELECT e.id, e.filename, e.updated_at, c.body FROM memory_catalog_entries e "
                 "JOIN memory_chunks c ON c.entry_id = e.id WHERE e.filename LIKE %s AND '100%%' = %s ORDER BY e.id")
    params = ["%.md", "100%"]
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        expected = cursor.fetchall()
    assert len(expected) == 4 and all(type(row[2]).__name__ == "datetime" for row in expected)
    with sql.cursor() as cursor:
        assert isinstance(cursor, sql.Cursor)
        assert fts._rows(cursor, statement, params) == expected
        with pytest.raises(OperationalError):
            fts._rows(cursor, "SELECT * FROM no_such_table WHERE x = %s", [1])
        cursor.execute("INSERT INTO memory_state (key, value) VALUES (%s, %s)", ["test_raw_read", "seen"])
        assert fts._rows(cursor, "SELECT value FROM memory_state WHERE key = %s", ["test_raw_read"]) == [("seen",)]


def test_recall_reads_run_as_given_on_a_cursor_that_is_not_django_s(ws_with_memories):
    # The benchmarks hand the catalog a recording cursor (search_bench's floor): it gets the statement as written.
    from memory.catalog import fts

    class Recording:
        def __init__(self):
            self.statements = []

        def execute(self, sql, params):
            self.statements.append((sql, params))

        def fetchall(self):
            return [(1,)]

    recording = Recording()
    assert fts._rows(recording, "SELECT %s", [1]) == [(1,)]
    assert recording.statements == [("SELECT %s", [1])]
