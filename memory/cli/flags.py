"""CLI flags generated from a verb's input model: one flag per field, named after it (`top_k` → `--top-k`; the
spec's CLI words `--agent`, `--session` and `--parent-session` for the `*_name`/`*_id` fields), with the field's
description as help, its enum or Literal values as enforced choices, `int` fields typed, and `bool` fields as
switches. Nothing here is declared per verb: a new field in a model is a new flag."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Any

from pydantic.fields import FieldInfo

from compozy.command import OUTPUTS
from memory.services.inputs import choices_of, unwrap_optional

# The spec's CLI spellings where they differ from the field name.
CLI_NAMES = {
    "agent_name": "agent",
    "to_agent_name": "to-agent",
    "session_id": "session",
    "parent_session_id": "parent-session",
}
# Fields whose CLI default comes from the environment.
ENV_DEFAULTS = {"workspace": "COMPOZY_WORKSPACE"}
CLI_HELP_SUFFIX = {"workspace": " On the CLI: $COMPOZY_WORKSPACE, then the current directory."}


def flag_of(name: str) -> str:
    return "--" + CLI_NAMES.get(name, name.replace("_", "-"))


@dataclass(frozen=True)
class Shape:
    kind: str  # str, int, float, bool, choice or complex (lists and objects: not offered on the CLI)
    choices: tuple[str, ...] = ()



def shape_of(info: FieldInfo) -> Shape:
    annotation = unwrap_optional(info.annotation)
    choices = choices_of(annotation)
    if choices is not None:
        return Shape("choice", choices)
    if annotation is bool:
        return Shape("bool")
    if annotation is int:
        return Shape("int")
    if annotation is float:
        return Shape("float")
    if annotation is str:
        return Shape("str")
    return Shape("complex")


def _help(name: str, info: FieldInfo) -> str:
    text = (info.description or "") + CLI_HELP_SUFFIX.get(name, "")
    # argparse formats help with %-style: a literal percent sign must be doubled.
    return text.replace("%", "%%")


def add_verb_arguments(parser: argparse.ArgumentParser, verb: Any) -> dict[str, str]:
    """Add one flag (or positional) per field of the verb's input model; returns field → flag, for error hints."""
    flags: dict[str, str] = {}
    for name, info in verb.input.model_fields.items():
        if name in verb.cli_exclude:
            continue
        shape = shape_of(info)
        if shape.kind == "complex":
            continue
        kwargs: dict[str, Any] = {"help": _help(name, info)}
        if shape.choices:
            kwargs["choices"] = shape.choices
        if shape.kind in ("int", "float"):
            # Text that is not a number is still a usage error; the model judges the number (its bounds).
            kwargs["type"] = int if shape.kind == "int" else float
        if name in verb.positionals:
            if not info.is_required():
                # A positional the model lets out (`replay <failure>` or `replay --session <id>`): the model
                # judges which combination is valid, with the same error as on every other surface.
                kwargs["nargs"] = "?"
            # A positional with choices shows them in the usage line (`token {rotate,path}`), as argparse does.
            action = parser.add_argument(name, **({} if shape.choices else {"metavar": name}), **kwargs)
            flags[name] = name
        else:
            flag = flag_of(name)
            flags[name] = flag
            if shape.kind == "bool":
                # None when absent, so the model's own default applies.
                action = parser.add_argument(flag, dest=name, action="store_true", default=None, help=kwargs["help"])
            else:
                env = ENV_DEFAULTS.get(name)
                default = (os.environ.get(env) or None) if env else None
                action = parser.add_argument(flag, dest=name, default=default,
                                             required=info.is_required() and default is None,
                                             metavar=name.upper() if not shape.choices else None, **kwargs)
        # Choices are shown and completed, and refused by the model itself (ProductParser._check_value).
        action.model_field = True
    if verb.switch is not None:
        parser.add_argument(flag_of(verb.switch.field), dest=verb.switch.field, action="store_true", default=None,
                            help=verb.switch.help)
    parser.add_argument("-o", "--output", default="human", choices=OUTPUTS,
                        help="Output: human (the default), json (the same document as the API) or jsonl (one line "
                             "per item of a list).")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="Say more: a write's rule trace, for example.")
    return flags


def fields_of(verb: Any, options: dict[str, Any]) -> dict[str, Any]:
    """The parsed options as the input model's fields: absent flags left out, readers applied."""
    fields: dict[str, Any] = {}
    for name in verb.input.model_fields:
        value = options.get(name)
        if value is None:
            continue
        reader = verb.readers.get(name)
        fields[name] = reader(value) if reader is not None else value
    return fields
