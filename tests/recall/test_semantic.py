"""Recall's semantic list and long memories in passages, end to end through memory_search."""

from __future__ import annotations

import pytest

from tests import helpers as h
from tests.catalog.helpers import SECTIONS
from tests.providers.fake_embeddings import FakeEmbeddings
from tests.recall import helpers as r
from tests.recall.helpers import LIBRARY, QUESTION, hit, put_library

pytestmark = pytest.mark.django_db


def runbook() -> str:
    """A long memory whose sections share a vocabulary; only the last one says how restores are rehearsed."""
    filler = {
        "Backups": "The nightly job copies the database to the bucket and checks the archive size.",
        "Restores": "A restore starts from the newest full copy and replays the archived log.",
        "Retention": "Copies are kept for five weeks; the bucket refuses deletes before then.",
        "Alerts": "The on-call engineer is paged when the archive lags behind the database.",
    }
    parts = [f"## {name}\n\n" + " ".join([text] * 6) + "\n\n" for name, text in filler.items()]
    parts.append("## Drills\n\nEvery Thursday a scratch machine rebuilds the database from the bucket and posts "
                 "the elapsed minutes and row counts to the operations channel.\n")
    return "".join(parts)


def test_a_long_memory_is_found_by_its_matching_passage_which_its_snippet_and_recall_block_show(ws):
    assert SECTIONS[-1] == "Drills"
    body = runbook()
    h.write(ws, name="Database runbook", content=body)
    h.write(ws, name="Chat channels", content="The operations channel is where deploy notices are posted.")
    result = r.search(ws, "who posts elapsed minutes after the thursday rebuild")
    top = result["results"][0]
    assert top["memory"]["filename"] == "project_database_runbook.md"
    assert "thursday" in top["snippet"].lower() and "elapsed minutes" in top["snippet"]
    assert "nightly job" not in top["snippet"]
    # The prompt receives the passage that matched, not the whole runbook, and where to read the rest.
    block = result["recall"]["blocks"][0]
    assert "Every Thursday a scratch machine rebuilds the database" in block and "nightly job" not in block
    assert "`memory show project_database_runbook.md` reads it whole" in block


def test_why_recalled_carries_the_semantic_part_and_the_score_is_the_sum_of_its_parts(ws):
    put_library(ws)
    result = r.search(ws, QUESTION)
    top = result["results"][0]
    assert set(top["why_recalled"]) == {"unicode", "trigram", "semantic", "token", "recency", "signal"}
    assert top["why_recalled"]["semantic"] > 0
    assert top["score"] == pytest.approx(sum(top["why_recalled"].values()), abs=1e-5)
    assert result["warning"] is None


def test_a_new_workspace_s_only_memory_is_credited_for_its_meaning_and_its_tokens(ws):
    # The semantic list's zero is the mean similarity of the visible passages and the token list's the median of its
    # candidates: with one memory both were the memory's own score, so an exact answer read "meaning 0.0, token
    # match 0.0". Too few memories to tell what an unrelated one scores: the zero is the score's own.
    h.write(ws, name="Runtime Docs Location", description="Runtime docs live in the Fumadocs runtime collection",
            content="Runtime docs are authored under `packages/site/content/runtime/` and build to `/runtime/*`.")
    top = r.search(ws, "where do the runtime docs live")["results"][0]
    assert top["memory"]["filename"] == "project_runtime_docs_location.md"
    assert top["why_recalled"]["semantic"] > 0 and top["why_recalled"]["token"] > 0
    assert top["score"] == pytest.approx(sum(top["why_recalled"].values()), abs=1e-5)


def test_a_memory_that_shares_no_word_with_the_question_is_found_through_its_vector(ws):
    put_library(ws, {**LIBRARY, "project_car.md": ("Commute", "Getting to the office",
                                                   "Everyone drives; parking is free behind the office.")})
    result = r.search(ws, "where can I leave my automobile when I arrive at work")
    found = hit(result, "project_car.md")
    assert found["why_recalled"]["unicode"] == 0  # the word index knows none of the question's words there
    assert found["why_recalled"]["semantic"] > 0


def test_a_query_sharing_no_word_with_any_memory_returns_nothing_even_with_vectors(ws):
    put_library(ws)
    assert r.search(ws, "zanzibar quokka")["results"] == []


