"""`compozy inspector link`: print a fresh one-time sign-in link for the Memory inspector."""

from __future__ import annotations

from typing import Any

from compozy.command import ProductCommand, ProductParser
from compozy.config import get_config


class Command(ProductCommand):
    help = "The Memory inspector. `link` prints a one-time sign-in link (valid 24 hours)."

    def add_arguments(self, parser: Any) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="<action>", title="actions",
                                        parser_class=ProductParser)
        link = actions.add_parser("link", help="Print a one-time sign-in link (valid 24 hours).")
        link.add_argument("--base-url", help="Where the inspector is served. Default: the address of the running "
                                             "`compozy serve`, or http://<server.bind> when none runs.")

    def handle(self, *args: Any, **options: Any) -> None:
        from memory.bootstrap import bootstrap

        bootstrap(replay=False)
        from compozy.serving import running_address
        from inspector.signin import create_link

        base = options.get("base_url") or f"http://{running_address() or get_config(None).server.bind}"
        self.stdout.write(create_link(base) + "\n")
