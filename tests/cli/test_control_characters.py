"""Issue 12, hole 4: control characters other than newline and tab (NUL, ESC, BEL, …) are refused on write with
`scan.control_character`, and any that an old, hand-placed file carries are shown as visible escapes wherever the
text is printed: CLI human and JSON output, the snapshot, the recall block and the inspector."""

from __future__ import annotations

import json

import pytest

from memory.domain.errors import Rejected
from tests import helpers as h
from tests.helpers import workspace_root
from tests.inspector.helpers import signed_in_client
from tests.recall import helpers as r

RAW = ("\x00", "\x1b", "\x07", "\x9b", "\u202e")


@pytest.mark.django_db
@pytest.mark.parametrize("char", ["\x00", "\x1b", "\x07", "\x08", "\x7f", "\x9b"])
@pytest.mark.parametrize("field", ["content", "name", "description"])
def test_a_write_carrying_a_control_character_is_rejected_with_its_stable_code(ws, field, char):
    fields = {"name": "Terminal colours", "description": "How the build log is coloured",
              "content": "The build log colours errors red."}
    fields[field] = fields[field].replace("colour", f"co{char}lour", 1)
    with pytest.raises(Rejected) as caught:
        h.write(ws, **fields)
    assert caught.value.details["rules"] == ["scan.control_character"]
    assert char not in caught.value.message and char not in json.dumps(caught.value.details, ensure_ascii=False)


@pytest.mark.django_db
def test_newline_and_tab_stay_allowed(ws):
    result = h.write(ws, name="Tabbed table", description="A table with tabs",
                     content="host\tport\nbuild-01\t8080\nbuild-02\t8081")
    assert result["applied"]


def test_the_cli_refuses_a_control_character_with_exit_5_and_the_rule_id(cli):
    result = cli("memory", "write", "--type", "project", "--name", "Bell", "--description", "ding",
                 "--content", "ring the \x07 bell", "-o", "json")
    assert result.code == 5
    assert result.json["code"] == "memory.rejected"
    assert result.json["details"]["rules"] == ["scan.control_character"]


def place_old_file(workspace_dir):
    """A file placed by hand (never scanned) whose header (YAML escapes) and body carry control characters. (A
    bidirectional or other hidden character would make it invalid: tests/domain/test_invisible_characters.py.)"""
    path = workspace_root(workspace_dir) / "project_old_notes.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('---\nname: "Old \\e[2Jnotes"\ndescription: "Rings \\a and \\x9b hides"\ntype: project\n'
                    "scope: workspace\n---\n\nThe deploy \x1b]0;pwned\x07 script\x00 lives in ops/ exe.txt\n",
                    "utf-8")
    return path


def assert_no_raw(text):
    for char in RAW:
        assert char not in text, repr(char)


def test_cli_human_and_json_output_of_an_old_file_shows_escapes_not_raw_characters(cli):
    assert cli("memory", "write", "--type", "project", "--name", "Clean note", "--description", "plain",
               "--content", "Release notes go in CHANGES.md.").code == 0  # creates the workspace
    place_old_file(cli.cwd)
    assert cli("memory", "reindex").code == 0
    for args in (("memory", "show", "project_old_notes.md"), ("memory", "list"),
                 ("memory", "search", "deploy script lives"), ("memory", "snapshot", "--query", "deploy script lives")):
        human = cli(*args)
        assert human.code == 0, human.stderr
        assert_no_raw(human.stdout + human.stderr)
        assert "\\x1b" in human.stdout or "\\x9b" in human.stdout, args
    shown = cli("memory", "show", "project_old_notes.md", "-o", "json")
    assert_no_raw(shown.stdout)
    # The JSON document itself is unchanged: the escapes decode to the characters the file holds.
    assert "\x1b]0;pwned\x07" in shown.json["memory"]["content"]
    assert shown.json["memory"]["summary"]["name"] == "Old \x1b[2Jnotes"


@pytest.mark.django_db
def test_the_snapshot_and_recall_block_of_an_old_file_carry_no_control_character(ws):
    place_old_file(ws)
    h.reindex(ws)
    text = r.snapshot(ws, query="where does the deploy script live?")["text"]
    assert "<compozy_recall>" in text
    assert_no_raw(text)
    assert "\\x1b]0;pwned\\x07" in text and "Old \\x1b[2Jnotes" in text
    blocks = r.search(ws, "where does the deploy script live?")["recall"]["blocks"]
    assert blocks and not any(char in block for block in blocks for char in RAW)


@pytest.mark.django_db
def test_the_inspector_shows_an_old_files_control_characters_as_escapes(ws):
    place_old_file(ws)
    h.reindex(ws)
    workspace_id = r.ensure_workspace(ws)
    browser = signed_in_client()
    for url in (f"/inspector/memories/project_old_notes.md?scope=workspace&workspace={workspace_id}",
                f"/inspector/memories/?workspace={workspace_id}&scope=workspace",
                f"/inspector/memories/project_old_notes.md/edit?scope=workspace&workspace={workspace_id}"):
        response = browser.get(url)
        assert response.status_code == 200, url
        page = response.content.decode()
        assert_no_raw(page)
        assert "\\x1b" in page, url
