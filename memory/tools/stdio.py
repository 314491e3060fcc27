"""MCP over stdio with an answer for every line.

The SDK's stdio transport decodes stdin with `errors="replace"` and, for a line that is not a JSON-RPC message,
hands the parse exception to the session, which logs it and answers nothing: a client that sent a non-JSON line,
invalid UTF-8, a lone surrogate or JSON nested too deeply waited for a reply until its own timeout. Here the lines
are read as bytes and checked first; a bad line gets a JSON-RPC error reply (-32700 parse error for bytes or text
that is not JSON, -32600 invalid request for JSON that is not a valid message), with the request's id when it
can be read (so the client's pending call ends) and `null` otherwise, and the server goes on with the next line.
Valid lines reach the SDK's transport unchanged, which still does all the protocol work.

The transport is given explicit streams, so the SDK does not divert fd 0 and 1 itself: that is done here, as the
SDK does it, so that a stray print or a child process can never write into the protocol stream.
"""

from __future__ import annotations

import json
import os
from typing import IO, Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server

from memory.domain.jsondepth import has_lone_surrogate

# A line longer than this is refused without being held whole in memory (arguments are capped far below it).
MAX_LINE_BYTES = 8 * 1024 * 1024


def _message_id(value: Any) -> int | str | None:
    """The id of a request, when the message has one a client can match (a string or an integer)."""
    if isinstance(value, dict):
        message_id = value.get("id")
        if isinstance(message_id, bool):
            return None
        if isinstance(message_id, int):
            return message_id
        if isinstance(message_id, str):
            try:
                message_id.encode("utf-8")
            except UnicodeEncodeError:
                return None
            return message_id
    return None




def error_reply(line: bytes) -> dict[str, Any] | None:
    """The JSON-RPC error a line gets, or None when it is a message the SDK can take."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _error(None, types.PARSE_ERROR, "Parse error: the line is not valid UTF-8.",
                      {"reason": "encoding", "offset": exc.start})
    try:
        value = json.loads(text)
    except RecursionError:
        return _error(None, types.PARSE_ERROR, "Parse error: the JSON is nested too deeply.", {"reason": "depth"})
    except ValueError as exc:
        return _error(None, types.PARSE_ERROR, f"Parse error: {exc}.", {"reason": "json"})
    message_id = _message_id(value)
    if has_lone_surrogate(value):
        return _error(message_id, types.INVALID_REQUEST,
                      "Invalid request: a string holds a lone surrogate, which is not valid Unicode text.",
                      {"reason": "encoding"})
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except Exception as exc:  # noqa: BLE001 - pydantic's error, or its recursion guard on deep nesting
        reason = "depth" if "recursion" in str(exc).lower() else "message"
        return _error(message_id, types.INVALID_REQUEST, "Invalid request: not a JSON-RPC 2.0 message.",
                      {"reason": reason})
    return None


def _error(message_id: int | str | None, code: int, message: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": message_id, "error": {"code": code, "message": message, "data": data}}


class _Wire:
    """The protocol's output: whole lines, one writer at a time (the SDK's replies and this module's)."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self._lock = anyio.Lock()

    def _put(self, data: bytes) -> None:
        self._raw.write(data)
        self._raw.flush()

    async def write(self, text: str) -> None:
        # The SDK writes each message as one string ending in a newline, then flushes.
        async with self._lock:
            await anyio.to_thread.run_sync(self._put, text.encode("utf-8", "backslashreplace"))

    async def flush(self) -> None:
        return None

    async def reply(self, document: dict[str, Any]) -> None:
        await self.write(json.dumps(document, ensure_ascii=True, separators=(",", ":")) + "\n")


class _Lines:
    """Stdin as the SDK iterates it: the good lines as text; each bad one answered on the wire and skipped."""

    def __init__(self, raw: IO[bytes], wire: _Wire) -> None:
        self._raw = raw
        self._wire = wire

    def __aiter__(self) -> _Lines:
        return self

    def _readline(self) -> tuple[bytes, bool]:
        line = self._raw.readline(MAX_LINE_BYTES + 1)
        if len(line) <= MAX_LINE_BYTES or line.endswith(b"\n"):
            return line, False
        while line and not line.endswith(b"\n"):  # skip the rest of an overlong line
            line = self._raw.readline(MAX_LINE_BYTES)
        return b"", True

    async def __anext__(self) -> str:
        while True:
            line, overlong = await anyio.to_thread.run_sync(self._readline, abandon_on_cancel=True)
            if overlong:
                await self._wire.reply(_error(None, types.INVALID_REQUEST,
                                              f"Invalid request: a line is longer than {MAX_LINE_BYTES} bytes.",
                                              {"reason": "too_large"}))
                continue
            if not line:
                raise StopAsyncIteration
            if not line.strip():
                continue  # a blank line is no message, and needs no answer
            failure = error_reply(line.rstrip(b"\r\n"))
            if failure is None:
                return line.decode("utf-8")
            await self._wire.reply(failure)


def _claim(fd: int, mode: str, diversion: int) -> tuple[IO[bytes], int]:
    """A private duplicate of a standard descriptor for the protocol, with the descriptor itself pointed at
    `diversion`. Returns the protocol stream and the duplicate, to restore the descriptor on exit."""
    private = os.dup(fd)
    os.dup2(diversion, fd)
    os.close(diversion)
    return os.fdopen(os.dup(private), mode, buffering=0 if mode == "wb" else -1), private


async def serve_stdio(server: MCPServer) -> None:
    stdin_raw, stdin_saved = _claim(0, "rb", os.open(os.devnull, os.O_RDONLY))
    stdout_raw, stdout_saved = _claim(1, "wb", os.dup(2))
    try:
        wire = _Wire(stdout_raw)
        async with stdio_server(stdin=_Lines(stdin_raw, wire), stdout=wire) as (read_stream, write_stream):  # type: ignore[arg-type]
            # MCPServer.run_stdio_async, with these streams: the SDK offers no public handle on its low-level server.
            lowlevel = server._lowlevel_server
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
    finally:
        for fd, saved in ((1, stdout_saved), (0, stdin_saved)):
            os.dup2(saved, fd)
            os.close(saved)


def run_stdio(server: MCPServer) -> None:
    anyio.run(serve_stdio, server)
