"""Catalog lookups the controller's rules use. Every query is keyed by one root."""

from __future__ import annotations

from memory.domain.catalog_view import Target

from . import fts, sql

_TARGETS = (
    "SELECT e.id, e.filename, e.name, e.description, e.body_key FROM memory_catalog_entries e "
    "WHERE e.root_key = %s AND e.is_system = 0 AND "
)


# Enough words to find any memory sharing two of them with a typical candidate, few enough to keep the OR query
# cheap for a long one.
MAX_OVERLAP_TERMS = 32


_COLUMNS = "e.id, e.filename, e.name, e.description, e.body_key FROM memory_catalog_entries e WHERE e.root_key = %s "
# The three look-ups of one candidate in one statement: each part is the index seek its look-up makes alone,
# tagged with the look-up it answers.
_PREFETCH = (
    f"SELECT 0, {_COLUMNS}AND e.is_system = 0 AND e.filename = %s "
    f"UNION ALL SELECT 1, {_COLUMNS}AND e.is_system = 0 AND e.body_key = %s "
    f"UNION ALL SELECT 2, {_COLUMNS}AND e.is_system = 0 AND e.entity_key = %s AND e.type = %s"
)


class RootCatalogView:
    def __init__(self, root_key: str) -> None:
        self.root_key = root_key
        # (the look-up's arguments) -> its answer, from `prefetch`; each answer is given once, then asked afresh.
        self._prefetched: dict[tuple[str, ...], list[Target]] = {}

    def prefetch(self, filename: str, body_key: str, entity: str, memory_type: str) -> None:
        """Answer by_filename(filename), by_body_key(body_key) and by_entity(entity, memory_type) with one
        statement instead of three (the rules ask all three for nearly every candidate)."""
        with sql.cursor() as cursor:
            cursor.execute(_PREFETCH, [self.root_key, filename, self.root_key, body_key, self.root_key, entity,
                                       memory_type])
            rows = cursor.fetchall()
            bodies = fts.entry_bodies(cursor, list(dict.fromkeys(row[1] for row in rows)))
        parts: list[list[Target]] = [[], [], []]
        for part, entry, name_of_file, name, description, key in rows:
            parts[part].append(Target(name_of_file, name, description, bodies.get(entry, ""), key))
        keys = (("filename", filename), ("body_key", body_key), ("entity", entity, memory_type))
        self._prefetched = {key: sorted(found, key=lambda target: target.filename)
                            for key, found in zip(keys, parts, strict=True)}

    def _targets(self, condition: str, params: list[object]) -> list[Target]:
        with sql.cursor() as cursor:
            # Sorted here, not by ORDER BY: that would tempt SQLite into walking the (root_key, filename) index
            # over the whole root instead of using the narrow index of the condition.
            cursor.execute(_TARGETS + condition, [self.root_key, *params])
            rows = cursor.fetchall()
            bodies = fts.entry_bodies(cursor, [row[0] for row in rows])
            return sorted((Target(filename, name, description, bodies.get(entry, ""), body_key)
                           for entry, filename, name, description, body_key in rows),
                          key=lambda target: target.filename)

    def by_filename(self, filename: str) -> Target | None:
        found = self._prefetched.pop(("filename", filename), None)
        if found is None:
            found = self._targets("e.filename = %s", [filename])
        return found[0] if found else None

    def by_body_key(self, body_key: str) -> list[Target]:
        found = self._prefetched.pop(("body_key", body_key), None)
        return found if found is not None else self._targets("e.body_key = %s", [body_key])

    def by_entity(self, entity: str, memory_type: str) -> list[Target]:
        found = self._prefetched.pop(("entity", entity, memory_type), None)
        return found if found is not None else self._targets("e.entity_key = %s AND e.type = %s", [entity, memory_type])

    def overlapping(self, memory_type: str, words: list[str], limit: int) -> list[Target]:
        with sql.cursor() as cursor:
            rows = fts.overlap_candidates(
                cursor, root_key=self.root_key, memory_type=memory_type, terms=words[:MAX_OVERLAP_TERMS], limit=limit
            )
        return [Target(filename, name, description, body) for _id, filename, name, description, body in rows]
