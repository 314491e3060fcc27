"""The extractor's shapes and policy, shared by every provider: what a provider is given (turns), what it must
answer (strict JSON lines), what may never be saved, and the injected blocks stripped before anything is read.

Pure Python. The local rules (memory/providers/extract_rules.py) and the HTTP provider both answer JSON lines that
are parsed here by one strict parser, so the deterministic provider exercises the same validation path.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic import ValidationError as PydanticValidationError

from .enums import AgentTier, MemoryType, Origin, Scope
from .models import Candidate, Frontmatter, Provenance, ScopeRef
from .names import SESSION_ID_PATTERN, memory_filename, slugify
from .scanner import scan

# Blocks Compozy itself puts into a prompt. What they hold is already memory (or its summary); read back from a
# transcript it would be proposed again as new, so it is removed before any rule or model sees the text.
INJECTED_TAGS = ("compozy_memory", "compozy_checkpoint_summary", "compozy_recall")
_INJECTED = re.compile(
    r"<(?P<tag>" + "|".join(INJECTED_TAGS) + r")\b[^>]*>.*?(?:</(?P=tag)\s*>|\Z)", re.DOTALL | re.IGNORECASE
)
_TAG = re.compile(r"<(?P<close>/?)(?:" + "|".join(INJECTED_TAGS) + r")\b[^>]*>", re.IGNORECASE)

MAX_CONTENT_CHARS = 500
MAX_SLOT_CHARS = 80
MAX_EVIDENCE = 8
DEFAULT_SCOPE = {
    MemoryType.USER: Scope.GLOBAL,
    MemoryType.FEEDBACK: Scope.GLOBAL,
    MemoryType.PROJECT: Scope.WORKSPACE,
    MemoryType.REFERENCE: Scope.WORKSPACE,
}
# A preference or instruction said of this codebase ("from now on, use pnpm in this repo") holds here, not in
# every project: it takes the workspace scope, whatever its type's default.
_THIS_CODEBASE = re.compile(
    r"\b(this|our|the current) (repo|repository|project|codebase|code base|monorepo|workspace|checkout)\b"
    r"|\bin here\b",
    re.IGNORECASE,
)


def extracted_scope(memory_type: MemoryType, content: str) -> Scope:
    """The scope a rule-extracted memory goes to: its type's default, or the workspace when it says it is about
    this codebase."""
    if DEFAULT_SCOPE[memory_type] is Scope.GLOBAL and _THIS_CODEBASE.search(content):
        return Scope.WORKSPACE
    return DEFAULT_SCOPE[memory_type]


def strip_injected(text: str) -> str:
    """The text without Compozy's own injected blocks. An unterminated block is removed to the end of the text;
    a closing tag met before any opening one (a window that starts inside a block) drops everything before it."""
    if "compozy_" not in text:
        return text  # the common case costs one substring test
    first = _TAG.search(text)
    if first is not None and first.group("close"):
        text = text[first.end():]
    return _INJECTED.sub("", text)


@dataclass(frozen=True)
class Turn:
    """One persisted turn of a session, as the extractor reads it."""

    seq: int
    role: str
    text: str
    # When it was said (the ledger event's own time, ISO 8601), so what is read from it is dated by the session,
    # not by when the extractor ran. Not sent to the provider: the text already carries resolved dates.
    ts: str = ""

    def as_payload(self) -> dict[str, Any]:
        return {"seq": self.seq, "role": self.role, "text": self.text}


class ExtractedMemory(BaseModel):
    """One line of provider output. Every field is required; an unknown field is an error, never ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: MemoryType
    scope: Scope
    agent_tier: AgentTier | None
    content: str = Field(min_length=1, max_length=MAX_CONTENT_CHARS)
    evidence: list[int] = Field(min_length=1, max_length=MAX_EVIDENCE,
                                description="seq numbers of the input turns the memory was read from")
    entity: str = Field(min_length=1, max_length=MAX_SLOT_CHARS, description="what the memory is about")
    attribute: str = Field(min_length=1, max_length=MAX_SLOT_CHARS, description="which property of the entity")

    @field_validator("content", "entity", "attribute")
    @classmethod
    def _single_spaced(cls, value: str) -> str:
        value = " ".join(value.split())
        if not value:
            raise ValueError("must not be blank")
        return value

    @field_validator("entity", "attribute")
    @classmethod
    def _sluggable(cls, value: str) -> str:
        if not re.search(r"[A-Za-z0-9]", value):
            raise ValueError("needs a letter or digit")
        return value

    @model_validator(mode="after")
    def _tier_only_in_agent_scope(self) -> ExtractedMemory:
        if self.scope is Scope.AGENT and self.agent_tier is None:
            raise ValueError("agent scope needs agent_tier")
        if self.scope is not Scope.AGENT and self.agent_tier is not None:
            raise ValueError("agent_tier is only allowed in agent scope")
        return self

    def line(self) -> str:
        return json.dumps(self.model_dump(mode="json"), ensure_ascii=False, sort_keys=True)


