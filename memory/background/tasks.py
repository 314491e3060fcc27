"""Task entry points run by the django-q2 cluster (or inline when COMPOZY_Q_SYNC=1)."""

from __future__ import annotations


def run_job(job_id: str) -> None:
    from memory.services.jobs import job_run

    job_run(job_id=job_id)
