"""Error messages name fields (`agent_name`), never one surface's spelling of them (`--agent`): the same
message reaches an HTTP caller, an MCP agent and the CLI, and each surface adds its own hint."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BELOW_THE_SURFACES = ("memory/services", "memory/controller", "memory/domain", "memory/recall", "memory/catalog",
                      "memory/store", "memory/sessions")


def _flag_texts(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Raise) and node.exc is not None:
            for inner in ast.walk(node.exc):
                if isinstance(inner, ast.Constant) and isinstance(inner.value, str) and " --" in f" {inner.value}":
                    found.append(f"{path.name}:{node.lineno}: {inner.value}")
    return found


def test_no_error_raised_below_the_surfaces_names_a_cli_flag():
    offending = []
    for package in BELOW_THE_SURFACES:
        for path in sorted((REPO / package).rglob("*.py")) if (REPO / package).is_dir() else []:
            offending += _flag_texts(path)
    assert not offending, "\n".join(offending)


def test_the_scan_finds_a_flag_in_a_raise(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text('raise ValueError("Pass --workspace to choose one.")\nraise ValueError(f"{x} --type")\n')
    assert len(_flag_texts(probe)) == 2
