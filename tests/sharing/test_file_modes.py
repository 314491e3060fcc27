"""Memory files that git writes (a `memory sync` pull, a `git pull` of the project) get the umask's mode, 0644 under
the usual 022; once reconciled as memory they have the mode of the files the controller writes itself, 0600."""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Cli

pytestmark = pytest.mark.django_db

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com"}


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def ok(result):
    assert result.code == 0, result.stdout + result.stderr
    return result


@pytest.fixture
def umask_022() -> Iterator[None]:
    """The children (the CLI, and the git it runs) inherit it: git then checks files out 0644."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def test_files_a_sync_pulls_get_the_mode_of_the_controllers_own_files(tmp_path, umask_022):
    remote = tmp_path / "global.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    machines = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        machines.append(Cli(home=tmp_path / name / "home", cwd=tmp_path / name))
    a, b = machines
    for content in ("Uses zsh.", "Uses fish now."):  # an add, then an update that the second pull brings
        if content == "Uses zsh.":
            ok(a("memory", "write", "--scope", "global", "--type", "user", "--name", "Shell", "--description",
                 "my shell", "--content", content, **GIT_ENV))
        else:
            ok(a("memory", "edit", "user_shell.md", "--scope", "global", "--content", content, **GIT_ENV))
        ok(a("memory", "sync", "--remote", str(remote), **GIT_ENV))
        ok(b("memory", "sync", "--remote", str(remote), **GIT_ENV))
        pulled = b.home / "memory" / "user_shell.md"
        assert content in pulled.read_text()
        assert mode(pulled) == mode(a.home / "memory" / "user_shell.md") == 0o600
    # What B writes itself is 0600 too, and the pulled file is still the memory B recalls.
    ok(b("memory", "write", "--scope", "global", "--type", "user", "--name", "Pager", "--description", "my pager",
         "--content", "Uses less.", **GIT_ENV))
    assert mode(b.home / "memory" / "user_pager.md") == 0o600
    assert "Uses fish now." in ok(b("memory", "search", "fish", "--scope", "global", "-o", "json")).stdout


def test_a_memory_file_a_git_pull_brings_into_a_workspace_gets_the_controllers_mode(cli, tmp_path, workspace_dir,
                                                                                   umask_022):
    def git(cwd: Path, *args: str) -> None:
        subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args], cwd=cwd, check=True,
                       capture_output=True)

    (workspace_dir / ".git").rmdir()
    git(workspace_dir, "init", "-q", "-b", "main")
    ok(cli("memory", "write", "--type", "project", "--name", "Release train", "--description", "when we ship",
           "--content", "Releases leave every Tuesday."))
    git(workspace_dir, "add", ".compozy")
    git(workspace_dir, "commit", "-qm", "memory")
    teammate = tmp_path / "teammate"
    git(tmp_path, "clone", "-q", str(workspace_dir), str(teammate))
    theirs = teammate / ".compozy" / "memory" / "project_flaky_tests.md"
    theirs.write_text((teammate / ".compozy" / "memory" / "project_release_train.md").read_text()
                      .replace("Release train", "Flaky tests").replace("Releases leave every Tuesday.",
                                                                       "The zzquux suite flakes on Mondays."))
    git(teammate, "add", ".compozy")
    git(teammate, "commit", "-qm", "teammate's memory")
    git(workspace_dir, "pull", "-q", str(teammate), "main")
    pulled = workspace_dir / ".compozy" / "memory" / "project_flaky_tests.md"
    assert mode(pulled) == 0o644  # as git wrote it
    assert "project_flaky_tests.md" in ok(cli("memory", "search", "zzquux suite", "-o", "json")).stdout
    assert mode(pulled) == mode(workspace_dir / ".compozy" / "memory" / "project_release_train.md") == 0o600
