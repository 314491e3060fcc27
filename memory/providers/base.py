"""LLM-backed steps (tiebreaker, extractor, dreaming synthesis, checkpoint summary) go through one interface.

A provider takes a task name and a JSON payload and returns text. Callers parse and validate that text the same
way whichever provider produced it, so the deterministic local provider exercises the real validation path.
"""

from __future__ import annotations

from typing import Any, Protocol


class ProviderError(Exception):
    """The provider failed, timed out or answered something unusable. Callers fall back, never crash."""


class Provider(Protocol):
    name: str

    def complete(self, *, task: str, payload: dict[str, Any], timeout_ms: int) -> str: ...
