"""One declaration per input: the CLI flags and the MCP schemas are generated from the verbs' input models, so
every field is described once and offered under the same name, choices and help on every surface."""

from __future__ import annotations

import argparse
import enum
from typing import Any

import pytest
from pydantic import BaseModel

from memory.cli.flags import CLI_NAMES, flag_of, shape_of
from memory.domain.errors import CompozyError, ValidationError
from memory.management.commands.memory import Command as MemoryCommand
from memory.verbs import all_verbs
from memory.verbs.schema import input_schema, output_schema

VERBS = all_verbs()


def _models(model: type[BaseModel]) -> list[type[BaseModel]]:
    """The model and every model nested in its fields (the operations of a batch, say)."""
    found = [model]
    for info in model.model_fields.values():
        stack = [info.annotation]
        while stack:
            annotation = stack.pop()
            if isinstance(annotation, type) and issubclass(annotation, BaseModel) and annotation not in found:
                found += _models(annotation)
            stack.extend(getattr(annotation, "__args__", ()))
    return found


@pytest.mark.parametrize("verb", VERBS, ids=lambda verb: verb.tool.name if verb.tool else " ".join(verb.command))
def test_every_field_of_every_verb_input_is_described(verb):
    for model in _models(verb.input):
        for name, info in model.model_fields.items():
            assert info.description and len(info.description) > 15, f"{model.__name__}.{name} has no description"


def _leaf_parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    leaves = {}
    subparsers = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    if not subparsers:
        return {path: parser}
    for action in subparsers:
        for name, child in action.choices.items():
            leaves |= _leaf_parsers(child, (*path, name))
    return leaves


@pytest.fixture(scope="module")
def memory_parser() -> argparse.ArgumentParser:
    return MemoryCommand().create_parser("compozy", "memory")


def test_the_cli_offers_each_verb_and_each_field_with_its_description_and_choices(memory_parser):
    leaves = _leaf_parsers(memory_parser)
    declared = {verb.command[1:]: verb for verb in VERBS if verb.command[:1] == ("memory",)}
    assert set(leaves) == set(declared)
    for path, parser in leaves.items():
        verb = declared[path]
        actions = {action.dest: action for action in parser._actions}
        for name, info in verb.input.model_fields.items():
            if shape_of(info).kind == "complex":
                continue
            action = actions[name]
            if name in verb.positionals:
                assert not action.option_strings
            else:
                assert action.option_strings == [flag_of(name)]
            assert action.help.replace("%%", "%").startswith(info.description)
            shape = shape_of(info)
            if shape.kind == "choice":
                assert tuple(action.choices) == shape.choices
        for action in parser._actions:
            assert action.help, f"memory {' '.join(path)}: {action.option_strings or action.dest} has no help"


def test_the_product_verbs_carry_none_of_djangos_options(memory_parser):
    for path, parser in _leaf_parsers(memory_parser).items():
        flags = {flag for action in parser._actions for flag in action.option_strings}
        assert not flags & {"--settings", "--pythonpath", "--traceback", "--no-color", "--force-color",
                            "--skip-checks", "--version", "--verbosity"}, path


@pytest.mark.parametrize(("argv", "field", "value", "code"), [
    (["list", "--scope", "galaxy"], "scope", "galaxy", "memory.scope.invalid"),
    (["list", "--type", "note"], "type", "note", "memory.validation"),
    (["list", "--sort", "size"], "sort", "size", "memory.validation"),
    (["list", "--agent-tier", "team"], "agent_tier", "team", "memory.scope.invalid"),
    (["list", "--limit", "0"], "limit", 0, "memory.validation"),
    (["decisions", "list", "--op", "merge"], "op", "merge", "memory.validation"),
    (["decisions", "list", "--origin", "web"], "origin", "web", "memory.validation"),
    (["history", "--operation", "memory.read"], "operation", "memory.read", "memory.validation"),
])
def test_a_value_outside_a_fields_choices_is_refused_by_the_model_as_on_every_surface(memory_parser, argv, field,
                                                                                         value, code):
    from memory.cli.flags import fields_of

    options = vars(memory_parser.parse_args(argv))
    verb = options["_verb"]
    with pytest.raises(CompozyError) as from_cli:
        verb.input.parse(fields_of(verb, options))
    with pytest.raises(CompozyError) as from_json:  # what HTTP and MCP parse
        verb.input.parse({field: value})
    assert from_cli.value.code == from_json.value.code == code
    assert from_cli.value.message == from_json.value.message
    assert from_cli.value.details["field"] == field