def slugify_or_empty(text: str) -> str:
    try:
        return slugify(text)
    except Exception:  # noqa: BLE001 - a text with no letters or digits simply has no slug
        return ""


@dataclass(frozen=True)
class LineError:
    line_number: int
    error: str
    text: str


@dataclass
class ParsedOutput:
    memories: list[ExtractedMemory] = field(default_factory=list)
    errors: list[LineError] = field(default_factory=list)


def parse_output(text: str, *, input_seqs: set[int]) -> ParsedOutput:
    """Strictly parse a provider's JSON lines. A blank line is skipped; any other line that is not exactly one
    valid object citing only input turns is an error, never repaired or guessed at."""
    parsed = ParsedOutput()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            parsed.errors.append(LineError(number, f"not JSON: {exc.msg}", line))
            continue
        if not isinstance(data, dict):
            parsed.errors.append(LineError(number, "not a JSON object", line))
            continue
        try:
            memory = ExtractedMemory.model_validate(data)
        except PydanticValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first.get("loc", ())) or "line"
            parsed.errors.append(LineError(number, f"{where}: {first.get('msg', 'invalid')}", line))
            continue
        unknown = sorted(set(memory.evidence) - input_seqs)
        if unknown:
            parsed.errors.append(LineError(number, f"evidence cites turns not in the input: {unknown}", line))
            continue
        parsed.memories.append(memory)
    return parsed


# ---------------------------------------------------------------------------------------------------------------
# What not to save. Both providers' output passes through this filter; the HTTP provider's prompt states it too.

POLICY_TEXT = """Never save:
- code, commands, file contents or the repository's structure (directory trees, lists of files)
- git history: commits, hashes, branches, merges, pull requests
- debugging recipes: stack traces, error messages and how one failure was fixed
- ephemeral task state: what is being done right now, next steps, TODOs, progress of this session
- anything the project's own documentation already says
- transcript dumps: quoted conversations or long passages
- secrets: keys, tokens, passwords, credentials
Save only durable facts a future session would want: who the user is, what they prefer, standing instructions
and corrections, decisions and facts about the project, and where to find things."""

_FENCE = re.compile(r"```|~~~")
_TREE = re.compile(r"[├└│]──|^\s*\|--", re.MULTILINE)
_CODE_LINE = re.compile(
    r"^\s*(def |class |import |from \S+ import |function |const |let |var |public |private |#include|return\b)"
    r"|[;{]\s*$|=>|\)\s*\{|^\s*[}\]]\s*;?\s*$",
    re.MULTILINE,
)
_PATH = re.compile(r"(?:^|[\s`(])(?:\.{0,2}/)?(?:[\w.-]+/){2,}[\w.-]*")
# History, not the word: "run the linter before every commit" is a standing instruction worth keeping.
_GIT = re.compile(
    r"\b[0-9a-f]{7,40}\b(?=.*\b(commit|sha|hash)\b)|\b(commit|sha|hash)\b\s+[0-9a-f]{7,40}\b"
    r"|\bgit (log|blame|show|diff|reset|revert|cherry-pick|rebase|bisect)\b"
    r"|\b(merged|rebased|cherry-picked|reverted|squashed|force-pushed)\b.*\b(branch|main|master|commit|pr)\b"
    r"|\b(PR|pull request|MR)\s*#?\d+",
    re.IGNORECASE,
)
_DEBUG = re.compile(
    r"\b(traceback|stack ?trace|segfault|core dump|exception|errno|stderr|assertionerror)\b"
    r"|\b\w+(Error|Exception):"
    r"|\b(the fix (was|is)|fixed (it|this|the bug) by|to debug|debugging)\b",
    re.IGNORECASE,
)
_EPHEMERAL = re.compile(
    r"\b(todo|fixme|next step|right now|at the moment|for now|in this (session|pr|branch|task)|wip|"
    r"work in progress|currently (working|fixing|debugging|refactoring)|(i'm|i am|let me|let's|we're|we are) "
    r"(now |currently )?(fixing|debugging|refactoring|running|rerunning|checking|looking at|trying to fix))\b",
    re.IGNORECASE,
)
_TRANSCRIPT = re.compile(r"^\s*(user|assistant|human|ai|system)\s*:", re.IGNORECASE | re.MULTILINE)
MAX_POLICY_LINES = 6


