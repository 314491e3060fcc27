"""Catalog lookups the controller's rules use. Every query is keyed by one root."""

from __future__ import annotations

from django.db import connection

from memory.controller.rules import Target
from memory.models import CatalogEntry, Chunk

from . import fts


class RootCatalogView:
    def __init__(self, root_key: str) -> None:
        self.root_key = root_key

    def _targets(self, queryset) -> list[Target]:
        rows = list(queryset.filter(is_system=False).values("id", "filename", "name", "description", "body_key"))
        bodies = dict(Chunk.objects.filter(entry_id__in=[r["id"] for r in rows]).values_list("entry_id", "body"))
        return [
            Target(r["filename"], r["name"], r["description"], bodies.get(r["id"], ""), r["body_key"])
            for r in sorted(rows, key=lambda r: r["filename"])
        ]

    def by_filename(self, filename: str) -> Target | None:
        found = self._targets(CatalogEntry.objects.filter(root_key=self.root_key, filename=filename))
        return found[0] if found else None

    def by_body_key(self, body_key: str) -> list[Target]:
        return self._targets(CatalogEntry.objects.filter(root_key=self.root_key, body_key=body_key))

    def by_entity(self, entity: str, memory_type: str) -> list[Target]:
        return self._targets(CatalogEntry.objects.filter(root_key=self.root_key, entity_key=entity, type=memory_type))

    def overlapping(self, memory_type: str, words: list[str], limit: int) -> list[Target]:
        with connection.cursor() as cursor:
            rows = fts.overlap_candidates(
                cursor, root_key=self.root_key, memory_type=memory_type, terms=words[:64], limit=limit
            )
        return [Target(filename, name, description, body) for _id, filename, name, description, body in rows]
