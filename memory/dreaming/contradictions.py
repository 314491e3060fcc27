"""Dreaming consolidates contradictions: two memories of a workspace that state the same subject and slot with
different values ("Production deploys to Fly.io" written by hand beside "Production moved from Fly.io to Render")
are the same fact at two times. The controller supersedes such a pair when the newer one is proposed; this pass
finds the pairs that reached the root another way (hand edits, a checkout, memories older than the rule) and
proposes, through the controller with origin `dreaming`, the delete of the older statement. Every delete is an
ordinary decision: listed with its reason on the run, revertible with `decisions revert`.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from compozy.config import Config
from memory.controller.core import submit
from memory.domain.checkpoint import CHECKPOINT_FILENAME
from memory.domain.document import parse_document
from memory.domain.enums import Op, Origin, RequestKind
from memory.domain.errors import DOCUMENT_ERRORS, CompozyError
from memory.domain.facts import Stated, contradicted, fact_of
from memory.domain.models import Candidate, ScopeRef, format_timestamp
from memory.store import files

_log = logging.getLogger("compozy.memory")


def stated_facts(root: Path) -> list[Stated]:
    """The facts the root's curated memories state (the checkpoint and dreaming's own syntheses left out)."""
    stated = []
    for filename in files.list_document_names(root):
        if filename == CHECKPOINT_FILENAME:
            continue
        try:
            found = files.read_file(root, filename)
            if found is None:
                continue
            document = parse_document(found[0].decode("utf-8"), filename=filename)
        except (*DOCUMENT_ERRORS, UnicodeDecodeError):
            continue  # an invalid file is health's to report, never dreaming's to delete
        provenance = document.frontmatter.provenance
        if provenance is not None and provenance.source_actor == Origin.DREAMING:
            continue
        fact = fact_of(document.body)
        if fact is None:
            continue
        updated = (provenance.updated_at if provenance is not None and provenance.updated_at
                   else format_timestamp(datetime.fromtimestamp(found[1].st_mtime, tz=UTC)))
        stated.append(Stated(filename, fact, updated))
    return stated


def consolidate(*, ref: ScopeRef, root: Path, config: Config) -> list[dict[str, Any]]:
    """Propose the delete of every contradicted older memory; what was proposed, for the run's record."""
    proposed = []
    for older, newer in contradicted(stated_facts(root)):
        candidate = Candidate(ref=ref, origin=Origin.DREAMING, kind=RequestKind.DELETE,
                              target_filename=older.filename, named_target=True)
        entry = {"superseded": older.filename, "by": newer.filename, "subject": older.fact.subject,
                 "slot": older.fact.slot, "old_value": older.fact.value, "new_value": newer.fact.value}
        try:
            decision = submit(candidate, root=root, config=config).decision
        except CompozyError as exc:  # the file went away meanwhile, or the root is busy: the next run sees it
            _log.info("dreaming: contradiction %s -> %s not consolidated: %s", older.filename, newer.filename,
                      exc.code)
            proposed.append(entry | {"decision_id": None, "op": None, "error": exc.code})
            continue
        proposed.append(entry | {"decision_id": decision.id, "op": decision.op,
                                 "applied": decision.op == Op.DELETE})
    return proposed
