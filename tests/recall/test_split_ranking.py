"""The word index ranks a question holding frequent terms in tiers (fts.RankSplit): the passages matching its rarer
terms first, then those whose rarest term is each frequent term in turn, least frequent first, each tier only when
its passages could still enter the list. The tiers must give exactly the rows and scores of the whole expression,
and skip a tier only when the bound says none of its passages can rank."""

from __future__ import annotations

import math
import random

import pytest
from django.db import connection

from memory.catalog import fts
from memory.catalog.indexer import current_generation
from memory.recall import pipeline
from memory.recall.query import parse_query
from memory.services import recall as recall_service
from tests import helpers as h
from tests.recall import helpers as r
from tests.recall.helpers import RecordingCursor

pytestmark = pytest.mark.django_db

# Share of the 300 memories holding each word: two frequent (>= 10%), the rest rarer.
SHARES = {"harbour": 0.45, "lantern": 0.25, "granite": 0.05, "meadow": 0.04, "quartz": 0.02, "falcon": 0.01}
FILLER = ["river", "stone", "cloud", "ember", "willow", "copper", "thistle", "orchard", "pebble", "saddle"]


@pytest.fixture
def catalog(home, workspace_dir):
    r.ensure_workspace(workspace_dir)
    rng = random.Random(17)
    root = h.workspace_root(workspace_dir)
    for index in range(300):
        words = [rng.choice(FILLER) for _ in range(rng.randint(6, 30))]
        words += [word for word, share in SHARES.items() if rng.random() < share] * rng.randint(1, 3)
        rng.shuffle(words)
        r.put(root, f"project_note_{index:03d}.md", name=f"Note {index}", body=" ".join(words) + ".")
    h.reindex(workspace_dir)
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT root_key FROM memory_catalog_entries WHERE root_key LIKE 'workspace:%'")
        return cursor.fetchone()[0]


def ranking(question: str, *, frequent_min: int, limit: int = 10) -> tuple[str, fts.RankSplit | None]:
    pipeline.forget_statistics()
    original = pipeline.FREQUENT_MIN
    pipeline.FREQUENT_MIN = frequent_min
    try:
        with connection.cursor() as cursor:
            common, *_rest = pipeline.classify_terms(cursor, parse_query(question), current_generation())
            return pipeline.word_ranking(cursor, parse_query(question), common, current_generation(), limit)
    finally:
        pipeline.FREQUENT_MIN = original


def ranked_rows(root_key: str, expression: str, split: fts.RankSplit | None, limit: int) -> tuple[list, list]:
    with connection.cursor() as raw:
        cursor = RecordingCursor(raw)
        rows = fts.recall_unicode(cursor, expression=expression, root_keys=[root_key], include_system=False,
                                  limit=limit, split=split)
    return [(row[0], row[1]) for row in rows], cursor.statements


def test_a_question_is_split_only_when_it_holds_both_frequent_and_rarer_terms(catalog):
    expression, split = ranking("harbour lantern granite meadow", frequent_min=20)
    assert split is not None
    # The frequent terms least frequent first ("lantern" is in about a quarter of the memories, "harbour" in half).
    assert split.rare == '"granite" OR "meadow"' and split.frequent == ('"lantern"', '"harbour"')
    assert expression == split.expression == '"granite" OR "meadow" OR "lantern" OR "harbour"'
    assert split.bounds[0] > split.bounds[1] > 0
    assert ranking("granite meadow", frequent_min=20)[1] is None
    assert ranking("harbour lantern", frequent_min=20)[1] is None
    # "falcon" is in about three memories: it cannot fill ten places, so the frequent terms are ranked anyway.
    assert ranking("harbour lantern falcon", frequent_min=20)[1] is None
    # A catalog too small for any term to be frequent: one expression, in the question's order.
    assert ranking("harbour lantern quartz", frequent_min=1000) == ('"harbour" OR "lantern" OR "quartz"', None)


