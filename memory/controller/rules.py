"""The deterministic decision rules, applied in a fixed order (numbered in `decide`: normalize, scan, delete
request, exact duplicate, filename collision, entity slot, lexical overlap with the fact slot). Each rule appends
`{name, passed, reason, target}` to the trace. The rules read the catalog, never scan the disk."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError

from memory.domain.catalog_view import CatalogView, Target
from memory.domain.document import body_fingerprint
from memory.domain.enums import AUTONOMOUS_ORIGINS, ControllerMode, DecisionSource, Op, Origin, RequestKind
from memory.domain.errors import ValidationError
from memory.domain.facts import Fact, conflicts, fact_of, other_subject
from memory.domain.models import Candidate, sha256_text
from memory.domain.names import entity_key, slugify
from memory.domain.scanner import scan
from memory.domain.text import overlap_words

MIN_SHARED_WORDS = 2
OVERLAP_POOL = 25
TIEBREAK_TARGETS = 5


@dataclass
class Verdict:
    op: Op
    target_filename: str
    targets: list[str] = field(default_factory=list)
    rule_trace: list[dict[str, Any]] = field(default_factory=list)
    reason: str = ""
    confidence: float = 1.0
    source: DecisionSource = DecisionSource.RULE
    llm_trace: dict[str, Any] | None = None
    rejected_rules: tuple[str, ...] = ()


class TiebreakerAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    op: Literal["add", "update", "noop"]
    target_id: str | None
    confidence: float = Field(ge=0, le=1)
    reason: str = Field(max_length=500)


Tiebreaker = Callable[[dict[str, Any], int], str]


@dataclass(frozen=True)
class RuleSettings:
    mode: ControllerMode
    max_latency_ms: int
    default_op_on_fail: Op
    tiebreaker: Tiebreaker | None


REJECTED_BY = "rejected by "


def scan_rejections(rule_trace: list[dict[str, Any]]) -> list[str]:
    """What the failed scan entries of a trace name: each is the comma-joined rule ids of one scan."""
    return [entry["reason"].removeprefix(REJECTED_BY) for entry in rule_trace
            if entry["name"] == "scan" and not entry["passed"]]


def _trace(verdict_trace: list[dict[str, Any]], name: str, passed: bool, reason: str, target: str | None) -> None:
    verdict_trace.append({"name": name, "passed": passed, "reason": reason, "target": target})


def decide(candidate: Candidate, view: CatalogView, settings: RuleSettings) -> Verdict:
    trace: list[dict[str, Any]] = []
    filename = candidate.target_filename or ""
    front = candidate.frontmatter

    # 1. Normalize and validate: the candidate model and the service already did; the trace records it.
    _trace(trace, "normalize", True, "header and size limits hold", filename)

    # 2. Scan.
    if candidate.kind is RequestKind.WRITE and front is not None:
        result = scan(front.name, front.description, candidate.body)
        if not result.clean:
            rules = ",".join(result.rejected_rules)
            _trace(trace, "scan", False, REJECTED_BY + rules, None)
            # The filename comes from the name; if the name itself was flagged, the filename is withheld too.
            safe_target = filename if scan(front.name).clean else ""
            return Verdict(Op.REJECT, safe_target, [], trace, f"content rejected: {rules}", 1.0,
                           rejected_rules=result.rejected_rules)
        notes = f"; annotated {','.join(result.annotations)}" if result.annotations else ""
        _trace(trace, "scan", True, "no reject rule matched" + notes, filename)

    # 3. Delete requests.
    if candidate.kind is RequestKind.DELETE:
        target = view.by_filename(filename)
        if target is None:
            _trace(trace, "delete_request", False, "target absent", filename)
            return Verdict(Op.NOOP, filename, [], trace, "nothing to delete: the target is absent")
        _trace(trace, "delete_request", True, "one target", filename)
        return Verdict(Op.DELETE, filename, [filename], trace, "delete of one target")

    assert front is not None
    body_key = sha256_text(body_fingerprint(candidate.body))
    _prefetch(view, candidate, filename, body_key, front.type.value)
    same_file = view.by_filename(filename)

    # 4. Exact duplicate. The same file with a changed header is an update, not a duplicate.
    for twin in view.by_body_key(body_key):
        header_same = twin.name == front.name and twin.description == front.description
        if twin.filename != filename or header_same:
            _trace(trace, "exact_duplicate", True, "the body equals a target's body", twin.filename)
            return Verdict(Op.NOOP, twin.filename, [twin.filename], trace, f"exact duplicate of {twin.filename}")
    _trace(trace, "exact_duplicate", False, "no target has this body", None)

    # 5. Filename collision.
    stem = filename.split("_", 1)[-1].removesuffix(".md")
    entity = entity_key(slugify(candidate.entity) if candidate.entity else stem)
    # An autonomous writer that declared an entity slot and whose generated name is that slot's file is updating
    # the slot, not colliding by accident: the entity-slot rule decides, as it would for any other file of the slot.
    slot_owns_file = bool(candidate.entity) and same_file is not None and entity == entity_key(stem)
    if same_file is not None:
        if candidate.origin in AUTONOMOUS_ORIGINS and not candidate.named_target:
            if not slot_owns_file:
                _trace(trace, "filename_collision", True, "autonomous origin named no target; never overwrite",
                       filename)
                return Verdict(Op.NOOP, filename, [filename], trace,
                               "an autonomous write collided with an existing file and named no target")
            _trace(trace, "filename_collision", False, "the file is the declared entity slot's; the slot decides",
                   filename)
        else:
            _trace(trace, "filename_collision", True, "the file exists", filename)
            return Verdict(Op.UPDATE, filename, [filename], trace, f"update of {filename}")
    else:
        _trace(trace, "filename_collision", False, "no file with this name", filename)
        if candidate.origin is Origin.PROVIDER and candidate.named_target:
            # A provider maintains exactly the file it names (the workspace checkpoint): a memory that shares its
            # entity or its words is never the one to overwrite, so the slot and overlap rules do not apply.
            _trace(trace, "named_target", True, "a provider writes the file it names", filename)
            return Verdict(Op.ADD, filename, [], trace, "new memory at the target the provider named")

    # 6. Entity slot: the entity is the filename stem without the type prefix (or the entity the candidate
    # declares); the attribute is the type.
    slot = [t for t in view.by_entity(entity, front.type.value) if t.filename != filename or slot_owns_file]
    if len(slot) == 1:
        _trace(trace, "entity_slot", True, "one memory holds this entity and type", slot[0].filename)
        return Verdict(Op.UPDATE, slot[0].filename, [slot[0].filename], trace,
                       f"update of {slot[0].filename}, which holds the same entity")
    if len(slot) > 1:
        _trace(trace, "entity_slot", False, f"{len(slot)} memories hold this entity: ambiguous", None)
        return _ambiguous(candidate, slot, trace, settings)
    _trace(trace, "entity_slot", False, "no other memory holds this entity", None)

    # 7. Lexical overlap: at least 2 shared words of 3+ characters.
    words = overlap_words(" ".join([front.name, front.description, candidate.body]))
    # Longer words first: they are the distinctive ones when a long candidate is cut to the query limit.
    pool = view.overlapping(front.type.value, sorted(words, key=lambda w: (-len(w), w)), OVERLAP_POOL)
    overlapping = []
    for target in pool:
        shared = len(words & overlap_words(" ".join([target.name, target.description, target.body])))
        if shared >= MIN_SHARED_WORDS and target.filename != filename:
            overlapping.append(Target(target.filename, target.name, target.description, target.body,
                                      target.body_key, shared))
    overlapping.sort(key=lambda t: (-t.shared_words, t.filename))

    # 7b. Fact slot: a memory stating the same subject and slot with another value is superseded by this newer
    # statement (update); one stating the same slot about another subject is a different memory, never a target.
    fact = fact_of(candidate.body) or fact_of(front.description)
    if fact is not None:
        superseded, other = _fact_targets(fact, [t for t in pool if t.filename != filename])
        if len(superseded) == 1:
            old, theirs = superseded[0]
            _trace(trace, "fact_slot", True, f"same subject and slot ({fact.subject}, {fact.slot}): "
                   f"{theirs.value} -> {fact.value}; the newer statement supersedes", old.filename)
            return Verdict(Op.UPDATE, old.filename, [old.filename], trace,
                           f"supersedes {old.filename}: {fact.subject} {fact.slot} {theirs.value} -> {fact.value}")
        if len(superseded) > 1:
            _trace(trace, "fact_slot", False, f"{len(superseded)} memories state ({fact.subject}, {fact.slot}) "
                   "with another value: ambiguous", None)
            return _ambiguous(candidate, [t for t, _ in superseded][:TIEBREAK_TARGETS], trace, settings)
        if other:
            overlapping = [t for t in overlapping if t.filename not in other]
            _trace(trace, "fact_slot", False, f"the same {fact.slot} of another subject is a different memory: "
                   + ", ".join(sorted(other)), None)
    if len(overlapping) > 1:
        _trace(trace, "lexical_overlap", False, f"{len(overlapping)} memories overlap: ambiguous", None)
        return _ambiguous(candidate, overlapping[:TIEBREAK_TARGETS], trace, settings)
    reason = "one memory overlaps; distinct enough to add" if overlapping else "no memory overlaps"
    _trace(trace, "lexical_overlap", True, reason, overlapping[0].filename if overlapping else None)
    return Verdict(Op.ADD, filename, [], trace, "new memory")


def _fact_targets(fact: Fact, pool: list[Target]) -> tuple[list[tuple[Target, Fact]], set[str]]:
    """(targets whose fact this one supersedes, with their fact; filenames of the same slot's other subjects)."""
    superseded: list[tuple[Target, Fact]] = []
    other: set[str] = set()
    for target in sorted(pool, key=lambda t: t.filename):
        theirs = fact_of(target.body) or fact_of(target.description)
        if theirs is None:
            continue
        if conflicts(fact, theirs):
            superseded.append((target, theirs))
        elif other_subject(fact, theirs):
            other.add(target.filename)
    return superseded, other


def _prefetch(view: CatalogView, candidate: Candidate, filename: str, body_key: str, memory_type: str) -> None:
    """Let a view that can answer the filename, body and entity look-ups in one statement do so (the catalog's
    does; each look-up then answers from it, exactly as it would have alone). The entity is the one rule 6 uses;
    when it cannot be derived (a slug with no letters), nothing is prefetched and the rules raise where they did."""
    prefetch = getattr(view, "prefetch", None)
    if prefetch is None:
        return
    stem = filename.split("_", 1)[-1].removesuffix(".md")
    try:
        entity = entity_key(slugify(candidate.entity) if candidate.entity else stem)
    except ValidationError:
        return
    prefetch(filename, body_key, entity, memory_type)


def _ambiguous(candidate: Candidate, targets: list[Target], trace: list[dict[str, Any]],
               settings: RuleSettings) -> Verdict:
    names = [t.filename for t in targets]
    if settings.mode is ControllerMode.RULES or settings.tiebreaker is None:
        _trace(trace, "ambiguous", False, f"{len(names)} plausible targets; rules mode decides noop", None)
        return Verdict(Op.NOOP, candidate.target_filename or "", names, trace,
                       "ambiguous: more than one plausible target")
    front = candidate.frontmatter
    assert front is not None
    payload = {
        "candidate": {"name": front.name, "description": front.description, "type": front.type.value,
                      "body": candidate.body},
        "targets": [{"id": t.filename, "name": t.name, "description": t.description, "body": t.body}
                    for t in targets],
    }
    started = time.monotonic()
    llm_trace: dict[str, Any] = {"targets": names}
    answer: TiebreakerAnswer | None = None
    try:
        raw = settings.tiebreaker(payload, settings.max_latency_ms)
        elapsed_ms = round((time.monotonic() - started) * 1000, 2)
        llm_trace["elapsed_ms"] = elapsed_ms
        if elapsed_ms > settings.max_latency_ms:
            llm_trace["status"] = "timeout"
        else:
            answer = TiebreakerAnswer.model_validate(json.loads(raw))
            if (answer.op == "update" and answer.target_id not in names
                    or answer.op != "update" and answer.target_id is not None and answer.target_id not in names):
                llm_trace["status"] = "invented_target"
                answer = None
            else:
                llm_trace["status"] = "ok"
    except (json.JSONDecodeError, PydanticValidationError, TypeError):
        llm_trace["status"] = "invalid_json"
    except Exception as exc:  # noqa: BLE001 - any provider failure falls back; the trace names its kind
        llm_trace["status"] = "error"
        llm_trace["error"] = type(exc).__name__
    llm_trace.setdefault("elapsed_ms", round((time.monotonic() - started) * 1000, 2))
    if answer is None:
        op = settings.default_op_on_fail
        _trace(trace, "tiebreaker", False, f"tiebreaker {llm_trace['status']}; falling back to {op.value}", None)
        return Verdict(op, candidate.target_filename or "", names, trace,
                       f"ambiguous and the tiebreaker failed ({llm_trace['status']})", 0.0,
                       DecisionSource.RULE, llm_trace)
    llm_trace["answer"] = answer.model_dump()
    op = Op(answer.op)
    target = answer.target_id if op is Op.UPDATE else candidate.target_filename or ""
    _trace(trace, "tiebreaker", True, f"tiebreaker chose {op.value}", target)
    return Verdict(op, target or "", names, trace, answer.reason, answer.confidence, DecisionSource.LLM, llm_trace)
