"""How a service submits a candidate. The controller decides and returns the decision, a `reject` included; here
a rejection becomes the Rejected error, its details holding the decision as every surface renders it."""

from __future__ import annotations

from pathlib import Path

from compozy.config import Config
from memory.controller.core import Outcome, submit
from memory.controller.rules import scan_rejections
from memory.domain.enums import Op
from memory.domain.errors import Rejected
from memory.domain.models import Candidate

from .views import decision_summary


def candidate_submit(candidate: Candidate, *, root: Path, config: Config, dry_run: bool = False) -> Outcome:
    """The controller's outcome; raises Rejected when the decision is a `reject` (already logged)."""
    outcome = submit(candidate, root=root, config=config, dry_run=dry_run)
    if outcome.decision.op == Op.REJECT:
        rules = scan_rejections(outcome.decision.rule_trace)
        raise Rejected(
            "The memory was rejected by the content scanner: " + ", ".join(rules) + ".",
            details={"decision": decision_summary(outcome.decision),
                     "rules": ",".join(rules).split(",") if rules else [],
                     "applied": outcome.applied, "dry_run": outcome.dry_run},
        )
    return outcome
