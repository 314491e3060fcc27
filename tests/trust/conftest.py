"""Fixtures the trust tests share."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import helpers as h


@pytest.fixture
def ws_with_a_memory(home: Path, workspace_dir: Path) -> Path:
    """The workspace directory with one memory written through the service (so its root and MEMORY.md exist)."""
    h.write(workspace_dir, name="Zebra Crossing", content="The zebra crossing is near the office.")
    return workspace_dir
