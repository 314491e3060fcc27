"""What every service takes: its input model (on the common base, so unknown fields are errors on every surface
alike), the selector fields most inputs share, and the caller."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic import ValidationError as PydanticValidationError

from memory.domain.enums import AgentTier, Origin, Scope
from memory.domain.models import translate_pydantic_error


class Input(BaseModel):
    """Base of every service input: unknown fields are errors, on every surface alike."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)

    @classmethod
    def parse(cls, data: dict[str, Any]) -> Any:
        try:
            return cls.model_validate({k: v for k, v in data.items() if v is not None})
        except PydanticValidationError as exc:
            raise translate_pydantic_error(exc, where="request") from None


class Selector(Input):
    scope: Scope | None = None
    agent_name: str | None = None
    agent_tier: AgentTier | None = None
    workspace: str | None = None
    include_system: bool = False


@dataclass(frozen=True)
class Caller:
    """Who is calling and from where: the surface (origin), the directory a workspace is found from, and the
    agent session (a sub-agent has a parent session)."""

    origin: Origin
    cwd: Path | None = None
    session_id: str | None = None
    parent_session_id: str | None = None
