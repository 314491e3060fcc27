"""Fusion that adapts to the question: each list weighed by how decisive it is (memory.recall.pipeline)."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from compozy.config import RecallConfig
from memory.catalog.fts import RecallRow
from memory.recall import pipeline
from memory.recall.pipeline import Candidates, RecallCandidate, decisiveness, list_weights

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_list_whose_first_ten_are_equal_is_not_decisive_and_one_whose_best_stands_alone_is():
    assert decisiveness([1.0] * 12, zero=0.0) == 0.0
    assert decisiveness([1.0] + [0.1] * 11, zero=0.0) == pytest.approx(0.9)
    # Measured from the list's own zero: similarities all near the corpus's mean are not decisive.
    assert decisiveness([0.42, *[0.4] * 11], zero=0.4) == pytest.approx(1.0)
    assert decisiveness([0.42, *[0.41] * 11], zero=0.4) == pytest.approx(0.5)


def test_a_short_list_is_judged_by_its_last_entry_a_list_of_one_is_decisive_and_an_empty_one_is_not():
    assert decisiveness([1.0, 0.25], zero=0.0) == pytest.approx(0.75)
    assert decisiveness([0.7], zero=0.0) == 1.0
    assert decisiveness([], zero=0.0) == 0.0
    assert decisiveness([0.3, 0.2], zero=0.3) == 0.0  # its best no nearer than an unrelated memory


def test_the_weights_follow_the_square_root_of_decisiveness_and_keep_their_configured_sum():
    weights = list_weights({"unicode": 0.3, "trigram": 0.3, "semantic": 0.3},
                           {"unicode": 1.0, "trigram": 0.25, "semantic": 0.0})
    assert weights["semantic"] == 0.0
    assert weights["unicode"] == pytest.approx(2 * weights["trigram"])
    assert sum(weights.values()) == pytest.approx(0.9)
    # No list decisive: the configured weights, not nothing.
    assert list_weights({"unicode": 0.3, "trigram": 0.2}, {"unicode": 0.0, "trigram": 0.0}) == {
        "unicode": 0.3, "trigram": 0.2}


def _candidate(entry: int, name: str, *, unicode: tuple[int, float] | None = None,
               semantic: tuple[int, float] | None = None) -> RecallCandidate:
    row = RecallRow(entry, filename=f"{name}.md", updated_at=NOW, recall_signal=None)
    candidate = RecallCandidate(row=row, strength=1.0)
    candidate.unicode_rank, candidate.semantic_rank = (unicode or (None,))[0], (semantic or (None,))[0]
    candidate.values = {"unicode": unicode[1] if unicode else 0.0, "trigram": 0.0,
                        "semantic": semantic[1] if semantic else 0.0}
    return candidate


def _ranked(candidates: list[RecallCandidate], decisive: dict[str, float]) -> list[str]:
    found = Candidates({c.row.entry_id: c for c in candidates}, 12, 0, 12, [], False, None, None, decisive)
    plan = SimpleNamespace(settings=RecallConfig(), top_k=5)
    pipeline.scores(found, plan, NOW)
    return [c.row.filename for c in pipeline.fusion(found, plan)]


def test_when_the_word_list_cannot_tell_its_matches_apart_the_decisive_semantic_list_ranks_them():
    # Twelve memories match the question's words equally well (a flat word list); the semantic list places
    # "answer" far above the rest, while the word index happened to list it eleventh.
    memories = [_candidate(index, f"m{index:02}", unicode=(index, 1.0), semantic=(index + 1, 0.2))
                for index in range(11)]
    memories.append(_candidate(11, "answer", unicode=(11, 1.0), semantic=(0, 1.0)))
    decisive = {"unicode": decisiveness([1.0] * 12, zero=0.0),
                "semantic": decisiveness([1.0] + [0.2] * 11, zero=0.0), "trigram": 0.0}
    assert _ranked(memories, decisive)[0] == "answer.md"


def test_when_the_semantic_list_is_flat_the_decisive_word_list_ranks_them():
    memories = [_candidate(index, f"m{index:02}", unicode=(index + 1, 0.2), semantic=(index, 1.0))
                for index in range(11)]
    memories.append(_candidate(11, "answer", unicode=(0, 1.0), semantic=(11, 1.0)))
    decisive = {"unicode": decisiveness([1.0] + [0.2] * 11, zero=0.0),
                "semantic": decisiveness([1.0] * 12, zero=0.0), "trigram": 0.0}
    assert _ranked(memories, decisive)[0] == "answer.md"


def test_near_equal_matches_score_near_equal_parts_not_the_steps_of_their_ranks():
    best = _candidate(0, "best", unicode=(0, 1.0))
    close = _candidate(1, "close", unicode=(5, 0.97))
    others = [_candidate(index, f"m{index}", unicode=(index - 1, 0.98)) for index in range(2, 6)]
    _ranked([best, close, *others], {"unicode": 1.0, "trigram": 0.0, "semantic": 0.0})
    # Ranks alone gave rank 5 a sixth of rank 0's part; with values it keeps more than half.
    assert close.parts["unicode"] > 0.5 * best.parts["unicode"]
    assert best.parts["unicode"] == pytest.approx(1.2)  # the whole configured sum went to the one decisive list
