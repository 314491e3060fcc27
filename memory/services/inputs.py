"""What every service takes: its input model (on the common base, so unknown fields are errors on every surface
alike), the selector fields most inputs share, and the caller."""

from __future__ import annotations

import enum
import re
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic import ValidationError as PydanticValidationError

from memory.domain.enums import AgentTier, Origin, Scope
from memory.domain.errors import ValidationError
from memory.domain.jsondepth import has_lone_surrogate
from memory.domain.models import translate_pydantic_error
from memory.domain.names import validate_session_id

_INTEGER_TEXT = re.compile(r"[+-]?[0-9]+")
_NUMBER_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_EXPECTED = {bool: "true or false", int: "an integer", float: "a number", str: "text"}




def _of_type(value: Any, kind: type) -> bool:
    """A value of the field's JSON type, or the text a query string, a form or a flag carries for it. Nothing
    else is coerced: `"yes"` is not true, `true` is not 1, `5` is not a name."""
    if kind is bool:
        return isinstance(value, bool) or (isinstance(value, str) and value.lower() in ("true", "false"))
    if kind is int:
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, str) and _INTEGER_TEXT.fullmatch(value.strip()) is not None)
    if kind is float:
        return (isinstance(value, int | float) and not isinstance(value, bool)) or (
            isinstance(value, str) and _NUMBER_TEXT.fullmatch(value.strip()) is not None)
    return isinstance(value, str)


class Input(BaseModel):
    """Base of every service input: unknown fields are errors, on every surface alike, and so are values of the
    wrong type (strict types, checked here once rather than per field) and text no UTF-8 file can hold."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)

    @model_validator(mode="before")
    @classmethod
    def _strict_values(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        for name, value in data.items():
            if has_lone_surrogate(name) or has_lone_surrogate(value):
                # The value itself is left out of the error, and the name made printable: the error document must
                # render as UTF-8 too.
                shown = str(name).encode("utf-8", "replace").decode("utf-8")
                raise ValidationError(f"{shown} holds a lone surrogate, which is not valid Unicode text.",
                                      details={"field": shown, "reason": "encoding"})
            info = cls.model_fields.get(name)
            kind = unwrap_optional(info.annotation) if info is not None else None
            if value is not None and kind in _EXPECTED and not _of_type(value, kind):
                raise ValidationError(f"{name} must be {_EXPECTED[kind]}, not {type(value).__name__} "
                                      f"{str(value)[:40]!r}.",
                                      details={"field": name, "reason": "type", "expected": _EXPECTED[kind]})
        return data

    @classmethod
    def parse(cls, data: dict[str, Any]) -> Any:
        try:
            return cls.model_validate({k: v for k, v in data.items() if v is not None})
        except PydanticValidationError as exc:
            raise translate_pydantic_error(exc, where="request") from None


class Selector(Input):
    """Which memory roots a call addresses. Every surface offers these fields under the same names (the CLI
    spells `agent_name` as `--agent`), with the same choices and the same help."""

    scope: Scope | None = Field(default=None, description=(
        "The scope: global, workspace or agent. Omitted on a read: every visible scope. Omitted on a write: the "
        "memory type picks it, project and reference going to the workspace, and user and feedback to global "
        "for an operator, to the agent's workspace tier for an agent (an agent never writes global by default)."))
    agent_name: str | None = Field(default=None, description=(
        "The agent's name. Needed with scope agent; on a read without a scope it adds that agent's two tiers."))
    agent_tier: AgentTier | None = Field(default=None, description=(
        "The agent tier, with scope agent: workspace (this workspace only, the default) or global (every "
        "workspace)."))
    workspace: str | None = Field(default=None, description=(
        "The workspace, as its ULID or a directory inside it. Default: the caller's own workspace."))
    include_system: bool = Field(default=False, description=(
        "Include machine-managed _system/ artifacts (ad-hoc notes, dreaming and extractor output), which are "
        "left out by default."))


class WriteSelector(Selector):
    """A selector of a write: its help says where leaving a field out puts the memory, not what a read would see
    (the inspector's New memory form and `memory write --help` show it)."""

    scope: Scope | None = Field(default=None, description=(
        "Where the memory goes: global, workspace or agent. Omitted: the memory type picks it, project and "
        "reference going to the workspace, and user and feedback to global for an operator, to the agent's "
        "workspace tier for an agent (an agent never writes global by default)."))
    agent_name: str | None = Field(default=None, description=(
        "The agent whose memory this is: needed with scope agent, not allowed with another scope."))


class ReadSelector(Selector):
    """A selector of a read over every visible scope (list, search, snapshot): its scope is a filter, so its help
    says what leaving it out reads, not where a write would go."""

    scope: Scope | None = Field(default=None, description=(
        "Only this scope: global, workspace or agent. Omitted: every scope visible here (global, this workspace "
        "and, with agent_name, that agent's two tiers)."))


def all_workspaces_field() -> Any:
    """The one declaration of the across-workspaces switch, on the operator reads that offer it."""
    return Field(default=False, description=(
        "Read across every workspace this machine knows (the operator's view, and the inspector's default): the "
        "global scope, each known workspace and the agents' tiers in each, every row still named by its "
        "workspace_id. Not together with workspace; refused to an agent, which reads its own workspace."))


@dataclass(frozen=True)
class Caller:
    """Who is calling and from where: the surface (origin), the directory a workspace is found from, and the
    agent session (a sub-agent has a parent session)."""

    origin: Origin
    cwd: Path | None = None
    session_id: str | None = None
    parent_session_id: str | None = None
    # The agent a confined caller acts for (an MCP agent session, never an operator): it may name only its own
    # sessions, as it may name only its own agent memory.
    agent: str | None = None

    def __post_init__(self) -> None:
        # Every surface builds a Caller from something no input model checked (a header, an environment
        # variable, a command-line flag): the session ids are held to the columns that store them here, once.
        if self.session_id:
            validate_session_id(self.session_id)
        if self.parent_session_id:
            validate_session_id(self.parent_session_id, field="parent_session_id")


# How a surface reads an input model's field: the CLI's flags and the inspector's forms offer the same choices.


def unwrap_optional(annotation: Any) -> Any:
    """`T | None` (an input that may be left out) as T; any other annotation as it is."""
    if get_origin(annotation) in (Union, types.UnionType):
        members = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(members) == 1:
            return members[0]
    return annotation


def choices_of(annotation: Any) -> tuple[str, ...] | None:
    """The allowed values of an enum or Literal field, as the CLI flags and the inspector's selects offer them."""
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return tuple(str(member.value) for member in annotation)
    if get_origin(annotation) is Literal:
        return tuple(str(arg) for arg in get_args(annotation))
    return None
