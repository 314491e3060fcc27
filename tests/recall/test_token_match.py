"""The token-match list: token sets stored beside each chunk's vector, a question token's neighbours, passages scored
by the question tokens they hold or hold a neighbour of, and the list's part in recall."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection

from memory.catalog import vectors
from memory.catalog.indexer import current_generation
from memory.catalog.vectors import chunk_text
from memory.providers.embeddings import LocalEmbedder
from memory.recall import token_match
from memory.recall.token_match import (
    MIN_COSINE,
    NEIGHBOURS,
    build_table,
    neighbour_table,
    question_token_ids,
    score_passages,
    table_path,
)
from tests import helpers as h
from tests.catalog.helpers import SECTIONS, long_body
from tests.recall import helpers as r

pytestmark = pytest.mark.django_db


def token_sets(filename: str) -> list[tuple[str, str, str, bytes | None]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT c.name, c.description, c.body, c.tokens FROM memory_chunks c "
                       "JOIN memory_catalog_entries e ON e.id = c.entry_id WHERE e.filename = %s ORDER BY c.ordinal",
                       [filename])
        return [(n, d, b, bytes(t) if t is not None else None) for n, d, b, t in cursor.fetchall()]


def ids_of(text: str) -> set[int]:
    _table, tokenizer = LocalEmbedder._model()
    return set(tokenizer.encode(text, add_special_tokens=False).ids)


def one_set(text: str) -> bytes:
    return LocalEmbedder().embed_with_tokens([text])[1][0]


def test_each_chunk_stores_its_distinct_token_ids_in_order_from_the_text_its_vector_stands_for(ws):
    filename = h.write(ws, name="Backups", content=long_body())["decision"]["target_filename"]
    rows = token_sets(filename)
    assert len(rows) == len(SECTIONS)
    for name, description, body, tokens in rows:
        stored = np.frombuffer(tokens, dtype=np.uint16)
        assert list(stored) == sorted(ids_of(chunk_text(name, description, body)))


def test_a_chunk_stored_without_its_token_set_gets_it_from_reindex_and_search_reads_it(ws):
    filename = h.write(ws, name="Backups", content="Backups run nightly from the standby.")["decision"][
        "target_filename"]
    expected = token_sets(filename)[0][3]
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT e.root_key FROM memory_catalog_entries e WHERE e.filename = %s", [filename])
        root_key = cursor.fetchone()[0]
    before = vectors.root_matrix(root_key, current_generation(), vectors.model_id())
    assert before.tokens.tolist() == [expected]
    with connection.cursor() as cursor:  # as a catalog from before migration 0020 holds it
        cursor.execute("UPDATE memory_chunks SET tokens = NULL")
    vectors.forget_matrices()
    stale = vectors.root_matrix(root_key, current_generation(), vectors.model_id())
    assert stale.tokens.tolist() == [b""]
    health = h.health(ws)
    assert health["status"] == "degraded" and health["vectors"]["missing_tokens"] == 1
    assert "1 chunk(s) without a token set" in health["reason"] and "compozy memory reindex" in health["reason"]
    h.reindex(ws)
    assert token_sets(filename)[0][3] == expected
    assert h.health(ws)["status"] == "ok" and h.health(ws)["vectors"]["missing_tokens"] == 0
    h.write(ws, name="Alerts", content="Page the on-call when WAL archiving lags.")  # a new generation
    after = vectors.root_matrix(root_key, current_generation(), vectors.model_id())
    assert expected in after.tokens.tolist() and b"" not in after.tokens.tolist()


def test_a_question_token_is_its_own_nearest_neighbour_among_its_variants():
    embedder = LocalEmbedder()
    question = question_token_ids(embedder, "Which methods does the parser use?")
    _table, tokenizer = LocalEmbedder._model()
    pieces = [tokenizer.id_to_token(token) for token in question]
    assert "▁methods" in pieces and "▁the" not in pieces and "?" not in pieces and "▁does" not in pieces
    table = neighbour_table(embedder)
    token = question[pieces.index("▁methods")]
    near = {tokenizer.id_to_token(int(other)): float(value)
            for other, value in zip(table.ids[token], table.cosines[token], strict=True) if value > 0}
    assert table.ids[token][0] == token and near["▁methods"] == pytest.approx(1.0, abs=1e-3)
    assert 0.5 < near["▁method"] < 1.0  # a variant matches, less than the word itself
    assert "▁parser" not in near
    assert len(near) <= NEIGHBOURS and min(near.values()) >= MIN_COSINE - 1e-3
    assert list(table.cosines[token]) == sorted(table.cosines[token], reverse=True)


def test_the_neighbour_table_is_built_once_per_home_and_read_back_from_its_cache():
    embedder = LocalEmbedder()
    # Not the table an earlier test of this process kept (it may have been kept from another cache folder).
    token_match._tables.clear()
    table = neighbour_table(embedder)
    path = table_path(embedder.token_model_id)
    assert path.is_file() and (path.stat().st_mode & 0o777) == 0o600
    # Named by the token table alone: how stored passages are weighed (in the model id) does not change it, so an
    # upgrade that changes the weighing reuses the table already built.
    assert embedder.model_id == embedder.token_model_id + "+zipf" and "zipf" not in path.name
    token_match._tables.clear()
    again = neighbour_table(embedder)
    assert again is not table and np.array_equal(again.ids, table.ids)
    # Built from any unit rows the same way: a token's own row first, then the nearest above MIN_COSINE.
    unit = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0], [-1.0, 0.0]], dtype=np.float32)
    small = build_table(unit)
    assert list(small.ids[0][:2]) == [0, 1] and small.cosines[0][2] == 0  # token 2 is at 0 < MIN_COSINE
    assert list(small.ids[1][:3]) == [1, 0, 2]


def test_the_table_built_from_half_the_products_is_each_rows_nearest_over_the_whole_square(monkeypatch):
    # Several batches, so pairs found beyond a batch must reach the later token; 12 dimensions, so a row has from
    # a few to hundreds of tokens above MIN_COSINE and the cut at NEIGHBOURS is exercised.
    monkeypatch.setattr(token_match, "_BATCH", 128)
    rng = np.random.default_rng(7)
    unit = rng.standard_normal((700, 12)).astype(np.float32)
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    table = build_table(unit)
    similarity = unit @ unit.T
    for token in range(len(unit)):
        near = [(-similarity[token, other], other) for other in range(len(unit))
                if similarity[token, other] >= token_match.MIN_COSINE]
        expected = [other for _minus, other in sorted(near)][: token_match.NEIGHBOURS]
        assert list(table.ids[token][: len(expected)]) == expected
        assert np.allclose(table.cosines[token][: len(expected)], similarity[token, expected], atol=1e-3)
        assert not table.cosines[token][len(expected):].any()


def test_a_passage_holding_the_questions_words_scores_above_one_holding_their_variants_and_one_holding_none():
    question = question_token_ids(LocalEmbedder(), "restore methods")
    sets = [one_set("The restore methods are listed below."),
            one_set("The method to restored copies is below."),
            one_set("Lunch is served at noon in the canteen."),
            b""]
    scores = score_passages(neighbour_table(LocalEmbedder()), question, sets)
    assert scores[0] == pytest.approx(1.0, abs=1e-5)
    assert 0.3 < scores[1] < scores[0]
    assert scores[2] < scores[1] and scores[3] == 0.0


def test_a_rare_question_token_weighs_more_than_one_every_passage_holds():
    question = question_token_ids(LocalEmbedder(), "database vacuum")
    sets = [one_set("The database is large."), one_set("The database grows."), one_set("The database is slow."),
            one_set("Vacuum runs weekly.")]
    scores = score_passages(neighbour_table(LocalEmbedder()), question, sets)
    # "database" is in three of four passages, "vacuum" in one: holding the rare one counts for more.
    assert scores[3] > scores[0] == pytest.approx(scores[1]) == pytest.approx(scores[2])


def test_search_gives_the_token_match_its_part_and_the_list_is_off_with_its_weight_at_zero(ws, monkeypatch):
    h.write(ws, name="Release checklist", content="Tag the release, then publish the wheels to the index.")
    h.write(ws, name="Lunch", content="The team orders lunch on Fridays; the index card lists allergies.")
    h.write(ws, name="Release party", content="A release party follows each major version.")
    h.write(ws, name="Search index", content="The search index is rebuilt nightly.")
    result = r.search(ws, "how are the wheels published for a release")
    top = result["results"][0]
    assert top["memory"]["filename"] == "project_release_checklist.md"
    assert top["why_recalled"]["token"] > 0
    assert top["score"] == pytest.approx(sum(top["why_recalled"].values()), abs=1e-5)
    monkeypatch.setenv("COMPOZY_MEMORY__RECALL__WEIGHTS__TOKEN", "0")
    off = r.search(ws, "how are the wheels published for a release")
    assert all(hit["why_recalled"]["token"] == 0 for hit in off["results"])


def test_the_list_scores_nothing_without_the_local_embedder(ws, monkeypatch):
    h.write(ws, name="Release checklist", content="Tag the release, then publish the wheels to the index.")
    monkeypatch.setenv("COMPOZY_MEMORY__EMBEDDER__KIND", "none")
    result = r.search(ws, "how are the wheels published for a release")
    assert result["results"] and all(hit["why_recalled"]["token"] == 0 for hit in result["results"])


def test_a_memory_is_scored_by_its_best_passage():
    class Root:
        entry_ids = np.array([1, 1, 2], dtype=np.int64)
        chunk_ids = np.array([10, 11, 12], dtype=np.int64)
        tokens = np.array([one_set("Nothing relevant here."), one_set("Vacuum the database weekly."),
                           one_set("The database is large.")], dtype=object)

    found = token_match.token_match(LocalEmbedder(), "database vacuum", [1, 2], [Root()])
    assert found is not None and found.chunks[1] == 11 and found.scores[1] > found.scores[2]


def test_recall_prepare_builds_the_table_ahead_of_a_question_and_needs_none_without_the_local_embedder(monkeypatch):
    from memory.services.recall import recall_prepare

    embedder = LocalEmbedder()
    table_path(embedder.token_model_id).unlink(missing_ok=True)
    token_match._tables.clear()
    assert recall_prepare() is True
    assert table_path(embedder.token_model_id).is_file() and embedder.token_model_id in token_match._tables
    monkeypatch.setenv("COMPOZY_MEMORY__EMBEDDER__KIND", "none")
    assert recall_prepare() is False
