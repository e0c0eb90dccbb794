"""``python -m primer``: run scenarios, draw figures and more from the command line.

Each sub-command lives in a module of :mod:`primer.commands` with a ``register(subparsers)``
function; this file only collects them. ``python -m primer --help`` lists them all.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

#: Modules of ``primer.commands`` whose sub-commands this program offers, in help order.
COMMAND_MODULES = [
    "demo",
    "figures",
    "bench",
    "approvals",
    "trace", "replay", "eval", "diagnose",
    "check_loop",
    "mcp_serve",
    "sessions",
]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every sub-command registered."""
    parser = argparse.ArgumentParser(
        prog="python -m primer",
        description="The agent-loop primer: run the course's scenarios offline, and more.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"primer.commands.{name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen sub-command; returns the process exit code.

    With no sub-command it prints a one-line hint and the help on stderr and returns 2. When
    the output's reader goes away (``| head``) it stops quietly with
    :data:`BROKEN_PIPE_EXIT`.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        print("python -m primer: choose a command, e.g. python -m primer demo orders",
              file=sys.stderr)
        parser.print_help(sys.stderr)
        return 2
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not at exit
    except BrokenPipeError:  # `python -m primer ... | head`: the reader has gone
        return broken_pipe()
    return code


#: The exit code after the reader of the output went away: 128 + SIGPIPE, what a shell
#: reports for a Unix tool that a closed pipe stopped (``yes | head``).
BROKEN_PIPE_EXIT = 141


def broken_pipe() -> int:
    """Stop quietly when stdout's reader has gone (as Unix tools do): point stdout at
    ``/dev/null`` so the interpreter's last flush cannot fail with a traceback, and return
    :data:`BROKEN_PIPE_EXIT`. The recipe is the one in the ``signal`` module's docs."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real stdout (a notebook, a test's capture)
        pass
    return BROKEN_PIPE_EXIT


if __name__ == "__main__":
    sys.exit(main())
