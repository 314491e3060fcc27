"""memory_search end to end through the real services: real files, real catalog, both FTS5 tables, signals and
events."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from memory.models import RecallSignal
from memory.recall.query import parse_query
from tests import helpers as h
from tests.recall import helpers as r
from tests.recall.helpers import LIBRARY, QUESTION, hit, put_library

pytestmark = pytest.mark.django_db

BANNER = re.compile(r"^This memory is (\d+) days old\. Verify against current state before asserting as fact\.$")

def test_a_natural_language_question_finds_the_memory_that_answers_it_among_distractors(ws):
    put_library(ws)
    words_in_memories = {word for name, description, body in LIBRARY.values()
                         for word in re.findall(r"\w+", f"{name} {description} {body}".lower())}
    terms = parse_query(QUESTION).terms
    assert terms == ("runtime", "docs", "live", "built")
    missing = [term for term in terms if not any(word.startswith(term) for word in words_in_memories)]
    assert len(missing) >= len(terms) / 2  # half of the question's words appear in no memory

    result = r.search(ws, QUESTION)
    assert result["skipped"] is False
    assert r.filenames(result)[0] == "project_runtime_docs.md"
    assert "project_release_process.md" not in r.filenames(result)


def test_a_memory_sharing_more_meaningful_words_ranks_above_one_sharing_fewer(ws):
    put_library(ws, {
        **LIBRARY,
        "project_staging_rollout.md": ("Rollout notes", "How changes go out",
                                       "We deploy to the staging cluster on kubernetes every afternoon."),
        "project_deploy_script.md": ("Script notes", "A shell helper",
                                     "The deploy script deploys; run the deploy script to deploy again."),
    })
    result = r.search(ws, "deploy the staging cluster on kubernetes")
    order = r.filenames(result)
    assert order.index("project_staging_rollout.md") < order.index("project_deploy_script.md")
    more, fewer = hit(result, "project_staging_rollout.md"), hit(result, "project_deploy_script.md")
    assert more["why_recalled"]["unicode"] > fewer["why_recalled"]["unicode"]
    assert more["score"] > fewer["score"]


def test_a_typo_still_finds_the_memory_through_the_trigram_table(ws, monkeypatch):
    # The lexical lists alone: the semantic and token-match lists also like the runtime docs for this question
    # (the typo's word pieces, "doc" among them, match the "docs" the runtime docs repeat).
    monkeypatch.setenv("COMPOZY_MEMORY__RECALL__WEIGHTS__SEMANTIC", "0")
    monkeypatch.setenv("COMPOZY_MEMORY__RECALL__WEIGHTS__TOKEN", "0")
    put_library(ws, {**LIBRARY, "project_writing.md": ("Writing", "Prose rules",
                                                       "The documentation is written in reStructuredText.")})
    result = r.search(ws, "documantation guidelines")
    found = hit(result, "project_writing.md")
    assert found["why_recalled"]["unicode"] == 0  # the word index knows neither word
    assert found["why_recalled"]["trigram"] > 0
    assert r.filenames(result)[0] == "project_writing.md"


def test_a_partial_word_still_finds_the_memory_through_the_trigram_table(ws):
    put_library(ws, {**LIBRARY, "project_settings.md": ("Settings", "Where settings are",
                                                        "The service configuration is read from settings.toml.")})
    result = r.search(ws, "runtim confi")
    assert "project_runtime_docs.md" in r.filenames(result)
    assert hit(result, "project_runtime_docs.md")["why_recalled"]["trigram"] > 0
    inside = r.search(ws, "untime onfiguration")  # fragments from inside words: only trigrams can see them
    assert hit(inside, "project_settings.md")["why_recalled"]["trigram"] > 0
    assert hit(inside, "project_settings.md")["why_recalled"]["unicode"] == 0


@pytest.mark.parametrize("query", [
    '"runtime docs', 'runtime AND docs', 'NOT runtime docs', 'runtime* docs*', '-runtime -docs', 'runtime: docs:',
    'name:runtime body:docs', '(runtime OR docs', 'NEAR(runtime docs)', '^runtime docs', "it's runtime docs",
    '🚀 runtime docs 🔥', '运行时 文档', 'документация рантайма', 'C:\\runtime\\docs', "runtime\x01docs\x7f built",
    "runtimedocs" * 300,
])
def test_fts_syntax_in_a_search_never_raises(ws, query):
    put_library(ws)
    result = r.search(ws, query)
    assert isinstance(result["results"], list)


def test_a_trivial_query_is_skipped_with_one_event_and_no_error(ws):
    put_library(ws)
    result = r.search(ws, "where is it?")
    assert result["skipped"] is True and result["skip_reason"] == "no_meaningful_words"
    assert result["results"] == [] and result["recall"]["blocks"] == []
    skipped = r.events("memory.recall.skipped")
    assert len(skipped) == 1 and skipped[0].metadata["reason"] == "trivial_query"
    assert r.events("memory.recall.executed") == []
    assert RecallSignal.objects.count() == 0


def test_a_recall_updates_the_signals_of_the_returned_entries_as_an_ema(ws):
    put_library(ws)
    first = r.search(ws, QUESTION, session_id="session-a")
    assert first["results"]
    signals = {s.filename: s for s in RecallSignal.objects.all()}
    assert set(signals) == set(r.filenames(first))
    for item in first["results"]:
        signal = signals[item["memory"]["filename"]]
        assert signal.recall_count == 1
        assert signal.last_recalled_at is not None
        assert signal.recall_score == pytest.approx(0.2 * item["score"])

    second = r.search(ws, QUESTION, session_id="session-b")
    assert set(r.filenames(second)) == set(signals)
    for item in second["results"]:
        old = signals[item["memory"]["filename"]]
        new = RecallSignal.objects.get(root_key=old.root_key, filename=old.filename)
        assert new.recall_count == 2
        assert new.last_recalled_at >= old.last_recalled_at
        assert new.recall_score == pytest.approx(0.8 * old.recall_score + 0.2 * item["score"])
        assert item["why_recalled"]["signal"] == pytest.approx(0.10 * old.recall_score, abs=1e-6)


def test_one_session_searching_again_and_again_moves_each_signal_once(ws):
    """21 searches in one session are one session's interest, not 21: neither the count dreaming's signal gate
    reads nor the score moves again until another session recalls the memory."""
    put_library(ws)
    for _ in range(21):
        first = r.search(ws, QUESTION, session_id="busy-session")
    returned = set(r.filenames(first))
    signals = {s.filename: s for s in RecallSignal.objects.all()}
    assert set(signals) == returned
    assert {s.recall_count for s in signals.values()} == {1}
    assert [hit(first, name)["why_recalled"]["signal"] for name in sorted(returned)] == [
        pytest.approx(0.10 * signals[name].recall_score, abs=1e-6) for name in sorted(returned)]
    r.search(ws, QUESTION, session_id="another-session")
    assert {s.recall_count for s in RecallSignal.objects.filter(filename__in=returned)} == {2}


def test_searches_without_a_session_count_once_an_hour(ws):
    put_library(ws)
    for _ in range(5):
        result = r.search(ws, QUESTION)
    assert {s.recall_count for s in RecallSignal.objects.filter(filename__in=r.filenames(result))} == {1}


def test_a_search_does_not_pad_its_results_with_memories_far_weaker_than_the_best(ws, monkeypatch):
    """Twelve notes mention only "docs" of the question, in their bodies; one memory answers it. With room for
    twenty results, none of the notes is returned beside it: their word match is a small fraction of the best
    one's (the semantic list, whose own bar would admit some of them, is off here)."""
    monkeypatch.setenv("COMPOZY_MEMORY__RECALL__WEIGHTS__SEMANTIC", "0")
    library = dict(LIBRARY)
    library.update({f"project_style_note_{index:02d}.md": (f"Style note {index}", f"Paragraph {index}",
                                                            f"Paragraph {index} of the docs style guide.")
                    for index in range(12)})
    put_library(ws, library)
    names = r.filenames(r.search(ws, QUESTION, top_k=20))
    assert names[0] == "project_runtime_docs.md"
    assert not [name for name in names if name.startswith("project_style_note_")]


