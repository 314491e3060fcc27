"""One isolated installation for the crash tests (a COMPOZY_HOME and a git checkout to run the CLI in), and the
writer process they kill."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import Cli, CliResult
from tests.helpers import workspace_root

WRITER = Path(__file__).resolve().parent / "writer.py"


@dataclass
class Run:
    """One isolated installation: a COMPOZY_HOME and a workspace (a git checkout) to run the CLI in."""

    cli: Cli

    @classmethod
    def create(cls, base: Path) -> Run:
        home = base / "home"
        workspace = base / "project"
        home.mkdir(parents=True)
        (workspace / ".git").mkdir(parents=True)
        return cls(Cli(home=home, cwd=workspace))

    @property
    def home(self) -> Path:
        return self.cli.home

    @property
    def workspace(self) -> Path:
        return self.cli.cwd

    @property
    def root(self) -> Path:
        return workspace_root(self.workspace)

    @property
    def db(self) -> Path:
        return self.home / "compozy.db"

    def __call__(self, *args: str, fault: str | None = None, **kwargs: Any) -> CliResult:
        env = {"COMPOZY_FAULT": fault} if fault else {}
        return self.cli(*args, **kwargs, **env)

    def ok(self, *args: str, **kwargs: Any) -> CliResult:
        result = self(*args, **kwargs)
        assert result.code == 0, f"{args} failed with {result.code}:\n{result.stdout}\n{result.stderr}"
        return result

    def write(self, memory: dict[str, str], *, fault: str | None = None) -> CliResult:
        return self("memory", "write", "--scope", "workspace", "--type", "project", "--name", memory["name"],
                    "--description", memory["description"], "--content", memory["content"], "-o", "json",
                    fault=fault)

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        connection = sqlite3.connect(self.db)
        try:
            return connection.execute(sql, params).fetchall()
        finally:
            connection.close()

    def health(self) -> dict[str, Any]:
        return self.ok("memory", "health", "-o", "json").json
