"""The one event writer: typed and keyword-only, so every field lands in its column and a misspelled one fails
loudly instead of being dropped."""

from __future__ import annotations

import pytest

from memory.controller.events import event_record
from memory.domain.enums import EventOp
from memory.models import Event

pytestmark = pytest.mark.django_db


def test_each_field_of_an_event_lands_in_its_own_column():
    event_record(op=EventOp.RECALL_EXECUTED, workspace_id="01HZZZZZZZZZZZZZZZZZZZZZZZ", session_id="s-1",
                 actor="cli", scope="workspace", agent_name="reviewer", agent_tier="global", target="x.md",
                 metadata={"result_count": 3})
    event = Event.objects.get()
    assert (event.op, event.workspace_id, event.session_id, event.actor, event.scope, event.agent_name,
            event.agent_tier, event.decision_id, event.target, event.metadata) == (
        "memory.recall.executed", "01HZZZZZZZZZZZZZZZZZZZZZZZ", "s-1", "cli", "workspace", "reviewer", "global",
        None, "x.md", {"result_count": 3})
    assert event.ts is not None


def test_a_misspelled_event_field_is_a_type_error_and_records_nothing():
    with pytest.raises(TypeError, match="sesion_id"):
        event_record(op=EventOp.RECALL_EXECUTED, sesion_id="s-1")  # type: ignore[call-arg]
    assert not Event.objects.exists()


def test_an_event_op_is_never_positional():
    with pytest.raises(TypeError):
        event_record(EventOp.RECALL_EXECUTED)  # type: ignore[misc]
