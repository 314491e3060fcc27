"""Issue 29's acceptance: two machines (two homes, two clones), one bare repository each for the project and for
one person's global memory, all on local disk. Workspace memory travels with the project's git, global memory with
`compozy memory sync`; what arrives becomes decisions; a conflict is reported where it was pulled, loses nothing
and is resolved by `memory resolve`; sessions on both machines never conflict on the checkpoint."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import Cli

pytestmark = pytest.mark.django_db

IDENTITY = ["-c", "user.email=t@example.com", "-c", "user.name=t"]


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *IDENTITY, *args], cwd=cwd, check=check, capture_output=True, text=True)


def ok(result, code: int = 0):
    assert result.code == code, result.stdout + result.stderr
    return result.json if result.stdout.startswith("{") else result


@pytest.fixture
def machines(tmp_path):
    project_repo, global_repo = tmp_path / "project.git", tmp_path / "global.git"
    for bare in (project_repo, global_repo):
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    checkouts = []
    for name in ("a", "b"):
        (tmp_path / name / "home").mkdir(parents=True)
        checkouts.append(tmp_path / name / "project")
    git(tmp_path, "init", "-q", "-b", "main", str(checkouts[0]))
    git(checkouts[0], "remote", "add", "origin", str(project_repo))
    # Git identity for the commits `memory sync` makes, as a person's ~/.gitconfig would give it.
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "COMPOZY_Q_SYNC": "1"}
    a = Cli(home=tmp_path / "a" / "home", cwd=checkouts[0])
    b = Cli(home=tmp_path / "b" / "home", cwd=checkouts[1])
    return a, b, env, project_repo, global_repo


def test_two_machines_share_memory_through_git_and_a_conflict_is_reported_resolved_and_nothing_lost(machines):
    a, b, env, project_repo, global_repo = machines
    # Machine A: a workspace memory (shared with the project) and a global one (synced by memory sync).
    ok(a("memory", "write", "--type", "project", "--name", "Deploy train", "--description", "when we deploy",
         "--content", "The zqdeploy train leaves on Thursdays.", **env))
    ok(a("memory", "write", "--scope", "global", "--type", "user", "--name", "Editor", "--description",
         "what the person edits with", "--content", "Prefers the zqvim editor with tabs of 4.", **env))
    git(a.cwd, "add", ".compozy")
    git(a.cwd, "commit", "-qm", "memory")
    git(a.cwd, "push", "-q", "origin", "main")
    first = ok(a("memory", "sync", "--remote", str(global_repo), "-o", "json", **env))
    assert first["initialized"] and first["pushed"]
    a_decisions = ok(a("memory", "decisions", "list", "--scope", "global", "-o", "json", **env))["decisions"]
    add = next(d for d in a_decisions if d["target_filename"] == "user_editor.md")
    assert [(c["decision_id"], c["op"], c["filename"]) for c in first["committed"]] == [
        (add["id"], "add", "user_editor.md")]
    # One commit per decision, its message naming the decision, op and file; machine state never committed.
    log = git(global_repo, "log", "--format=%s", "main").stdout.split("\n")
    assert f"{add['id']} add user_editor.md" in log
    tracked = git(global_repo, "ls-tree", "-r", "--name-only", "main").stdout.split()
    assert sorted(tracked) == [".gitignore", "user_editor.md"]

    # Machine B: clones the project, syncs global memory; both are recalled, as decisions of origin file/sync.
    git(b.cwd.parent, "clone", "-q", str(project_repo), str(b.cwd))
    pulled = ok(b("memory", "sync", "--remote", str(global_repo), "-o", "json", **env))
    assert pulled["arrived"] == ["user_editor.md"] and pulled["conflicts"] == []
    search = ok(b("memory", "search", "zqdeploy train zqvim editor", "-o", "json", **env))
    found = {hit["memory"]["filename"] for hit in search["results"]}
    assert {"project_deploy_train.md", "user_editor.md"} <= found
    snapshot = b("memory", "snapshot", "--query", "zqdeploy zqvim", **env).stdout
    assert "zqdeploy" in snapshot and "zqvim" in snapshot
    b_decisions = ok(b("memory", "decisions", "list", "-o", "json", **env))["decisions"]
    origins = {d["target_filename"]: (d["op"], d["origin"]) for d in b_decisions}
    assert origins["user_editor.md"] == ("add", "sync")
    assert origins["project_deploy_train.md"] == ("add", "file")

    # Both edit the global memory differently. A syncs first; B's sync pulls the conflict and reports it there.
    ok(a("memory", "edit", "user_editor.md", "--scope", "global", "--content", "Prefers zqvim with tabs of 2.", **env))
    ok(a("memory", "sync", "-o", "json", **env))
    ok(b("memory", "edit", "user_editor.md", "--scope", "global", "--content", "Prefers zqvim with tabs of 8.", **env))
    conflicted = b("memory", "sync", "-o", "json", **env)
    assert conflicted.code == 9, conflicted.stdout + conflicted.stderr  # ran, but did less than asked: not pushed
    report = conflicted.json
    assert [c["filename"] for c in report["conflicts"]] == ["user_editor.md"] and not report["pushed"]
    assert "compozy memory resolve user_editor.md --scope global" in report["conflicts"][0]["resolve"]
    on_disk = (b.home / "memory" / "user_editor.md").read_text()
    assert "tabs of 2" in on_disk and "tabs of 8" in on_disk  # nothing lost
    health = b("memory", "health", "-o", "json", **env)
    assert health.json["status"] == "degraded"  # as for any invalid file (test_conflict_markers compares codes)
    assert [(i["filename"], i["reason"]) for i in health.json["invalid_files"]] == [("user_editor.md",
                                                                                     "conflict_markers")]
    recalled = b("memory", "search", "zqvim tabs", "-o", "json", **env).stdout
    assert "tabs of 8" in recalled and "<<<<<<<" not in recalled  # B's previous version, never the markers
    assert "<<<<<<<" not in b("memory", "snapshot", "--query", "zqvim tabs", **env).stdout
    assert "<<<<<<<" not in (b.home / "memory" / "MEMORY.md").read_text()
    # Still not pushed while the conflict waits.
    again = b("memory", "sync", "-o", "json", **env)
    assert again.code == 9 and not again.json["pushed"]
    assert "tabs of 8" not in git(global_repo, "show", "main:user_editor.md").stdout

    resolved = ok(b("memory", "resolve", "user_editor.md", "--scope", "global", "--keep", "both", "-o", "json",
                    **env))
    assert len(resolved["writes"]) == 2
    final = ok(b("memory", "sync", "-o", "json", **env))
    assert final["pushed"] and final["conflicts"] == []
    assert {c["filename"] for c in final["committed"]} == {"user_editor.md", "user_editor_theirs.md"}
    back = ok(a("memory", "sync", "-o", "json", **env))
    assert back["conflicts"] == [] and set(back["arrived"]) == {"user_editor.md", "user_editor_theirs.md"}
    memory = a.home / "memory"
    both = (memory / "user_editor.md").read_text() + (memory / "user_editor_theirs.md").read_text()
    assert "tabs of 2" in both and "tabs of 8" in both and "<<<<<<<" not in both
    a_sync = [d for d in ok(a("memory", "decisions", "list", "--scope", "global", "-o", "json", **env))["decisions"]
              if d["origin"] == "sync"]
    assert {d["target_filename"] for d in a_sync} == {"user_editor.md", "user_editor_theirs.md"}

    # Sessions on both machines in the same workspace: the checkpoint is each person's, ignored by git.
    for machine, session in ((a, "sa-1"), (b, "sb-1")):
        ok(machine("session", "start", "--session", session, **env))
        ok(machine("session", "append", session, "--kind", "user_message", "--content",
                   "Remember that the zqdeploy train moved to Fridays.", **env))
        ok(machine("session", "stop", session, **env))
        checkpoint = machine.cwd / ".compozy" / "memory" / "project_checkpoint_summary.md"
        if not checkpoint.exists():  # what the checkpoint task writes; content is not this test's concern
            checkpoint.write_text(f"---\nname: checkpoint\n---\n{session}\n")
        assert git(machine.cwd, "check-ignore", "-q", str(checkpoint), check=False).returncode == 0
        git(machine.cwd, "add", ".compozy")
        git(machine.cwd, "commit", "-qm", f"session {session}", check=False)
        pull = git(machine.cwd, "pull", "-q", "--no-rebase", "origin", "main", check=False)
        assert pull.returncode == 0, pull.stderr
        git(machine.cwd, "push", "-q", "origin", "HEAD:main")
    assert "project_checkpoint_summary.md" not in git(project_repo, "ls-tree", "-r", "--name-only", "main").stdout


def test_the_first_sync_without_a_remote_says_which_field_is_missing(cli):
    result = cli("memory", "sync", "-o", "json")
    assert result.code == 2
    assert result.json["code"] == "memory.validation" and result.json["details"]["field"] == "remote"


def test_a_remote_carrying_a_password_is_refused_and_never_stored_nor_printed(cli):
    result = cli("memory", "sync", "--remote", "https://someone:s3cret-token@example.com/memory.git", "-o", "json")
    assert result.code == 2 and result.json["code"] == "memory.validation"
    assert result.json["details"] == {"field": "remote", "reason": "credentials_in_url"}
    assert "s3cret-token" not in result.stdout + result.stderr
    assert not (cli.home / "memory" / ".git").exists()


def test_an_unreachable_remote_is_a_sync_error_with_its_stable_code(cli, tmp_path):
    result = cli("memory", "sync", "--remote", str(tmp_path / "no-such-repository.git"), "-o", "json")
    assert result.code == 12, result.stdout + result.stderr
    assert result.json["code"] == "memory.sync.failed" and result.json["details"]["step"] == "fetch"


@pytest.fixture
def remote(tmp_path):
    bare = tmp_path / "global.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    return bare


GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com"}


def test_each_decision_is_its_own_commit_holding_what_that_decision_wrote(cli, remote):
    ok(cli("memory", "write", "--scope", "global", "--type", "user", "--name", "Shell", "--description", "my shell",
           "--content", "Uses zsh.", **GIT_ENV))
    ok(cli("memory", "edit", "user_shell.md", "--scope", "global", "--content", "Uses fish now.", **GIT_ENV))
    ok(cli("memory", "write", "--scope", "global", "--type", "user", "--name", "Pager", "--description", "my pager",
           "--content", "Uses less.", **GIT_ENV))
    ok(cli("memory", "delete", "user_pager.md", "--scope", "global", **GIT_ENV))
    report = ok(cli("memory", "sync", "--remote", str(remote), "-o", "json", **GIT_ENV))
    decisions = ok(cli("memory", "decisions", "list", "--scope", "global", "-o", "json"))["decisions"]
    in_order = [(d["id"], d["op"], d["target_filename"]) for d in reversed(decisions)]
    assert [(c["decision_id"], c["op"], c["filename"]) for c in report["committed"]] == in_order
    subjects = git(remote, "log", "--reverse", "--format=%s", "main").stdout.split("\n")
    assert [s for s in subjects if s.startswith("dec_")] == [f"{i} {op} {f}" for i, op, f in in_order]
    shas = git(remote, "log", "--reverse", "--format=%H", "main").stdout.split()
    first, second = (git(remote, "show", f"{sha}:user_shell.md").stdout for sha in shas[:2])
    assert "Uses zsh." in first and "Uses fish now." in second
    assert "user_pager.md" not in git(remote, "ls-tree", "--name-only", "main").stdout
    # Nothing new: the next sync commits nothing and still succeeds.
    assert ok(cli("memory", "sync", "-o", "json", **GIT_ENV))["committed"] == []


def test_a_session_stop_syncs_global_memory_when_the_setting_asks(cli, remote):
    ok(cli("memory", "sync", "--remote", str(remote), "-o", "json", **GIT_ENV))
    ok(cli("memory", "write", "--scope", "global", "--type", "user", "--name", "Tea", "--description", "tea",
           "--content", "Drinks green tea.", **GIT_ENV))
    env = {**GIT_ENV, "COMPOZY_Q_SYNC": "1"}
    ok(cli("session", "start", "--session", "s-off", **env))
    ok(cli("session", "stop", "s-off", **env))
    assert "user_tea.md" not in git(remote, "ls-tree", "--name-only", "main").stdout  # off by default
    env["COMPOZY_MEMORY__SYNC__AFTER_SESSION_STOP"] = "true"
    ok(cli("session", "start", "--session", "s-on", **env))
    ok(cli("session", "stop", "s-on", **env))
    assert "user_tea.md" in git(remote, "ls-tree", "--name-only", "main").stdout


def test_the_task_cluster_schedules_sync_only_when_every_minutes_is_set(home, monkeypatch):
    from django_q.models import Schedule

    from memory.background.schedules import SYNC_SCHEDULE, ensure_schedules

    ensure_schedules()
    assert not Schedule.objects.filter(name=SYNC_SCHEDULE).exists()
    monkeypatch.setenv("COMPOZY_MEMORY__SYNC__EVERY_MINUTES", "30")
    ensure_schedules()
    schedule = Schedule.objects.get(name=SYNC_SCHEDULE)
    assert (schedule.func, schedule.minutes) == ("memory.background.tasks.sync_global", 30)
    monkeypatch.setenv("COMPOZY_MEMORY__SYNC__EVERY_MINUTES", "0")
    ensure_schedules()
    assert not Schedule.objects.filter(name=SYNC_SCHEDULE).exists()


def test_two_machines_writing_one_memory_name_make_decisions_with_distinct_ids_and_lose_neither_content(tmp_path,
                                                                                                       remote):
    """Decision ids are content hashes (decision_identity), not ULIDs: two machines' decisions for the same file
    differ in content (and time), so their ids differ, in each home and in the commit messages both push."""
    machines = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        machines.append(Cli(home=tmp_path / name / "home", cwd=tmp_path / name))
    a, b = machines
    for machine, editor in ((a, "Prefers zqhelix."), (b, "Prefers zqkakoune.")):
        ok(machine("memory", "write", "--scope", "global", "--type", "user", "--name", "Editor", "--description",
                   "what I edit with", "--content", editor, **GIT_ENV))
    first = ok(a("memory", "sync", "--remote", str(remote), "-o", "json", **GIT_ENV))
    conflicted = b("memory", "sync", "--remote", str(remote), "-o", "json", **GIT_ENV)
    assert conflicted.code == 9 and [c["filename"] for c in conflicted.json["conflicts"]] == ["user_editor.md"]
    (a_add,) = [c["decision_id"] for c in first["committed"]]
    (b_add,) = [c["decision_id"] for c in conflicted.json["committed"]]
    assert a_add != b_add
    ok(b("memory", "resolve", "user_editor.md", "--scope", "global", "--keep", "both", "-o", "json", **GIT_ENV))
    assert ok(b("memory", "sync", "-o", "json", **GIT_ENV))["pushed"]
    ok(a("memory", "sync", "-o", "json", **GIT_ENV))

    ids = {}
    for name, machine in (("a", a), ("b", b)):
        decisions = ok(machine("memory", "decisions", "list", "--scope", "global", "-o", "json"))["decisions"]
        ids[name] = [d["id"] for d in decisions]
        assert len(set(ids[name])) == len(ids[name])
        memory = machine.home / "memory"
        kept = (memory / "user_editor.md").read_text() + (memory / "user_editor_theirs.md").read_text()
        assert "zqhelix" in kept and "zqkakoune" in kept and "<<<<<<<" not in kept  # nothing lost, on both
    assert a_add in ids["a"] and b_add in ids["b"]
    # Each home has its own decisions for what the other did (origin sync), never the other's ids reused.
    assert set(ids["a"]) & set(ids["b"]) == set()
    pushed = [s.split()[0] for s in git(remote, "log", "--format=%s", "main").stdout.split("\n")
              if s.startswith("dec_")]
    assert a_add in pushed and b_add in pushed and len(set(pushed)) == len(pushed)


def test_an_agents_global_tier_follows_the_person_through_memory_sync_on_its_own_branch(tmp_path, remote):
    """$COMPOZY_HOME/agents/<name>/memory is the person's knowledge like $COMPOZY_HOME/memory: memory sync carries
    it with the same remote, on branch agents/<name>, and another machine gets it with its next sync."""
    machines = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        machines.append(Cli(home=tmp_path / name / "home", cwd=tmp_path / name))
    a, b = machines
    tier = ("--scope", "agent", "--agent", "reviewer", "--agent-tier", "global")
    ok(a("memory", "write", *tier, "--type", "feedback", "--name", "Reviewer tone", "--description",
         "how reviews read", "--content", "Lead with the zqblocker, cite file and line.", **GIT_ENV))
    first = ok(a("memory", "sync", "--remote", str(remote), "-o", "json", **GIT_ENV))
    (agent,) = first["agents"]
    assert agent["agent_name"] == "reviewer" and agent["pushed"]
    assert [c["filename"] for c in agent["committed"]] == ["feedback_reviewer_tone.md"]
    assert git(remote, "ls-tree", "--name-only", "agents/reviewer").stdout.split() == [
        ".gitignore", "feedback_reviewer_tone.md"]
    assert "feedback_reviewer_tone.md" not in git(remote, "ls-tree", "--name-only", "main").stdout

    pulled = ok(b("memory", "sync", "--remote", str(remote), "-o", "json", **GIT_ENV))
    assert [(x["agent_name"], x["arrived"]) for x in pulled["agents"]] == [("reviewer", ["feedback_reviewer_tone.md"])]
    found = ok(b("memory", "search", "zqblocker", *tier, "-o", "json", **GIT_ENV))
    assert [hit["memory"]["filename"] for hit in found["results"]] == ["feedback_reviewer_tone.md"]
    decisions = ok(b("memory", "decisions", "list", *tier, "-o", "json"))["decisions"]
    assert [(d["op"], d["origin"]) for d in decisions] == [("add", "sync")]

    # Both machines change the tier: B's edit goes back to A, and a conflict is reported on the agent's entry.
    ok(b("memory", "edit", "feedback_reviewer_tone.md", *tier, "--content", "Lead with the zqblocker, then nits.",
         **GIT_ENV))
    assert ok(b("memory", "sync", "-o", "json", **GIT_ENV))["agents"][0]["pushed"]
    back = ok(a("memory", "sync", "-o", "json", **GIT_ENV))
    assert back["agents"][0]["arrived"] == ["feedback_reviewer_tone.md"]
    assert "then nits" in (a.home / "agents" / "reviewer" / "memory" / "feedback_reviewer_tone.md").read_text()
    ok(a("memory", "edit", "feedback_reviewer_tone.md", *tier, "--content", "Only blockers.", **GIT_ENV))
    ok(a("memory", "sync", "-o", "json", **GIT_ENV))
    ok(b("memory", "edit", "feedback_reviewer_tone.md", *tier, "--content", "Blockers and nits.", **GIT_ENV))
    conflicted = b("memory", "sync", "-o", "json", **GIT_ENV)
    assert conflicted.code == 9, conflicted.stdout + conflicted.stderr
    (conflict,) = conflicted.json["agents"][0]["conflicts"]
    assert conflict["resolve"].startswith("compozy memory resolve feedback_reviewer_tone.md --scope agent --agent "
                                          "reviewer --agent-tier global")
    assert "CONFLICT feedback_reviewer_tone.md" in b("memory", "sync", **GIT_ENV).stdout