@pytest.mark.parametrize(("argv", "flag"), [
    (["list", "-o", "yaml"], "-o"),
    (["list", "--limit", "many"], "--limit"),
    (["write", "--content", "x", "--colour", "blue"], "--colour"),
])
def test_what_is_not_a_field_is_a_usage_error(memory_parser, argv, flag):
    with pytest.raises(ValidationError) as caught:
        memory_parser.parse_args(argv)
    assert flag in caught.value.message and caught.value.details["reason"] == "usage"


def test_promote_uses_the_same_selector_words_as_every_other_verb(memory_parser):
    promote = _leaf_parsers(memory_parser)[("promote",)]
    show = _leaf_parsers(memory_parser)[("show",)]
    flags = {flag for action in promote._actions for flag in action.option_strings}
    assert {"--scope", "--agent", "--agent-tier", "--workspace"} <= flags
    assert {"--to-scope", "--to-agent", "--to-agent-tier"} <= flags
    assert "--from" not in flags and "--to" not in flags
    choices = {action.dest: action.choices for action in promote._actions}
    assert choices["scope"] == choices["to_scope"] == {a.dest: a.choices for a in show._actions}["scope"]


def _enum_of(property_schema: dict[str, Any]) -> list[Any] | None:
    return property_schema.get("enum")


@pytest.mark.parametrize("verb", [verb for verb in VERBS if verb.tool], ids=lambda verb: verb.tool.name)
def test_the_tool_schema_is_the_input_model_with_every_parameter_described_and_its_enums(verb):
    schema = input_schema(verb.input)
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert set(schema["properties"]) == set(verb.input.model_fields)
    assert set(schema.get("required", [])) == {n for n, i in verb.input.model_fields.items() if i.is_required()}
    for name, info in verb.input.model_fields.items():
        prop = schema["properties"][name]
        assert prop["description"] == info.description
        assert "$ref" not in str(prop) and "anyOf" not in prop
        shape = shape_of(info)
        if shape.kind == "choice":
            assert tuple(str(v) for v in _enum_of(prop)) == shape.choices


def test_the_cli_spells_only_the_documented_fields_differently():
    # The spec's CLI words (--agent, --session, --parent-session); every other flag is the field's own name.
    assert CLI_NAMES == {"agent_name": "agent", "to_agent_name": "to-agent", "session_id": "session",
                         "parent_session_id": "parent-session"}


@pytest.mark.parametrize("verb", [verb for verb in VERBS if verb.tool], ids=lambda verb: verb.tool.name)
def test_the_tool_output_schema_is_the_result_model_not_an_open_object(verb):
    schema = output_schema(verb.result)
    assert schema["type"] == "object" and schema["properties"]
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == set(verb.result.model_fields)


def test_the_enums_of_the_models_are_the_domains_closed_sets():
    from memory.domain.enums import AgentTier, MemoryType, Op, Origin, Scope

    by_field: dict[str, set[str]] = {}
    for verb in VERBS:
        for name, info in verb.input.model_fields.items():
            shape = shape_of(info)
            if shape.kind == "choice":
                by_field.setdefault(name, set()).update(shape.choices)
    expected: dict[str, type[enum.Enum]] = {"scope": Scope, "agent_tier": AgentTier, "type": MemoryType, "op": Op,
                                            "origin": Origin, "to_scope": Scope, "to_agent_tier": AgentTier}
    for name, domain in expected.items():
        assert by_field[name] == {member.value for member in domain}, name
    assert by_field["sort"] == {"recent", "name"}


def test_a_positional_with_choices_shows_them_in_the_usage_line(memory_parser):
    token = _leaf_parsers(memory_parser)[("token",)]
    assert token.format_usage().rstrip().endswith("{rotate,path}")


def test_a_read_over_every_visible_scope_describes_its_scope_as_a_filter_and_a_write_as_its_destination():
    schemas = {verb.tool.name: input_schema(verb.input) for verb in VERBS if verb.tool}
    for name in ("compozy__memory_list", "compozy__memory_search", "compozy__memory_snapshot"):
        described = schemas[name]["properties"]["scope"]["description"]
        assert "Omitted: every scope visible here" in described and "write" not in described, name
    for name in ("compozy__memory_propose", "compozy__memory_note"):
        assert "the memory type picks it" in schemas[name]["properties"]["scope"]["description"], name
