"""A memory's filename names its type (`user_x.md` is a user memory): a hand edit whose frontmatter says another
type is an invalid file, reported by health and reindex like broken YAML, never indexed, recalled or
overwritten."""

from __future__ import annotations


def test_a_hand_written_file_whose_type_differs_from_its_filename_prefix_is_invalid(cli, memory_root):
    made = cli("memory", "write", "--type", "user", "--name", "Tabs", "--description", "indentation",
               "--content", "The user indents with zqtabs.", "--scope", "workspace")
    assert made.code == 0, made.stderr
    root = memory_root
    good = (root / "user_tabs.md").read_text()
    (root / "user_tabs.md").write_text(good.replace("type: user", "type: project"))
    (root / "user_planted.md").write_text(good.replace("type: user", "type: project")
                                          .replace("name: Tabs", "name: Planted"))

    health = cli("memory", "health", "-o", "json")
    invalid = {(item["filename"], item["reason"]) for item in health.json["invalid_files"]}
    assert {("user_tabs.md", "type_mismatch"), ("user_planted.md", "type_mismatch")} <= invalid, health.stdout

    reindex = cli("memory", "reindex", "-o", "json")
    assert "user_planted.md" in reindex.stdout and "type_mismatch" in reindex.stdout, reindex.stdout
    listed = cli("memory", "list", "-o", "json")
    assert "user_planted.md" not in listed.stdout, listed.stdout
    search = cli("memory", "search", "zqtabs", "-o", "json")
    assert all(hit["memory"]["filename"] != "user_planted.md" for hit in search.json["results"])