def test_each_search_records_one_executed_event_with_its_result_count(ws):
    put_library(ws)
    counts = []
    for query, top_k in ((QUESTION, None), ("grafana latency dashboards", 1), ("postgres backups nightly", 3)):
        result = r.search(ws, query, top_k=top_k)
        counts.append(len(result["results"]))
    executed = r.events("memory.recall.executed")
    assert [event.metadata["result_count"] for event in executed] == counts
    assert counts[1] == 1


def test_top_k_defaults_to_five_and_is_clamped_to_twenty(ws):
    many = {f"project_queue_note_{index:02d}.md": (f"Queue note {index}", f"Note number {index}",
                                                    f"The worker queue retries job batch {index} with backoff.")
            for index in range(25)}
    put_library(ws, many)
    assert len(r.search(ws, "worker queue retries")["results"]) == 5
    assert len(r.search(ws, "worker queue retries", top_k=1)["results"]) == 1
    clamped = r.search(ws, "worker queue retries", top_k=50)
    assert len(clamped["results"]) == 20
    assert r.events("memory.recall.executed")[-1].metadata["top_k"] == 20


def test_system_files_are_excluded_unless_include_system(ws, memory_root):
    put_library(ws)
    r.put(memory_root, "_system/dreaming/project_dream_artifact.md", name="Dream artifact",
          body="Zanzibar quokka consolidation notes from the nightly dream.")
    h.reindex(ws, include_system=True)
    assert r.search(ws, "zanzibar quokka")["results"] == []
    included = r.search(ws, "zanzibar quokka", include_system=True)
    assert r.filenames(included) == ["_system/dreaming/project_dream_artifact.md"]
    assert included["results"][0]["memory"]["is_system"] is True


