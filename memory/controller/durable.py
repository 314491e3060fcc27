"""Durable commits: a transaction whose commit reaches the disk (SQLite `synchronous=FULL`) before it returns, for
rows that must survive a crash before anything acts on them: a decision before its file is written, a compaction's
coverage before the rows it covers are marked archived. Everything else commits with the WAL default, NORMAL."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction

from memory.catalog import sql


@contextmanager
def durable_transaction() -> Iterator:
    """A transaction and its cursor. Inside an outer transaction it is a savepoint, and the outer commit decides how
    durable it is (the pragma cannot change inside a transaction)."""
    durable = not connection.in_atomic_block
    if durable:
        connection.ensure_connection()
        with sql.cursor() as cursor:
            cursor.execute("PRAGMA synchronous=FULL")
    try:
        with transaction.atomic(), sql.cursor() as cursor:
            yield cursor
    finally:
        if durable:
            with sql.cursor() as cursor:
                cursor.execute("PRAGMA synchronous=NORMAL")
