"""Two workspaces and two agents with the same slug in every scope: no search or snapshot for one of them ever
contains another's entry, and shadowing follows agent-workspace ▸ agent-global ▸ workspace ▸ global."""

from __future__ import annotations

import itertools

import pytest

from memory.domain.errors import CompozyError
from tests import helpers as h
from tests.recall import helpers as r

pytestmark = pytest.mark.django_db

FILENAME = "project_deploy_notes.md"
QUERY = "deploy pipeline rollout"
AGENTS = ("x", "y")
WORKSPACES = ("A", "B")


def location_key(scope, workspace=None, agent=None, tier=None):
    return (scope, workspace, agent, tier)


# One distinct word per location; it is in the description (so in the index) and in the body (so in recall).
WORDS = {
    location_key("global"): "albatross",
    location_key("workspace", "A"): "bison",
    location_key("workspace", "B"): "cheetah",
    location_key("agent", None, "x", "global"): "dingo",
    location_key("agent", None, "y", "global"): "emu",
    location_key("agent", "A", "x", "workspace"): "falcon",
    location_key("agent", "A", "y", "workspace"): "gazelle",
    location_key("agent", "B", "x", "workspace"): "heron",
    location_key("agent", "B", "y", "workspace"): "ibis",
}


@pytest.fixture
def world(home, tmp_path):
    """Workspaces A and B, agents x and y, and project_deploy_notes.md in all nine roots."""
    dirs = {}
    for label in WORKSPACES:
        path = tmp_path / f"project-{label.lower()}"
        (path / ".git").mkdir(parents=True)
        dirs[label] = path
    ids = {label: r.ensure_workspace(path) for label, path in dirs.items()}
    for (scope, workspace, agent, tier), word in WORDS.items():
        cwd = dirs[workspace or "A"]
        selectors = {"scope": scope}
        if agent:
            selectors.update(agent_name=agent, agent_tier=tier)
        result = h.write(cwd, name="Deploy Notes", description=f"Deploy notes kept by {word}",
                         content=f"The deploy pipeline here does a {word} rollout.", **selectors)
        assert result["applied"] is True, result
        assert result["decision"]["target_filename"] == FILENAME
    return dirs, ids


def identity_of(item, ids):
    """The location key of a search hit, from its summary."""
    memory = item["memory"]
    workspace = {v: k for k, v in ids.items()}.get(memory["workspace_id"]) if memory["workspace_id"] else None
    return location_key(memory["scope"], workspace, memory["agent_name"], memory["agent_tier"])


def visible(workspace, agent):
    keys = [location_key("global"), location_key("workspace", workspace)]
    if agent:
        keys += [location_key("agent", None, agent, "global"), location_key("agent", workspace, agent, "workspace")]
    return keys


COMBINATIONS = list(itertools.product(WORKSPACES, (*AGENTS, None)))


@pytest.mark.parametrize(("workspace", "agent"), COMBINATIONS)
def test_a_search_never_returns_another_workspaces_or_agents_entry(world, workspace, agent):
    dirs, ids = world
    fields = {"agent_name": agent} if agent else {}
    result = r.search(dirs[workspace], QUERY, top_k=20, **fields)
    seen = [identity_of(item, ids) for item in result["results"]]
    assert sorted(seen, key=str) == sorted(visible(workspace, agent), key=str)
    assert all(item["memory"]["filename"] == FILENAME for item in result["results"])
    text = repr(result)
    for key, word in WORDS.items():
        if key not in visible(workspace, agent):
            assert word not in text, (key, word)
    for item in result["results"]:
        if item["shadowed_by"]:
            shadower = item["shadowed_by"]
            assert shadower["workspace_id"] in (None, ids[workspace])
            assert shadower["agent_name"] in (None, agent)


@pytest.mark.parametrize(("workspace", "agent"), COMBINATIONS)
def test_a_snapshot_never_contains_another_workspaces_or_agents_entry(world, workspace, agent):
    dirs, ids = world
    fields = {"agent_name": agent} if agent else {}
    result = r.snapshot(dirs[workspace], query=QUERY, session_id=f"s-{workspace}-{agent}", **fields)
    text = result["text"].lower()
    for key, word in WORDS.items():
        if key in visible(workspace, agent):
            assert word in text, (key, word)
        else:
            assert word not in text, (key, word)
    for entry in result["entries"]:
        assert entry["workspace_id"] in (None, ids[workspace])
        assert entry["agent_name"] in (None, agent)
    log = r.snapshot_log(dirs[workspace], f"s-{workspace}-{agent}")
    assert {item["agent_name"] for item in log["injections"]} <= {None, agent}
    assert {item["root_key"].split(":")[-1] for item in log["injections"] if item["scope"] != "global"
            and item["agent_tier"] != "global"} == {ids[workspace]}


