"""`compozy workspace …`: the workspaces this machine knows, and a copied checkout's adopt or fork. The verbs and
their flags are generated from their declarations in `memory.verbs.workspace` (see memory/cli/command.py)."""

from __future__ import annotations

from memory.cli.command import VerbCommand


class Command(VerbCommand):
    help = ("The workspaces this machine knows: list, show; a copied checkout (memory.workspace.copied) is settled "
            "with adopt (it moved here) or fork (a workspace of its own).")
    noun = "workspace"
