"""The decision noun: the controller's write-ahead log, read and reverted."""

from __future__ import annotations

from collections import defaultdict

from django.db.models import Q
from pydantic import Field

from compozy.config import get_config
from memory.controller.events import event_record
from memory.controller.lock import write_lock
from memory.controller.replay import replay_pending
from memory.controller.retention import prune_decisions, pruned_record
from memory.controller.revert import revert_decision
from memory.domain.enums import EventOp, Op, Origin
from memory.domain.errors import NotFound, ValidationError
from memory.models import Decision

from .catalog import held_root_reports
from .inputs import Caller, Input, Selector, all_workspaces_field
from .paging import cursor_field, limit_field, page_of
from .resolution import Span, resolve, resolve_span
from .results import (
    DecisionList,
    DecisionShow,
    Page,
    PruneResult,
    PruneRoot,
    RetryHeldResult,
    RevertResult,
    decision_detail,
    decision_summary,
    iso,
)
from .root_discovery import administered_refs_across
from .scopes import visible_refs, visible_refs_across
from .timefilter import SINCE, parse_since


class DecisionListInput(Selector):
    filename: str | None = Field(default=None, description="Only decisions about this file.")
    op: Op | None = Field(default=None, description=(
        "Only decisions with this outcome: add, update, delete, noop (nothing changed) or reject."))
    origin: Origin | None = Field(default=None, description=(
        "Only decisions requested through this origin: cli, http, uds, tool (an agent), extractor, dreaming, "
        "file (a hand edit found on disk) or provider."))
    since: str | None = Field(default=None, description=SINCE)
    all_workspaces: bool = all_workspaces_field()
    cursor: str | None = cursor_field()
    limit: int | None = limit_field()


class DecisionIdInput(Selector):
    decision_id: str = Field(description="The decision id: dec_ followed by 24 hex characters.")
    # A decision id is unique in the whole log, so the operator may look one up without naming its workspace.
    all_workspaces: bool = all_workspaces_field()


class RevertInput(DecisionIdInput):
    dry_run: bool = Field(default=False, description="Decide the revert without applying it.")


class PruneInput(Input):
    """Retention over the whole decision log (it is per database, like the log itself), with the home
    configuration's `memory.decisions.prune_after_applied_days`."""

    dry_run: bool = Field(False, description="count what would be pruned; delete nothing and record no event")


def _scoped(selector: DecisionListInput | DecisionIdInput, caller: Caller) -> tuple[Span, Q]:
    """The decisions a call may see, as a filter on their root keys: the roots the selectors name, else every
    administered root of the caller's workspace (or, with all_workspaces, of each known workspace)."""
    span = resolve_span(selector.workspace, caller, all_workspaces=selector.all_workspaces)
    if selector.scope is not None or selector.agent_name:
        refs = (visible_refs_across(selector, span.workspace_ids) if span.across
                else visible_refs(selector, span.resolved))
    else:
        refs = administered_refs_across(list(span.workspaces))
    return span, Q(root_key__in=[ref.root_key for ref in refs])


def decision_list(*, data: DecisionListInput, caller: Caller) -> DecisionList:
    span, visible = _scoped(data, caller)
    queryset = Decision.objects.filter(visible)
    if data.filename:
        queryset = queryset.filter(target_filename=data.filename)
    if data.op is not None:
        queryset = queryset.filter(op=data.op.value)
    if data.origin is not None:
        queryset = queryset.filter(origin=data.origin.value)
    since = parse_since(data.since)
    if since is not None:
        queryset = queryset.filter(decided_at__gte=since)
    binding = {"filename": data.filename, "op": data.op, "origin": data.origin, "since": data.since,
               "scope": data.scope, "agent": data.agent_name, "tier": data.agent_tier,
               "workspaces": span.workspace_ids, "across": span.across}
    rows, page = page_of(
        queryset.order_by("-seq", "-id").defer("post_content", "prior_content"),
        cursor=data.cursor, limit=data.limit, binding=binding,
    )
    return DecisionList(decisions=[decision_summary(row) for row in rows], page=Page(**page))


