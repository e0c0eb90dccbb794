"""Serve our own tools over the Model Context Protocol, with the ``mcp`` package's ``Server``.

:func:`mcp_server` turns a list of :class:`~primer.loop.tools.Tool` into an MCP server object
that lists each tool with exactly its ``name``, ``description`` and ``input_schema`` (the
SDK's higher-level ``MCPServer`` would derive a schema of its own from the function) and
answers each ``tools/call`` through :meth:`ToolRegistry.run`: the same argument validation
and the same error texts as a local run, so a model sees the same ``tool_result`` whether
the tool runs in its own process or behind an MCP server.

The server object runs in-process (:func:`primer.providers.mcp.mcp_inprocess_tools`), over
stdio (:func:`serve_stdio`) or over Streamable HTTP (:func:`serve_http`);
``python -m primer mcp-serve orders`` runs the order world with either. ``faults`` makes a
tool misbehave on purpose, for lessons and tests: ``"hang"`` never answers (the handler waits
until the client cancels the request, then logs that on the ``primer.mcp_server`` logger),
``"crash"`` ends the server process with exit status 1 before answering, as a segfault or an
out-of-memory kill would. A crash ends the whole
process, so use it only for a server in a process of its own (stdio or HTTP).

Imported only when used: ``import primer`` does not import ``mcp``.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError

from primer import __version__
from primer.loop.messages import tool_use_block
from primer.loop.tools import Tool, ToolRegistry

log = logging.getLogger(__name__)

#: What a faulty tool does when called: never answer, or end the server process.
Fault = Literal["hang", "crash"]
FAULTS: tuple[Fault, ...] = ("hang", "crash")


def mcp_server(tools: ToolRegistry | Iterable[Tool], *, name: str,
               instructions: str | None = None,
               faults: Mapping[str, Fault] | None = None) -> Server[Any]:
    """An MCP server (the SDK's low-level ``mcp.server.Server``) offering ``tools``.

    ``tools/list`` returns each tool's ``name``, ``description`` and ``input_schema``
    unchanged, with the hint ``readOnlyHint = not side_effecting`` (hints only: a client
    decides for itself). ``tools/call`` validates and runs the call with
    :meth:`ToolRegistry.run` on a worker thread; a failed call (bad input, a ``ToolError``,
    an exception) is a result with ``isError: true`` carrying the same text a local run
    sends. A name the server does not have is a protocol error (``-32602``, invalid params).
    ``faults`` maps tool names to a :data:`Fault`. Raises ``ValueError`` for a fault on a
    tool that is not served or a fault kind not in :data:`FAULTS`, and for duplicate names.
    """
    registry = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
    faults = dict(faults or {})
    for tool_name, kind in faults.items():
        if tool_name not in registry:
            raise ValueError(f"fault on {tool_name!r}, which is not one of the served tools "
                             f"({', '.join(registry.names)})")
        if kind not in FAULTS:
            raise ValueError(f"unknown fault {kind!r} for {tool_name!r}; choose one of "
                             f"{', '.join(FAULTS)}")
    listing = types.ListToolsResult(tools=[_listed(t) for t in registry])
    calls = 0

    async def list_tools(_ctx: ServerRequestContext[Any],
                         _params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return listing

    async def call_tool(_ctx: ServerRequestContext[Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        nonlocal calls
        if params.name not in registry:
            raise MCPError(types.INVALID_PARAMS, registry.unknown_tool_message(params.name))
        calls += 1
        fault = faults.get(params.name)
        if fault == "hang":
            try:
                await anyio.sleep_forever()
            finally:  # the client gave up and cancelled the request
                log.info("the client cancelled the call of %s", params.name)
        if fault == "crash":
            print(f"{name}: crashing on purpose on a call of {params.name}", file=sys.stderr,
                  flush=True)
            os._exit(1)
        block = tool_use_block(f"mcp-{calls}", params.name, params.arguments or {})
        execution = await anyio.to_thread.run_sync(registry.run, block)
        return types.CallToolResult(content=[types.TextContent(text=execution.content)],
                                    is_error=execution.is_error)

    return Server(name, version=__version__, instructions=instructions,
                  on_list_tools=list_tools, on_call_tool=call_tool)


def _listed(t: Tool) -> types.Tool:
    return types.Tool(name=t.name, description=t.description, input_schema=t.input_schema,
                      annotations=types.ToolAnnotations(read_only_hint=not t.side_effecting))


def serve_stdio(server: Server[Any]) -> None:
    """Serve ``server`` on this process's stdin and stdout until stdin closes.

    Stdout carries the protocol, so nothing else may print there while it runs.
    """
    from mcp.server.stdio import stdio_server

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


def serve_http(server: Server[Any], *, port: int, host: str = "127.0.0.1",
               announce: Callable[[str], None] | None = None) -> None:
    """Serve ``server`` over Streamable HTTP at ``http://HOST:PORT/mcp`` until interrupted.

    Binds the socket first (``port=0`` picks a free port), then calls ``announce(url)``
    with the real URL, then runs the SDK's Starlette app under ``uvicorn``; DNS-rebinding
    protection is on for a local host. Raises ``OSError`` when the port cannot be bound.
    """
    import socket

    import uvicorn

    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    bound = sock.getsockname()[1]
    app = server.streamable_http_app(host=host)
    config = uvicorn.Config(app, host=host, port=bound, log_level="warning", lifespan="on")
    if announce is not None:
        announce(f"http://{host}:{bound}/mcp")
    with sock:
        uvicorn.Server(config).run(sockets=[sock])
