"""How deep a JSON value nests. The json module parses recursively and raises RecursionError past the interpreter's
limit (about 1,000 levels), and a value parsed just under it cannot be written back as JSON from inside a request's
call stack: every reader of JSON from outside bounds the depth well below that, with this one check."""

from __future__ import annotations

import json
from typing import Any

# Deeper than any document this service reads from a client (transcript lines, events, payloads).
MAX_DEPTH = 64


def depth_over(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether lists and objects nest more than `limit` levels. Iterative: the value may be as deep as the parser
    allowed."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


def has_lone_surrogate(value: Any) -> bool:
    """Whether a decoded JSON value holds a lone surrogate anywhere, key or value (JSON's `"\\ud800"` decodes to
    one, and JavaScript writes one when it cuts an emoji): no UTF-8 file, column or response can carry it."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(has_lone_surrogate(key) or has_lone_surrogate(item) for key, item in value.items())
    if isinstance(value, list | tuple):
        return any(has_lone_surrogate(item) for item in value)
    return False


class TooDeep(ValueError):
    """JSON nested past MAX_DEPTH."""


def loads(text: str | bytes, limit: int = MAX_DEPTH) -> Any:
    """json.loads, with nesting past `limit` (RecursionError included) raised as TooDeep, a ValueError like every
    other malformed input. A text with no more brackets than `limit` cannot nest past it and is not walked."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise TooDeep(f"JSON nested more than {limit} levels") from None
    brackets = text.count(b"[" if isinstance(text, bytes) else "[") + text.count(b"{" if isinstance(text, bytes)
                                                                               else "{")
    if brackets > limit and depth_over(value, limit):
        raise TooDeep(f"JSON nested more than {limit} levels")
    return value
