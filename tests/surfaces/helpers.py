"""What the surface tests share: an MCP session over stdio with a real `compozy mcp` process."""

from __future__ import annotations

import asyncio
from typing import Any

from mcp import Client, StdioServerParameters

from tests.conftest import COMPOZY
from tests.helpers import tool_document


def session(cli, *args: str, calls: list[tuple[str, dict[str, Any]]]) -> tuple[list[Any], list[tuple[bool, Any]]]:
    """Start `compozy mcp <args>`, list its tools, make the calls in order; return (tools, [(is_error, doc)])."""
    params = StdioServerParameters(command=COMPOZY, args=["mcp", *args], env=cli.env(), cwd=str(cli.cwd))

    async def go():
        async with Client(params) as client:
            tools = (await client.list_tools()).tools
            answers = []
            for name, arguments in calls:
                ok, document = tool_document(await client.call_tool(name, arguments))
                answers.append((not ok, document))
            return tools, answers

    return asyncio.run(go())
