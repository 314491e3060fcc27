"""The session noun's verbs, each declared once: CLI `compozy session …`, REST `/api/sessions…` and, for the
reading verbs, MCP tools in the operators' toolset. Agents never write a ledger through MCP: their runtime (a
hook, an ACP client) appends for them."""

from __future__ import annotations

from memory.domain.errors import Conflict, ControllerTimeout, NotFound
from memory.services import sessions

from . import ADMIN_TOOLSET, Route, Tool, Verb, human
from .memory import read_content

SESSION = "/api/sessions/{session_id}"
READ = {"read_only": True, "idempotent": True}

VERBS = [
    Verb(
        command=("session", "start"), input=sessions.SessionStartInput, service=sessions.session_start,
        human=human.human_session_start, routes=(Route("POST", "/api/sessions"),), errors=(Conflict, NotFound),
        summary="Start (or look up) a session; prints the frozen memory section it begins with.",
    ),
    Verb(
        command=("session", "append"), input=sessions.SessionAppendInput, service=sessions.session_append,
        positionals=("session_id",), human=human.human_session_append,
        readers={"jsonl": read_content, "content": read_content},
        routes=(Route("POST", f"{SESSION}/events"),), errors=(NotFound, Conflict),
        summary="Append events: one with --kind (and --content …), or JSON lines with --jsonl - (stdin).",
    ),
    Verb(
        command=("session", "usage"), input=sessions.SessionUsageInput, service=sessions.session_usage,
        positionals=("session_id",), human=human.human_session_usage,
        routes=(Route("POST", f"{SESSION}/usage"),), errors=(NotFound, Conflict, ControllerTimeout),
        summary="Record context usage; at the pressure threshold the session is compacted into the checkpoint.",
    ),
    Verb(
        command=("session", "stop"), input=sessions.SessionIdInput, service=sessions.session_stop,
        positionals=("session_id",), human=human.human_session_stop,
        routes=(Route("POST", f"{SESSION}/stop"),), errors=(NotFound,),
        summary="Stop a session; an eligible one queues the workspace checkpoint update.",
    ),
    Verb(
        command=("session", "show"), input=sessions.SessionIdInput, service=sessions.session_show,
        positionals=("session_id",), human=human.human_session_show, routes=(Route("GET", SESSION),),
        errors=(NotFound,), summary="A session with its snapshot, compaction coverage and checkpoint decisions.",
        tool=Tool("compozy__session_show", ADMIN_TOOLSET, **READ, description=(
            "One session of this workspace: type, status, parent, context usage, event counts, the snapshot it "
            "started with, its compaction coverage and the checkpoint decisions it caused.")),
    ),
    Verb(
        command=("session", "events"), input=sessions.SessionEventsInput, service=sessions.session_events,
        positionals=("session_id",), human=human.human_session_events, items_key="events",
        routes=(Route("GET", f"{SESSION}/events"),), errors=(NotFound,),
        summary="A session's events in order; archived ones (covered by the checkpoint) are marked.",
        tool=Tool("compozy__session_events", ADMIN_TOOLSET, **READ, description=(
            "Read a session's events in seq order: user and assistant messages, tool calls and results, usage, "
            "done and error rows, archived ones marked. Page with after_seq = next_after_seq.")),
    ),
    Verb(
        command=("session", "history"), input=sessions.SessionHistoryInput, service=sessions.session_history,
        positionals=("session_id",), human=human.human_session_history, items_key="events",
        routes=(Route("GET", f"{SESSION}/history"),), errors=(NotFound,),
        summary="What happened to a session, oldest first: its recorded operations, and the ledger rows it keeps.",
        tool=Tool("compozy__session_history", ADMIN_TOOLSET, **READ, description=(
            "What happened to one session, oldest first: start and stop, its snapshot and recalls, the memories "
            "it wrote, checkpoint updates, compaction and extraction runs, with how many ledger rows it keeps "
            "(archived included). Pages: pass page.next_cursor back as cursor.")),
    ),
    Verb(
        command=("session", "list"), input=sessions.SessionListInput, service=sessions.session_list,
        human=human.human_session_list, items_key="sessions", routes=(Route("GET", "/api/sessions"),),
        summary="This workspace's sessions, newest first.",
        tool=Tool("compozy__session_list", ADMIN_TOOLSET, **READ, description=(
            "This workspace's sessions, newest first, with type, status, event counts and context usage. Pages: "
            "pass page.next_cursor back as cursor with the same other arguments.")),
    ),
    Verb(
        command=("session", "resume"), input=sessions.SessionIdInput, service=sessions.session_resume,
        positionals=("session_id",), human=human.human_session_resume,
        routes=(Route("GET", f"{SESSION}/resume"),), errors=(NotFound,),
        summary="The degraded-resume replay: a historical-context notice, the checkpoint, then unarchived events.",
        tool=Tool("compozy__session_resume", ADMIN_TOOLSET, **READ, description=(
            "The degraded-resume text of a session: a notice that it is historical context, the workspace "
            "checkpoint, then the session's events not yet summarised into it. The same state gives the same "
            "bytes.")),
    ),
]
