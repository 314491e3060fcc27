"""Issue 24 item 15: decisions are ordered by their sequence, never by the wall clock. The clock is the
controller's one time source (memory.domain.models.clock), made to jump back three hours as faketime did."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

import memory.domain.models
from tests import helpers
from tests.helpers import workspace_root

pytestmark = pytest.mark.django_db


def test_a_backward_clock_jump_between_an_agent_edit_and_a_hand_edit_loses_no_version_on_revert(
        home: Path, workspace_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_clock = memory.domain.models.clock
    written = helpers.write(workspace_dir, name="Staging port", content="Staging listens on port 5432.")
    filename = written["decision"]["target_filename"]
    path = workspace_root(workspace_dir) / filename
    # The agent's edit happens while the clock says three hours earlier than the first write.
    monkeypatch.setattr(memory.domain.models, "clock", lambda: real_clock() - timedelta(hours=3))
    helpers.edit(workspace_dir, filename=filename, content="Staging listens on port 6543.")
    monkeypatch.setattr(memory.domain.models, "clock", real_clock)
    edited = path.read_text("utf-8")
    assert "port 6543" in edited
    # Then a hand edit, recorded by reindex at the real time again.
    path.write_text(edited.replace("port 6543", "port 7000"), "utf-8")
    helpers.reindex(workspace_dir)
    listed = helpers.decision_list(workspace_dir)["decisions"]
    hand = next(d for d in listed if d["origin"] == "file" and d["target_filename"] == filename)
    assert "port 6543" in helpers.decision_show(workspace_dir, hand["id"])["decision"]["prior_content"]
    helpers.revert(workspace_dir, hand["id"])
    # Reverting the hand edit restores the agent's edit, not the version before it.
    restored = path.read_text("utf-8")
    assert "port 6543" in restored and "port 5432" not in restored and "port 7000" not in restored
