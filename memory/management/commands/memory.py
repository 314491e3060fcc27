"""`compozy memory …` (= `python manage.py memory …`): the operator CLI over memory.services.

The verbs and their flags are generated from their declarations in `memory.verbs.memory`: each verb parses its
flags into the service's input model, calls the service once, and renders the result, a readable view by
default or the same JSON document the HTTP API returns with `-o json` (`-o jsonl` writes one list item per
line). Errors are `{code, message, details}` with the exit code of their code (see the README).
"""

from __future__ import annotations

from memory.cli.command import VerbCommand


class Command(VerbCommand):
    help = "Durable agent memory: write, edit, delete, list, search, snapshot, show, decisions, history, health …"
    noun = "memory"
