"""Long operator work as jobs: started from a surface, run by the task cluster, followed through its progress."""

from __future__ import annotations

import time
from typing import Any

from ulid import ULID

from memory.domain.enums import Origin
from memory.domain.errors import CompozyError, NotFound, ValidationError
from memory.domain.models import utc_now
from memory.models import Job

from .catalog import ReindexInput, catalog_reindex
from .inputs import Caller, Input
from .results import Result, iso

# Progress is written at most this often: a reindex of 10,000 files must not turn into 10,000 commits.
PROGRESS_INTERVAL_S = 0.25


class JobIdInput(Input):
    job_id: str


class JobView(Result):
    id: str
    kind: str
    status: str
    done: int
    total: int
    result: dict[str, Any] | None
    error: dict[str, Any] | None
    created_at: str | None
    started_at: str | None
    finished_at: str | None


def _view(job: Job) -> JobView:
    return JobView(id=job.id, kind=job.kind, status=job.status, done=job.done, total=job.total, result=job.result,
                   error=job.error, created_at=iso(job.created_at), started_at=iso(job.started_at),
                   finished_at=iso(job.finished_at))


def reindex_job_start(*, data: ReindexInput, caller: Caller) -> JobView:
    from django_q.tasks import async_task

    job = Job.objects.create(id=str(ULID()), kind="reindex", status="queued", origin=caller.origin.value,
                             input=data.model_dump(mode="json", exclude_defaults=True), created_at=utc_now())
    async_task("memory.background.tasks.run_job", job.id, task_name=f"reindex-{job.id}")
    job.refresh_from_db()
    return _view(job)


def job_get(*, data: JobIdInput, caller: Caller) -> JobView:
    job = Job.objects.filter(id=data.job_id).first()
    if job is None:
        raise NotFound(f"No job {data.job_id}.", details={"job_id": data.job_id})
    return _view(job)


def job_run(*, job_id: str) -> None:
    job = Job.objects.get(id=job_id)
    if job.status != "queued":
        return  # a retried task must not run finished work twice
    Job.objects.filter(id=job_id).update(status="running", started_at=utc_now())
    last_write = 0.0

    def progress(done: int, total: int) -> None:
        nonlocal last_write
        now = time.monotonic()
        if now - last_write >= PROGRESS_INTERVAL_S or done == total:
            last_write = now
            Job.objects.filter(id=job_id).update(done=done, total=total)

    caller = Caller(origin=Origin(job.origin))
    try:
        if job.kind != "reindex":
            raise ValidationError(f"Unknown job kind {job.kind!r}.", details={"kind": job.kind})
        result = catalog_reindex(data=ReindexInput.parse(job.input), caller=caller, progress=progress)
    except CompozyError as exc:
        Job.objects.filter(id=job_id).update(status="failed", error=exc.to_dict(), finished_at=utc_now())
        return
    except Exception as exc:
        Job.objects.filter(id=job_id).update(
            status="failed", finished_at=utc_now(),
            error={"code": "memory.internal", "message": f"{type(exc).__name__}: {exc}", "details": {}})
        raise
    Job.objects.filter(id=job_id).update(status="succeeded", result=result.to_json(), done=result.files,
                                         total=result.files, finished_at=utc_now())
