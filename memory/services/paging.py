"""Counted cursor pages. Filtering and sorting happen before the cut; the cursor is opaque and bound to the
selector, type and sort it was issued for."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from memory.domain.errors import ValidationError
from memory.domain.models import canonical_json, sha256_text

DEFAULT_LIMIT = 50
MAX_LIMIT = 200


def normalize_limit(limit: int | None) -> int:
    if limit is None:
        return DEFAULT_LIMIT
    if limit < 1:
        raise ValidationError("--limit must be at least 1.", details={"field": "limit", "reason": "range"})
    return min(limit, MAX_LIMIT)


def fingerprint(binding: dict[str, Any]) -> str:
    return sha256_text(canonical_json(binding))[:16]


def encode_cursor(offset: int, binding: dict[str, Any]) -> str:
    raw = json.dumps({"o": offset, "b": fingerprint(binding)}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str | None, binding: dict[str, Any]) -> int:
    if not cursor:
        return 0
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
        offset, bound = int(data["o"]), data["b"]
    except (binascii.Error, ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise ValidationError("The cursor is not valid.", details={"field": "cursor", "reason": "malformed"}) from None
    if bound != fingerprint(binding) or offset < 0:
        raise ValidationError(
            "The cursor was issued for a different selector, type or sort.",
            details={"field": "cursor", "reason": "mismatch"},
        )
    return offset


def page_of(queryset, *, cursor: str | None, limit: int | None, binding: dict[str, Any]) -> tuple[list, dict[str, Any]]:
    size = normalize_limit(limit)
    offset = decode_cursor(cursor, binding)
    total = queryset.count()
    items = list(queryset[offset : offset + size])
    has_more = offset + len(items) < total
    page = {
        "total": total,
        "limit": size,
        "has_more": has_more,
        "next_cursor": encode_cursor(offset + len(items), binding) if has_more else None,
    }
    return items, page
