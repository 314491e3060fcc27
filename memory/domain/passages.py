"""Long memory bodies in passages: the units recall indexes, embeds and scores.

A body of up to SPLIT_WORDS words is one passage. A longer one is cut into blocks (a heading line starts a block,
a blank line outside a code fence ends one) and consecutive blocks are packed into passages of about
PASSAGE_WORDS words; a heading starts a new passage once the current one holds a third of that. A block longer
than twice PASSAGE_WORDS (a long code listing) is cut between its lines.

Passages are exact slices of the body: joined in order they give the body back byte for byte, so the catalog keeps
a long memory only as its passages and still returns it whole.
"""

from __future__ import annotations

import re

SPLIT_WORDS = 300
PASSAGE_WORDS = 150

_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")


def word_count(text: str) -> int:
    # str.split() with no argument splits on runs of the same whitespace as `\S+` leaves out, without building a
    # match object per word (the catalog counts every body, block and line of every memory it indexes).
    return len(text.split())


def _blocks(body: str) -> list[str]:
    blocks: list[str] = []
    current: list[str] = []
    fence: str | None = None
    for line in body.splitlines(keepends=True):
        stripped = line.strip()
        opener = _FENCE.match(line)
        if fence is None and _HEADING.match(line) and any(part.strip() for part in current):
            blocks.append("".join(current))
            current = []
        current.append(line)
        if opener:
            fence = None if fence == opener.group(1) else fence or opener.group(1)
        elif fence is None and not stripped and any(part.strip() for part in current):
            blocks.append("".join(current))
            current = []
    if current:
        if blocks and not "".join(current).strip():
            blocks[-1] += "".join(current)  # trailing blank lines belong to the last block
        else:
            blocks.append("".join(current))
    return blocks


def _cut_long(block: str) -> list[str]:
    """A block far longer than a passage, cut between lines into pieces of about PASSAGE_WORDS words."""
    pieces: list[str] = []
    current: list[str] = []
    words = 0
    for line in block.splitlines(keepends=True):
        count = word_count(line)
        if current and words + count > PASSAGE_WORDS:
            pieces.append("".join(current))
            current, words = [], 0
        current.append(line)
        words += count
    if current:
        pieces.append("".join(current))
    return pieces


def passages(body: str) -> list[str]:
    """The body's passages, in order; `"".join(passages(body)) == body` always."""
    if word_count(body) <= SPLIT_WORDS:
        return [body]
    units: list[tuple[str, int, bool]] = []
    for block in _blocks(body):
        count = word_count(block)
        heading = bool(_HEADING.match(block.lstrip("\n")))
        if count > 2 * PASSAGE_WORDS:
            units.extend((piece, word_count(piece), heading and index == 0)
                         for index, piece in enumerate(_cut_long(block)))
        else:
            units.append((block, count, heading))
    out: list[str] = []
    current: list[str] = []
    words = 0
    for text, count, heading in units:
        if current and (words + count > PASSAGE_WORDS or (heading and words >= PASSAGE_WORDS // 3)):
            out.append("".join(current))
            current, words = [], 0
        current.append(text)
        words += count
    if current:
        # A short tail (a closing line) joins the passage before it rather than standing alone.
        if out and words < PASSAGE_WORDS // 3 and word_count(out[-1]) + words <= 2 * PASSAGE_WORDS:
            out[-1] += "".join(current)
        else:
            out.append("".join(current))
    return out
