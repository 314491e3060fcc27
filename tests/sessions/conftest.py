"""Sessions tests run the task cluster's work inline: django-q2 reads its `sync` setting when a task is queued,
so patching it here makes `async_task` run the checkpoint job in the calling thread, as `sync: True` does."""

from __future__ import annotations

import pytest


@pytest.fixture
def sync_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", True)


@pytest.fixture
def http_provider(monkeypatch, completions):
    """The HTTP provider, pointed at the one fake chat-completions endpoint (tests/fake_completions.py)."""
    monkeypatch.setenv("COMPOZY_MEMORY__PROVIDER__KIND", "'openai'")
    monkeypatch.setenv("COMPOZY_MEMORY__PROVIDER__BASE_URL", f"'{completions.url}'")
    monkeypatch.setenv("COMPOZY_MEMORY__PROVIDER__MODEL", "'m'")
    return completions