@functools.lru_cache(maxsize=1024)
def policy_violation(content: str) -> str | None:
    """The policy rule a memory's content breaks, or None. Rule ids only, never the text.

    Cached (it is a pure function of the text): the local provider's rules check each memory they propose, and
    the extractor checks every provider's answer again, so the same text came here twice per candidate, and this
    check (with the content scanner in it) was a tenth of the local extractor's time."""
    if _FENCE.search(content) or _TREE.search(content) or len(_CODE_LINE.findall(content)) >= 1:
        return "policy.code"
    if len(_PATH.findall(content)) >= 3:
        return "policy.repo_structure"
    if _GIT.search(content):
        return "policy.git_history"
    if _DEBUG.search(content):
        return "policy.debugging"
    if _EPHEMERAL.search(content):
        return "policy.ephemeral"
    if _TRANSCRIPT.search(content) or content.count("\n") >= MAX_POLICY_LINES:
        return "policy.transcript"
    if not scan(content).clean:
        return "policy.secret_or_unsafe"
    return None


# ---------------------------------------------------------------------------------------------------------------
# The inbox and its dead letters

# The session ledger's id pattern: letters, digits and ._:@- (a session id names a directory under _inbox/).
SESSION_ID = re.compile(SESSION_ID_PATTERN)
FailureStage = Literal["provider", "validate", "stage", "parse", "resolve", "submit"]
# The stages at which a staged file failed: its dead letter holds the file's lines, so a replay stages them again.
# The others (`provider`, `validate`) failed inside a run, and a replay extracts the same turns again.
STAGED_FILE_STAGES: frozenset[FailureStage] = frozenset({"stage", "parse", "resolve", "submit"})


def valid_session_id(value: str) -> str:
    # A session id names a directory under _inbox/: nothing that could leave it or hide in it.
    if not SESSION_ID.match(value) or ".." in value:
        raise ValueError("a session id uses 1 to 128 characters: letters, digits and ._:@-")
    return value


class RunSource(BaseModel):
    """Where staged candidates (or a failure) came from: a session and the seq range of its turns that were read."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    session: str
    root_session: str
    from_seq: int = Field(ge=0)
    until_seq: int = Field(ge=0)
    workspace_id: str = ""
    agent_name: str = ""

    _sessions = field_validator("session", "root_session")(classmethod(lambda cls, v: valid_session_id(v)))


class StagedCandidate(BaseModel):
    """One line of an inbox file: a validated provider line and the turns it came from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: RunSource
    memory: ExtractedMemory
    # The time of the newest turn the memory cites as evidence (ISO 8601): the memory's provenance dates. Absent in
    # lines staged before dates were kept; those are dated by their decision.
    occurred_at: str | None = None

    def line(self) -> str:
        return json.dumps(self.model_dump(mode="json"), ensure_ascii=False, sort_keys=True)


class FailureSource(RunSource):
    # The inbox file (relative to the root) when a staged file failed; empty when a run failed before staging.
    file: str = ""


