"""One error hierarchy with stable codes. Every surface translates these in exactly one place."""

from __future__ import annotations

import errno
from typing import Any


class CompozyError(Exception):
    """The root of every error the product raises on purpose: a stable code, an HTTP status, an exit code."""

    code = "memory.internal"
    http_status = 500
    exit_code = 1

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details}


class ValidationError(CompozyError):
    code = "memory.validation"
    http_status = 400
    exit_code = 2


class ScopeInvalid(CompozyError):
    code = "memory.scope.invalid"
    http_status = 400
    exit_code = 2


class AgentTierRequired(CompozyError):
    code = "memory.scope.agent_tier_required"
    http_status = 400
    exit_code = 2


class WorkspaceRequired(CompozyError):
    code = "memory.scope.workspace_required"
    http_status = 400
    exit_code = 2


class NotFound(CompozyError):
    code = "memory.not_found"
    http_status = 404
    exit_code = 3


class Conflict(CompozyError):
    code = "memory.conflict"
    http_status = 409
    exit_code = 4


class Rejected(CompozyError):
    code = "memory.rejected"
    http_status = 422
    exit_code = 5


class ControllerTimeout(CompozyError):
    code = "memory.controller.timeout"
    http_status = 503
    exit_code = 6


class ProviderCollision(CompozyError):
    code = "memory.provider.collision"
    http_status = 409
    exit_code = 4


class ConfigError(CompozyError):
    """A configuration file or variable is invalid. Reported with the key and the file that set it."""

    code = "memory.validation"
    http_status = 400
    exit_code = 2


class Unauthorized(CompozyError):
    code = "memory.unauthorized"
    http_status = 401
    exit_code = 8


class StorageFull(CompozyError):
    """The filesystem a write needs is full (or over a quota, or the file-size limit): nothing was decided."""

    code = "memory.storage.full"
    http_status = 507
    exit_code = 10


class StorageReadOnly(CompozyError):
    """The filesystem a write needs is read-only: nothing was decided. Reads keep working."""

    code = "memory.storage.read_only"
    http_status = 503
    exit_code = 10


class DecisionPending(CompozyError):
    """The decision is durable but its file could not be written (its root is held): it is applied by the next
    replay once the root can be written again. Not a failure to retry: retrying returns the same decision."""

    code = "memory.decision.pending"
    http_status = 202
    exit_code = 11


class WorkspaceCopied(CompozyError):
    """A directory holds the identity (workspace.toml) of a workspace registered at another path that still holds
    it: a copied checkout. It is not that workspace until `compozy workspace adopt` (the registration moves here)
    or `compozy workspace fork` (it gets an identity of its own)."""

    code = "memory.workspace.copied"
    http_status = 409
    exit_code = 4


class SyncFailed(CompozyError):
    """`memory sync`: git (the system's, run as a subprocess) refused a step: no repository or remote yet, an
    unreachable remote, a push refused. What was already committed stays committed; nothing is lost."""

    code = "memory.sync.failed"
    http_status = 502
    exit_code = 12


# errno → (reason, error class) for the failures that mean "this filesystem cannot take the write now", as
# opposed to a bug: a root on such a filesystem is held, never a crash of the whole home.
STORAGE_ERRNOS: dict[int, tuple[str, type[CompozyError]]] = {
    errno.ENOSPC: ("disk_full", StorageFull),
    errno.EDQUOT: ("quota_exceeded", StorageFull),
    errno.EFBIG: ("file_too_large", StorageFull),
    errno.EROFS: ("read_only", StorageReadOnly),
}


def storage_reason(exc: BaseException) -> str | None:
    """The reason an OSError means the filesystem cannot take a write, or None for any other error."""
    if isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS:
        return STORAGE_ERRNOS[exc.errno][0]
    return None


def storage_error(exc: OSError, *, where: str, details: dict[str, Any] | None = None) -> CompozyError:
    """The domain error for a storage OSError (see `storage_reason`)."""
    reason, kind = STORAGE_ERRNOS[exc.errno]  # type: ignore[index]
    return kind(f"{where} cannot be written: {exc.strerror or reason}. Nothing was decided; retry once it can.",
                details={"reason": reason, "path": str(exc.filename or ""), **(details or {})})


def environment_error(exc: BaseException) -> CompozyError | None:
    """The stable error for a failure of the environment rather than of the code, or None: a storage OSError
    (see `storage_reason`), or SQLite saying the database is held by another process's write (the README's
    `memory.controller.timeout`), is full, or is read-only. SQLite's messages are its stable C API strings."""
    if isinstance(exc, OSError):
        if storage_reason(exc) is None:
            return None
        return storage_error(exc, where=str(exc.filename or "The memory root"))
    text = str(exc).lower()
    if "database is locked" in text or "database table is locked" in text or "database is busy" in text:
        return ControllerTimeout(
            "The memory database is held by another process's write transaction; nothing was changed. Retry when "
            "it is released.", details={"reason": "database_locked"})
    if "database or disk is full" in text:
        return StorageFull("The memory database's disk is full; nothing was changed. Retry once there is room.",
                           details={"reason": "disk_full", "path": "database"})
    if "readonly database" in text or "read-only" in text:
        return StorageReadOnly("The memory database is read-only; nothing was changed. Reads keep working.",
                               details={"reason": "read_only", "path": "database"})
    return None


# Everything parsing a document on disk may raise: each one means "not a valid memory document", to be reported
# (health, reindex) and never to abort the walk over the other files.
DOCUMENT_ERRORS = (ValidationError, ScopeInvalid, AgentTierRequired)
