"""Call the session services the way a surface would, and build transcripts of turns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memory.domain.enums import Origin
from memory.services import sessions
from tests import helpers as h
from tests.helpers import workspace_root


def start(cwd: Path, session_id: str, **fields: Any) -> dict[str, Any]:
    data = sessions.SessionStartInput.parse({"session_id": session_id, **fields})
    return sessions.session_start(data=data, caller=h.caller(cwd)).to_json()


def append(cwd: Path, session_id: str, events: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    data = sessions.SessionAppendInput.parse({"session_id": session_id, "events": events, **fields})
    return sessions.session_append(data=data, caller=h.caller(cwd)).to_json()


def usage(cwd: Path, session_id: str, used: int, **fields: Any) -> dict[str, Any]:
    data = sessions.SessionUsageInput.parse({"session_id": session_id, "used": used, **fields})
    return sessions.session_usage(data=data, caller=h.caller(cwd)).to_json()


def compact(cwd: Path, session_id: str, **fields: Any) -> dict[str, Any]:
    data = sessions.SessionCompactInput.parse({"session_id": session_id, **fields})
    return sessions.session_compact(data=data, caller=h.caller(cwd)).to_json()


def stop(cwd: Path, session_id: str, origin: Origin = Origin.CLI) -> dict[str, Any]:
    data = sessions.SessionIdInput.parse({"session_id": session_id})
    return sessions.session_stop(data=data, caller=h.caller(cwd, origin)).to_json()


def show(cwd: Path, session_id: str) -> dict[str, Any]:
    data = sessions.SessionIdInput.parse({"session_id": session_id})
    return sessions.session_show(data=data, caller=h.caller(cwd)).to_json()


def events(cwd: Path, session_id: str, **fields: Any) -> dict[str, Any]:
    data = sessions.SessionEventsInput.parse({"session_id": session_id, **fields})
    return sessions.session_events(data=data, caller=h.caller(cwd)).to_json()


def history(cwd: Path, session_id: str, **fields: Any) -> dict[str, Any]:
    data = sessions.SessionHistoryInput.parse({"session_id": session_id, **fields})
    return sessions.session_history(data=data, caller=h.caller(cwd)).to_json()


def listing(cwd: Path, **fields: Any) -> dict[str, Any]:
    return sessions.session_list(data=sessions.SessionListInput.parse(fields), caller=h.caller(cwd)).to_json()


def resume(cwd: Path, session_id: str) -> dict[str, Any]:
    data = sessions.SessionIdInput.parse({"session_id": session_id})
    return sessions.session_resume(data=data, caller=h.caller(cwd)).to_json()


def turn(turn_id: str, ask: str, answer: str, *, end: str = "done", key: bool = True) -> list[dict[str, Any]]:
    """One complete turn: the user's ask, the assistant's answer, and its end row."""
    rows = [
        {"kind": "user_message", "content": ask, "turn_id": turn_id},
        {"kind": "assistant_message", "content": answer, "turn_id": turn_id},
        {"kind": end, "content": "", "turn_id": turn_id},
    ]
    if key:
        for index, row in enumerate(rows[:2]):
            row["external_key"] = f"{turn_id}-{index}"
    return rows


def checkpoint_path(ws: Path) -> Path:
    return workspace_root(ws) / "project_checkpoint_summary.md"


def valid_answer(goal: str) -> str:
    """A checkpoint a provider could answer: every section, the goal given."""
    from memory.domain import checkpoint

    sections = checkpoint.empty_sections()
    sections["goal"] = [goal]
    return checkpoint.render(sections)
