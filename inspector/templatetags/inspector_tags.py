"""Links between inspector pages. Every link to a memory or decision carries its own scope selectors, so the
target page resolves the same root the list showed."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from django import template
from django.urls import reverse

from inspector.rendering import memory_ref

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
    url = reverse("inspector:decision", args=[decision["id"]])
    return f"{url}?{urlencode({'workspace': decision['workspace_id']})}" if decision.get("workspace_id") else url


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
