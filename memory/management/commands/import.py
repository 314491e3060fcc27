"""`compozy import …`: memory another tool kept before Compozy. The verbs and their flags are generated from their
declarations in `memory.verbs.imports` (see memory/cli/command.py)."""

from __future__ import annotations

from memory.cli.command import VerbCommand


class Command(VerbCommand):
    help = ("Import what another tool remembered: claude-code brings in Claude Code's auto-memory and, with "
            "--sessions, its past sessions.")
    noun = "import"
