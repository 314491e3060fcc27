"""Chunk vectors are derived like the rest of the catalog: on write, edit, delete, revert and reindex, stored
beside each chunk with the model that made them, reported by health when missing or from another model."""

from __future__ import annotations

import math

import numpy as np
import pytest
from django.db import connection

from memory.catalog.vectors import chunk_text, model_id
from memory.domain.passages import SPLIT_WORDS
from memory.providers.embeddings import LocalEmbedder
from tests import helpers as h
from tests.catalog.helpers import SECTIONS, long_body
from tests.providers.fake_embeddings import FakeEmbeddings

pytestmark = pytest.mark.django_db

def chunks(filename: str) -> list[tuple[int, str, str, str, bytes | None, str]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT c.ordinal, c.name, c.description, c.body, c.vector, c.vector_model "
                       "FROM memory_chunks c JOIN memory_catalog_entries e ON e.id = c.entry_id "
                       "WHERE e.filename = %s ORDER BY c.ordinal", [filename])
        return [(o, n, d, b, bytes(v) if v is not None else None, m) for o, n, d, b, v, m in cursor.fetchall()]


def assert_vectors_match_text(rows) -> None:
    assert rows
    expected, _sets = LocalEmbedder().embed_with_tokens([chunk_text(name, description, body)
                                                         for _o, name, description, body, _v, _m in rows])
    for (_ordinal, _name, _description, _body, vector, model), want in zip(rows, expected, strict=True):
        assert model == model_id() and model.startswith("wordllama")
        assert np.allclose(np.frombuffer(vector, dtype=np.float32), want, atol=1e-6)


def filled(report) -> int:
    return sum(root["vectors_filled"] for root in report["roots"])


def test_a_write_stores_a_vector_of_each_chunk_with_its_model(ws):
    filename = h.write(ws, name="Backups", content=long_body())["decision"]["target_filename"]
    rows = chunks(filename)
    assert len(rows) == len(SECTIONS) and "".join(row[3] for row in rows) == long_body().strip()
    assert_vectors_match_text(rows)


def test_an_edit_replaces_the_vectors_and_a_delete_removes_them(ws):
    filename = h.write(ws, name="Backups",
                       content="Backups run nightly from the standby.")["decision"]["target_filename"]
    before = chunks(filename)
    h.edit(ws, filename=filename, content="Restores are rehearsed every week on a scratch machine.")
    after = chunks(filename)
    assert after[0][4] != before[0][4]
    assert_vectors_match_text(after)
    h.delete(ws, filename=filename)
    assert chunks(filename) == []


def test_a_revert_brings_back_the_previous_vectors(ws):
    filename = h.write(ws, name="Backups",
                       content="Backups run nightly from the standby.")["decision"]["target_filename"]
    original = chunks(filename)
    edited = h.edit(ws, filename=filename, content="Restores are rehearsed every week on a scratch machine.")
    h.revert(ws, edited["decision"]["id"])
    assert chunks(filename) == original


def test_reindex_and_rebuild_derive_the_same_chunks_and_vectors_as_incremental_indexing(ws):
    long_name = h.write(ws, name="Backups", content=long_body())["decision"]["target_filename"]
    short_name = h.write(ws, name="Alerts", content="Page the on-call when WAL archiving lags.")["decision"][
        "target_filename"]
    incremental = (chunks(long_name), chunks(short_name))
    h.reindex(ws)
    assert (chunks(long_name), chunks(short_name)) == incremental
    h.reindex(ws, rebuild=True)
    assert (chunks(long_name), chunks(short_name)) == incremental


def test_health_reports_vectors_of_another_model_and_reindex_replaces_them(ws):
    filename = h.write(ws, name="Backups", content=long_body())["decision"]["target_filename"]
    assert h.health(ws)["status"] == "ok"
    with connection.cursor() as cursor:
        cursor.execute("UPDATE memory_chunks SET vector_model = 'some-other-model'")
    health = h.health(ws)
    assert health["status"] == "degraded"
    assert health["vectors"] == {"model": model_id(), "chunks": len(SECTIONS), "missing": 0,
                                 "other_model": len(SECTIONS), "missing_tokens": 0}
    assert f"{len(SECTIONS)} chunk(s) with a vector from another model than {model_id()}" in health["reason"]
    assert filled(h.reindex(ws)) == len(SECTIONS)
    assert h.health(ws)["status"] == "ok"
    assert_vectors_match_text(chunks(filename))