class FailureRecord(BaseModel):
    """A dead letter, `_system/extractor/failures/<timestamp>-<file>.json`: what failed, at which stage, and what
    it held (the staged file's text, or the provider's unusable answer), so it can be replayed."""

    model_config = ConfigDict(extra="forbid")

    stage: FailureStage
    source: FailureSource
    error: str
    content: str
    recorded_at: str


# ---------------------------------------------------------------------------------------------------------------
# From a staged line to the controller's candidate

MAX_DESCRIPTION_CHARS = 160
CONFIDENCE = "medium"


def memory_slot(memory: ExtractedMemory) -> str:
    """The slot text a memory's filename and entity come from. The speaker, the project and the memory's own type
    are implied by the scope and type, so they are left out: `user_editor.md`, `project_staging_database.md`."""
    entity = memory.entity
    if slugify_or_empty(entity) in ("user", "me", "i", "project", memory.type.value):
        entity = ""
    return f"{entity} {memory.attribute}".strip()


# Words a person writes in capitals; a memory's name is read in the index, so "Staging url" reads as a typo.
ACRONYMS = frozenset({"api", "aws", "ci", "cd", "cli", "cpu", "css", "db", "dns", "e2e", "gcp", "gpu", "html", "http",
                      "https", "id", "ip", "jwt", "k8s", "llm", "mcp", "orm", "os", "pr", "qa", "sdk", "sql", "ssh",
                      "ssl", "tls", "ui", "url", "uri", "ux", "vm", "vpn"})
# Slot words that say what kind of statement it is, not what it is about: the name puts them first, as a label.
KINDS = frozenset({"preference", "instruction", "identity"})


def display_name(slot: str) -> str:
    """A memory's name from its slot: `staging url` → "Staging URL", `preference explain root cause` →
    "Preference: explain root cause"."""
    words = [word.upper() if word.lower() in ACRONYMS else word for word in slot.split()]
    if not words:
        return slot
    head = words[0][:1].upper() + words[0][1:]
    if words[0].lower() in KINDS and len(words) > 1:
        return f"{head}: {' '.join(words[1:])}"
    return " ".join([head, *words[1:]])


def _description(content: str) -> str:
    if len(content) <= MAX_DESCRIPTION_CHARS:
        return content
    cut = content[:MAX_DESCRIPTION_CHARS].rsplit(" ", 1)[0].rstrip(",;:-")
    return cut + "…"


def candidate_from_staged(staged: StagedCandidate) -> Candidate:
    """The controller candidate for one staged line. Its filename is generated from the slot and never names a
    target: only the entity slot (declared here) and the overlap rules may lead it to an existing memory."""
    memory = staged.memory
    source = staged.source
    slot = memory_slot(memory)
    if memory.scope is Scope.GLOBAL:
        ref = ScopeRef(scope=Scope.GLOBAL)
    elif memory.scope is Scope.WORKSPACE:
        if not source.workspace_id:
            raise ValueError("a workspace memory from a session that has no workspace")
        ref = ScopeRef(scope=Scope.WORKSPACE, workspace_id=source.workspace_id)
    else:
        if not source.agent_name:
            raise ValueError("an agent memory from a session that has no agent")
        if memory.agent_tier is AgentTier.WORKSPACE and not source.workspace_id:
            raise ValueError("an agent-workspace memory from a session that has no workspace")
        ref = ScopeRef(scope=Scope.AGENT, agent_name=source.agent_name, agent_tier=memory.agent_tier,
                       workspace_id=source.workspace_id if memory.agent_tier is AgentTier.WORKSPACE else "")
    front = Frontmatter(
        name=display_name(slot),
        description=_description(memory.content),
        type=memory.type,
        scope=memory.scope,
        agent=source.agent_name if memory.scope is Scope.AGENT else None,
        agent_tier=memory.agent_tier,
        provenance=Provenance(source_actor=Origin.EXTRACTOR, source_sessions=[source.session],
                              confidence=CONFIDENCE),
    )
    return Candidate(ref=ref, origin=Origin.EXTRACTOR, frontmatter=front, body=memory.content,
                     target_filename=memory_filename(memory.type, slot), entity=slot, session_id=source.session,
                     said_at=staged.occurred_at)
