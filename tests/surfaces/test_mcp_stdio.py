"""MCP over stdio answers every line: a line that is not JSON, not UTF-8, holds a lone surrogate or is nested too
deeply gets a JSON-RPC error reply (-32700 parse error, -32600 invalid request) instead of silence, and the server
keeps serving. Driven twice: with raw bytes on the pipe, and with the official `mcp` client behind bad lines."""

from __future__ import annotations

import asyncio
import json
import select
import subprocess
from typing import Any

from mcp import Client, StdioServerParameters

from tests.conftest import COMPOZY, Cli
from tests.helpers import tool_document

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "raw", "version": "0"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}

BAD_LINES: list[tuple[str, bytes, int, Any]] = [
    ("not json", b"hello there", -32700, None),
    ("invalid utf-8", b'{"jsonrpc": "2.0", "id": 7, "method": "tools/list", "x": "\xff\xfe"}', -32700, None),
    ("raw surrogate bytes", b'{"jsonrpc": "2.0", "id": 8, "method": "ping", "x": "\xed\xa0\x80"}', -32700, None),
    ("escaped lone surrogate", b'{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": '
                               b'"compozy__memory_search", "arguments": {"query": "\\ud83d"}}}', -32600, 9),
    ("deep nesting", b"[" * 100_000 + b"]" * 100_000, -32700, None),
    ("deep nesting in a request", b'{"jsonrpc": "2.0", "id": 10, "method": "ping", "params": {"a": '
                                  + b"[" * 5000 + b"]" * 5000 + b"}}", -32700, None),
    # Deep enough for the SDK's parser, not for Python's: the request's id is read, so the client's call ends.
    ("nesting the sdk refuses", b'{"jsonrpc": "2.0", "id": 12, "method": "ping", "params": {"a": '
                                + b"[" * 300 + b"]" * 300 + b"}}", -32600, 12),
    ("truncated json", b'{"jsonrpc": "2.0", "id": 11, "method"', -32700, None),
    ("json that is no message", b'{"hello": "world"}', -32600, None),
    ("a bare number", b"42", -32600, None),
]


def test_every_bad_line_gets_a_json_rpc_error_and_the_server_keeps_serving(tmp_path):
    (tmp_path / "home").mkdir()
    (tmp_path / "project" / ".git").mkdir(parents=True)
    cli = Cli(home=tmp_path / "home", cwd=tmp_path / "project")
    lines = [json.dumps(INITIALIZE).encode()]
    lines += [line for _label, line, _code, _id in BAD_LINES]
    lines += [json.dumps(INITIALIZED).encode(),
              json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                          "params": {"name": "compozy__memory_list", "arguments": {}}}).encode()]
    proc = subprocess.Popen([COMPOZY, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=cli.env(), cwd=cli.cwd)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(b"\n".join(lines) + b"\n")
        proc.stdin.flush()
        replies: list[dict[str, Any]] = []
        # Read until the last call is answered (stdin stays open: at its end the server stops serving).
        while not any(reply.get("id") == 2 for reply in replies):
            ready, _, _ = select.select([proc.stdout], [], [], 60)
            assert ready, f"no reply within 60 s; so far: {replies}"
            line = proc.stdout.readline()
            assert line, f"the server closed its output; so far: {replies}"
            replies.append(json.loads(line))
    finally:
        proc.kill()
        proc.wait()
    answered = {reply["id"]: reply for reply in replies if "result" in reply}
    assert set(answered) == {1, 2}
    # After all the bad lines, a real call is still answered.
    assert answered[2]["result"]["isError"] is False, answered[2]
    errors = [reply for reply in replies if "error" in reply]
    assert len(errors) == len(BAD_LINES), errors
    for (label, _line, code, message_id), reply in zip(BAD_LINES, errors, strict=True):
        assert reply["jsonrpc"] == "2.0" and reply["id"] == message_id, (label, reply)
        assert reply["error"]["code"] == code, (label, reply)
        assert reply["error"]["message"], label


def test_the_official_client_works_on_behind_bad_lines(tmp_path):
    """Bad lines reach the server before the client's own messages; the client then lists and calls tools. (The
    client ignores replies with id null, so this shows the replies do not disturb it; the raw test above shows
    they are sent.)"""
    (tmp_path / "home").mkdir()
    (tmp_path / "project" / ".git").mkdir(parents=True)
    cli = Cli(home=tmp_path / "home", cwd=tmp_path / "project")
    garbage = "printf 'not json\\n\\377\\376\\n[[[[[[[[\\n'"
    params = StdioServerParameters(command="sh", args=["-c", f'{{ {garbage}; cat; }} | "$0" mcp', COMPOZY],
                                   env=cli.env(), cwd=str(cli.cwd))

    async def go() -> tuple[Any, ...]:
        async with Client(params) as client:
            tools = (await client.list_tools()).tools
            ok, document = tool_document(await client.call_tool(
                "compozy__memory_note", {"title": "After Garbage", "content": "A zqgarbage note."}))
            return tools, ok, document

    tools, ok, document = asyncio.run(go())
    assert "compozy__memory_search" in {tool.name for tool in tools}
    assert ok, document
