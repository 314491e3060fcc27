"""Fixtures the inspector's tests share."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.recall.helpers import ensure_workspace


@pytest.fixture
def ws_id(ws: Path) -> str:
    """The id of the shared `ws` workspace, as the pages' `?workspace=` selector and their forms take it."""
    return ensure_workspace(ws)
