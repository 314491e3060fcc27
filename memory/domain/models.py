"""Frontmatter, scope references and candidates: the validated shapes every write is made of."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic import ValidationError as PydanticValidationError

from .enums import AgentTier, MemoryType, Origin, RequestKind, Scope
from .errors import AgentTierRequired, CompozyError, ScopeInvalid, ValidationError
from .names import SESSION_ID_PATTERN, SESSION_ID_RULE, validate_agent_name

# Read precedence: agent-workspace ▸ agent-global ▸ workspace ▸ global. A larger depth shadows a smaller one.
SCOPE_DEPTH = {"global": 0, "workspace": 1, "agent:global": 2, "agent:workspace": 3}


def _system_clock() -> datetime:
    return datetime.now(UTC)


# The one wall-clock source of the controller and its logs (decided_at, applied_at, events, holds). A seam, not a
# setting: a test replaces it to make the clock jump (backwards, as NTP or faketime can), and nothing that orders
# decisions may depend on what it says.
clock = _system_clock


def utc_now() -> datetime:
    return clock()


def format_timestamp(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(value: Any) -> str:
    """Accept an RFC 3339 string or a datetime (YAML loads bare timestamps as datetimes) and normalize."""
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        return format_timestamp(moment)
    if isinstance(value, str):
        text = value.strip()
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError as exc:
            raise ValueError(f"not an RFC 3339 timestamp: {text[:40]!r}") from exc
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return format_timestamp(moment)
    raise ValueError("a timestamp must be an RFC 3339 string")


class Provenance(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source_actor: Origin | None = None
    source_sessions: list[str] = Field(default_factory=list)
    confidence: Literal["low", "medium", "high"] | None = None
    superseded_by: str | None = None
    created_at: str | None = None
    updated_at: str | None = None

    @field_validator("created_at", "updated_at", mode="before")
    @classmethod
    def _timestamp(cls, value: Any) -> str | None:
        return None if value is None else parse_timestamp(value)

    @field_validator("source_sessions", mode="before")
    @classmethod
    def _sessions(cls, value: Any) -> list[str]:
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
            raise ValueError("source_sessions is a list of session ids")
        return value


class Frontmatter(BaseModel):
    """Strict YAML frontmatter. The YAML key for the agent is `agent`; JSON payloads call it `agent_name`."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    description: str = Field(min_length=1, max_length=1000)
    type: MemoryType
    scope: Scope
    agent: str | None = None
    agent_tier: AgentTier | None = None
    provenance: Provenance | None = None

    @field_validator("name", "description")
    @classmethod
    def _single_line(cls, value: str) -> str:
        value = " ".join(value.split())
        if not value:
            raise ValueError("must not be blank")
        return value

    @model_validator(mode="after")
    def _agent_keys_only_in_agent_scope(self) -> Frontmatter:
        if self.scope is Scope.AGENT:
            if not self.agent or self.agent_tier is None:
                raise ValueError("agent scope needs both `agent` and `agent_tier`")
            validate_agent_name(self.agent)
        elif self.agent is not None or self.agent_tier is not None:
            raise ValueError("`agent` and `agent_tier` are only allowed in agent scope")
        return self

    @classmethod
    def build(cls, **fields: Any) -> Frontmatter:
        """From keyword fields, None meaning absent; a bad field is the domain's error with its stable code."""
        try:
            return cls.model_validate({k: v for k, v in fields.items() if v is not None})
        except PydanticValidationError as exc:
            raise translate_pydantic_error(exc) from None

    def yaml_dict(self) -> dict[str, Any]:
        data = self.model_dump(mode="json", exclude_none=True)
        provenance = data.get("provenance")
        if provenance is not None and not provenance.get("source_sessions"):
            provenance.pop("source_sessions", None)
        return data


def needs_workspace(scope: Scope, tier: AgentTier | None) -> bool:
    """Whether a scope lives in a workspace: the workspace scope and the agent scope's workspace tier, which is
    also the agent scope's default tier."""
    return scope is Scope.WORKSPACE or (scope is Scope.AGENT and tier is not AgentTier.GLOBAL)


class ScopeRef(BaseModel):
    """One memory root: a scope, and the workspace and agent that own it."""

    model_config = ConfigDict(frozen=True)

    scope: Scope
    workspace_id: str = ""
    agent_name: str = ""
    agent_tier: AgentTier | None = None

    @property
    def root_key(self) -> str:
        if self.scope is Scope.GLOBAL:
            return "global"
        if self.scope is Scope.WORKSPACE:
            return f"workspace:{self.workspace_id}"
        if self.agent_tier is AgentTier.GLOBAL:
            return f"agent:{self.agent_name}:global"
        return f"agent:{self.agent_name}:workspace:{self.workspace_id}"

    @property
    def depth(self) -> int:
        if self.scope is Scope.AGENT:
            return SCOPE_DEPTH[f"agent:{self.agent_tier.value}"]  # type: ignore[union-attr]
        return SCOPE_DEPTH[self.scope.value]

    @property
    def label(self) -> str:
        return f"agent:{self.agent_tier.value}" if self.scope is Scope.AGENT else self.scope.value  # type: ignore[union-attr]

    def as_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope.value,
            "workspace_id": self.workspace_id or None,
            "agent_name": self.agent_name or None,
            "agent_tier": self.agent_tier.value if self.agent_tier else None,
        }


