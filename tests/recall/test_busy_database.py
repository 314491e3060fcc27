"""A recall must answer while another process holds the database's write lock (a long reindex, say)."""

from __future__ import annotations

import sqlite3


def test_a_search_answers_while_another_writer_holds_the_lock(cli):
    assert cli("memory", "write", "--type", "project", "--name", "Lock Free", "--description", "d",
               "--content", "Searches keep answering during a long reindex.").code == 0
    blocker = sqlite3.connect(cli.home / "compozy.db", isolation_level=None, timeout=1)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        result = cli("memory", "search", "searches answering during reindex", "-o", "json")
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert result.code == 0, result.stdout + result.stderr
    assert [hit["memory"]["filename"] for hit in result.json["results"]] == ["project_lock_free.md"]
    # The bookkeeping gave up after a short wait instead of failing the search after the 5 s busy timeout.
    assert "skipped recall signals and event" in result.stderr
