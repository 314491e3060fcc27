"""Statements of the write path on Django's connection, without Django's per-statement cost.

A statement through Django's cursor costs several times what SQLite itself spends on it (a cursor wrapper per
`connection.cursor()`, the chain of execute wrappers, and a regular expression turning every `%s` into `?` on every
call), and the write path and the extractor's drain run many statements per write. `cursor()` hands out the same
connection's sqlite3 cursor behind a thin wrapper that does what Django's does, once where it can: the `%s` to `?`
conversion (Django's own expression) once per statement text, Django's refusal of a statement inside a broken
transaction, and Django's translation of every sqlite3 error into its own (`django.db.OperationalError`, ...), so
callers catch what Django's cursor raises. The statements, their parameters, the connection and its transaction are the
same, so are the rows.

When anything watches the statements (an execute wrapper, as tests and benchmarks install, or the query log of
DEBUG and `CaptureQueriesContext`), it hands out Django's own cursor instead, so they see every statement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import suppress
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.sqlite3.base import FORMAT_QMARK_REGEX

# Statement text -> its qmark form. The write path's statements are a few dozen; the bound only guards against a
# caller that builds a new text per call (an IN list of varying length).
_QMARK: dict[str, str] = {}
_QMARK_LIMIT = 1024


def qmark(sql: str) -> str:
    """Django's "format" to SQLite's "qmark" style, exactly as `SQLiteCursorWrapper.convert_query` does it."""
    converted = _QMARK.get(sql)
    if converted is None:
        if len(_QMARK) >= _QMARK_LIMIT:
            _QMARK.clear()
        converted = _QMARK[sql] = FORMAT_QMARK_REGEX.sub("?", sql).replace("%%", "%")
    return converted


class Cursor:
    """The subset of Django's cursor the write path uses: execute, executemany, fetchone, fetchall, rowcount."""

    __slots__ = ("_db", "_cursor")

    def __init__(self, db: Any, cursor: Any) -> None:
        self._db = db
        self._cursor = cursor

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> Cursor:
        if isinstance(params, Mapping):
            raise TypeError("memory.catalog.sql takes positional parameters only")
        self._db.validate_no_broken_transaction()
        with self._db.wrap_database_errors:
            if params is None:
                self._cursor.execute(sql)  # as Django: no parameters, no conversion
            else:
                self._cursor.execute(qmark(sql), params)
        return self

    def executemany(self, sql: str, param_list: Sequence[Sequence[Any]]) -> Cursor:
        self._db.validate_no_broken_transaction()
        with self._db.wrap_database_errors:
            self._cursor.executemany(qmark(sql), param_list)
        return self

    def fetchone(self) -> Any:
        with self._db.wrap_database_errors:
            return self._cursor.fetchone()

    def fetchall(self) -> list[Any]:
        with self._db.wrap_database_errors:
            return self._cursor.fetchall()

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount


class cursor:  # noqa: N801 - used as `with sql.cursor() as cursor:`, like Django's
    """A cursor on the default connection (Django's own while statements are being watched). A class rather than a
    generator-based context manager: it is entered for every statement of the write path."""

    __slots__ = ("_db", "_raw", "_watched")

    def __enter__(self) -> Any:
        db = self._db = connections[DEFAULT_DB_ALIAS]
        if db.execute_wrappers or db.queries_logged:
            self._raw = None
            self._watched = db.cursor()
            return self._watched.__enter__()
        db.close_if_health_check_failed()
        if db.connection is None:
            db.ensure_connection()  # what it would check first; skipped when connected (its async guard costs)
        with db.wrap_database_errors:
            self._raw = db.connection.cursor()
        return Cursor(db, self._raw)

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        if self._raw is None:
            self._watched.__exit__(exc_type, exc_value, traceback)
            return
        with suppress(self._db.Database.Error):
            self._raw.close()  # as Django's cursor: a failed close is not the statement's error
