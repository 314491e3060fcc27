"""The extractor's verbs: `compozy memory extractor status|list-failures|replay <failure>|drain`, and
`replay --session <id>` (every dead letter of a session), REST under `/api/memory/extractor`, and the admin tools
`compozy__memory_extractor_*`."""

from __future__ import annotations

from typing import Any

from memory.domain.errors import ControllerTimeout, NotFound
from memory.services import extractor

from . import ADMIN_TOOLSET, Route, Tool, Verb
from .human import table, when


def human_status(document: dict[str, Any]) -> str:
    queue, counts, last = document["queue"], document["counts"], document["last_run"]
    lines = [
        f"enabled:        {'yes' if document['enabled'] else 'no'} (provider {document['provider']})",
        f"inbox:          {queue['inbox_files']} staged, {queue['claimed_files']} claimed",
        f"sessions:       {queue['sessions_queued']} queued, {queue['sessions_running']} running, "
        f"{queue['pending_requests']} requests coalesced",
        f"runs:           {counts['started']} started, {counts['completed']} completed, {counts['failed']} failed, "
        f"{counts['dropped']} dropped, {counts['coalesced']} coalesced",
        f"candidates:     {counts['candidates']}",
        f"failures:       {counts['failures']} (compozy memory extractor list-failures)",
        "last run:       " + (f"{last['outcome']} {last['session_id']} at {when(last['at'])}"
                              + (f" ({last['error']})" if last["error"] else "") if last else "never"),
    ]
    return "\n".join(lines)


def human_failures(document: dict[str, Any]) -> str:
    rows = [(f["id"], f["stage"], f["source"]["session_id"], f"{f['source']['from_seq']}-{f['source']['until_seq']}",
             f["error"], when(f["recorded_at"])) for f in document["failures"]]
    if not rows:
        return "No extractor failures."
    return (table(rows, ["id", "stage", "session", "seqs", "error", "recorded"])
            + f"\n{len(rows)} of {document['total']} shown; replay one with: compozy memory extractor replay <id>, "
            "or each of a session with: compozy memory extractor replay --session <session>")


def human_drain(document: dict[str, Any]) -> str:
    rows = [(c["op"], "yes" if c["applied"] else "no", c["target_filename"] or "-", c["session_id"], c["decision_id"])
            for c in document["candidates"]]
    lines = [table(rows, ["op", "applied", "file", "session", "decision"])] if rows else []
    lines.append(f"{len(document['files'])} files drained, {len(rows)} candidates, "
                 f"{len(document['failures'])} failed" + (": " + ", ".join(document["failures"])
                                                          if document["failures"] else ""))
    return "\n".join(lines)


def human_replay(document: dict[str, Any]) -> str:
    if document["session_id"] is None:
        return f"replayed {document['failure']} (stage {document['stage']})\n" + human_drain(document["drain"])
    blocks = []
    for replay in document["replays"]:
        if replay["replayed"]:
            blocks.append(f"replayed {replay['failure']} (stage {replay['stage']})\n" + human_drain(replay["drain"]))
        else:
            error = replay["error"]
            blocks.append(f"not replayed {replay['failure']} (stage {replay['stage'] or '?'}): {error['message']} "
                          f"[{error['code']}]")
    done = sum(replay["replayed"] for replay in document["replays"])
    blocks.append(f"session {document['session_id']}: {done} of {len(document['replays'])} failures replayed")
    return "\n".join(blocks)


GROUPS = {("memory", "extractor"): "The extractor: status, list-failures, replay, drain."}

VERBS = [
    Verb(
        command=("memory", "extractor", "status"), input=extractor.ExtractorStatusInput,
        service=extractor.extractor_status, human=human_status,
        summary="The extractor's queue, last run and counts.", routes=(Route("GET", "/api/memory/extractor"),),
        tool=Tool("compozy__memory_extractor_status", ADMIN_TOOLSET, read_only=True, idempotent=True, description=(
            "The extractor (memories proposed from session transcripts): whether it is enabled and with which "
            "provider, its queue (inbox files, sessions queued or running, coalesced requests), the last run and "
            "counts of runs, candidates and failures.")),
    ),
    Verb(
        command=("memory", "extractor", "list-failures"), input=extractor.FailureListInput,
        service=extractor.extractor_failure_list, human=human_failures, items_key="failures",
        summary="The extractor's dead letters, newest first.",
        routes=(Route("GET", "/api/memory/extractor/failures"),),
        tool=Tool("compozy__memory_extractor_list_failures", ADMIN_TOOLSET, read_only=True, idempotent=True,
                  description=(
                      "The extractor's dead letters, newest first: each with the stage that failed (provider, "
                      "validate, stage, parse, resolve, submit), the session and seq range it came from, the error "
                      "and what it held.")),
    ),
    Verb(
        command=("memory", "extractor", "replay"), input=extractor.ReplayInput, service=extractor.extractor_replay,
        positionals=("failure",), human=human_replay, errors=(NotFound, ControllerTimeout),
        incomplete=lambda document: not document["replayed"],
        summary=("Replay a dead letter (or, with a session, every dead letter of it, oldest first): stage it again "
                 "(or extract its turns again) and drain it."),
        routes=(Route("POST", "/api/memory/extractor/failures/{failure}/replay"),
                Route("POST", "/api/memory/extractor/sessions/{session_id}/replay")),
        tool=Tool("compozy__memory_extractor_replay", ADMIN_TOOLSET, idempotent=True, description=(
            "Replay extractor dead letters: one by its id (failure), or every one of a session (session_id), oldest "
            "first. A staged file's candidates are staged and drained again, a failed run's turns are extracted "
            "again. Candidates decided before keep their earlier decisions. A session replay reports each dead "
            "letter in replays, with the error of one that could not be replayed.")),
    ),
    Verb(
        command=("memory", "extractor", "drain"), input=extractor.DrainInput, service=extractor.extractor_drain,
        human=human_drain, errors=(ControllerTimeout,),
        summary="Drain the extractor's inbox through the write controller now.",
        routes=(Route("POST", "/api/memory/extractor/drain"),),
        tool=Tool("compozy__memory_extractor_drain", ADMIN_TOOLSET, idempotent=True, description=(
            "Drain the extractor's inbox now: every staged candidate goes through the write controller with origin "
            "extractor. Returns each candidate's decision and the files that failed.")),
    ),
]
