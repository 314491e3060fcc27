"""search_bench's check that its floor runs the statements the product runs (bench/search_bench.py)."""

from __future__ import annotations

from tests.bench_scripts import load_bench_script


def _row(entry: int, score: float, chunk: int) -> tuple:
    # RECALL_COLUMNS: the entry id first, the score second, the chunk id second to last, the signal last.
    return (entry, score, "", *([None] * 17), chunk, None)


def test_the_floor_is_compared_memory_by_memory_so_a_long_memorys_other_passages_do_not_count_as_a_difference():
    search_bench = load_bench_script("search_bench")
    owner = {10: 1, 11: 1, 20: 2, 30: 3}
    # Memory 1 has two passages among the hits: its second (chunk 11) ranks between memories 2 and 3's.
    floor_hits = [(10, -9.0), (20, -7.5), (11, -7.0), (30, -6.0)]
    product = [_row(1, -9.0, 10), _row(2, -7.5, 20), _row(3, -6.0, 30)]
    assert search_bench.floor_ranks_alike(product, floor_hits, owner)
    # A real difference still shows: another score, another passage, or another order.
    assert not search_bench.floor_ranks_alike([_row(1, -9.0, 10), _row(2, -7.4, 20), _row(3, -6.0, 30)],
                                              floor_hits, owner)
    assert not search_bench.floor_ranks_alike([_row(1, -7.0, 11), _row(2, -7.5, 20), _row(3, -6.0, 30)],
                                              floor_hits, owner)
    assert not search_bench.floor_ranks_alike([_row(2, -7.5, 20), _row(1, -9.0, 10), _row(3, -6.0, 30)],
                                              floor_hits, owner)
