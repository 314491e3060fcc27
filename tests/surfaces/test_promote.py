"""promote copies a memory into another scope through the controller, on the CLI, HTTP and MCP."""

from __future__ import annotations

import pytest

from memory.domain.enums import Origin
from memory.domain.errors import Conflict, NotFound, ScopeInvalid, ValidationError
from memory.services import promote
from memory.services.inputs import Caller
from tests import helpers as h

pytestmark = pytest.mark.django_db


def run(cwd, **fields):
    return promote.memory_promote(data=promote.PromoteInput.parse(fields), caller=Caller(origin=Origin.CLI, cwd=cwd))


def test_promote_copies_a_workspace_memory_to_global_as_a_new_decision(home, workspace_dir, memory_root):
    h.write(workspace_dir, name="Deploy Path", content="Deploys go through the signed artifact path.")
    result = run(workspace_dir, filename="project_deploy_path.md", scope="workspace", to_scope="global")
    assert result.applied is True and result.decision.op == "add" and result.decision.scope == "global"
    copied = (home / "memory" / "project_deploy_path.md").read_text()
    assert "scope: global" in copied and "signed artifact" in copied
    assert (memory_root / "project_deploy_path.md").exists()


def test_promote_into_an_agent_tier_needs_the_agent(home, workspace_dir):
    h.write(workspace_dir, name="Style", type="feedback", scope="global", content="Keep review comments short.")
    result = run(workspace_dir, filename="feedback_style.md", scope="global", to_scope="agent",
                 to_agent_name="reviewer", to_agent_tier="global")
    assert result.decision.agent_name == "reviewer" and result.decision.agent_tier == "global"
    assert (home / "agents" / "reviewer" / "memory" / "feedback_style.md").is_file()
    with pytest.raises(ScopeInvalid):
        run(workspace_dir, filename="feedback_style.md", scope="global", to_scope="agent")


def test_promote_from_an_agent_tier_uses_the_same_selector_words_as_every_verb(home, workspace_dir):
    h.write(workspace_dir, name="Tabs", type="feedback", scope="agent", agent_name="coder",
            content="The coder agent indents with tabs in Makefiles.")
    result = run(workspace_dir, filename="feedback_tabs.md", scope="agent", agent_name="coder",
                 agent_tier="workspace", to_scope="agent", to_agent_tier="global")
    assert result.decision.scope == "agent" and result.decision.agent_name == "coder"
    assert result.decision.agent_tier == "global"
    assert (home / "agents" / "coder" / "memory" / "feedback_tabs.md").is_file()


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"filename": "project_missing.md", "scope": "workspace", "to_scope": "global"}, NotFound),
        ({"filename": "project_x.md", "scope": "galaxy", "to_scope": "global"}, ScopeInvalid),
        ({"filename": "project_x.md", "scope": "workspace", "to_scope": "global", "to_agent_tier": "global"},
         ScopeInvalid),
        ({"filename": "project_present.md", "scope": "workspace", "to_scope": "workspace"}, ValidationError),
        ({"filename": "../project_x.md", "scope": "workspace", "to_scope": "global"}, ValidationError),
    ],
)
def test_bad_promotions_are_refused(home, workspace_dir, fields, error):
    h.write(workspace_dir, name="Present", content="A memory so the workspace exists.")
    with pytest.raises(error):
        run(workspace_dir, **fields)


def test_promote_on_the_cli(cli):
    cli("memory", "write", "--type", "project", "--name", "Cli Promote", "--description", "d",
        "--content", "Promoted from the command line.")
    result = cli("memory", "promote", "project_cli_promote.md", "--scope", "workspace", "--to-scope", "global",
                 "-o", "json")
    assert result.code == 0, result.stdout
    assert result.json["decision"]["scope"] == "global"
    assert (cli.home / "memory" / "project_cli_promote.md").is_file()


def test_a_memory_file_that_is_not_utf8_is_refused_alike_by_show_edit_and_promote(home, workspace_dir, memory_root):
    """One selector reads every memory file: bad bytes are the same conflict (409, reason encoding: the disk is
    wrong, not the request) wherever they are met, never a crash, and the file is left as it was."""
    h.write(workspace_dir, name="Deploy Path", content="Deploys go through the signed artifact path.")
    path = memory_root / "project_deploy_path.md"
    path.write_bytes(path.read_bytes().replace(b"signed", b"sign\xe9d"))
    before = path.read_bytes()
    attempts = [
        lambda: h.show(workspace_dir, filename="project_deploy_path.md"),
        lambda: h.edit(workspace_dir, filename="project_deploy_path.md", content="Deploys are signed."),
        lambda: run(workspace_dir, filename="project_deploy_path.md", scope="workspace", to_scope="global"),
    ]
    for attempt in attempts:
        with pytest.raises(Conflict) as error:
            attempt()
        assert error.value.details == {"filename": "project_deploy_path.md", "reason": "encoding"}
    assert path.read_bytes() == before
    assert not (home / "memory" / "project_deploy_path.md").exists()
