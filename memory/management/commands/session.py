"""`compozy session …`: the session ledger from the command line. The verbs and their flags are generated from
their declarations in `memory.verbs.sessions` (see memory/cli/command.py)."""

from __future__ import annotations

from memory.cli.command import VerbCommand


class Command(VerbCommand):
    help = ("The session ledger: start, append, usage, stop, show, events, history, list, resume. Sessions carry what "
            "happened to the next session through the workspace checkpoint.")
    noun = "session"
