"""Shared fixtures. Every test gets its own COMPOZY_HOME; the database is pytest-django's test database, except
in subprocess tests, where each child process uses the SQLite file under its own COMPOZY_HOME."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import django
import pytest

from tests.environment import child_environment

# Settings read COMPOZY_HOME at import: point it somewhere disposable before Django loads.
_SESSION_HOME = tempfile.mkdtemp(prefix="compozy-test-home-")
atexit.register(shutil.rmtree, _SESSION_HOME, True)
os.environ["COMPOZY_HOME"] = _SESSION_HOME
# Tables derived from the model alone (recall's token neighbours, about 5 s to build) are shared by every test's
# home and every worker, and kept between runs: they depend on nothing a test writes.
os.environ["COMPOZY_CACHE_DIR"] = str(Path(tempfile.gettempdir()) / f"compozy-test-cache-{os.getuid()}")
for _name in list(os.environ):
    if _name.startswith("COMPOZY_") and ("__" in _name or _name in ("COMPOZY_WORKSPACE", "COMPOZY_FAULT")):
        del os.environ[_name]
# Only now may Django load. pytest-django's own setup (pytest_configure) skips a Django nobody has imported and
# configured yet, so the test modules' imports of memory.models would find no apps: load it here, once.
os.environ["DJANGO_SETTINGS_MODULE"] = "compozy.settings"
django.setup()

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
COMPOZY = str(VENV_BIN / "compozy")


@pytest.fixture(autouse=True)
def _no_derived_state_across_tests():
    """Recall caches derived state per process, keyed by the memory generation. pytest-django rolls every test
    back, so generation numbers and chunk ids repeat from one test to the next: each test starts with none."""
    yield
    if "memory.recall.pipeline" in sys.modules:
        sys.modules["memory.recall.pipeline"].forget_statistics()
    if "memory.catalog.vectors" in sys.modules:
        sys.modules["memory.catalog.vectors"].forget_matrices()
    if "memory.catalog.owners" in sys.modules:
        sys.modules["memory.catalog.owners"].forget_owners()
    if "memory.recall.side_thread" in sys.modules:
        # A test that started recall's side thread leaves no thread (nor its connection) to the next.
        sys.modules["memory.recall.side_thread"].shut_down()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("COMPOZY_HOME", str(path))
    monkeypatch.delenv("COMPOZY_WORKSPACE", raising=False)
    return path


@pytest.fixture
def workspace_dir(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    (path / ".git").mkdir()
    return path


@pytest.fixture
def ws(home: Path, workspace_dir: Path) -> Path:
    """The workspace directory, already created as a workspace (its identity recorded, no memory written)."""
    from tests.recall.helpers import ensure_workspace

    ensure_workspace(workspace_dir)
    return workspace_dir


@pytest.fixture
def memory_root(workspace_dir: Path) -> Path:
    """The workspace's memory root, <workspace_dir>/.compozy/memory (it exists once something was written)."""
    from tests.helpers import workspace_root

    return workspace_root(workspace_dir)


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    @property
    def json(self) -> dict:
        return json.loads(self.stdout)


@dataclass
class Cli:
    """Runs the real `compozy` console script in a child process, as a user would."""

    home: Path
    cwd: Path

    def env(self, **extra: str) -> dict[str, str]:
        env = child_environment()
        env["COMPOZY_HOME"] = str(self.home)
        env.update(extra)
        return env

    def __call__(self, *args: str, input: bytes | None = None, cwd: Path | None = None,
                 program: list[str] | None = None, **env: str) -> CliResult:
        command = (program or [COMPOZY]) + list(args)
        proc = subprocess.run(command, cwd=cwd or self.cwd, env=self.env(**env), input=input,
                              capture_output=True, timeout=120)
        return CliResult(proc.returncode, proc.stdout.decode("utf-8", "replace"),
                         proc.stderr.decode("utf-8", "replace"))


@pytest.fixture
def cli(home: Path, workspace_dir: Path) -> Cli:
    return Cli(home=home, cwd=workspace_dir)


@pytest.fixture
def completions():
    """A fake chat-completions endpoint on loopback (tests/fake_completions.py), closed after the test."""
    from tests.fake_completions import FakeCompletions

    server = FakeCompletions()
    yield server
    server.close()
