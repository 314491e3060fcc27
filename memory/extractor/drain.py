"""Draining the extractor's inbox: every staged candidate goes through `submit` with origin `extractor`.

One drain at a time (the drain lock). Files are taken oldest first by renaming them (`.processing`); a file a dead
drain had claimed is finished first. Each candidate is submitted with `once=True`, so a file drained again (after
a crash, or replayed from the dead letters) gets its candidates' earlier decisions back instead of new ones.
A file that cannot be read, resolved or submitted moves whole to the dead letters with the stage that failed.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.db import OperationalError
from pydantic import ValidationError as PydanticValidationError

from compozy.config import Config
from memory.controller import faults
from memory.controller.core import submit
from memory.controller.lock import drain_lock
from memory.controller.roots import resolve_root
from memory.domain.errors import CompozyError, ControllerTimeout
from memory.domain.extraction import FailureSource, StagedCandidate, candidate_from_staged
from memory.store.roots import global_root

from . import inbox

_log = logging.getLogger("compozy.memory")
# Files staged while a drain runs are picked up by its next pass; a bound keeps a flood from holding it forever.
MAX_PASSES = 100


@dataclass(frozen=True)
class DrainedCandidate:
    """One staged candidate and the decision it got: also the shape every surface shows (the services' drain
    result lists these as they are)."""

    file: str
    line: int
    session_id: str
    decision_id: str
    op: str
    applied: bool
    target_filename: str


@dataclass
class DrainReport:
    files: list[str] = field(default_factory=list)
    candidates: list[DrainedCandidate] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def ops(self) -> dict[str, int]:
        return dict(Counter(c.op for c in self.candidates))


class _FileFailed(Exception):
    def __init__(self, stage: str, error: str, source: FailureSource) -> None:
        super().__init__(error)
        self.stage = stage
        self.error = error
        self.source = source


def drain_inbox(config: Config, *, prepare: Callable[[], str | None] | None = None) -> DrainReport:
    """Drain every staged file, oldest first. With `prepare` (a replay), drain only the file it stages: it runs
    under the drain lock, so no other drain takes that file first and the replay reports its own decisions."""
    root = global_root()
    report = DrainReport()
    with drain_lock(config.memory.controller.lock_timeout):
        only = prepare() if prepare is not None else None
        if prepare is not None and only is None:
            return report  # nothing was staged: nothing to drain
        inbox.remove_stale_temps(root)
        for _pass in range(MAX_PASSES):
            items = [item for item in inbox.inbox_files(root) if only is None or item.relative == only]
            if not items:
                break
            for item in items:
                claimed = inbox.claim(item)
                if claimed is not None:
                    _drain_file(root, claimed, config, report)
            if only is not None:
                break
    return report


def _drain_file(root: Path, item: inbox.InboxFile, config: Config, report: DrainReport) -> None:
    staged: list[tuple[int, StagedCandidate]] = []

    def source() -> FailureSource:
        # Built only for a dead letter (the file's first line says where it came from, when it parsed).
        if staged:
            return FailureSource(**staged[0][1].source.model_dump())
        return FailureSource(session=item.session, root_session=item.session, from_seq=0, until_seq=0)

    try:
        text = item.path.read_text("utf-8")
        staged = _parse(text, source)
        for number, line in staged:
            _submit_line(item, number, line, config, report)
            faults.hit("drain_after_candidate")
    except _FileFailed as failed:
        report.failures.append(inbox.fail_file(root, item, stage=failed.stage, source=failed.source,  # type: ignore[arg-type]
                                               error=failed.error))
        return
    except UnicodeDecodeError:
        report.failures.append(inbox.fail_file(root, item, stage="parse", source=source(),
                                               error="the file is not valid UTF-8"))
        return
    inbox.finish(item)
    report.files.append(item.relative)


def _parse(text: str, source: Callable[[], FailureSource]) -> list[tuple[int, StagedCandidate]]:
    staged: list[tuple[int, StagedCandidate]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            staged.append((number, StagedCandidate.model_validate_json(line)))
        except PydanticValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first.get("loc", ())) or "line"
            raise _FileFailed("parse", f"line {number}: {where}: {first.get('msg', 'invalid')}", source()) from None
    return staged


def _submit_line(item: inbox.InboxFile, number: int, line: StagedCandidate, config: Config,
                 report: DrainReport) -> None:
    def source() -> FailureSource:
        return FailureSource(**line.source.model_dump())  # only for a dead letter

    try:
        candidate = candidate_from_staged(line)
    except (ValueError, CompozyError) as exc:
        raise _FileFailed("resolve", f"line {number}: {_message(exc)}", source()) from None
    root = resolve_root(candidate.ref)
    if root is None:
        raise _FileFailed("resolve", f"line {number}: the workspace {candidate.ref.workspace_id} is not known on "
                                     "this machine", source())
    try:
        # A scanner reject is a decision like any other (logged, with its event): reported, not a failure.
        outcome = submit(candidate, root=root, config=config, once=True)
    except (ControllerTimeout, OperationalError):
        raise  # busy, not broken: the file stays claimed and the next drain takes it again
    except Exception as exc:  # noqa: BLE001 - a poison file must not block every file after it; it is dead-lettered
        _log.exception("extractor drain: %s line %s could not be submitted", item.relative, number)
        raise _FileFailed("submit", f"line {number}: {_message(exc)}", source()) from None
    decision = outcome.decision
    report.candidates.append(DrainedCandidate(item.relative, number, line.source.session, decision.id, decision.op,
                                              outcome.applied, decision.target_filename))


def _message(exc: BaseException) -> str:
    if isinstance(exc, CompozyError):
        return f"{exc.code}: {exc.message}"
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
