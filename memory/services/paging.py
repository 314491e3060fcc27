"""Counted keyset pages. Filtering and sorting happen before the cut; the cursor is opaque, holds the sort key of
the last item shown, and is bound to the selector, type and sort it was issued for."""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime
from typing import Any

from django.db.models import Q
from pydantic import Field

from memory.domain.errors import ValidationError
from memory.domain.models import canonical_json, sha256_text

DEFAULT_LIMIT = 50
MAX_LIMIT = 200


def limit_field() -> Any:
    """The one declaration of a page size: below 1 is an error on every surface, above the maximum is lowered to it
    (and reported in page.limit)."""
    return Field(default=None, ge=1, description=(
        f"Items per page: default {DEFAULT_LIMIT}, at most {MAX_LIMIT} (a larger value is lowered to {MAX_LIMIT})."))


def cursor_field() -> Any:
    return Field(default=None, description=(
        "page.next_cursor from the previous page, to read the next one. Give the same other arguments again."))


def normalize_limit(limit: int | None) -> int:
    if limit is None:
        return DEFAULT_LIMIT
    if limit < 1:
        raise ValidationError("limit must be at least 1.", details={"field": "limit", "reason": "range"})
    return min(limit, MAX_LIMIT)


def fingerprint(binding: dict[str, Any]) -> str:
    return sha256_text(canonical_json(binding))[:16]


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return {"t": value.isoformat()}
    return value


def _typed(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"t"}:
        return datetime.fromisoformat(value["t"])
    return value


def encode_cursor(key: list[Any], binding: dict[str, Any]) -> str:
    raw = json.dumps({"k": [_plain(v) for v in key], "b": fingerprint(binding)}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, binding: dict[str, Any], width: int) -> list[Any]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
        key, bound = [_typed(v) for v in data["k"]], data["b"]
    except (binascii.Error, ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise ValidationError("The cursor is not valid.", details={"field": "cursor", "reason": "malformed"}) from None
    if bound != fingerprint(binding) or len(key) != width:
        raise ValidationError(
            "The cursor was issued for a different selector, type or sort.",
            details={"field": "cursor", "reason": "mismatch"},
        )
    return key


def _after(order: list[tuple[str, bool]], key: list[Any]) -> Q:
    """Rows strictly after `key` in this order: (a > x) or (a = x and b > y) or …, each step in its direction."""
    condition = Q(pk__in=[])
    for index, (name, descending) in enumerate(order):
        step = Q(**{f"{name}__{'lt' if descending else 'gt'}": key[index]})
        for position, (earlier, _descending) in enumerate(order[:index]):
            step &= Q(**{earlier: key[position]})
        condition |= step
    return condition


def page_of(queryset, *, cursor: str | None, limit: int | None, binding: dict[str, Any]) -> tuple[list, dict[str, Any]]:
    """A keyset page: the cursor holds the sort key of the last item shown, so a write between two pages neither
    repeats nor skips an item. The queryset's ordering must end in a unique field (a total order)."""
    size = normalize_limit(limit)
    order = [(term.lstrip("-"), term.startswith("-")) for term in queryset.query.order_by]
    total = queryset.count()
    if cursor:
        queryset = queryset.filter(_after(order, decode_cursor(cursor, binding, len(order))))
    items = list(queryset[: size + 1])
    has_more = len(items) > size
    items = items[:size]
    last = [getattr(items[-1], name) for name, _descending in order] if items else []
    page = {
        "total": total,
        "limit": size,
        "has_more": has_more,
        "next_cursor": encode_cursor(last, binding) if has_more else None,
    }
    return items, page
