"""A writer killed after reserving its file and before committing its decision leaves a temp file no decision names;
the next process to start (or write) removes it, as replay removes the temp files of the decisions it applies."""

from __future__ import annotations

from pathlib import Path


def no_marker(home: Path) -> bool:
    """The marker stays between writes as a file and names a root only while a write is between its reserve and
    its commit: an empty file is no marker."""
    marker = home / "run" / "reservation"
    return not marker.exists() or marker.read_text() == ""


def test_a_reserved_file_of_a_writer_killed_before_its_decision_is_removed_by_the_next_process(cli, memory_root):
    written = cli("memory", "write", "--type", "project", "--name", "Kept", "--description", "d", "--content", "Kept.")
    assert written.code == 0, written.stderr
    root = memory_root
    # What the killed writer left: its reserved temp copy and the marker naming the root.
    orphan = root / ".project_lost.md.4242.deadbeef.compozy-tmp"
    orphan.write_text("---\nname: Lost\n---\n")
    (cli.home / "run" / "reservation").write_text(str(root))
    listed = cli("memory", "list", "-o", "json")
    assert listed.code == 0, listed.stderr
    assert not orphan.exists()
    assert no_marker(cli.home)
    assert (root / "project_kept.md").exists()
    assert [m["filename"] for m in listed.json["memories"]] == ["project_kept.md"]


def test_no_marker_is_left_after_a_write(cli, memory_root):
    assert cli("memory", "write", "--type", "project", "--name", "One", "--description", "d",
               "--content", "One.").code == 0
    assert no_marker(cli.home)
    assert not list((memory_root).glob("*.compozy-tmp"))
