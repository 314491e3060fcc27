"""MEMORY.md: the prompt-safe table of contents of one memory root."""

from __future__ import annotations

from collections.abc import Iterable

HEADER = "# Memory Index\n"


def index_line(filename: str, name: str, description: str) -> str:
    name = name.replace("[", "(").replace("]", ")")
    return f"- [{name}]({filename}) — {description}"


def render_index(entries: Iterable[tuple[str, str, str]]) -> str:
    """entries: (filename, name, description), already sorted by filename."""
    lines = [index_line(*entry) for entry in entries]
    return HEADER + ("\n" + "\n".join(lines) + "\n" if lines else "")
