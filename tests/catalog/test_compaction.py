"""The full-text indexes merged back into one b-tree: after writes, by the schedule's service, and after a reindex."""

from __future__ import annotations

import pytest

from memory.background.schedules import COMPACT_SCHEDULE, wanted
from memory.catalog import fts, sql
from memory.domain.enums import Origin
from memory.services.catalog import (
    CompactInput,
    HealthInput,
    ReindexInput,
    catalog_compact,
    catalog_reindex,
    health_get,
)
from memory.services.inputs import Caller
from tests import helpers as h
from tests.recall import helpers as r
from tests.recall.helpers import put

pytestmark = pytest.mark.django_db

OPERATOR = Caller(origin=Origin.CLI)


def compact():
    return catalog_compact(data=CompactInput(), caller=OPERATOR)


def segments() -> dict[str, int]:
    with sql.cursor() as cursor:
        return {table: fts.segment_count(cursor, table) for table in fts.MEMORY_INDEXES}


def ranking(table: str, expression: str) -> list[tuple]:
    with sql.cursor() as cursor:
        cursor.execute(f"SELECT rowid, bm25({table}, 3.0, 2.0, 1.0) AS score FROM {table} WHERE {table} MATCH %s "
                       "ORDER BY score, rowid", [expression])
        return cursor.fetchall()


def write_notes(ws, count: int) -> None:
    for index in range(count):
        h.write(ws, name=f"Deploy note {index}", description=f"How release {index} went out",
                content=f"Release {index} was deployed to staging on a Tuesday; the rollback plan {index} was kept.")


def test_writes_add_b_trees_and_compaction_merges_them_without_changing_a_row_or_a_score(ws):
    write_notes(ws, 12)
    assert all(count > 1 for count in segments().values())  # a b-tree per write, four merged at a time at most
    before = {table: ranking(table, '"deployed" OR "rollback"') for table in fts.MEMORY_INDEXES}
    search_before = r.search(ws, "when was release 7 deployed to staging")

    result = compact()

    assert segments() == {table: 1 for table in fts.MEMORY_INDEXES}
    assert [item.index for item in result.indexes] == list(fts.MEMORY_INDEXES)
    assert all(item.segments_before > 1 and item.segments_after == 1 and item.steps >= 2 for item in result.indexes)
    assert {table: ranking(table, '"deployed" OR "rollback"') for table in fts.MEMORY_INDEXES} == before
    after = r.search(ws, "when was release 7 deployed to staging")
    assert [(hit["memory"]["filename"], hit["why_recalled"]["unicode"], hit["why_recalled"]["trigram"])
            for hit in after["results"]] == [
        (hit["memory"]["filename"], hit["why_recalled"]["unicode"], hit["why_recalled"]["trigram"])
        for hit in search_before["results"]]


def test_an_index_already_in_one_b_tree_is_left_alone(ws):
    write_notes(ws, 6)
    compact()
    again = compact()
    assert [(item.segments_before, item.steps) for item in again.indexes] == [(1, 0), (1, 0)]


def test_a_reindex_that_indexed_memories_leaves_each_index_in_one_b_tree(ws):
    write_notes(ws, 3)
    for index in range(12):  # hand-written files, taken in by the reindex
        put(h.workspace_root(ws), f"project_hand_{index}.md", name=f"Hand {index}", description="Written by hand",
            body=f"Hand note {index} on the staging rollback.")
    result = catalog_reindex(data=ReindexInput.parse({"workspace": str(ws)}), caller=Caller(origin=Origin.CLI))
    assert sum(root.rewritten_rows for root in result.roots) >= 12
    assert segments() == {table: 1 for table in fts.MEMORY_INDEXES}


def test_a_reindex_that_wrote_nothing_leaves_the_indexes_to_the_schedule(ws):
    write_notes(ws, 6)
    before = segments()
    assert all(count > 1 for count in before.values())
    result = catalog_reindex(data=ReindexInput.parse({"workspace": str(ws)}), caller=Caller(origin=Origin.CLI))
    assert sum(root.rewritten_rows + root.removed_rows for root in result.roots) == 0
    assert segments() == before


def test_the_cluster_compacts_the_indexes_on_a_schedule():
    [item] = [item for item in wanted() if item.name == COMPACT_SCHEDULE]
    assert item.func == "memory.background.tasks.compact_catalog" and item.minutes == 10


def test_health_reports_each_index_b_trees_and_compaction_brings_them_to_one(ws):
    write_notes(ws, 8)
    reported = health_get(data=HealthInput.parse({"workspace": str(ws)}), caller=OPERATOR).fts_segments
    assert reported == segments() and all(count > 1 for count in reported.values())
    compact()
    assert health_get(data=HealthInput.parse({"workspace": str(ws)}), caller=OPERATOR).fts_segments == {
        table: 1 for table in fts.MEMORY_INDEXES}
