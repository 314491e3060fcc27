"""One error hierarchy with stable codes. Every surface translates these in exactly one place."""

from __future__ import annotations

from typing import Any


class MemoryError_(Exception):
    code = "memory.internal"
    http_status = 500
    exit_code = 1

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details}


class ValidationError(MemoryError_):
    code = "memory.validation"
    http_status = 400
    exit_code = 2


class ScopeInvalid(MemoryError_):
    code = "memory.scope.invalid"
    http_status = 400
    exit_code = 2


class AgentTierRequired(MemoryError_):
    code = "memory.scope.agent_tier_required"
    http_status = 400
    exit_code = 2


class WorkspaceRequired(MemoryError_):
    code = "memory.scope.workspace_required"
    http_status = 400
    exit_code = 2


class NotFound(MemoryError_):
    code = "memory.not_found"
    http_status = 404
    exit_code = 3


class Conflict(MemoryError_):
    code = "memory.conflict"
    http_status = 409
    exit_code = 4


class Rejected(MemoryError_):
    code = "memory.rejected"
    http_status = 422
    exit_code = 5


class ControllerTimeout(MemoryError_):
    code = "memory.controller.timeout"
    http_status = 503
    exit_code = 6


class ProviderCollision(MemoryError_):
    code = "memory.provider.collision"
    http_status = 409
    exit_code = 4


class Unsupported(MemoryError_):
    code = "memory.unsupported"
    http_status = 501
    exit_code = 7


class ConfigError(MemoryError_):
    """A configuration file or variable is invalid. Reported with the key and the file that set it."""

    code = "memory.validation"
    http_status = 400
    exit_code = 2


# Public alias: `MemoryError` shadows a builtin, so the class carries a trailing underscore.
CompozyError = MemoryError_


class Unauthorized(MemoryError_):
    code = "memory.unauthorized"
    http_status = 401
    exit_code = 8


# Everything parsing a document on disk may raise: each one means "not a valid memory document", to be reported
# (health, reindex) and never to abort the walk over the other files.
DOCUMENT_ERRORS = (ValidationError, ScopeInvalid, AgentTierRequired)
