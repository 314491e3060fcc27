"""Facts a memory states about a subject: "the staging database listens on port 6543" is (staging database, port,
6543); "Production deploys to Fly.io" is (production, where, fly.io), and so is "Production moved from Fly.io to
Render" with the value render (pure Python, deterministic).

The write controller's rules use them two ways (memory/controller/rules.py):
- the same subject and slot with another value is the newer statement of that fact: it updates (supersedes) the
  memory that states the old value, instead of being added beside it;
- the same slot about another subject is a different fact, however many words the two share: such a memory is
  never a target to update ("the test database listens on port 6543" is not "the staging database …").

Only a few sentence shapes are read, on purpose: a fact this module does not recognise changes nothing, and the
other rules decide as before. A shape reads the first sentence that has one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Words that open a subject without naming it.
_LEADING = re.compile(r"^(?:(?:the|our|your|their|my|a|an|we|that|so|now|currently|today|remember)\s+)+", re.I)
_VALUE = r"(?:(?:the|a|an|our)\s+)?(?P<value>[A-Za-z0-9][\w.\-/: ]*)"
# A value ends at the first of these: what follows says when or why, not where.
_VALUE_END = re.compile(r"\s+(?:since|because|for|with|and|but|via|when|after|before|until|from|in|on|at|as|now|"
                        r"today|instead)\b.*$", re.I)
_SUBJECT = r"(?P<subject>[A-Za-z][\w .\-/]{0,80}?)"

# (slot, pattern). A pattern's subject is everything before its verb in the sentence.
SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("port", re.compile(rf"^{_SUBJECT}\s+(?:listens|runs|is served|serves|answers|is)\s+on\s+port\s+(?P<value>\d+)\b",
                        re.I)),
    ("port", re.compile(rf"^{_SUBJECT}(?:'s|s')?\s+port\s+is\s+(?P<value>\d+)\b", re.I)),
    ("where", re.compile(rf"^{_SUBJECT}\s+(?:has\s+)?(?:moved|migrated|switched|was moved|was migrated)\s+from\s+"
                         rf"(?P<old>[\w.\-/:]+)\s+to\s+{_VALUE}", re.I)),
    ("where", re.compile(rf"^{_SUBJECT}\s+(?:now\s+)?(?:deploys|is deployed|gets deployed|ships|is hosted|runs|lives)"
                         rf"\s+(?:to|on|at|in)\s+{_VALUE}", re.I)),
)


@dataclass(frozen=True)
class Fact:
    subject: str
    slot: str
    value: str


def _sentences(text: str) -> list[str]:
    return [part.strip() for part in re.split(r"(?<=[.!?])\s+|\n+", text) if part.strip()]


def _subject(text: str) -> str:
    words = _LEADING.sub("", text.strip()).lower().split()
    return " ".join(words)


def fact_of(text: str) -> Fact | None:
    """The first fact of a recognised shape in the text, or None."""
    for sentence in _sentences(text):
        for slot, pattern in SHAPES:
            found = pattern.search(sentence)
            if found is None:
                continue
            subject = _subject(found.group("subject"))
            if not subject or subject in ("it", "this", "that", "they", "he", "she"):
                continue
            value = _VALUE_END.sub("", found.group("value").strip()).lower().rstrip(".,;: ")
            if value:
                return Fact(subject=subject, slot=slot, value=" ".join(value.split()[:4]))
    return None


def conflicts(newer: Fact, older: Fact) -> bool:
    """The same fact with another value: the newer statement supersedes the older one."""
    return newer.subject == older.subject and newer.slot == older.slot and newer.value != older.value


def other_subject(newer: Fact, older: Fact) -> bool:
    """The same kind of fact about something else: a different memory, whatever words they share."""
    return newer.slot == older.slot and newer.subject != older.subject


@dataclass(frozen=True)
class Stated:
    """One memory's fact, with when it was last stated (ISO 8601, comparable as text) and its file."""

    filename: str
    fact: Fact
    updated_at: str


def contradicted(memories: list[Stated]) -> list[tuple[Stated, Stated]]:
    """(older, newer) for every memory whose fact a newer memory states with another value: the same subject and
    slot. Each older memory once, paired with the newest statement of its fact (ties: the later filename)."""
    newest: dict[tuple[str, str], Stated] = {}
    for memory in memories:
        key = (memory.fact.subject, memory.fact.slot)
        current = newest.get(key)
        if current is None or (memory.updated_at, memory.filename) > (current.updated_at, current.filename):
            newest[key] = memory
    pairs = []
    for memory in sorted(memories, key=lambda m: m.filename):
        latest = newest[(memory.fact.subject, memory.fact.slot)]
        if latest is not memory and conflicts(latest.fact, memory.fact):
            pairs.append((memory, latest))
    return pairs
