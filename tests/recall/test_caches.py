"""Recall keeps derived state in the process between queries (each root's chunk vectors, each term's document
counts, which memory and root each chunk belongs to), keyed by the memory generation. Every write, edit, delete,
revert and reindex must make the next search see the catalog as it now is: a stale vector or count is never
served."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection

from memory.catalog import owners, vectors
from memory.catalog.indexer import current_generation
from memory.recall import pipeline
from memory.recall.query import parse_query
from tests import helpers as h
from tests.recall import helpers as r

pytestmark = pytest.mark.django_db


def workspace_root_key() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT root_key FROM memory_catalog_entries WHERE root_key LIKE 'workspace:%'")
        return cursor.fetchone()[0]


def stored_vectors(root_key: str) -> tuple[list[int], np.ndarray]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT c.id, c.vector FROM memory_chunks c JOIN memory_catalog_entries e ON e.id = c.entry_id "
                       "WHERE e.root_key = %s AND e.is_system = 0 ORDER BY c.id", [root_key])
        rows = cursor.fetchall()
    return [chunk for chunk, _vector in rows], np.stack([np.frombuffer(bytes(v), dtype=np.float32) for _c, v in rows])


def assert_matrix_is_current(root_key: str) -> None:
    """What search would use now equals what the catalog holds now, chunk by chunk (system files aside)."""
    served = vectors.root_matrix(root_key, current_generation(), vectors.model_id())
    ids, matrix = stored_vectors(root_key)
    visible = ~served.system
    assert served.chunk_ids[visible].tolist() == ids
    assert np.array_equal(served.matrix[visible], matrix)


def classify(word: str) -> tuple[set[str], set[str], set[str]]:
    with connection.cursor() as cursor:
        return pipeline.classify_terms(cursor, parse_query(word), current_generation())


def test_the_vector_matrix_follows_every_write_edit_delete_revert_and_reindex(ws, memory_root):
    first = h.write(ws, name="Backups", content="Backups run nightly from the standby.")["decision"]
    root_key = workspace_root_key()
    assert_matrix_is_current(root_key)
    second = h.write(ws, name="Alerts", content="Page the on-call when WAL archiving lags.")["decision"]
    assert_matrix_is_current(root_key)
    edited = h.edit(ws, filename=first["target_filename"], content="Restores are rehearsed every Thursday.")
    assert_matrix_is_current(root_key)
    h.revert(ws, edited["decision"]["id"])
    assert_matrix_is_current(root_key)
    h.delete(ws, filename=second["target_filename"])
    assert_matrix_is_current(root_key)
    # A hand edit taken in by reindex, then a rebuild that derives every row again.
    path = memory_root / first["target_filename"]
    path.write_text(path.read_text("utf-8").replace("Backups run nightly", "Snapshots are taken hourly"), "utf-8")
    h.reindex(ws)
    assert_matrix_is_current(root_key)
    h.reindex(ws, rebuild=True)
    assert_matrix_is_current(root_key)


def test_term_counts_are_taken_again_after_a_write_an_edit_a_delete_and_a_reindex(ws, memory_root):
    # "zebrafish" is unfound (no memory holds the word), then rare once one does, and unfound again when it goes.
    assert classify("zebrafish")[2] == {"zebrafish"}
    filename = h.write(ws, name="Lab", content="The zebrafish tanks are cleaned on Mondays.")["decision"][
        "target_filename"]
    assert classify("zebrafish") == (set(), {"zebrafish"}, set())
    h.edit(ws, filename=filename, content="The tanks are cleaned on Mondays.")
    assert classify("zebrafish")[2] == {"zebrafish"}
    path = memory_root / filename
    path.write_text(path.read_text("utf-8").replace("The tanks", "The zebrafish tanks"), "utf-8")
    h.reindex(ws)
    assert classify("zebrafish")[2] == set()
    h.delete(ws, filename=filename)
    assert classify("zebrafish")[2] == {"zebrafish"}


def test_a_term_becomes_common_once_enough_memories_hold_it(ws):
    # Common means matched by at least 20 memories (and half of all): counted again as memories are written.
    for index in range(12):
        h.write(ws, name=f"Note {index}", content=f"Entry {index} mentions the pipeline and item{index}.")
    assert classify("pipeline")[:2] == (set(), {"pipeline"})
    for index in range(12, 24):
        h.write(ws, name=f"Note {index}", content=f"Entry {index} mentions the pipeline and item{index}.")
    assert classify("pipeline")[:2] == ({"pipeline"}, set())


def owners_from_database(root_keys: list[str], include_system: bool) -> dict[int, int]:
    """{chunk id: entry id} of every chunk of these roots, as the database says now."""
    system = "" if include_system else " AND e.is_system = 0"
    with connection.cursor() as cursor:
        cursor.execute("SELECT c.id, c.entry_id FROM memory_chunks c JOIN memory_catalog_entries e "
                       f"ON e.id = c.entry_id WHERE e.root_key IN ({', '.join('%s' for _ in root_keys)}){system}",
                       root_keys)
        return dict(cursor.fetchall())


def every_chunk_id() -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM memory_chunks")
        return [row[0] for row in cursor.fetchall()]


def assert_owners_are_current(root_keys: list[str]) -> None:
    """Which chunks recall treats as visible, and whose, equals what the catalog says, with and without system
    files, asked about every chunk of the database (other roots' included)."""
    with connection.cursor() as cursor:
        known = owners.owners(cursor, root_keys, current_generation())
        for include_system in (False, True):
            served = known.visible(cursor, every_chunk_id(), include_system=include_system)
            assert served == owners_from_database(root_keys, include_system)


def test_the_chunk_owners_follow_every_write_edit_delete_revert_and_reindex(ws, home, tmp_path, memory_root):
    first = h.write(ws, name="Backups", content="Backups run nightly from the standby.")["decision"]
    root_key = workspace_root_key()
    roots = ["global", root_key]
    assert_owners_are_current(roots)
    # Another workspace's memories are in the same tables and must never count as visible here.
    other = tmp_path / "other"
    (other / ".git").mkdir(parents=True)
    r.ensure_workspace(other)
    h.write(other, name="Other", content="Backups of the other project.")
    assert_owners_are_current(roots)
    second = h.write(ws, name="Alerts", content="Page the on-call when WAL archiving lags.")["decision"]
    assert_owners_are_current(roots)
    edited = h.edit(ws, filename=first["target_filename"], content="Restores are rehearsed every Thursday. " * 80)
    assert_owners_are_current(roots)
    h.revert(ws, edited["decision"]["id"])
    assert_owners_are_current(roots)
    h.delete(ws, filename=second["target_filename"])
    assert_owners_are_current(roots)
    h.reindex(ws, rebuild=True)
    assert_owners_are_current(roots)
    # A system file's chunks belong to the root but are visible only with include_system.
    r.put(memory_root, "_system/dreaming/project_dream_artifact.md", name="Dream artifact",
          body="Consolidation notes from the nightly dream.")
    h.reindex(ws, include_system=True)
    assert_owners_are_current(roots)


def test_chunks_written_after_the_owners_were_read_are_asked_of_the_database(ws):
    h.write(ws, name="Backups", content="Backups run nightly from the standby.")
    roots = ["global", workspace_root_key()]
    with connection.cursor() as cursor:
        before = owners.owners(cursor, roots, current_generation())
    # A write that commits between reading the generation and the FTS5 query: its chunks are newer than `before`.
    h.write(ws, name="Alerts", content="Page the on-call when WAL archiving lags.")
    with connection.cursor() as cursor:
        assert before.visible(cursor, every_chunk_id(), include_system=False) == owners_from_database(roots, False)


def holding(roots: list[str]) -> list[str]:
    with connection.cursor() as cursor:
        return owners.owners(cursor, roots, current_generation()).holding_memories()


def test_the_roots_holding_memories_follow_writes_and_leave_out_system_files(ws, home):
    h.write(ws, name="Backups", content="Backups run nightly from the standby.")
    roots = ["global", workspace_root_key()]
    # Shadowing needs a second root holding memories; recall skips the lookup while only one does.
    assert holding(roots) == [roots[1]]
    # A root holding only a system file holds no memory.
    r.put(r.global_root(home), "_system/dreaming/project_dream_artifact.md", name="Dream artifact",
          body="Consolidation notes from the nightly dream.")
    h.reindex(ws, include_system=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM memory_catalog_entries WHERE root_key = 'global' AND is_system = 1")
        assert cursor.fetchone()[0] == 1
    assert holding(roots) == [roots[1]]
    h.write(ws, name="Standards", content="Every service logs in JSON.", scope="global")
    assert holding(roots) == roots


def test_rows_kept_per_generation_carry_the_current_recall_signal_and_equal_a_fresh_read(ws, memory_root):
    from memory.catalog import fts

    root = memory_root
    for index in range(3):
        r.put(root, f"project_row_{index}.md", name=f"Row {index}", body=f"Kept rows {index} answer again.")
    h.reindex(ws)
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM memory_chunks ORDER BY id")
        chunks = [row[0] for row in cursor.fetchall()]
        kept = fts.RowCache()
        first = sorted(fts.chunk_rows(cursor, chunks, rows=kept))
        assert len(kept.rows) == len(chunks) and first == sorted(fts.chunk_rows(cursor, chunks))
        assert all(row[-1] is None for row in first)  # no recall yet
    # A recall records signals (no generation change): rows served from what was kept carry the new ones.
    assert r.filenames(r.search(ws, "kept rows answer"))
    with connection.cursor() as cursor:
        again = sorted(fts.chunk_rows(cursor, chunks, rows=kept))
        assert again == sorted(fts.chunk_rows(cursor, chunks))
        assert any(row[-1] is not None for row in again)
        # A chunk gone (deleted since) has no row, kept or not.
        assert fts.chunk_rows(cursor, [max(chunks) + 1000], rows=kept) == []
        # Ranking columns: from the whole rows kept, from the ranking rows kept, and read, all alike.
        fresh = sorted(fts.chunk_ranking_rows(cursor, chunks))
        assert sorted(fts.chunk_ranking_rows(cursor, chunks, rows=kept)) == fresh
        only_ranked = fts.RowCache()
        assert sorted(fts.chunk_ranking_rows(cursor, chunks, rows=only_ranked)) == fresh
        assert len(only_ranked.ranking) == len(chunks)
        assert sorted(fts.chunk_ranking_rows(cursor, chunks, rows=only_ranked)) == fresh
        assert any(row[-1] is not None for row in fresh)
