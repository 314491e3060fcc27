"""`memory list` dates a hand edit by the edit (issue 27 item 11): after a person edits a memory file (frontmatter
untouched) and reindex records it, UPDATED is the file's mtime, not the stale frontmatter date, and stays so after a
rebuild; a file the controller wrote keeps its frontmatter's date even when only its mtime moves."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

from tests.helpers import workspace_root


def listed(cli) -> dict[str, str]:
    result = cli("memory", "list", "-o", "json")
    assert result.code == 0, result.stderr
    return {item["filename"]: item["updated_at"] for item in result.json["memories"]}


def test_memory_list_shows_a_hand_edits_time_and_keeps_a_controller_written_files_date(cli):
    for name in ("Deploy Target", "Billing Worker"):
        written = cli("memory", "write", "--type", "project", "--name", name, "--description", f"About {name}",
                      "--content", f"{name}: first version.")
        assert written.code == 0, written.stderr
    before = listed(cli)
    edited = workspace_root(cli.cwd) / "project_deploy_target.md"
    touched = workspace_root(cli.cwd) / "project_billing_worker.md"
    later = (datetime.now(UTC) + timedelta(days=2)).replace(microsecond=0)
    edited.write_text(edited.read_text().replace("first version.", "second version, edited by hand."))
    for path in (edited, touched):
        os.utime(path, (later.timestamp(), later.timestamp()))
    assert cli("memory", "reindex").code == 0
    stamp = later.strftime("%Y-%m-%dT%H:%M:%SZ")
    after = listed(cli)
    assert after["project_deploy_target.md"] == stamp, after
    assert after["project_billing_worker.md"] == before["project_billing_worker.md"]  # only its mtime moved
    assert cli("memory", "reindex", "--rebuild").code == 0
    assert listed(cli) == after
    table = cli("memory", "list")
    assert later.strftime("%Y-%m-%d") in table.stdout, table.stdout
