"""Links between inspector pages. Every link to a memory or decision carries its own scope selectors, so the
target page resolves the same root the list showed."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode
from zoneinfo import ZoneInfo

from django import template
from django.conf import settings
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from inspector.rendering import compact_metadata, memory_ref, moment, trace_rows

register = template.Library()


@register.simple_tag
def memory_href(memory: dict[str, Any], action: str = "") -> str:
    name = {"": "inspector:memory", "edit": "inspector:memory_edit", "delete": "inspector:memory_delete"}[action]
    ref = memory_ref(memory) | ({"include_system": "1"} if memory.get("is_system") else {})
    # A decision names its memory by target_filename; a summary or an injection by filename.
    filename = memory.get("filename") or memory["target_filename"]
    return f"{reverse(name, args=[filename])}?{urlencode(ref)}"


@register.simple_tag
def decision_href(decision: dict[str, Any]) -> str:
    # Decision ids are unique in the whole log: the page finds one without being told its workspace.
    return reverse("inspector:decision", args=[decision["id"]])


@register.simple_tag
def when(value: str | None, default: str = "") -> str:
    """A timestamp as `<time>`: relative text, the exact time in the server's local zone (the user's machine for
    this local service) on hover."""
    shown = moment(value, datetime.now(UTC), ZoneInfo(settings.DISPLAY_TIME_ZONE))
    if shown is None:
        return default
    return format_html('<time datetime="{}" title="{}">{}</time>', shown.iso, shown.exact, shown.relative)


_INSTANT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)")


@register.filter
def with_times(text: str | None) -> str:
    """A service's sentence (a gate's detail) with each RFC 3339 instant in it shown as `when` shows a field."""
    if not text:
        return ""
    parts = []
    last = 0
    for found in _INSTANT.finditer(str(text)):
        parts.append(format_html("{}{}", str(text)[last:found.start()], when(found.group(0))))
        last = found.end()
    parts.append(format_html("{}", str(text)[last:]))
    return mark_safe("".join(parts))


@register.filter
def local_time(value: str | None) -> str:
    """The exact time in the machine's zone as plain text, where markup cannot go (an SVG title)."""
    shown = moment(value, datetime.now(UTC), ZoneInfo(settings.DISPLAY_TIME_ZONE))
    return shown.exact if shown else ""


@register.simple_tag
def rule_rows(trace: list[dict[str, Any]], op: str) -> list[dict[str, Any]]:
    return trace_rows(trace, op)


# Where a file name or path may wrap: after each separator, so a narrow column breaks it into words, never into
# runs of two or three characters.
_BREAK_AFTER = re.compile(r"(?<=[_/-])")


@register.filter
def filename(name: str | None) -> str:
    """A file name or path as `<code class="file">`, with a line-break opportunity (`<wbr>`) after `_`, `-`, `/`."""
    if not name:
        return ""
    parts = _BREAK_AFTER.split(str(name))
    inner = format_html_join(mark_safe("<wbr>"), "{}", ((part,) for part in parts))
    return format_html('<code class="file">{}</code>', inner)


@register.filter
def metadata_pairs(metadata: dict[str, Any]) -> list[tuple[str, str]]:
    return compact_metadata(metadata or {})


@register.filter
def workspace_name(workspace_id: str | None, workspaces: list[dict[str, Any]]) -> str:
    """The last part of a workspace's path (its directory name), or its id when this machine does not know it."""
    for workspace in workspaces or []:
        if workspace["id"] == workspace_id:
            return workspace["path"].rstrip("/").rsplit("/", 1)[-1] or workspace["path"]
    return workspace_id or ""


@register.simple_tag
def page_href(filters: dict[str, Any], cursor: str | None = None) -> str:
    params = dict(filters)
    if cursor:
        params["cursor"] = cursor
    return "?" + urlencode(params, quote_via=quote)


@register.filter
def get(mapping: dict[str, Any], key: str) -> Any:
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.filter
def pretty_json(value: Any) -> str:
    import json

    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
