"""JSON Schemas of a verb as an agent sees them, generated from its input and result models.

An LLM acts best on a flat schema: every parameter described, enums spelled out where they are used (not behind a
`$ref`), optional parameters simply left out of `required` rather than typed `anyOf [T, null]`, unknown
parameters refused (`additionalProperties: false`). The output schema is the result model's own JSON Schema.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel

_DROPPED_KEYS = ("title",)


def _resolve(node: Any, definitions: dict[str, Any], seen: tuple[str, ...] = (), *, drop_null: bool) -> Any:
    """Inline local references; with `drop_null`, `anyOf [T, null]` becomes T (an input that may be left out)."""
    if isinstance(node, list):
        return [_resolve(item, definitions, seen, drop_null=drop_null) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        if name in seen:  # a recursive model keeps its reference
            return node
        target = _resolve(copy.deepcopy(definitions[name]), definitions, (*seen, name), drop_null=drop_null)
        siblings = {key: value for key, value in node.items() if key != "$ref"}
        return {**target, **siblings}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED_KEYS and isinstance(value, str):
            continue
        if key == "properties":
            out[key] = {name: _resolve(prop, definitions, seen, drop_null=drop_null) for name, prop in value.items()}
        else:
            out[key] = _resolve(value, definitions, seen, drop_null=drop_null)
    variants = out.get("anyOf")
    if drop_null and isinstance(variants, list):
        real = [variant for variant in variants if variant != {"type": "null"}]
        if len(real) == 1 and len(real) < len(variants):
            # `T | None`: a parameter that may be left out; null itself is never needed.
            del out["anyOf"]
            out = {**real[0], **out}
    if drop_null and out.get("default", 0) is None:
        del out["default"]
    return out


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    definitions = schema.pop("$defs", {})
    flat = _resolve(schema, definitions, drop_null=True)
    flat.pop("description", None)  # the model's docstring is for developers; the tool has its own description
    flat["type"] = "object"
    flat["additionalProperties"] = False
    flat.setdefault("properties", {})
    return flat


def output_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema(mode="serialization")
    definitions = schema.pop("$defs", {})
    flat = _resolve(schema, definitions, drop_null=False)
    flat.pop("description", None)
    return flat

