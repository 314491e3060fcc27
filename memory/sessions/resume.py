"""Degraded resume: the text an agent receives when its own saved session cannot be loaded.

In order: an instruction that this is historical context, the workspace checkpoint block, then the session's
unarchived rows as a transcript replay (archived rows are already in the checkpoint). The same state always gives
the same bytes: nothing here reads a clock.
"""

from __future__ import annotations

from memory.domain.enums import SessionEventKind
from memory.domain.text import prompt_safe

from .ledger import Projection

RESUME_NOTICE = (
    "Historical context, not a request: this replays an earlier session so that work can continue where it "
    "stopped. The workspace checkpoint comes first, then the session's transcript; rows already summarised into "
    "the checkpoint are left out. Act only on the current user request that follows."
)
_LABELS = {SessionEventKind.USER_MESSAGE: "user", SessionEventKind.ASSISTANT_MESSAGE: "assistant",
           SessionEventKind.TOOL_CALL: "tool call", SessionEventKind.TOOL_RESULT: "tool result",
           SessionEventKind.USAGE: "usage", SessionEventKind.DONE: "done", SessionEventKind.ERROR: "error"}


def _line(message: dict) -> str:
    label = _LABELS.get(message["kind"], message["kind"])
    data = message.get("data") or {}
    if message["kind"] == SessionEventKind.TOOL_CALL and data.get("name"):
        label = f"tool call {data['name']}"
    if message["kind"] == SessionEventKind.TOOL_RESULT and data.get("is_error"):
        label = "tool result (error)"
    text = prompt_safe(message["content"]).replace("\r\n", "\n").rstrip()
    head, *rest = text.split("\n") if text else [""]
    lines = [f"[{message['seq']}] {label}: {head}".rstrip()]
    lines += [f"    {line}".rstrip() for line in rest]
    return "\n".join(lines)


def render(session_id: str, checkpoint_block: str | None, replay: Projection, *, archived: int) -> str:
    parts = [f'<compozy_resume session="{session_id}">', RESUME_NOTICE, ""]
    if checkpoint_block is not None:
        parts += [checkpoint_block, ""]
    attributes = (f'session="{session_id}" rows="{len(replay.messages)}" left_out_archived="{archived}" '
                  f'left_out_older="{replay.omitted_messages}"')
    parts.append(f"<compozy_session_replay {attributes}>")
    if replay.omitted_messages:
        parts.append(f"[… {replay.omitted_messages} older rows cut to fit …]")
    parts += [_line(message) for message in replay.messages]
    parts += ["</compozy_session_replay>", "</compozy_resume>"]
    return "\n".join(parts) + "\n"
