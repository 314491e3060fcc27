"""The MCP server: the toolsets `compozy__memory` (agents: list, show, search, snapshot, propose, note) and
`compozy__memory_admin` (operators: health, history, reindex, promote, decisions).

Every tool is generated from its verb's declaration (`memory.verbs`): the input schema from the input model, the
output schema from the result model, the MCP annotations from the declaration. A call parses its arguments into
the input model (unknown arguments refused, as over REST), calls the same service the CLI and HTTP call, and
returns the same JSON document; errors come back as tool errors (`isError`) carrying `{code, message, details}` both
as `structuredContent` and as their text, for clients that read only one of the two.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools.base import Tool as McpTool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import ConfigDict

from memory.domain.enums import Origin, Scope
from memory.domain.errors import CompozyError, ScopeInvalid
from memory.domain.names import parse_filename
from memory.services.inputs import Caller
from memory.services.resolution import confined_to
from memory.services.scopes import agent_write_selector
from memory.verbs import ADMIN_TOOLSET, AGENT_TOOLSET, Verb, all_verbs
from memory.verbs.schema import input_schema, output_schema

from .registry import ToolRegistry, ToolSpec

__all__ = ["ADMIN_TOOLSET", "AGENT_TOOLSET", "Session", "build_registry", "build_server"]

# Verbs whose default visibility is "every scope I can see": for an agent that includes its own two tiers.
AGENT_READS = {"compozy__memory_list", "compozy__memory_search", "compozy__memory_snapshot"}
# Writes whose default scope follows the agent policy (never global).
AGENT_WRITES = {"compozy__memory_propose", "compozy__memory_note"}


class Session:
    """Who the calling agent is: its session, its agent name, and (for a sub-agent) its parent session."""

    def __init__(self, session_id: str | None = None, agent: str | None = None,
                 parent_session_id: str | None = None, workspace: str | None = None,
                 cwd: str | None = None, operator: bool = False) -> None:
        self.session_id = session_id
        # Served with the admin toolset, the client acts for the operator, who may write global memory.
        self.operator = operator
        self.agent = agent
        self.parent_session_id = parent_session_id
        self.workspace = workspace
        # Without --workspace the workspace is found from the directory the client started the server in, as
        # the CLI finds it: walking up, so a fresh checkout reads global memory until its first workspace write.
        self.cwd = cwd

    def caller(self) -> Caller:
        return Caller(origin=Origin.TOOL, cwd=Path(self.cwd) if self.cwd else None, session_id=self.session_id,
                      parent_session_id=self.parent_session_id, agent=None if self.operator else self.agent)

    def _confine_workspace(self, named: Any) -> None:
        """An agent works in the workspace its server was started in (--workspace, else the one around its
        directory): naming another one, to read or to write, is refused like all_workspaces is. Naming its own
        (by ULID or by a path inside it) is allowed. The operator (admin toolset) names any."""
        if self.operator or named is None:
            return
        if not confined_to(named, own=self.workspace, caller=self.caller()):
            raise ScopeInvalid("This agent session works in its own workspace only: leave workspace out (or name "
                               "the workspace the server was started in).",
                               details={"field": "workspace", "reason": "other_workspace"})

    def fields(self, verb: Verb, arguments: dict[str, Any]) -> dict[str, Any]:
        """The call's arguments, with the session's workspace and agent as defaults."""
        values = {key: value for key, value in arguments.items() if value is not None}
        self._confine_workspace(values.get("workspace"))
        accepted = verb.input.model_fields
        name = verb.tool.name if verb.tool else ""
        # Global memory is the operator's (the spec's "operator-only"): an agent's own write tools may not name it,
        # unless the operator served the admin toolset (`compozy mcp --toolsets …,compozy__memory_admin`).
        if name in AGENT_WRITES and values.get("scope") == Scope.GLOBAL.value and not self.operator:
            raise ScopeInvalid("Global memory is written by operators only: write to this workspace or your agent "
                               "scope (leave scope out for the default).",
                               details={"field": "scope", "reason": "global_operator_only"})
        # An agent's session acts for that agent alone: naming another agent would read or write its private memory.
        # The operator (admin toolset) may name any agent, as on the CLI.
        named = values.get("agent_name")
        if self.agent and not self.operator and named is not None and named != self.agent:
            raise ScopeInvalid(f"This session acts for agent '{self.agent}': it reads and writes only its own agent "
                               "memory (leave agent_name out, or name itself).",
                               details={"field": "agent_name", "reason": "other_agent", "agent": self.agent})
        if self.workspace and "workspace" in accepted and "workspace" not in values:
            values["workspace"] = self.workspace
        if not self.agent or "agent_name" not in accepted:
            if name in AGENT_WRITES and "scope" not in values:
                values |= agent_write_selector(_memory_type(values), None)
            return values
        if values.get("scope") == "agent" and "agent_name" not in values:
            values["agent_name"] = self.agent
        elif "scope" not in values and "agent_name" not in values:
            if name in AGENT_READS:
                values["agent_name"] = self.agent
            elif name in AGENT_WRITES:
                values |= agent_write_selector(_memory_type(values), self.agent)
        return values


def _memory_type(values: dict[str, Any]) -> str | None:
    if values.get("type"):
        return str(values["type"])
    filename = values.get("filename")
    if isinstance(filename, str):
        try:
            memory_type, _slug = parse_filename(filename)
        except CompozyError:
            return None
        return memory_type.value if memory_type else None
    return None


class _Arguments(ArgModelBase):
    """Every argument reaches the tool as given: the verb's input model validates them (and refuses unknown
    ones) with the same codes as every other surface."""

    model_config = ConfigDict(extra="allow")

    def model_dump_one_level(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


def _decode_json_strings(arguments: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """Some clients send a list or object argument as a JSON string; decode those, as MCPServer does."""
    decoded = dict(arguments)
    for key, value in arguments.items():
        kind = schema.get("properties", {}).get(key, {}).get("type")
        if isinstance(value, str) and kind in ("array", "object"):
            with contextlib.suppress(ValueError):
                decoded[key] = json.loads(value)
    return decoded


def tool_of(verb: Verb, session: Session) -> McpTool:
    assert verb.tool is not None
    spec = verb.tool
    parameters = input_schema(verb.input)

    def call(**arguments: Any) -> CallToolResult:
        try:
            fields = session.fields(verb, _decode_json_strings(arguments, parameters))
            document = verb.run(fields, session.caller()).to_json()
        except CompozyError as error:
            # The MCP SDK validates structuredContent against the output schema only for successful results, so
            # the error document can travel structured as well as in the text.
            failure = error.to_dict()
            return CallToolResult(content=[TextContent(type="text", text=json.dumps(failure, ensure_ascii=False))],
                                  structured_content=failure, is_error=True)
        return CallToolResult(content=[TextContent(type="text", text=json.dumps(document, ensure_ascii=False))],
                              structured_content=document)

    return McpTool(
        fn=call, name=spec.name, description=spec.description, parameters=parameters,
        fn_metadata=FuncMetadata(arg_model=_Arguments, output_schema=output_schema(verb.result)), is_async=False,
        annotations=ToolAnnotations(read_only_hint=spec.read_only, destructive_hint=spec.destructive,
                                    idempotent_hint=spec.idempotent, open_world_hint=False),
    )


def build_registry(session: Session) -> ToolRegistry:
    registry = ToolRegistry()
    for verb in all_verbs():
        if verb.tool is not None:
            tool = tool_of(verb, session)
            registry.add(ToolSpec(name=verb.tool.name, toolset=verb.tool.toolset, description=verb.tool.description,
                                  fn=tool.fn, tool=tool))
    return registry


def build_server(session: Session, toolsets: tuple[str, ...] = (AGENT_TOOLSET,),
                 registry: ToolRegistry | None = None) -> MCPServer:
    registry = registry or build_registry(session)
    specs = [spec for toolset in toolsets for spec in registry.in_toolset(toolset)]
    from compozy.cli import version

    # The product's version in the initialize answer, so an agent's client can say what it talks to.
    server = MCPServer(name="compozy-memory", version=version(),
                       tools=[spec.tool for spec in specs if spec.tool is not None],
                       instructions=(
                           "Durable memory for this workspace. Search before asking; propose memories the user will "
                           "want in later sessions; the write controller decides and logs every change."))
    for spec in specs:
        if spec.tool is None:  # a provider's tool, declared by its function
            server.add_tool(spec.fn, name=spec.name, description=spec.description, structured_output=True)
    return server
