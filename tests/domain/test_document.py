from __future__ import annotations

import pytest

from memory.domain.document import (
    Limits,
    check_body,
    decode_utf8,
    normalize_body,
    parse_document,
    render_document,
)
from memory.domain.errors import AgentTierRequired, ScopeInvalid, ValidationError
from memory.domain.models import Frontmatter, Provenance

VALID = """---
name: Test Integrity
description: Production bugs must be fixed instead of weakening tests
type: feedback
scope: global
provenance:
  source_actor: extractor
  source_sessions:
    - 01J7VR2Q8MZ4FXWZ8WB7M2A4S0
  confidence: high
  created_at: 2026-04-12T14:32:11Z
  updated_at: 2026-04-12T14:32:11Z
---

If a test reveals incorrect behavior, fix the production code.
"""


def test_the_spec_example_file_parses_and_renders_back_byte_for_byte():
    document = parse_document(VALID)
    assert document.frontmatter.provenance.created_at == "2026-04-12T14:32:11Z"
    assert render_document(document.frontmatter, document.body) == VALID


def test_unknown_frontmatter_keys_are_rejected():
    with pytest.raises(ValidationError) as error:
        parse_document(VALID.replace("scope: global", "scope: global\ncolour: blue"))
    assert error.value.details["reason"] == "unknown_key"


def test_unknown_provenance_keys_are_rejected():
    with pytest.raises(ValidationError):
        parse_document(VALID.replace("confidence: high", "confidence: high\n  mood: happy"))


def test_agent_keys_are_forbidden_outside_agent_scope():
    with pytest.raises(ScopeInvalid):
        parse_document(VALID.replace("scope: global", "scope: global\nagent: reviewer\nagent_tier: global"))


def test_agent_scope_needs_agent_and_tier():
    with pytest.raises((ScopeInvalid, AgentTierRequired)):
        parse_document(VALID.replace("scope: global", "scope: agent\nagent: reviewer"))
    ok = parse_document(VALID.replace("scope: global", "scope: agent\nagent: reviewer\nagent_tier: workspace"))
    assert ok.frontmatter.agent == "reviewer"


@pytest.mark.parametrize("bad_type", ["note", "User", "", "projects"])
def test_the_type_set_is_closed(bad_type):
    with pytest.raises(ValidationError):
        parse_document(VALID.replace("type: feedback", f"type: {bad_type!r}"))


def test_broken_yaml_and_missing_frontmatter_are_validation_errors():
    with pytest.raises(ValidationError) as error:
        parse_document("---\nname: [unclosed\n---\nbody\n")
    assert error.value.details["reason"] == "yaml"
    with pytest.raises(ValidationError) as error:
        parse_document("just a body\n")
    assert error.value.details["reason"] == "missing_frontmatter"


def test_limits_apply_to_the_final_body():
    limits = Limits(max_lines=3, max_bytes=40)
    check_body("one\ntwo\nthree", limits)
    with pytest.raises(ValidationError) as error:
        check_body("1\n2\n3\n4", limits)
    assert error.value.details["reason"] == "too_large"
    with pytest.raises(ValidationError):
        check_body("x" * 41, limits)
    with pytest.raises(ValidationError) as error:
        check_body("  \n ", limits)
    assert error.value.details["reason"] == "empty"


def test_body_normalization_trims_blank_edges_and_unifies_newlines():
    assert normalize_body("\r\n\r\nline one  \r\nline two\r\n\r\n") == "line one\nline two"


def test_non_utf8_bytes_are_a_validation_error():
    with pytest.raises(ValidationError) as error:
        decode_utf8(b"caf\xe9")
    assert error.value.details["reason"] == "encoding"


def test_frontmatter_renders_without_empty_keys():
    front = Frontmatter(name="A", description="B", type="user", scope="global",
                        provenance=Provenance(source_actor="cli", created_at="2026-01-01T00:00:00Z"))
    text = render_document(front, "body")
    assert "agent" not in text and "source_sessions" not in text
    assert "created_at: 2026-01-01T00:00:00Z" in text


@pytest.mark.parametrize(
    "text",
    [
        "plain words", "yes", "No", "null", "~", "123", "1.5", "0x1F", "1e3", "2026-01-01", "12:30", "a: b",
        "note # not a comment", "- dash first", "[bracket", "{brace", "'quoted'", '"double"', "trailing ", " leading",
        "Café ünïcode ✓", "tab\there", "back\\slash", "colon:inside", "*star", "&anchor", "!tag", "%percent",
        "@at", "`tick", "|pipe", ">fold", "?question", "line\nbreak", "", "true", "Off", ".inf", "-.5", "+1",
    ],
)
def test_rendered_frontmatter_reads_back_as_the_same_strings(text):
    import yaml

    front = Frontmatter(name="N", description="D", type="user", scope="global",
                        provenance=Provenance(source_actor="cli", source_sessions=[text or "s"], superseded_by=text))
    rendered = render_document(front, "body")
    loaded = yaml.safe_load(rendered.split("---\n")[1])
    assert loaded["provenance"]["superseded_by"] == text
    assert loaded["provenance"]["source_sessions"] == [text or "s"]
    assert parse_document(rendered).frontmatter == front
