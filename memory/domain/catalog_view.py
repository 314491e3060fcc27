"""What the controller's rules may know about one memory root: the catalog's view of it. The shapes live here
because both sides use them: the rules (memory/controller/rules.py) read them, the catalog
(memory/catalog/queries.py) serves them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Target:
    filename: str
    name: str
    description: str
    body: str = ""
    body_key: str = ""
    shared_words: int = 0


class CatalogView(Protocol):
    """What the rules may know about one memory root."""

    def by_filename(self, filename: str) -> Target | None: ...
    def by_body_key(self, body_key: str) -> list[Target]: ...
    def by_entity(self, entity: str, memory_type: str) -> list[Target]: ...
    def overlapping(self, memory_type: str, words: list[str], limit: int) -> list[Target]: ...
