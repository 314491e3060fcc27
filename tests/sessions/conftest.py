"""Sessions tests run the task cluster's work inline: django-q2 reads its `sync` setting when a task is queued,
so patching it here makes `async_task` run the checkpoint job in the calling thread, as `sync: True` does."""

from __future__ import annotations

import pytest


@pytest.fixture
def sync_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", True)
