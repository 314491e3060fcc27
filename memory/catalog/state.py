"""The `memory_state` table: integers kept by key beside the catalog (the schema stamp, the catalog's generation and
derivation, each root's freshness stamp and sync position). One way to read and set one; a counter that moves in
its own statement (the generation) keeps its statement where it moves."""

from __future__ import annotations

import hashlib

from django.db import connection


def root_state_key(prefix: str, root_key: str) -> str:
    """The key of a value kept per memory root: the root key (a path, possibly long) hashed to fit the column."""
    return f"{prefix}:" + hashlib.sha256(root_key.encode()).hexdigest()[:40]


def state_value(key: str) -> int | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT value FROM memory_state WHERE key = %s", [key])
        row = cursor.fetchone()
    return None if row is None else int(row[0])


def set_state_value(key: str, value: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO memory_state (key, value) VALUES (%s, %s) "
                       "ON CONFLICT(key) DO UPDATE SET value = excluded.value", [key, value])
