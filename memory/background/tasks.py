"""Task entry points run by the django-q2 cluster (or inline when COMPOZY_Q_SYNC=1). They hold no logic: each
calls one service."""

from __future__ import annotations

# The actor recorded in the events of scheduled work, which has no surface origin of its own.
SCHEDULE_ACTOR = "schedule"


def sync_global() -> dict:
    """`memory sync` of global memory, after a session stop or on the schedule; a home never synced is left alone."""
    from memory.domain.enums import Origin
    from memory.services.inputs import Caller
    from memory.services.sync import SyncInput, memory_sync, sync_configured

    if not sync_configured():
        return {"skipped": "global memory was never synced on this machine (run `compozy memory sync --remote`)"}
    return memory_sync(data=SyncInput(), caller=Caller(origin=Origin.CLI)).to_json()


def compact_catalog() -> dict:
    """The full-text indexes merged back into one b-tree each, after writes have added b-trees to them."""
    from memory.domain.enums import Origin
    from memory.services.catalog import CompactInput, catalog_compact
    from memory.services.inputs import Caller

    return catalog_compact(data=CompactInput(), caller=Caller(origin=Origin.CLI)).to_json()


def run_job(job_id: str) -> None:
    from memory.services.jobs import job_run

    job_run(job_id=job_id)


def prune_decisions() -> dict:
    """The daily retention pass over the decision log."""
    from memory.domain.enums import Origin
    from memory.services.decisions import PruneInput, decision_prune
    from memory.services.inputs import Caller

    result = decision_prune(data=PruneInput(), caller=Caller(origin=Origin.CLI), actor=SCHEDULE_ACTOR)
    return result.to_json()


def retry_held_roots() -> dict:
    """Apply what waits for a held root (a full disk with space again): a server that makes no write of its own
    would otherwise leave the root held, and health degraded, until some command replayed."""
    from memory.services.decisions import decision_retry_held

    return decision_retry_held().to_json()


def close_idle_sessions() -> dict:
    """Stop the sessions idle for session.idle_close_after (their clients never said they ended)."""
    from memory.domain.enums import Origin
    from memory.services.inputs import Caller
    from memory.services.sessions import session_close_idle

    return session_close_idle(caller=Caller(origin=Origin.CLI)).to_json()


def dream_check() -> dict:
    """The dreaming schedule: the gates of every workspace with activity, and a run where they all pass."""
    from memory.domain.enums import Origin
    from memory.services.dreams import dream_scheduled_pass
    from memory.services.inputs import Caller

    return dream_scheduled_pass(caller=Caller(origin=Origin.DREAMING)).to_json()


def run_extraction(session_id: str, run_id: str) -> dict:
    """One extractor run for one session (queued by `extractor_request`)."""
    from dataclasses import asdict

    from memory.services.extractor import extractor_run

    return asdict(extractor_run(session_id=session_id, run_id=run_id))


def drain_extractor_inbox() -> dict:
    """Drain the extractor's inbox through the controller (queued after a run staged a file)."""
    from memory.domain.enums import Origin
    from memory.services.extractor import DrainInput, extractor_drain
    from memory.services.inputs import Caller

    return extractor_drain(data=DrainInput(), caller=Caller(origin=Origin.EXTRACTOR)).to_json()


def run_checkpoint(session_id: str) -> None:
    """The workspace checkpoint update after an eligible session stopped."""
    from memory.services.checkpoints import checkpoint_after_stop

    checkpoint_after_stop(session_id=session_id)
