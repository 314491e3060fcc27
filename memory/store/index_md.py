"""MEMORY.md: the prompt-safe table of contents of one memory root, one line per document, oldest first.

Lines are kept in the order memories were added, so adding a memory appends one line: a write's cost does not
grow with the size of its root. Changing or removing a line rewrites the file.
"""

from __future__ import annotations

from collections.abc import Iterable

from memory.domain.text import prompt_safe

HEADER = "# Memory Index\n"


def index_line(filename: str, name: str, description: str) -> str:
    # The index goes into prompts as it is: a hand-placed file's name or description must not carry a structural
    # tag or a control character into it (or a NUL into MEMORY.md).
    name = prompt_safe(name).replace("[", "(").replace("]", ")")
    return f"- [{name}]({filename}) — {prompt_safe(description)}"


def render_index(entries: Iterable[tuple[str, str, str]]) -> str:
    """entries: (filename, name, description) in the order they were added."""
    return _join([index_line(*entry) for entry in entries])


def _join(lines: list[str]) -> str:
    return HEADER + ("\n" + "\n".join(lines) + "\n" if lines else "")


def _lines(text: str) -> list[str] | None:
    if text == HEADER:
        return []
    if text.startswith(HEADER + "\n") and text.endswith("\n"):
        lines = text[len(HEADER) + 1 : -1].split("\n")
        if all(_filename_of(line) for line in lines):
            return lines
    return None


def _filename_of(line: str) -> str | None:
    start = line.find("](")
    end = line.find(")", start + 2)
    if not line.startswith("- [") or start < 0 or end < 0:
        return None
    return line[start + 2 : end]


def splice_index(text: str, filename: str, line: str | None) -> str | None:
    """Replace or remove (line None) one file's entry, or append it when absent. None when the text is not in the
    rendered form (hand-edited, say): the caller then renders the index whole."""
    return splice_lines(text, {filename: line})


def splice_lines(text: str, changes: dict[str, str | None]) -> str | None:
    """`splice_index` for many files at once, in one pass over the index: the same text as splicing them one by
    one in `changes`' order (new entries are appended in that order)."""
    lines = _lines(text)
    if lines is None:
        return None
    positions: dict[str, int] = {}
    for index, existing in enumerate(lines):
        filename = _filename_of(existing)
        if filename in changes:
            if filename in positions:
                return None  # listed twice: not the rendered form
            positions[filename] = index
    removed: set[int] = set()
    for filename, line in changes.items():
        at = positions.get(filename)
        if line is None:
            if at is not None:
                removed.add(at)
        elif at is not None:
            lines[at] = line
        else:
            positions[filename] = len(lines)
            lines.append(line)
    if removed:
        lines = [line for index, line in enumerate(lines) if index not in removed]
    joined = _join(lines)
    return text if joined == text else joined


def listed_filenames(text: str) -> list[str] | None:
    """The filenames an index lists, or None when it is not in the rendered form."""
    lines = _lines(text)
    return None if lines is None else [_filename_of(line) or "" for line in lines]
