"""docs/architecture.md names only paths that exist: every repository path it mentions (`memory/controller/core.py`,
`tests/crash/`), and every bare module file (`replay.py`), is checked against the tree.

Paths outside the repository (`$COMPOZY_HOME/token`, `<ws>/.compozy/memory/`) and URL paths (`/api/memory`) are not
repository paths and are skipped: a repository path starts at one of the top-level directories listed here.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "architecture.md"
TOP_LEVEL = ("compozy", "memory", "inspector", "tests", "bench", "docs", "scripts", "static", "templates")
SOURCE_DIRS = ("compozy", "memory", "inspector", "tests", "bench")

# A repository path: a top-level directory at the start of a token (not after `/`, `$`, `>` or a word character,
# which would make it part of a longer path such as $COMPOZY_HOME/memory/), then path characters.
REPO_PATH = re.compile(rf"(?<![\w/.$>-])(?:{'|'.join(TOP_LEVEL)})/[\w./-]*")
# A bare module file in backticks: `replay.py`.
BARE_MODULE = re.compile(r"`([\w]+\.py)`")


def repo_paths(text: str) -> set[str]:
    return {match.rstrip(".") for match in REPO_PATH.findall(text)}


def bare_modules(text: str) -> set[str]:
    return set(BARE_MODULE.findall(text))


def test_every_repository_path_in_the_architecture_doc_exists():
    text = DOC.read_text("utf-8")
    paths = repo_paths(text)
    assert len(paths) > 20, "the scan found too few paths to be reading the doc"
    missing = sorted(path for path in paths if not (REPO / path).exists())
    assert missing == [], f"docs/architecture.md names paths that do not exist: {missing}"


def test_every_bare_module_file_in_the_architecture_doc_exists_somewhere():
    text = DOC.read_text("utf-8")
    known = {path.name for top in SOURCE_DIRS for path in (REPO / top).rglob("*.py")} | {
        path.name for path in REPO.glob("*.py")}  # manage.py
    missing = sorted(name for name in bare_modules(text) if name not in known)
    assert missing == [], f"docs/architecture.md names module files that do not exist: {missing}"


def test_the_scan_tells_repository_paths_from_other_paths():
    text = ("`memory/controller/reindex.py` and memory/recall/ and tests/crash/. Not $COMPOZY_HOME/memory/, "
            "<ws>/.compozy/memory/, /api/memory or $COMPOZY_HOME/agents/<name>/memory/. Bare: `reindex.py`.")
    assert repo_paths(text) == {"memory/controller/reindex.py", "memory/recall/", "tests/crash/"}
    assert bare_modules(text) == {"reindex.py"}