def test_a_write_while_the_embedder_fails_is_kept_without_vectors_until_reindex_fills_them(ws, monkeypatch):
    fake = FakeEmbeddings()
    try:
        fake.status = 500
        monkeypatch.setenv("COMPOZY_MEMORY__EMBEDDER__KIND", "openai")
        monkeypatch.setenv("COMPOZY_MEMORY__EMBEDDER__BASE_URL", fake.url)
        monkeypatch.setenv("COMPOZY_MEMORY__EMBEDDER__MODEL", "fake")
        written = h.write(ws, name="Backups", content="Backups run nightly from the standby.")
        assert written["applied"] is True
        filename = written["decision"]["target_filename"]
        assert [(row[4], row[5]) for row in chunks(filename)] == [(None, "")]
        health = h.health(ws)
        assert health["status"] == "degraded" and health["vectors"]["missing"] == 1
        assert "1 chunk(s) without a vector" in health["reason"]
        fake.status = 200
        assert filled(h.reindex(ws)) == 1
        assert chunks(filename)[0][5] == "openai:fake"
        assert h.health(ws)["status"] == "ok"
    finally:
        fake.close()


def test_with_the_embedder_turned_off_nothing_is_embedded_and_health_does_not_ask_for_vectors(ws, monkeypatch):
    monkeypatch.setenv("COMPOZY_MEMORY__EMBEDDER__KIND", "none")
    filename = h.write(ws, name="Backups",
                       content="Backups run nightly from the standby.")["decision"]["target_filename"]
    assert [(row[4], row[5]) for row in chunks(filename)] == [(None, "")]
    health = h.health(ws)
    assert health["status"] == "ok" and health["vectors"]["model"] == "" and health["vectors"]["missing"] == 0


def test_a_long_body_becomes_several_chunks_each_indexed_in_both_fts_tables(ws):
    body = long_body()
    assert len(body.split()) > SPLIT_WORDS
    h.write(ws, name="Backups", content=body)
    for table in ("memory_fts_unicode", "memory_fts_trigram"):
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT c.ordinal FROM {table} f JOIN memory_chunks c ON c.id = f.rowid "
                           f"WHERE {table} MATCH %s", ['"backupdrills7"'])
            assert cursor.fetchall() == [(len(SECTIONS) - 1,)]


def test_search_reads_only_new_vectors_after_a_write_and_forgets_deleted_ones(ws):
    from memory.catalog import vectors
    from memory.catalog.indexer import current_generation

    first = h.write(ws, name="Backups", content="Backups run nightly from the standby.")["decision"]["target_filename"]
    h.write(ws, name="Alerts", content="Page the on-call when WAL archiving lags.")
    root_key = [key for key in _root_keys() if key.startswith("workspace:")][0]
    before = vectors.root_matrix(root_key, current_generation(), model_id())
    assert len(before.chunk_ids) == 2 and list(before.chunk_ids) == sorted(before.chunk_ids)
    h.delete(ws, filename=first)
    h.write(ws, name="Restores", content=long_body("restore"))
    after = vectors.root_matrix(root_key, current_generation(), model_id())
    with connection.cursor() as cursor:
        cursor.execute("SELECT c.id, c.vector FROM memory_chunks c JOIN memory_catalog_entries e "
                       "ON e.id = c.entry_id WHERE e.root_key = %s ORDER BY c.id", [root_key])
        stored = cursor.fetchall()
    assert list(after.chunk_ids) == [chunk for chunk, _vector in stored] and len(stored) == 1 + len(SECTIONS)
    assert np.array_equal(after.matrix, np.stack([np.frombuffer(bytes(v), dtype=np.float32) for _c, v in stored]))


def _root_keys() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT root_key FROM memory_catalog_entries")
        return [row[0] for row in cursor.fetchall()]


