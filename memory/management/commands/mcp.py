"""`compozy mcp`: the MCP server over stdio, for Claude Code, editors and any MCP client."""

from __future__ import annotations

import os
from typing import Any

from compozy.command import ProductCommand
from memory.domain.errors import ValidationError
from memory.tools.server import ADMIN_TOOLSET, AGENT_TOOLSET, Session, build_server
from memory.tools.stdio import run_stdio


class Command(ProductCommand):
    help = ("Serve the memory tools over MCP stdio: the agent toolset compozy__memory, and the operators' "
            "compozy__memory_admin only when --toolsets names it.")

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--session", default=os.environ.get("COMPOZY_SESSION_ID"),
                            help="The calling agent's session id (default: $COMPOZY_SESSION_ID).")
        parser.add_argument("--parent-session", default=os.environ.get("COMPOZY_PARENT_SESSION_ID"),
                            help="Set for a sub-agent, whose writes are refused (default: $COMPOZY_PARENT_SESSION_ID).")
        parser.add_argument("--agent", default=os.environ.get("COMPOZY_AGENT"),
                            help="The calling agent's name: its two agent tiers become visible and its memories "
                                 "of type user and feedback go to its workspace tier (default: $COMPOZY_AGENT).")
        parser.add_argument("--workspace", default=os.environ.get("COMPOZY_WORKSPACE"),
                            help="Workspace ULID or path (default: $COMPOZY_WORKSPACE, then the current directory).")
        parser.add_argument("--toolsets", default=AGENT_TOOLSET,
                            help=f"Comma-separated toolsets to serve: {AGENT_TOOLSET} (the default) and "
                                 f"{ADMIN_TOOLSET} (operators' tools: health, history, reindex, promote, "
                                 "decisions; a client served them acts for the operator and may also write global "
                                 "memory).")

    def handle(self, *args: Any, **options: Any) -> None:
        from memory.bootstrap import bootstrap

        bootstrap()
        workspace = options["workspace"]
        toolsets = tuple(name.strip() for name in options["toolsets"].split(",") if name.strip())
        unknown = sorted(set(toolsets) - {AGENT_TOOLSET, ADMIN_TOOLSET})
        if unknown or not toolsets:
            raise ValidationError(f"Unknown toolset {unknown[0] if unknown else ''!r}: use {AGENT_TOOLSET} and/or "
                                  f"{ADMIN_TOOLSET}.", details={"field": "toolsets", "reason": "unknown_toolset"})
        session = Session(session_id=options["session"], agent=options["agent"],
                          parent_session_id=options["parent_session"], workspace=workspace,
                          cwd=os.getcwd(), operator=ADMIN_TOOLSET in toolsets)
        run_stdio(build_server(session, toolsets))