class Candidate(BaseModel):
    """What a caller submits to the controller. The controller decides the op."""

    model_config = ConfigDict(frozen=True)

    ref: ScopeRef
    origin: Origin
    kind: RequestKind = RequestKind.WRITE
    frontmatter: Frontmatter | None = None
    body: str = ""
    # A named target: the caller asked for this exact file (edit, delete, checkpoint). Writes derive it from
    # the type and name when absent.
    target_filename: str | None = None
    named_target: bool = False
    session_id: str | None = None
    entity: str | None = None
    revert_of: str | None = None
    # A request identity chosen by the caller (an atomic batch's payload), used instead of the candidate's content:
    # a retried batch re-stages against a body that already holds its changes, so only the request is stable.
    request_key: str | None = None
    # When what the memory records happened, for an origin that brings its source's own time (an import of a file
    # dated by its tool): the provenance dates it is stamped with instead of the decision's. Not the candidate's
    # identity, as the stamped timestamps are not.
    occurred_at: str | None = None
    # When what it records was said (an extracted memory's session time): its provenance `created_at` only. Its
    # `updated_at` stays the write's time, as recall's recency and the index order read it (dating both by a
    # replayed session's time cost 8 points of continuity_eval at 2,000 characters). Not the identity either.
    said_at: str | None = None

    def candidate_hash(self) -> str:
        if self.request_key:
            return sha256_text(canonical_json({"ref": self.ref.as_dict(), "request": self.request_key}))
        payload = {
            "ref": self.ref.as_dict(),
            "origin": self.origin.value,
            "kind": self.kind.value,
            "frontmatter": self._frontmatter_identity(),
            "body": self.body,
            "target": self.target_filename,
            "named": self.named_target,
            "entity": self.entity,
            "revert_of": self.revert_of,
        }
        return sha256_text(canonical_json(payload))

    def _frontmatter_identity(self) -> dict[str, Any] | None:
        # Timestamps are stamped by the controller, not chosen by the caller, so they are not the candidate.
        if self.frontmatter is None:
            return None
        data = self.frontmatter.yaml_dict()
        data.get("provenance", {}).pop("created_at", None)
        data.get("provenance", {}).pop("updated_at", None)
        return data


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_SCOPE_FIELDS = {"scope", "agent_tier"}
_PATTERN_RULES = {SESSION_ID_PATTERN: SESSION_ID_RULE}


def translate_pydantic_error(exc: PydanticValidationError, *, where: str = "frontmatter") -> CompozyError:
    """Map a pydantic failure to the stable code of its first offending field."""
    errors = exc.errors()
    first = errors[0] if errors else {"loc": (), "msg": str(exc), "type": ""}
    loc = [str(part) for part in first.get("loc", ())]
    field = ".".join(loc)
    fields = [{"field": ".".join(str(p) for p in e.get("loc", ())), "problem": e.get("msg", "")} for e in errors]
    details = {"where": where, "field": field, "errors": fields}
    if first.get("type") == "extra_forbidden":
        return ValidationError(f"Unknown {where} key: {field!r}.", details={**details, "reason": "unknown_key"})
    if loc and loc[-1] in _SCOPE_FIELDS:
        if loc[-1] == "agent_tier" and first.get("type") == "missing":
            return AgentTierRequired("Agent scope needs an agent tier.", details=details)
        return ScopeInvalid(f"Invalid {field}: {first.get('msg', '')}.", details=details)
    message = first.get("msg", "invalid value")
    if "agent" in message and "scope" in message:
        return ScopeInvalid(message.removeprefix("Value error, ") + ".", details=details)
    # "Invalid request type: ..." read as a kind of request, and a pattern's regex means nothing to a person: name
    # the field and where it was, and say what a known pattern allows in words.
    name = field or "value"
    if first.get("type") == "missing":
        return ValidationError(f"Missing {name} in the {where}.", details=details)
    words = _PATTERN_RULES.get(str((first.get("ctx") or {}).get("pattern", "")))
    if first.get("type") == "string_pattern_mismatch" and words:
        message = f"it must be {words}"
    return ValidationError(f"Invalid {name} in the {where}: {message}.", details=details)
