"""Long bodies in passages: exact slices, cut on headings and paragraphs, code fences kept whole."""

from __future__ import annotations

from memory.domain.passages import PASSAGE_WORDS, SPLIT_WORDS, passages, word_count


def paragraph(tag: str, words: int) -> str:
    return " ".join(f"{tag}{index}" for index in range(words)) + "\n"


def test_a_body_up_to_the_split_size_is_one_passage():
    body = paragraph("w", SPLIT_WORDS)
    assert passages(body) == [body]


def test_a_long_body_is_cut_into_passages_that_join_back_to_the_body_exactly():
    body = "Intro line.\n\n" + "\n".join(f"## Part {n}\n\n{paragraph(f'p{n}x', 90)}" for n in range(6)) + "\n\n"
    assert word_count(body) > SPLIT_WORDS
    parts = passages(body)
    assert len(parts) > 1
    assert "".join(parts) == body
    assert all(word_count(part) <= 2 * PASSAGE_WORDS for part in parts)


def test_a_heading_starts_a_passage_once_the_current_one_holds_a_third_of_a_passage():
    sections = [f"## Section {n}\n\n{paragraph(f's{n}w', 70)}\n" for n in range(6)]
    parts = passages("".join(sections))
    assert all(part.startswith("## Section") for part in parts)
    assert [part.count("## Section") for part in parts] == [1] * 6


def test_a_code_fence_with_blank_lines_inside_is_never_cut_in_the_middle():
    code = "```python\n" + "\n\n".join(f"value_{n} = compute({n})" for n in range(40)) + "\n```\n"
    body = paragraph("a", 140) + "\n" + code + "\n" + paragraph("b", 140)
    parts = passages(body)
    assert "".join(parts) == body
    holding = [part for part in parts if "```python" in part]
    assert len(holding) == 1 and holding[0].count("```") == 2


def test_a_block_far_longer_than_a_passage_is_cut_between_its_lines():
    listing = "".join(f"line {n} of a very long listing without blank lines\n" for n in range(200))
    parts = passages(listing)
    assert len(parts) >= 5
    assert "".join(parts) == listing
    assert all(part.endswith("\n") for part in parts)
