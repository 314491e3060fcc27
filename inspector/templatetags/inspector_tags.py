"""Links between inspector pages. Every link to a memory or decision carries its own scope selectors, so the
target page resolves the same root the list showed."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from django import template
from django.urls import reverse

register = template.Library()


def _memory_ref(memory: dict[str, Any]) -> dict[str, str]:
    ref = {"scope": memory.get("scope"), "agent_name": memory.get("agent_name"),
           "agent_tier": memory.get("agent_tier"), "workspace": memory.get("workspace_id")}
    if memory.get("is_system"):
        ref["include_system"] = "1"
    return {k: v for k, v in ref.items() if v}


@register.simple_tag
def memory_href(memory: dict[str, Any], action: str = "") -> str:
    name = {"": "inspector:memory", "edit": "inspector:memory_edit", "delete": "inspector:memory_delete"}[action]
    return f"{reverse(name, args=[memory['filename']])}?{urlencode(_memory_ref(memory))}"


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
