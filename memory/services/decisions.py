"""The decision noun: the controller's write-ahead log, read and reverted."""

from __future__ import annotations

from django.db.models import Q

from memory.controller.revert import revert_decision
from memory.domain.enums import Op, Origin
from memory.domain.errors import NotFound, ValidationError
from memory.models import Decision

from .context import Caller, Input, Selector, administered_refs, resolve, visible_refs
from .paging import page_of
from .timefilter import parse_since
from .views import DecisionList, DecisionShow, Page, RevertResult, decision_detail, decision_summary


class DecisionListInput(Selector):
    filename: str | None = None
    op: Op | None = None
    origin: Origin | None = None
    since: str | None = None
    cursor: str | None = None
    limit: int | None = None


class DecisionIdInput(Selector):
    decision_id: str


class RevertInput(DecisionIdInput):
    dry_run: bool = False


def _scoped(selector: Selector, caller: Caller):
    resolved = resolve(selector, caller)
    if selector.scope is not None or selector.agent_name:
        refs = visible_refs(selector, resolved)
    else:
        refs = administered_refs(resolved)
    return resolved, Q(root_key__in=[ref.root_key for ref in refs])


def decision_list(*, data: DecisionListInput, caller: Caller) -> DecisionList:
    _resolved, visible = _scoped(data, caller)
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
    binding = {"filename": data.filename, "op": data.op, "origin": data.origin, "since": data.since, "scope": data.scope,
               "agent": data.agent_name, "tier": data.agent_tier, "workspace": _resolved.workspace_id}
    rows, page = page_of(
        queryset.order_by("-decided_at", "-id").defer("post_content", "prior_content"),
        cursor=data.cursor, limit=data.limit, binding=binding,
    )
    return DecisionList(decisions=[decision_summary(row) for row in rows], page=Page(**page))


def _get(data: DecisionIdInput, caller: Caller) -> Decision:
    if not data.decision_id.startswith("dec_") or len(data.decision_id) != 28:
        raise ValidationError("Decision ids look like dec_ followed by 24 hex characters.",
                              details={"field": "decision_id", "reason": "format"})
    _resolved, visible = _scoped(data, caller)
    decision = Decision.objects.filter(visible, id=data.decision_id).first()
    if decision is None:
        raise NotFound(f"No decision {data.decision_id} here.", details={"decision_id": data.decision_id})
    return decision


def decision_show(*, data: DecisionIdInput, caller: Caller) -> DecisionShow:
    return DecisionShow(decision=decision_detail(_get(data, caller)))


def decision_revert(*, data: RevertInput, caller: Caller) -> RevertResult:
    decision = _get(data, caller)
    resolved = resolve(data, caller)
    outcome = revert_decision(decision.id, origin=caller.origin, session_id=caller.session_id or "",
                              config=resolved.config, dry_run=data.dry_run)
    return RevertResult(decision=decision_summary(outcome.decision), reverted=outcome.applied, dry_run=outcome.dry_run)


__all__ = ["decision_list", "decision_show", "decision_revert", "DecisionListInput", "DecisionIdInput",
           "RevertInput", "Input"]
