"""`compozy mcp`: the MCP server over stdio, for Claude Code, editors and any MCP client."""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand

from memory.tools.server import ADMIN_TOOLSET, AGENT_TOOLSET, Session, build_server


class Command(BaseCommand):
    help = "Serve the memory tools (toolsets compozy__memory and compozy__memory_admin) over MCP stdio."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--session", default=os.environ.get("COMPOZY_SESSION_ID"), help="the caller's session id")
        parser.add_argument("--parent-session", default=os.environ.get("COMPOZY_PARENT_SESSION_ID"),
                            help="set for a sub-agent: its writes are denied")
        parser.add_argument("--agent", default=os.environ.get("COMPOZY_AGENT"), help="the calling agent's name")
        parser.add_argument("--workspace", default=os.environ.get("COMPOZY_WORKSPACE"),
                            help="workspace ULID or path (default: the current directory's workspace)")
        parser.add_argument("--toolsets", default=f"{AGENT_TOOLSET},{ADMIN_TOOLSET}",
                            help="comma-separated toolsets to serve")

    def handle(self, *args: Any, **options: Any) -> None:
        from memory.bootstrap import bootstrap

        bootstrap()
        workspace = options["workspace"] or os.getcwd()
        session = Session(session_id=options["session"], agent=options["agent"],
                          parent_session_id=options["parent_session"], workspace=workspace)
        toolsets = tuple(name.strip() for name in options["toolsets"].split(",") if name.strip())
        build_server(session, toolsets).run("stdio")