def _get(data: DecisionIdInput, caller: Caller) -> Decision:
    if not data.decision_id.startswith("dec_") or len(data.decision_id) != 28:
        raise ValidationError("Decision ids look like dec_ followed by 24 hex characters.",
                              details={"field": "decision_id", "reason": "format"})
    _span, visible = _scoped(data, caller)
    decision = Decision.objects.filter(visible, id=data.decision_id).first()
    if decision is None:
        tombstone = pruned_record(data.decision_id, _root_keys(visible))
        if tombstone is not None:
            raise NotFound(
                f"Decision {data.decision_id} was pruned by retention on {iso(tombstone.pruned_at)}: applied "
                f"decisions older than memory.decisions.prune_after_applied_days are deleted, except each existing "
                "file's latest ones.",
                details={"decision_id": data.decision_id, "reason": "pruned_by_retention",
                         "pruned_at": iso(tombstone.pruned_at), "filename": tombstone.target_filename},
            )
        raise NotFound(f"No decision {data.decision_id} here.", details={"decision_id": data.decision_id})
    return decision


def _root_keys(visible: Q) -> list[str]:
    """The root keys of a `_scoped` filter (one `root_key__in` child)."""
    ((_lookup, keys),) = visible.children
    return list(keys)


def decision_show(*, data: DecisionIdInput, caller: Caller) -> DecisionShow:
    return DecisionShow(decision=decision_detail(_get(data, caller)))


def decision_revert(*, data: RevertInput, caller: Caller) -> RevertResult:
    decision = _get(data, caller)
    # The revert is decided under the configuration of the decision's own workspace, wherever it was found from.
    workspace = decision.workspace_id if data.all_workspaces else data.workspace
    config = resolve(Selector(workspace=workspace or None), caller).config
    outcome = revert_decision(decision.id, origin=caller.origin, session_id=caller.session_id or "",
                              config=config, dry_run=data.dry_run)
    return RevertResult(decision=decision_summary(outcome.decision), reverted=outcome.applied, dry_run=outcome.dry_run)


def decision_retry_held(*, lock_timeout_ms: int | None = None) -> RetryHeldResult:
    """Apply the decisions that wait for a held root (a full or read-only filesystem that has space again, a
    workspace found back at its path). A long-running server makes no other write that would replay them, so its
    cluster runs this on a schedule; each root lifted records memory.root.released."""
    timeout = lock_timeout_ms or get_config(None).memory.controller.lock_timeout
    replayed = replay_pending(lock_timeout_ms=timeout)
    return RetryHeldResult(replayed=replayed, held_roots=held_root_reports())


def decision_prune(*, data: PruneInput, caller: Caller, actor: str | None = None) -> PruneResult:
    """Delete applied decisions older than the retention setting, keeping what the controller still reads (see
    memory.controller.retention), and record memory.decisions.pruned per workspace with counts per root.
    `actor` names a caller that is not a surface (the daily task) in the events."""
    config = get_config(None)
    days = config.memory.decisions.prune_after_applied_days
    with write_lock(config.memory.controller.lock_timeout):
        report = prune_decisions(days=days, dry_run=data.dry_run)
        if not data.dry_run:
            by_workspace: dict[str, dict[str, int]] = defaultdict(dict)
            for root_key, count in report.pruned.items():
                by_workspace[report.workspaces.get(root_key, "")][root_key] = count
            if not by_workspace:
                by_workspace[""] = {}  # the run itself is worth a trace, even when nothing was old enough
            for workspace_id, roots in sorted(by_workspace.items()):
                event_record(op=EventOp.DECISIONS_PRUNED, workspace_id=workspace_id,
                             actor=actor or caller.origin.value,
                             metadata={"roots": roots, "pruned": sum(roots.values()), "days": days,
                                       "cutoff": iso(report.cutoff)})
    root_keys = sorted(set(report.pruned) | set(report.kept))
    return PruneResult(
        dry_run=data.dry_run, days=days, cutoff=iso(report.cutoff) or "", pruned=report.total,
        kept=sum(report.kept.values()),
        roots=[PruneRoot(root_key=key, workspace_id=report.workspaces.get(key) or None,
                         pruned=report.pruned.get(key, 0), kept=report.kept.get(key, 0)) for key in root_keys],
    )


__all__ = ["decision_list", "decision_show", "decision_revert", "decision_prune", "decision_retry_held",
           "DecisionListInput",
           "DecisionIdInput", "RevertInput", "PruneInput", "Input"]
