"""`compozy inspector link`: print a fresh one-time sign-in link for the Memory inspector."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from compozy.config import get_config


class Command(BaseCommand):
    help = "The Memory inspector. `link` prints a one-time sign-in link (valid 24 hours)."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="action")
        link = actions.add_parser("link", help="print a one-time sign-in link (valid 24 hours)")
        link.add_argument("--base-url", help="where the inspector is served (default: http://<server.bind>)")

    def handle(self, *args: Any, **options: Any) -> None:
        from memory.bootstrap import bootstrap

        bootstrap(replay=False)
        from inspector.signin import create_link

        base = options.get("base_url") or f"http://{get_config(None).server.bind}"
        self.stdout.write(create_link(base) + "\n")
