"""Recall's side thread (memory.recall.side_thread): the same answers with it and without it, and never inside a
transaction or on an in-memory database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest
from django.db import connection, transaction

from memory.recall import side_thread
from tests.conftest import REPO
from tests.environment import child_environment
from tests.recall import helpers as rh


def test_the_side_thread_gives_the_same_answers_keeps_its_connection_and_reopens_it_after_a_reconnect(
        home, workspace_dir):
    # A child process on a SQLite file: the pytest process's test database is in memory, where the side thread is
    # never used.
    env = child_environment()
    completed = subprocess.run([sys.executable, "-m", "tests.recall.side_thread_child", str(home),
                                str(workspace_dir)], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    assert report["roots"] == 2
    assert report["compared"] == 20 and report["answered"] >= 16
    assert report["differing"] == 0
    # Each question ran twice with the side thread enabled, and both times it really ran there.
    assert report["concurrent_runs"] == 2 * report["compared"]
    assert report["ran_in_side_thread"] == [True, True, True]
    assert report["side_connections_before_reconnect"] == 1
    assert report["side_connections_after_reconnect"] == 2


@pytest.mark.django_db
def test_inside_a_transaction_recall_runs_in_the_calling_thread(workspace_dir, memory_root):
    from tests import helpers as h

    rh.ensure_workspace(workspace_dir)
    rh.put(memory_root, "project_side.md", name="Side Thread", body="The side thread answers.")

    h.reindex(workspace_dir)
    before = side_thread.side_runs
    with transaction.atomic():
        assert connection.in_atomic_block
        assert not side_thread.usable()
        assert not side_thread.start(lambda: None).concurrent
        assert rh.filenames(rh.search(workspace_dir, "side thread answers")) == ["project_side.md"]
    assert side_thread.side_runs == before


@pytest.mark.django_db(transaction=True)
def test_on_an_in_memory_database_recall_runs_in_the_calling_thread(workspace_dir, memory_root):
    assert connection.is_in_memory_db() and not connection.in_atomic_block
    assert not side_thread.usable()
    before = side_thread.side_runs
    from tests import helpers as h

    rh.ensure_workspace(workspace_dir)
    rh.put(memory_root, "project_side.md", name="Side Thread", body="The side thread answers.")

    h.reindex(workspace_dir)
    assert rh.filenames(rh.search(workspace_dir, "side thread answers")) == ["project_side.md"]
    assert side_thread.side_runs == before


def test_an_error_in_the_side_call_is_raised_by_result_and_the_thread_stays_usable(monkeypatch):
    monkeypatch.setattr(side_thread, "usable", lambda: True)  # calls that never touch the database

    def fails() -> None:
        raise ValueError("from the side")

    before = side_thread.side_runs
    pending = side_thread.start(fails)
    assert pending.concurrent
    with pytest.raises(ValueError, match="from the side"):
        pending.result()
    assert side_thread.start(lambda: 7).result() == 7
    assert side_thread.side_runs == before + 1  # the call that raised does not count
    side_thread.shut_down()


def test_a_caller_that_never_collects_its_side_call_does_not_keep_the_side_thread_held(monkeypatch):
    # A question that raises between start() and result() (an error in the word-index ranking, say) drops its
    # Pending: the side thread must be free again once that call ends, not held for the rest of the process.
    monkeypatch.setattr(side_thread, "usable", lambda: True)
    release = threading.Event()
    abandoned = side_thread.start(release.wait, 30)
    assert abandoned.concurrent and side_thread.busy()
    assert not side_thread.start(lambda: 1).concurrent  # held meanwhile: the caller does its own part
    del abandoned
    release.set()
    deadline = time.monotonic() + 30
    while side_thread.busy() and time.monotonic() < deadline:
        time.sleep(0.01)
    following = side_thread.start(lambda: 7)
    assert following.concurrent and following.result() == 7
    assert not side_thread.busy()
    side_thread.shut_down()


def test_by_default_the_side_thread_is_used_only_while_the_load_average_leaves_a_core_free(monkeypatch):
    monkeypatch.setattr(side_thread, "enabled", None)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(side_thread, "_load_checked", -1.0)
    monkeypatch.setattr(os, "getloadavg", lambda: (1.2, 0.0, 0.0))
    assert side_thread.core_free()
    monkeypatch.setattr(os, "getloadavg", lambda: (2.0, 0.0, 0.0))
    assert side_thread.core_free()  # read at most once a second
    monkeypatch.setattr(side_thread, "_load_checked", -1.0)
    assert not side_thread.core_free()
    # Busy machine: not used, whatever the database; enabled=True skips the load check (not the other rules).
    monkeypatch.setattr(connection, "is_in_memory_db", lambda: False)
    assert not side_thread.usable()
    monkeypatch.setattr(side_thread, "enabled", True)
    assert side_thread.usable()
    monkeypatch.setattr(side_thread, "enabled", False)
    assert not side_thread.usable()
