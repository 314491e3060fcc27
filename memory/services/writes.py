"""How a service submits a candidate, and the one place a write's result is made. The controller decides and
returns the decision, a `reject` included; here a rejection becomes the Rejected error, its details holding the
decision as every surface renders it."""

from __future__ import annotations

from pathlib import Path

from compozy.config import Config
from memory.controller.core import submit
from memory.controller.rules import scan_rejections
from memory.domain.enums import Op
from memory.domain.errors import Rejected
from memory.domain.models import Candidate

from .results import WriteResult, decision_summary


def candidate_submit(candidate: Candidate, *, root: Path, config: Config, dry_run: bool = False,
                     resolution: str | None = None) -> WriteResult:
    """The controller's decision as a write result; raises Rejected when it is a `reject` (already logged)."""
    outcome = submit(candidate, root=root, config=config, dry_run=dry_run, resolution=resolution)
    summary = decision_summary(outcome.decision)
    if outcome.decision.op == Op.REJECT:
        rules = scan_rejections(outcome.decision.rule_trace)
        raise Rejected(
            "The memory was rejected by the content scanner: " + ", ".join(rules) + ".",
            details={"decision": summary, "rules": ",".join(rules).split(",") if rules else [],
                     "applied": outcome.applied, "dry_run": outcome.dry_run},
        )
    return WriteResult(decision=summary, applied=outcome.applied, dry_run=outcome.dry_run)
