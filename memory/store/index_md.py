"""MEMORY.md: the prompt-safe table of contents of one memory root, one line per document, sorted by filename."""

from __future__ import annotations

import bisect
from collections.abc import Iterable

HEADER = "# Memory Index\n"


def index_line(filename: str, name: str, description: str) -> str:
    name = name.replace("[", "(").replace("]", ")")
    return f"- [{name}]({filename}) — {description}"


def render_index(entries: Iterable[tuple[str, str, str]]) -> str:
    """entries: (filename, name, description), already sorted by filename."""
    return _join([index_line(*entry) for entry in entries])


def _join(lines: list[str]) -> str:
    return HEADER + ("\n" + "\n".join(lines) + "\n" if lines else "")


def _filename_of(line: str) -> str:
    start = line.find("](")
    end = line.find(")", start + 2)
    if not line.startswith("- [") or start < 0 or end < 0:
        raise ValueError("not an index line")
    return line[start + 2 : end]


def splice_index(text: str, filename: str, line: str | None) -> str | None:
    """Replace, insert (line given) or remove (line None) the entry for one file in a rendered index.

    A write changes one line, so this keeps the cost of a write from growing with the size of the root. Returns
    None when the text is not in the rendered form (hand-edited, say): the caller then renders it whole.
    """
    if text == HEADER:
        lines: list[str] = []
    elif text.startswith(HEADER + "\n") and text.endswith("\n"):
        lines = text[len(HEADER) + 1 : -1].split("\n")
    else:
        return None
    try:
        position = bisect.bisect_left(lines, filename, key=_filename_of)
        present = position < len(lines) and _filename_of(lines[position]) == filename
    except ValueError:
        return None
    if line is None:
        if not present:
            return text
        del lines[position]
    elif present:
        lines[position] = line
    else:
        lines.insert(position, line)
    return _join(lines)


def listed_filenames(text: str) -> list[str] | None:
    """The filenames an index lists, or None when it is not in the rendered form."""
    if text == HEADER:
        return []
    if not (text.startswith(HEADER + "\n") and text.endswith("\n")):
        return None
    try:
        return [_filename_of(line) for line in text[len(HEADER) + 1 : -1].split("\n")]
    except ValueError:
        return None