def test_a_system_artifact_named_like_a_dreaming_run_is_indexed_and_found_only_with_include_system(ws, memory_root):
    put_library(ws)
    r.put(memory_root, "_system/dreaming/x.md", name="Dream artifact",
          body="Zanzibar quokka consolidation notes from the nightly dream.", description="Dream run")
    r.put(memory_root, "_system/dreaming/20261130-0300-run.md", name="Dream run",
          body="Zanzibar quokka promoted candidates.", description="Dream run")
    h.reindex(ws, include_system=True)
    assert r.search(ws, "zanzibar quokka")["results"] == []
    found = r.filenames(r.search(ws, "zanzibar quokka", include_system=True))
    assert sorted(found) == ["_system/dreaming/20261130-0300-run.md", "_system/dreaming/x.md"]


def test_a_stale_entry_carries_the_staleness_banner_and_a_fresh_one_does_not(ws, memory_root):
    r.put(memory_root, "project_old_cache.md", name="Old cache", body="The cache layer uses redis sentinel.",
          age=timedelta(days=3))
    r.put(memory_root, "project_new_cache.md", name="New cache",
          body="The cache eviction policy uses redis LRU.")
    h.reindex(ws)
    result = r.search(ws, "redis cache")
    old, new = hit(result, "project_old_cache.md"), hit(result, "project_new_cache.md")
    match = BANNER.match(old["banner"] or "")
    assert match and match.group(1) == "3"
    assert new["banner"] is None
    assert old["why_recalled"]["recency"] == pytest.approx(0.15 * 0.5 ** (3 / 14), abs=1e-3)
    assert new["why_recalled"]["recency"] == pytest.approx(0.15, abs=1e-3)
    old_block = next(block for block in result["recall"]["blocks"] if "project_old_cache.md" in block)
    assert old["banner"] in old_block
    new_block = next(block for block in result["recall"]["blocks"] if "project_new_cache.md" in block)
    assert "days old" not in new_block


def test_the_score_weights_come_from_configuration(ws, monkeypatch):
    put_library(ws)
    default = r.search(ws, QUESTION)["results"][0]
    assert default["why_recalled"]["unicode"] > 0
    monkeypatch.setenv("COMPOZY_MEMORY__RECALL__WEIGHTS__UNICODE", "0")
    monkeypatch.setenv("COMPOZY_MEMORY__RECALL__WEIGHTS__TRIGRAM", "0.5")
    monkeypatch.setenv("COMPOZY_MEMORY__RECALL__WEIGHTS__RECENCY", "0")
    monkeypatch.setenv("COMPOZY_MEMORY__RECALL__WEIGHTS__SIGNAL", "0")
    monkeypatch.setenv("COMPOZY_MEMORY__RECALL__WEIGHTS__SEMANTIC", "0")
    monkeypatch.setenv("COMPOZY_MEMORY__RECALL__WEIGHTS__TOKEN", "0")
    result = r.search(ws, QUESTION)
    assert result["results"]
    for item in result["results"]:
        parts = item["why_recalled"]
        assert parts["unicode"] == 0 and parts["recency"] == 0 and parts["signal"] == 0 and parts["semantic"] == 0
        assert parts["token"] == 0
        assert item["score"] == pytest.approx(parts["trigram"])
    assert max(item["why_recalled"]["trigram"] for item in result["results"]) == pytest.approx(0.5)


def test_each_result_carries_score_why_recalled_snippet_and_shadowed_by(ws):
    put_library(ws)
    result = r.search(ws, QUESTION)
    top = result["results"][0]
    assert set(top) >= {"memory", "score", "snippet", "why_recalled", "shadowed_by"}
    parts = top["why_recalled"]
    assert set(parts) == {"unicode", "trigram", "semantic", "token", "recency", "signal"}
    assert top["score"] == pytest.approx(sum(parts.values()), abs=1e-5)
    assert "runtime" in top["snippet"].lower()
    assert top["shadowed_by"] is None
    assert parts["unicode"] > 0 and parts["recency"] == pytest.approx(0.15, abs=1e-3)


