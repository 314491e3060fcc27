"""Invariant 2: nothing writes under a memory root except the controller's apply step.

The scan walks the product's source for every call that can create, change or remove a file, and allows it only
in the modules listed here, each with its reason. The atomic-write helpers themselves may be called only from the
controller.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("compozy", "memory", "inspector")

# module -> why it may touch the filesystem
ALLOWED_WRITERS = {
    "memory/store/files.py": "the atomic-write helper: temp file, fsync, rename, directory fsync",
    "memory/store/workspace.py": "creates .compozy/workspace.toml (outside every memory root) exactly once",
    "memory/store/sharing.py": ("appends missing lines to .compozy/.gitignore and to a synced root's "
                                ".gitignore (no memory file)"),
    "memory/controller/lock.py": "the write lock file under $COMPOZY_HOME/run",
    "memory/bootstrap.py": "the migration lock file under $COMPOZY_HOME/run",
    "compozy/settings.py": "the per-home secret key file",
    "compozy/home.py": "creates $COMPOZY_HOME and run/ 0700 and the database file 0600; tightens looser modes; "
                       "the API token file $COMPOZY_HOME/token, written atomically with mode 0600",
    "compozy/gunicorn_conf.py": "chmod of the Unix socket",
    "memory/tools/stdio.py": "opens /dev/null read-only over fd 0 while MCP serves stdio (children read EOF)",
    "memory/management/commands/serve.py": "removes a stale Unix socket under $COMPOZY_HOME/run",
    "compozy/serving.py": "records the running server's address in $COMPOZY_HOME/run/serve.json",
    "compozy/command.py": "opens /dev/null over stdout once its reader has closed the pipe",
    "memory/services/hooklog.py": "appends agent-hook failures to $COMPOZY_HOME/logs/hooks.log, outside every root",
    # os.open is how a file is opened without following a link; the flags are O_RDONLY | O_NOFOLLOW | O_NONBLOCK.
    "memory/importers/claude_code.py": "opens Claude Code's files read-only, never through a link; writes nothing",
}
# Only these may call the store's mutating helpers.
HELPER_CALLERS = {"memory/controller/core.py", "memory/controller/apply.py", "memory/controller/reconcile.py",
                  "memory/controller/replay.py",
                  # memory sync creates the global root's directories before `git init`; what git's own checkout
                  # writes there (a pull) is recorded right after as decisions of origin sync, like a hand edit
                  "memory/controller/sync.py",
                  # the extractor's inbox (_inbox/) and dead letters (_system/extractor/failures/): staged files are
                  # written whole by atomic_write, claimed by rename, removed once drained
                  "memory/extractor/inbox.py",
                  # dreaming's run reports and failure records under _system/dreaming/, and the records of failed
                  # checkpoint generations under _system/checkpoint/ (no decision records them)
                  "memory/controller/artifacts.py"}

MUTATING_HELPERS = {"atomic_write", "append_durably", "remove_file", "remove_stale_temp_files", "make_scope_dirs",
                    "rename_file", "remove_empty_dir"}

WRITE_ATTRS = {"write_text", "write_bytes", "unlink", "rename", "replace", "rmdir", "mkdir", "touch", "chmod",
               "symlink_to", "hardlink_to"}
OS_WRITERS = {"replace", "rename", "renames", "unlink", "remove", "rmdir", "removedirs", "mkdir", "makedirs",
              "link", "symlink", "chmod", "truncate", "write", "open"}


def _is_write_open(call: ast.Call) -> bool:
    mode = None
    if len(call.args) >= 2 and isinstance(call.args[1], ast.Constant):
        mode = call.args[1].value
    for keyword in call.keywords:
        if keyword.arg == "mode" and isinstance(keyword.value, ast.Constant):
            mode = keyword.value.value
    return isinstance(mode, str) and any(flag in mode for flag in "wax+")


def violations(source: Path) -> list[str]:
    tree = ast.parse(source.read_text(), filename=str(source))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = None
        if isinstance(func, ast.Attribute):
            base = func.value.id if isinstance(func.value, ast.Name) else None
            if base == "os" and func.attr in OS_WRITERS:
                name = f"os.{func.attr}"
            elif base == "shutil":
                name = f"shutil.{func.attr}"
            elif func.attr in WRITE_ATTRS and base not in ("os", "shutil", "re", "str"):
                # str.replace(a, b) and datetime.replace(tzinfo=...) are not Path.replace(target).
                if func.attr not in ("replace", "rename") or (len(node.args) == 1 and not node.keywords):
                    name = f".{func.attr}"
            elif func.attr == "open" and _is_write_open(node):
                name = ".open(w)"
        elif isinstance(func, ast.Name) and func.id == "open" and _is_write_open(node):
            name = "open(w)"
        if name:
            found.append(f"{source.relative_to(REPO)}:{node.lineno} {name}")
    return found


def helper_calls(source: Path) -> list[str]:
    tree = ast.parse(source.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if name in MUTATING_HELPERS:
                found.append(f"{source.relative_to(REPO)}:{node.lineno} {name}")
    return found


def sources() -> list[Path]:
    return [p for package in PACKAGES for p in (REPO / package).rglob("*.py") if "migrations" not in p.parts]


def test_only_the_listed_modules_touch_the_filesystem():
    offending = [v for path in sources() if str(path.relative_to(REPO)) not in ALLOWED_WRITERS
                 for v in violations(path)]
    assert offending == [], "file writes outside the store module:\n" + "\n".join(offending)


def test_the_store_helpers_are_called_only_by_the_controller():
    offending = [c for path in sources()
                 if str(path.relative_to(REPO)) not in HELPER_CALLERS | {"memory/store/files.py"}
                 for c in helper_calls(path)]
    assert offending == [], "\n".join(offending)


def test_the_scan_would_catch_a_stray_write(tmp_path, monkeypatch):
    stray = REPO / "memory" / "_stray_probe.py"
    stray.write_text("from pathlib import Path\nPath('x').write_text('y')\nopen('z', 'w')\nPath('a').replace(b)\n")
    try:
        assert len(violations(stray)) == 3
    finally:
        stray.unlink()