def chunk_ids(filename: str) -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT c.id FROM memory_chunks c JOIN memory_catalog_entries e ON e.id = c.entry_id "
                       "WHERE e.filename = %s ORDER BY c.ordinal", [filename])
        return [row[0] for row in cursor.fetchall()]


def fts_integrity_holds() -> bool:
    with connection.cursor() as cursor:
        for table in ("memory_fts_unicode", "memory_fts_trigram"):
            # Raises (SQLITE_CORRUPT_VTAB) when the index and memory_chunks disagree.
            cursor.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")
    return True


def test_an_edited_memorys_chunks_take_ids_never_used_before_and_no_later_chunk_reuses_them(ws):
    """The recall caches (catalog.owners, vectors.root_matrix) trust that a chunk id never changes its text or
    vector: a rewritten chunk moves to a new id above every earlier one, also when the memory is deleted next."""
    filename = h.write(ws, name="Backups", content=long_body())["decision"]["target_filename"]
    seen = chunk_ids(filename)
    shorter = long_body()[: len(long_body()) * 4 // 5]  # four passages: four rows rewritten, one deleted
    short = long_body().partition("## Alerts")[0]  # one passage: one row rewritten, three deleted
    for body in (shorter, short, long_body("restore")):  # then five: one rewritten, four inserted
        h.edit(ws, filename=filename, content=body)
        ids = chunk_ids(filename)
        assert min(ids) > max(seen) and ids == sorted(ids)
        assert_vectors_match_text(chunks(filename))
        assert fts_integrity_holds()
        seen += ids
    assert len(chunks(filename)) == len(SECTIONS)
    h.delete(ws, filename=filename)
    later = h.write(ws, name="Alerts", content="Page the on-call when WAL archiving lags.")
    assert min(chunk_ids(later["decision"]["target_filename"])) > max(seen)


def test_stale_vectors_are_embedded_again_without_a_reindex_and_a_fresh_catalog_is_left_alone(ws, monkeypatch):
    from memory.catalog.indexer import current_generation
    from memory.services import catalog
    from memory.services.catalog import catalog_refresh_vectors

    monkeypatch.setattr(catalog, "REFRESH_BATCH", 2)  # batches of two chunks, each under the lock on its own

    filename = h.write(ws, name="Backups", content=long_body())["decision"]["target_filename"]
    generation = current_generation()
    assert catalog_refresh_vectors() == 0 and current_generation() == generation  # nothing stale: nothing done
    with connection.cursor() as cursor:
        # As after an upgrade that changed how vectors are made, and one chunk stored before token sets.
        cursor.execute("UPDATE memory_chunks SET vector_model = 'wordllama/l2_supercat_256'")
        cursor.execute("UPDATE memory_chunks SET tokens = NULL WHERE ordinal = 0")
    assert h.health(ws)["status"] == "degraded"
    assert catalog_refresh_vectors() == len(SECTIONS)
    # One generation per batch that filled chunks: recall's per-generation caches read the new vectors.
    assert current_generation() == generation + math.ceil(len(SECTIONS) / 2)
    assert h.health(ws)["status"] == "ok"
    assert_vectors_match_text(chunks(filename))
    assert catalog_refresh_vectors() == 0


def test_serve_refreshes_stale_vectors_then_builds_the_neighbour_table_and_one_failing_does_not_stop_the_other(
        monkeypatch, caplog):
    from memory.management.commands import serve
    from memory.services import catalog, recall

    done = []

    def refresh_fails() -> int:
        done.append("vectors")
        raise RuntimeError("disk full")

    monkeypatch.setattr(catalog, "catalog_refresh_vectors", refresh_fails)
    monkeypatch.setattr(recall, "recall_prepare", lambda: done.append("table") or True)
    said = []
    with caplog.at_level("ERROR"):
        serve._prepare_recall(said.append)
    assert done == ["vectors", "table"]
    assert "stale vectors were not refreshed at start-up" in caplog.text and said == []
    monkeypatch.setattr(catalog, "catalog_refresh_vectors", lambda: 3)
    serve._prepare_recall(said.append)
    assert len(said) == 1 and said[0].startswith("Embedded 3 chunk(s) again")
