"""``python -m primer mcp-serve orders``: serve a course world's tools as an MCP server.

By default the server speaks over stdin/stdout, the way Claude Desktop, the MCP inspector
and :func:`primer.providers.mcp.mcp_stdio_tools` start a server; ``--http PORT`` serves
Streamable HTTP at ``http://127.0.0.1:PORT/mcp`` instead (``--http 0`` picks a free port)
and prints the URL on stderr once the port is bound. The tools are the world's own
functions (:mod:`primer.scenarios.orders`), listed with the same ``input_schema`` and
answering with the same texts as in a local run (:func:`primer.providers.mcp_server.mcp_server`).

``--hang TOOL`` makes calls of TOOL never answer (a cancelled call is logged on stderr);
``--crash TOOL`` makes the server process exit with status 1 when TOOL is called: the two
failures lesson 16 shows a client surviving.

An unknown world or tool, or a port that cannot be bound, is one line on stderr and exit
code 2. Stdout belongs to the protocol in stdio mode: nothing else is printed there. Started
on stdio from a terminal (stdin is a tty), it says on stderr that it is waiting for a client
and that Ctrl-D or Ctrl-C stops it.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from typing import TYPE_CHECKING, Any

from primer.scenarios import get_demo

if TYPE_CHECKING:
    from primer.providers.mcp_server import Fault

#: Exit code for a command-line usage error (the convention argparse follows).
USAGE_ERROR = 2

#: Worlds this command serves: name → (the scenario whose tools it serves, description).
WORLDS: dict[str, tuple[str, str]] = {
    "orders": ("orders", "the order-A123 world: get_order and calculator"),
}


def register(subparsers: Any) -> None:
    """Add the ``mcp-serve`` sub-command to ``subparsers`` (an argparse sub-parsers action)."""
    p = subparsers.add_parser(
        "mcp-serve", help="serve a world's tools as an MCP server (stdio or Streamable HTTP)",
        description="Serve one of the course's worlds as a Model Context Protocol server: over "
                    "stdin/stdout by default (for Claude Desktop, the MCP inspector or "
                    "mcp_stdio_tools), or over Streamable HTTP with --http.")
    p.add_argument("world", nargs="?", metavar="WORLD",
                   help=f"the world to serve: {', '.join(WORLDS)}")
    p.add_argument("--list", action="store_true", help="list the worlds and exit")
    p.add_argument("--http", type=int, metavar="PORT",
                   help="serve Streamable HTTP on 127.0.0.1:PORT (0 picks a free port; the "
                        "URL is printed on stderr) instead of stdio")
    p.add_argument("--hang", metavar="TOOL", action="append", default=[],
                   help="make calls of TOOL never answer (to watch a client time out)")
    p.add_argument("--crash", metavar="TOOL", action="append", default=[],
                   help="make the server exit with status 1 when TOOL is called")
    p.set_defaults(func=run)


def _stop_at_once(signum: int, frame: object) -> None:
    """Ctrl-C on a terminal: say so on stderr and end the process now (exit code 130).
    Nothing is lost: a stdio server keeps no state between a client's calls."""
    sys.stderr.write("mcp-serve: stopped (Ctrl-C)\n")
    sys.stderr.flush()
    os._exit(130)


def stdio_notice(world: str) -> str:
    """The line printed on stderr when the stdio server starts with a terminal as its stdin:
    it is waiting, for whom, and how to stop it. Never on stdout (the protocol's channel)."""
    return (f"mcp-serve: serving {world} as an MCP server on stdio; it waits for a client's "
            f"JSON-RPC messages on stdin (an MCP client such as Claude Desktop or the MCP "
            f"inspector starts it itself). Ctrl-D or Ctrl-C stops it.")


def run(args: argparse.Namespace) -> int:
    """Carry out ``mcp-serve``; returns the exit code (0 when the client hangs up, 2 for
    a usage error)."""
    if args.list:
        print("\n".join(f"{name:8}  {text}" for name, (_, text) in WORLDS.items()))
        return 0
    if args.world not in WORLDS:
        given = f"unknown world {args.world!r}" if args.world else "give a WORLD to serve"
        print(f"mcp-serve: {given}; choose one of {', '.join(WORLDS)}", file=sys.stderr)
        return USAGE_ERROR
    if args.http is not None and not 0 <= args.http <= 65535:
        print(f"mcp-serve: --http takes a port from 0 to 65535, not {args.http}",
              file=sys.stderr)
        return USAGE_ERROR
    from primer.providers.mcp_server import mcp_server, serve_http, serve_stdio

    scenario = get_demo(WORLDS[args.world][0])
    faults: dict[str, Fault] = {**{t: "hang" for t in args.hang},
                                **{t: "crash" for t in args.crash}}
    try:
        server = mcp_server(scenario.tools(), name=f"primer-{args.world}",
                            instructions=scenario.system or None, faults=faults)
    except ValueError as e:
        print(f"mcp-serve: {e}", file=sys.stderr)
        return USAGE_ERROR
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"primer-{args.world}: %(message)s"))
    logging.getLogger("primer").addHandler(handler)
    logging.getLogger("primer").setLevel(logging.INFO)
    try:
        if args.http is None:
            if sys.stdin.isatty():  # a person started it in a terminal: say it is waiting
                # The SDK reads stdin in a worker thread that Ctrl-C cannot wake, so a
                # KeyboardInterrupt would wait for the next line; stop at once instead.
                previous = signal.signal(signal.SIGINT, _stop_at_once)
                print(stdio_notice(args.world), file=sys.stderr, flush=True)
                try:
                    serve_stdio(server)
                finally:
                    signal.signal(signal.SIGINT, previous)
            else:
                serve_stdio(server)
        else:
            serve_http(server, port=args.http, announce=lambda url: print(
                f"mcp-serve: serving {args.world} over Streamable HTTP at {url}",
                file=sys.stderr, flush=True))
    except OSError as e:
        where = "stdin/stdout" if args.http is None else f"127.0.0.1 port {args.http}"
        print(f"mcp-serve: cannot serve on {where}: {e.strerror or e}", file=sys.stderr)
        return USAGE_ERROR
    except KeyboardInterrupt:
        return 130
    return 0