def test_a_four_gram_most_memories_hold_is_left_out_of_a_typo_lookup_which_still_finds_its_memory(ws, monkeypatch):
    from django.db import connection

    from memory.catalog.indexer import current_generation
    from memory.recall import pipeline

    # The lexical lists alone, as in the typo test above; every station memory holds "tati", "atio" and "tion".
    monkeypatch.setenv("COMPOZY_MEMORY__RECALL__WEIGHTS__SEMANTIC", "0")
    stations = {f"project_station_{index}.md": (f"Station {index}", "Radio notes",
                                                f"Station {index} broadcasts the nation's news at {index} o'clock.")
                for index in range(24)}
    put_library(ws, {**LIBRARY, **stations, "project_writing.md": (
        "Writing", "Prose rules", "The documentation is written in reStructuredText.")})
    query = parse_query("documantation guidelines")
    with connection.cursor() as cursor:
        _common, _rare, unfound = pipeline.classify_terms(cursor, query, current_generation())
        grams = pipeline.common_grams(cursor, query, unfound, current_generation())
    assert unfound == {"documantation", "guidelines"}
    assert grams == {"tati", "atio", "tion"}
    expression = query.trigram_expression(unfound, unfound, grams)
    assert '"docu"' in expression and '"tion"' not in expression and '"atio"' not in expression
    result = r.search(ws, "documantation guidelines")
    assert r.filenames(result)[0] == "project_writing.md"
    assert hit(result, "project_writing.md")["why_recalled"]["trigram"] > 0


def test_a_word_held_in_another_inflection_is_the_word_index_s_and_only_a_typo_goes_to_the_trigram_index(ws):
    # "mention" is in no memory as it is written, but the word index stems both it and "mentioned": it is found
    # there, so the trigram query takes it only as a rare substring, without the 4-grams ("ment", "tion") that
    # would make every memory holding "comment" or "station" a match. A misspelling the word index cannot find
    # is spelled out by its 4-grams.
    from django.db import connection

    from memory.catalog.indexer import current_generation
    from memory.recall import pipeline

    put_library(ws, {**LIBRARY, "project_release.md": ("Release", "Release notes",
                                                       "The release date was mentioned in the standup.")})
    with connection.cursor() as cursor:
        for text, unfound_terms in (("mention", set()), ("mentoin", {"mentoin"})):
            query = parse_query(text)
            _common, rare, unfound = pipeline.classify_terms(cursor, query, current_generation())
            assert unfound == unfound_terms
            expression = query.trigram_expression(rare, unfound, pipeline.common_grams(
                cursor, query, unfound, current_generation()))
            assert (f'"{text}"' in expression, '"ment"' in expression) == (True, bool(unfound))
    assert hit(r.search(ws, "mention"), "project_release.md")["why_recalled"]["unicode"] > 0
    assert r.filenames(r.search(ws, "mentoin"))[0] == "project_release.md"


def test_the_word_index_matches_inflections_by_their_stem_and_not_other_words_that_share_a_prefix(ws):
    # Porter stemming: "studies" finds "study" and "configured" finds "configuration"; "studies" does not find
    # "student", which only begins the same way (the light stem's prefix query, "stud"*, found both).
    put_library(ws, {**LIBRARY,
                     "project_study.md": ("Study", "Log review", "We study the gateway logs every Friday."),
                     "project_student.md": ("Students", "Onboarding", "The student handbook lists the mentors."),
                     "project_setup.md": ("Setup", "Gateway", "The gateway configuration lives in the infra repo.")})
    studies = r.search(ws, "studies of the gateway")
    assert hit(studies, "project_study.md")["why_recalled"]["unicode"] > 0
    assert "project_student.md" not in [
        name for name in r.filenames(studies) if hit(studies, name)["why_recalled"]["unicode"] > 0]
    configured = r.search(ws, "where is it configured")
    assert hit(configured, "project_setup.md")["why_recalled"]["unicode"] > 0


def test_a_memory_both_lexical_lists_find_is_read_once_and_answers_from_the_word_index_row(ws):
    # "reStructuredText" is rare, so it goes to the trigram query as a substring too: both lists find the memory.
    # Its row is read for the word index only; the trigram list adds its rank, and the answer is whole.
    from django.db import connection

    put_library(ws, {**LIBRARY, "project_writing.md": ("Writing", "Prose rules",
                                                       "The documentation is written in reStructuredText.")})
    # Every statement SQLite runs on the connection: recall's hot reads bypass Django's cursor (fts._rows), so
    # Django's query capture would not see them.
    statements: list[str] = []
    connection.ensure_connection()
    connection.connection.set_trace_callback(statements.append)
    try:
        result = r.search(ws, "restructuredtext")
    finally:
        connection.connection.set_trace_callback(None)
    found = hit(result, "project_writing.md")
    assert found["why_recalled"]["unicode"] > 0 and found["why_recalled"]["trigram"] > 0
    assert "reStructuredText" in found["snippet"] and found["memory"]["name"] == "Writing"
    row_reads = [sql for sql in statements
                 if "FROM memory_chunks c CROSS JOIN memory_catalog_entries e" in sql and "e.updated_at" in sql]
    assert len(row_reads) == 1
