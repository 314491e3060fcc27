"""memory.catalog.sql: the write path's cursor answers what Django's cursor answers, raises Django's errors, refuses a
statement in a broken transaction, and hands out Django's own cursor while statements are watched."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, OperationalError, connection, transaction
from django.db.transaction import TransactionManagementError
from django.test.utils import CaptureQueriesContext

from memory.catalog import sql

pytestmark = pytest.mark.django_db

ROWS = "SELECT key, value FROM memory_state WHERE key LIKE %s ORDER BY key"


def test_the_fast_cursor_reads_and_writes_the_same_rows_as_djangos():
    with sql.cursor() as cursor:
        assert isinstance(cursor, sql.Cursor)
        cursor.executemany("INSERT INTO memory_state (key, value) VALUES (%s, %s)", [["x15.a", 1], ["x15.b", 2]])
        cursor.execute("UPDATE memory_state SET value = value + 10 WHERE key LIKE %s", ["x15.%"])
        assert cursor.rowcount == 2
        cursor.execute(ROWS, ["x15.%"])
        fast = cursor.fetchall()
        cursor.execute("SELECT count(*) FROM memory_state WHERE key LIKE '%%x15%%' AND 1 = %s", [1])
        assert cursor.fetchone() == (2,)  # '%%' is a literal '%' once converted, as in Django
    with connection.cursor() as cursor:
        cursor.execute(ROWS, ["x15.%"])
        assert cursor.fetchall() == fast == [("x15.a", 11), ("x15.b", 12)]


def test_the_fast_cursor_raises_djangos_errors():
    with sql.cursor() as cursor:
        cursor.execute("INSERT INTO memory_state (key, value) VALUES (%s, %s)", ["x15.unique", 1])
        with pytest.raises(IntegrityError), transaction.atomic():
            cursor.execute("INSERT INTO memory_state (key, value) VALUES (%s, %s)", ["x15.unique", 2])
        with pytest.raises(OperationalError):
            cursor.execute("SELECT no_such_column FROM memory_state WHERE key = %s", ["x15.unique"])


def test_the_fast_cursor_refuses_a_statement_inside_a_broken_transaction():
    with transaction.atomic():
        connection.set_rollback(True)
        with pytest.raises(TransactionManagementError), sql.cursor() as cursor:
            cursor.execute("SELECT 1 WHERE 1 = %s", [1])


def test_watched_statements_go_through_djangos_cursor():
    seen: list[str] = []

    def watch(execute, statement, params, many, context):
        seen.append(statement)
        return execute(statement, params, many, context)

    with connection.execute_wrapper(watch), sql.cursor() as cursor:
        assert not isinstance(cursor, sql.Cursor)
        cursor.execute("SELECT 1 WHERE 1 = %s", [1])
    with CaptureQueriesContext(connection) as captured, sql.cursor() as cursor:
        cursor.execute("SELECT 2 WHERE 2 = %s", [2])
    assert seen == ["SELECT 1 WHERE 1 = %s"]
    assert [query["sql"] for query in captured.captured_queries] == ["SELECT 2 WHERE 2 = 2"]
