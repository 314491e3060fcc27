"""A product command whose verbs are generated from their declarations (`memory.verbs`): `compozy <noun> …`.

Each declared verb becomes a sub-command with one flag per input field (`memory.cli.flags`); running it parses the
flags into the input model, calls the service once and renders the result (a human view, or the same JSON
document the API returns with `-o json`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from compozy.command import ProductCommand, ProductParser
from memory.domain.enums import Origin
from memory.services.inputs import Caller
from memory.verbs import GROUPS, INCOMPLETE_EXIT, Verb, verbs_of

from . import flags, render


class VerbCommand(ProductCommand):
    noun = ""

    def add_arguments(self, parser: Any) -> None:
        self._flags: dict[int, dict[str, str]] = {}
        groups: dict[tuple[str, ...], Any] = {}

        def subparsers_of(path: tuple[str, ...], owner: Any) -> Any:
            if path not in groups:
                groups[path] = owner.add_subparsers(dest=f"_{'_'.join(path)}", required=True, metavar="<verb>",
                                                    title="verbs", parser_class=ProductParser)
            return groups[path]

        owners: dict[tuple[str, ...], Any] = {(self.noun,): parser}
        for verb in verbs_of(self.noun):
            path = verb.command
            for depth in range(1, len(path) - 1):
                group = path[: depth + 1]
                if group not in owners:
                    help_text = GROUPS.get(group, "")
                    owners[group] = subparsers_of(path[:depth], owners[path[:depth]]).add_parser(
                        group[-1], help=help_text, description=help_text)
            sub = subparsers_of(path[:-1], owners[path[:-1]]).add_parser(
                path[-1], help=verb.summary, description=verb.summary)
            self._flags[id(verb)] = flags.add_verb_arguments(sub, verb)
            sub.set_defaults(_verb=verb)

    def handle(self, *args: Any, **options: Any) -> None:
        from memory.bootstrap import bootstrap

        verb: Verb = options["_verb"]
        self.error_flags = self._flags.get(id(verb), {})
        if verb.switch is not None and options.get(verb.switch.field):
            verb = verb.switch.verb
        bootstrap()
        caller = Caller(origin=Origin.CLI, cwd=Path.cwd(), session_id=os.environ.get("COMPOZY_SESSION_ID") or None)
        kwargs = verb.cli_kwargs(options) if verb.cli_kwargs is not None else {}
        result = verb.run(flags.fields_of(verb, options), caller, **kwargs)
        document = result.to_json()
        render.emit(document, options["output"], verb.human or render.human_json,
                    items_key=verb.items_key, verbose=options.get("verbose", 0))
        sys.stdout.flush()
        if verb.incomplete is not None and verb.incomplete(document):
            sys.exit(INCOMPLETE_EXIT)