@pytest.mark.parametrize("status", [500, None])
def test_search_still_answers_from_the_lexical_lists_with_a_warning_when_the_embedder_fails(ws, monkeypatch, status):
    put_library(ws)
    expected = r.filenames(r.search(ws, QUESTION, top_k=3))
    fake = FakeEmbeddings()
    try:
        monkeypatch.setenv("COMPOZY_MEMORY__EMBEDDER__KIND", "openai")
        monkeypatch.setenv("COMPOZY_MEMORY__EMBEDDER__BASE_URL", fake.url)
        monkeypatch.setenv("COMPOZY_MEMORY__EMBEDDER__MODEL", "fake")
        monkeypatch.setenv("COMPOZY_MEMORY__EMBEDDER__TIMEOUT", "200ms")
        if status is None:
            fake.delay = 1.0  # a timeout
        else:
            fake.status = status
        result = r.search(ws, QUESTION, top_k=3)
    finally:
        fake.close()
    assert result["warning"].startswith("semantic candidates unavailable, lexical recall only")
    assert r.filenames(result)[0] == expected[0] == "project_runtime_docs.md"
    assert all(item["why_recalled"]["semantic"] == 0 for item in result["results"])


EXTRA = {
    "project_car.md": ("Commute", "Getting to the office", "Everyone comes by car; parking is free behind the office."),
    "project_bikes.md": ("Bicycles", "Cycling in", "A rack by the side door holds twenty bicycles."),
    "project_train.md": ("Train", "Rail travel", "The station is a ten minute walk from the building."),
    "project_lunch.md": ("Lunch", "Eating out", "The canteen on the ground floor opens at noon."),
    "project_badges.md": ("Badges", "Entry", "Visitors collect a badge from reception before going up."),
}


@pytest.mark.parametrize(("question", "alone"), [
    ("where can I leave my automobile when I arrive at work", "semantic"),  # the car, by its vector alone
    ("where are the runtime docs and the grafanna dashbords", "trigram"),  # the dashboards, by their typos' grams
])
def test_memories_only_the_trigram_or_semantic_list_finds_are_read_whole_only_when_they_place_with_the_same_answer(
        ws, monkeypatch, question, alone):
    from memory.catalog import fts
    from memory.catalog.owners import Owners
    from memory.domain.models import utc_now
    from memory.services import recall as recall_service

    put_library(ws, {**LIBRARY, **EXTRA})
    # Both searches see the same signals and the same clock, so their answers can be compared whole.
    monkeypatch.setattr(recall_service, "_update_signals", lambda *args, **kwargs: None)
    moment = utc_now()
    monkeypatch.setattr(recall_service, "utc_now", lambda: moment)
    read: list[int] = []
    real = fts.chunk_rows
    monkeypatch.setattr(fts, "chunk_rows", lambda cursor, ids, **kw: read.extend(ids) or real(cursor, ids, **kw))
    ranked_by: list[int] = []
    real_ranking = fts.chunk_ranking_rows
    monkeypatch.setattr(fts, "chunk_ranking_rows",
                        lambda cursor, ids, **kw: ranked_by.extend(ids) or real_ranking(cursor, ids, **kw))

    ranked_first = r.search(ws, question, top_k=3)
    brought = [item for item in ranked_first["results"] if item["why_recalled"]["unicode"] == 0
               and item["why_recalled"][alone] > 0
               and (alone == "trigram" or item["why_recalled"]["trigram"] == 0)]
    assert brought, [(i["memory"]["filename"], i["why_recalled"]) for i in ranked_first["results"]]
    assert all(item["memory"]["name"] and item["memory"]["created_at"] and item["snippet"] for item in brought)
    # Whole rows for the placed ones only, among more that were ranked by their ranking columns.
    assert 0 < len(read) <= min(3, len(ranked_by))

    # With a second root holding memories, shadowing is possible and every such row is read whole first.
    real_holders = Owners.holding_memories
    monkeypatch.setattr(Owners, "holding_memories", lambda self: [*real_holders(self), "elsewhere:nothing"])
    ranked_by.clear()
    read_all = r.search(ws, question, top_k=3)
    assert ranked_by == []
    assert read_all["results"] == ranked_first["results"]