@pytest.mark.parametrize("question,limit", [
    ("harbour granite meadow", 10),  # the rarer terms' matches fill the list: frequent-only never scored
    ("harbour lantern granite meadow", 10),
    ("harbour lantern granite meadow quartz falcon", 25),
    ("harbour lantern granite meadow quartz falcon", 40),  # the frequent-only passages are ranked too
    ("harbour granite meadow quartz falcon", 40),
    ("lantern meadow", 5),
])
def test_a_split_ranking_returns_exactly_the_rows_and_scores_of_the_whole_expression(catalog, question, limit):
    expression, split = ranking(question, frequent_min=20, limit=limit)
    assert split is not None
    whole, _statements = ranked_rows(catalog, expression, None, limit)
    parts, _statements = ranked_rows(catalog, expression, split, limit)
    assert parts == whole and len(whole) == limit


def tiers_scored(statements: list[str], split: fts.RankSplit) -> list[str]:
    """The frequent tiers whose passages were ranked (the rarer terms' tier always is)."""
    return [tier for tier in split.frequent if any(f"(({tier}) NOT (" in statement for statement in statements)]


def test_a_frequent_tier_is_scored_only_when_its_passages_could_enter_the_list(catalog):
    def scored(question: str, limit: int) -> list[str]:
        _expression, split = ranking(question, frequent_min=20, limit=limit)
        _rows, statements = ranked_rows(catalog, split.expression, split, limit)
        return tiers_scored(statements, split)

    # Rarer matches fill ten places, each scoring more than a passage holding only "harbour" (in nearly half of
    # the memories, so worth little to bm25) ever could.
    assert scored("harbour granite meadow", 10) == []
    # Forty places: the rarer words are counted 44 times, but fewer than forty memories hold one (some hold two),
    # so passages holding "lantern" take the last places; none holding only "harbour" can (worth at most a
    # fifth of what a passage holding only "lantern" scores), so that tier is never scored.
    assert scored("harbour lantern granite meadow quartz falcon", 40) == ['"lantern"']


def test_ranking_every_tier_gives_exactly_the_rows_and_scores_of_the_whole_expression(catalog):
    # Bounds no score exceeds: every tier is ranked, the last one ("harbour" without any rarer term) too.
    expression, split = ranking("harbour lantern granite meadow", frequent_min=20, limit=10)
    every = fts.RankSplit(split.rare, split.frequent, (math.inf, math.inf))
    whole, _statements = ranked_rows(catalog, expression, None, 10)
    parts, statements = ranked_rows(catalog, expression, every, 10)
    assert parts == whole and tiers_scored(statements, every) == ['"lantern"', '"harbour"']
    assert [matches for matches, _bound in every.steps()] == [
        ['("granite" OR "meadow") NOT ("lantern" OR "harbour")',
         '("granite" OR "meadow") AND ("lantern" OR "harbour")'],
        ['(("lantern") NOT ("granite" OR "meadow")) NOT ("harbour")',
         '(("lantern") NOT ("granite" OR "meadow")) AND ("harbour")'],
        ['(("harbour") NOT ("granite" OR "meadow" OR "lantern"))'],
    ]


def test_search_answers_the_same_with_and_without_the_split(catalog, workspace_dir, monkeypatch):
    questions = ["harbour lantern granite meadow", "harbour granite meadow", "lantern quartz meadow granite river"]
    # The first searches' recall signals would reorder the second's answers.
    monkeypatch.setattr(recall_service, "_update_signals", lambda *args: None)
    monkeypatch.setattr(pipeline, "FREQUENT_MIN", 20)
    split = [r.search(workspace_dir, question, top_k=10)["results"] for question in questions]
    monkeypatch.setattr(pipeline, "FREQUENT_SHARE", 2.0)  # nothing is frequent: one ranked statement
    monkeypatch.setattr(pipeline, "FREQUENT_MIN", 10**9)
    whole = [r.search(workspace_dir, question, top_k=10)["results"] for question in questions]

    def essence(results: list[dict]) -> list[tuple]:
        return [(hit["memory"]["filename"], hit["why_recalled"]["unicode"]) for hit in results]

    assert [essence(results) for results in split] == [essence(results) for results in whole]
    assert all(len(results) == 10 for results in split)