def test_the_agent_workspace_entry_wins_and_every_other_holder_is_reported_as_shadowed_by_it(world):
    dirs, ids = world
    result = r.search(dirs["A"], QUERY, agent_name="x")
    assert len(result["results"]) == 4  # nothing silently dropped
    winners = [item for item in result["results"] if item["shadowed_by"] is None]
    assert [identity_of(item, ids) for item in winners] == [location_key("agent", "A", "x", "workspace")]
    expected = {"scope": "agent", "agent_name": "x", "agent_tier": "workspace", "workspace_id": ids["A"],
                "filename": FILENAME}
    shadowed = [item for item in result["results"] if item["shadowed_by"] is not None]
    assert sorted((identity_of(item, ids) for item in shadowed), key=str) == sorted(
        [location_key("global"), location_key("workspace", "A"), location_key("agent", None, "x", "global")], key=str)
    assert all(item["shadowed_by"] == expected for item in shadowed)
    assert len(result["recall"]["blocks"]) == 1 and "falcon" in result["recall"]["blocks"][0]
    executed = r.events("memory.recall.executed")[-1].metadata
    assert (executed["result_count"], executed["shadowed_count"]) == (1, 3)


def test_shadowing_follows_agent_workspace_then_agent_global_then_workspace_then_global(home, workspace_dir):
    ws = workspace_dir
    ws_id = r.ensure_workspace(ws)
    steps = [
        ({"scope": "global"}, "albatross", {"scope": "global", "agent_name": None, "agent_tier": None,
                                             "workspace_id": None}),
        ({"scope": "workspace"}, "bison", {"scope": "workspace", "agent_name": None, "agent_tier": None,
                                            "workspace_id": ws_id}),
        ({"scope": "agent", "agent_name": "x", "agent_tier": "global"}, "dingo",
         {"scope": "agent", "agent_name": "x", "agent_tier": "global", "workspace_id": None}),
        ({"scope": "agent", "agent_name": "x", "agent_tier": "workspace"}, "falcon",
         {"scope": "agent", "agent_name": "x", "agent_tier": "workspace", "workspace_id": ws_id}),
    ]
    for count, (selectors, word, winner) in enumerate(steps, start=1):
        h.write(ws, name="Deploy Notes", description=f"Deploy notes kept by {word}",
                content=f"The deploy pipeline here does a {word} rollout.", **selectors)
        result = r.search(ws, QUERY, agent_name="x")
        assert len(result["results"]) == count
        winners = [item for item in result["results"] if item["shadowed_by"] is None]
        assert len(winners) == 1
        assert {k: winners[0]["memory"][k] for k in winner} == winner
        assert all(item["shadowed_by"] == {**winner, "filename": FILENAME}
                   for item in result["results"] if item is not winners[0])
        assert word in result["recall"]["blocks"][0]


def test_the_agent_tier_of_another_workspace_is_invisible_even_with_its_agent(world):
    dirs, ids = world
    result = r.search(dirs["B"], "falcon gazelle rollout", agent_name="x", top_k=20)
    assert "falcon" not in repr(result) and "gazelle" not in repr(result)
    explicit = r.search(dirs["B"], "falcon heron rollout", scope="agent", agent_name="x", agent_tier="workspace")
    assert [identity_of(item, ids) for item in explicit["results"]] == [location_key("agent", "B", "x", "workspace")]


def test_the_session_log_and_snapshot_of_one_workspace_stay_in_it(world):
    dirs, _ids = world
    r.snapshot(dirs["A"], session_id="a-main", agent_name="x", query=QUERY)
    assert "falcon" in r.snapshot(dirs["A"], session_id="a-helper", parent_session_id="a-main")["text"]
    own = r.snapshot(dirs["B"], session_id="b-main", agent_name="y", query=QUERY)["text"]
    assert "bison" not in own and "falcon" not in own


CROSS_WORKSPACE = {
    "sub-agent of a session started in another workspace": lambda ws: r.snapshot(
        ws, session_id="b-child", parent_session_id="a-main", agent_name="y")["text"],
    "the same session id asked from another workspace": lambda ws: r.snapshot(
        ws, session_id="a-main", agent_name="y")["text"],
    "the injection log of a session of another workspace": lambda ws: repr(r.snapshot_log(ws, "a-main")),
}


@pytest.mark.parametrize("ask", CROSS_WORKSPACE.values(), ids=CROSS_WORKSPACE.keys())
def test_a_session_of_another_workspace_never_hands_over_its_entries(world, ask):
    dirs, ids = world
    r.snapshot(dirs["A"], session_id="a-main", agent_name="x", query=QUERY)
    try:
        seen = ask(dirs["B"])
    except CompozyError:
        return  # refusing is fine; handing over workspace A's memory is not
    for word in ("bison", "falcon"):
        assert word not in seen
    assert ids["A"] not in seen
