"""Dreaming's verbs, each declared once: `compozy memory dream …`, REST `/api/memory/dreams…` and MCP tools in the
admin toolset `compozy__memory_admin` are generated from this table."""

from __future__ import annotations

from memory.domain.errors import Conflict, ControllerTimeout, NotFound
from memory.services import dreams

from . import ADMIN_TOOLSET, Route, Tool, Verb, human

GROUPS = {("memory", "dream"): "Dreaming: consolidate what agents keep recalling (gated; the cluster runs it on a "
                               "schedule): trigger, status, list, show, retry."}

VERBS = [
    Verb(
        command=("memory", "dream", "trigger"), input=dreams.DreamTriggerInput, service=dreams.dream_trigger,
        human=human.human_dream_trigger, summary="Check the dreaming gates now and run when they all pass.",
        routes=(Route("POST", "/api/memory/dreams/trigger"),), errors=(ControllerTimeout,),
        tool=Tool("compozy__memory_dream_trigger", ADMIN_TOOLSET, description=(
            "Check the dreaming gates (time, sessions, lock, signal) now and run when they pass; force skips time "
            "and sessions, never the lock. Returns {triggered, reason, dream}; reason names the gate that "
            "blocked.")),
    ),
    Verb(
        command=("memory", "dream", "status"), input=dreams.DreamStatusInput, service=dreams.dream_status,
        human=human.human_dream_status, items_key="gates",
        summary="Each dreaming gate's current state and what it waits for, with the latest runs.",
        routes=(Route("GET", "/api/memory/dreams/status"),),
        tool=Tool("compozy__memory_dream_status", ADMIN_TOOLSET, read_only=True, idempotent=True, description=(
            "Each dreaming gate's current state and what it is waiting for, with the latest runs.")),
    ),
    Verb(
        command=("memory", "dream", "list"), input=dreams.DreamListInput, service=dreams.dream_list,
        human=human.human_dream_list, items_key="dreams", summary="The workspace's dreaming runs, newest first.",
        routes=(Route("GET", "/api/memory/dreams"),),
        tool=Tool("compozy__memory_dream_list", ADMIN_TOOLSET, read_only=True, idempotent=True, description=(
            "The workspace's dreaming runs, newest first; page with cursor.")),
    ),
    Verb(
        command=("memory", "dream", "show"), input=dreams.DreamIdInput, service=dreams.dream_show,
        positionals=("run_id",), human=human.human_dream_show,
        summary="One dreaming run: candidates, scores, timings, its report and the controller decision.",
        routes=(Route("GET", "/api/memory/dreams/{run_id}"),), errors=(NotFound,),
        tool=Tool("compozy__memory_dream_show", ADMIN_TOOLSET, read_only=True, idempotent=True, description=(
            "One dreaming run: candidates, scores, timings, its report and the controller decision.")),
    ),
    Verb(
        command=("memory", "dream", "retry"), input=dreams.DreamIdInput, service=dreams.dream_retry,
        positionals=("run_id",), human=human.human_dream_trigger,
        summary="Run dreaming again after a failed or canceled run (skips time and sessions, never the lock).",
        routes=(Route("POST", "/api/memory/dreams/{run_id}/retry"),), errors=(NotFound, Conflict, ControllerTimeout),
        tool=Tool("compozy__memory_dream_retry", ADMIN_TOOLSET, description=(
            "Run dreaming again after a failed or canceled run (skips time and sessions, never the lock).")),
    ),
]
