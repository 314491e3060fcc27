"""Revert: a new decision that points at the one it undoes. It is refused when the file has changed since."""

from __future__ import annotations

from pathlib import Path

from compozy.config import Config
from memory.domain.document import parse_document
from memory.domain.enums import MUTATING_OPS, Op, Origin
from memory.domain.errors import Conflict, NotFound, ValidationError
from memory.domain.models import canonical_json, sha256_text, utc_now
from memory.models import Decision
from memory.store import files

from .core import Outcome, exclusive, persist_and_apply
from .decision_log import last_decision_id, new_decision
from .roots import ref_from_row, resolve_root

_INVERSE = {Op.ADD: Op.DELETE, Op.UPDATE: Op.UPDATE, Op.DELETE: Op.ADD}


def revert_decision(decision_id: str, *, origin: Origin, session_id: str, config: Config,
                    dry_run: bool = False) -> Outcome:
    with exclusive(config):
        original = Decision.objects.filter(id=decision_id).first()
        if original is None:
            raise NotFound(f"No decision {decision_id}.", details={"decision_id": decision_id})
        op = Op(original.op)
        if op not in MUTATING_OPS:
            raise ValidationError(
                f"Only add, update and delete decisions can be reverted; {decision_id} is a {op.value}.",
                details={"decision_id": decision_id, "op": op.value, "reason": "not_revertible"},
            )
        if original.applied_at is None:
            raise Conflict(f"{decision_id} has not been applied yet.",
                           details={"decision_id": decision_id, "reason": "unapplied"})
        ref = ref_from_row(original.scope, original.workspace_id, original.agent_name, original.agent_tier)
        root = resolve_root(ref)
        if root is None:
            raise NotFound("The decision's workspace is not known on this machine.",
                           details={"decision_id": decision_id, "workspace_id": original.workspace_id})
        existing = Decision.objects.filter(reverts=decision_id, applied_at__isnull=False).order_by("seq").first()
        current = _current_text(root, original.target_filename)
        if existing is not None and _matches(current, existing):
            return Outcome(existing, applied=False, dry_run=dry_run)
        if not _matches(current, original):
            raise Conflict(
                f"{original.target_filename} has changed since {decision_id}; the revert would lose that change.",
                details={"decision_id": decision_id, "filename": original.target_filename, "reason": "changed_since"},
            )
        inverse = _INVERSE[op]
        post = original.prior_content or "" if inverse is not Op.DELETE else ""
        if inverse is not Op.DELETE and not post:
            raise Conflict(f"{decision_id} recorded no prior content to restore.",
                           details={"decision_id": decision_id, "reason": "no_prior_content"})
        frontmatter = parse_document(post).frontmatter.yaml_dict() if post else None
        now = utc_now()
        candidate_hash = sha256_text(canonical_json(["revert", decision_id, original.post_content_hash]))
        decision = new_decision(
            ref=ref, origin=origin, op=inverse, candidate_hash=candidate_hash,
            targets=[original.target_filename], target_filename=original.target_filename, frontmatter=frontmatter,
            post_content=post, prior_content=current,
            rule_trace=[{"name": "revert", "passed": True, "reason": f"undo {op.value} of {decision_id}",
                         "target": original.target_filename}],
            reason=f"revert of {decision_id}", base_state=last_decision_id(original.root_key, original.target_filename),
            decided_at=now, session_id=session_id, reverts=decision_id,
        )
        if dry_run:
            return Outcome(decision, applied=False, dry_run=True)
        stored = Decision.objects.filter(idempotency_key=decision.idempotency_key).first()
        if stored is not None:
            # The same revert was decided before and the file is back where it was: a retry.
            return Outcome(stored, applied=False, dry_run=False)
        persist_and_apply(decision, root=root)
        return Outcome(decision, applied=True, dry_run=False)


def _current_text(root: Path, filename: str) -> str | None:
    raw = files.read_bytes(root, filename)
    return raw.decode("utf-8", "replace") if raw is not None else None


def _matches(current: str | None, decision: Decision) -> bool:
    if decision.op == Op.DELETE:
        return current is None
    return current is not None and sha256_text(current) == decision.post_content_hash
