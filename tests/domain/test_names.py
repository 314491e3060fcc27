from __future__ import annotations

import pytest

from memory.domain.enums import MemoryType
from memory.domain.errors import ValidationError
from memory.domain.names import entity_key, memory_filename, parse_filename, slugify, validate_filename


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("Review Style", "review_style"),
        ("  Runtime -- Docs!! ", "runtime_docs"),
        ("Café au lait", "cafe_au_lait"),  # transliterated first (anyascii), then the run rule
        ("v2.1 release", "v2_1_release"),
    ],
)
def test_slug_transliterates_then_turns_every_run_outside_a_z0_9_into_one_underscore(name, slug):
    assert slugify(name) == slug


def test_a_name_without_letters_or_digits_cannot_become_a_filename():
    with pytest.raises(ValidationError):
        slugify("!!! ---")


def test_filenames_are_type_underscore_slug_dot_md():
    assert memory_filename(MemoryType.PROJECT, "Runtime Docs") == "project_runtime_docs.md"
    assert parse_filename("project_runtime_docs.md") == (MemoryType.PROJECT, "runtime_docs")


@pytest.mark.parametrize(
    ("filename", "reason"),
    [
        ("../etc/passwd.md", "traversal"),
        ("project_a/../../b.md", "traversal"),
        ("sub/project_a.md", "separator"),
        ("/abs/project_a.md", "separator"),
        ("_system_notes.md", "reserved"),
        ("_system", "reserved"),
        ("Project_Upper.md", "charset"),
        ("project a.md", "charset"),
        ("project_ü.md", "charset"),
        ("project_a.txt", "extension"),
        ("", "length"),
        (".hidden.md", "charset"),
        ("project\\a.md", "charset"),
    ],
)
def test_unsafe_filenames_are_rejected_before_the_disk(filename, reason):
    with pytest.raises(ValidationError) as error:
        validate_filename(filename)
    assert error.value.code == "memory.validation"
    assert error.value.details["reason"] == reason


def test_system_paths_are_readable_only_when_asked_for():
    with pytest.raises(ValidationError):
        validate_filename("_system/dreaming/20260101-run.md")
    assert validate_filename("_system/dreaming/20260101-run.md", include_system=True)


def test_entity_key_ignores_word_order():
    assert entity_key("runtime_docs") == entity_key("docs_runtime")
