"""``python -m primer``: run scenarios, draw figures and more from the command line.

Each sub-command lives in a module of :mod:`primer.commands` with a ``register(subparsers)``
function; this file only collects them. ``python -m primer --help`` lists them all.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shlex
import sys
from pathlib import Path

from primer.commands.hints import interpreter, primer_command

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
        prog=f"{interpreter()} -m primer",
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
    try:
        parser = build_parser()
    except ModuleNotFoundError as e:  # run by a Python without the course's packages
        if (e.name or "").split(".")[0] == "primer":
            raise
        print(missing_packages_line(e.name or str(e), sys.argv[1:] if argv is None else argv),
              file=sys.stderr)
        return MISSING_PACKAGES_EXIT
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        print(f"python -m primer: choose a command, e.g. {primer_command('demo', 'orders')}",
              file=sys.stderr)
        parser.print_help(sys.stderr)
        return 2
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not at exit
    except BrokenPipeError:  # `python -m primer ... | head`: the reader has gone
        return broken_pipe()
    return code


#: The exit code when this Python lacks a package the commands need.
MISSING_PACKAGES_EXIT = 1


def missing_packages_line(module: str, argv: list[str]) -> str:
    """The one line printed instead of a traceback when ``python -m primer`` runs on a Python
    without the course's packages (``module`` is the one that was missing): it names the
    command to type instead, with the course's environment ``.venv`` (relative to the
    current directory when it is below it) and the same arguments ``argv``."""
    venv_python = Path(__file__).resolve().parent.parent / ".venv" / "bin" / "python"
    try:
        shown = str(venv_python.relative_to(Path.cwd().resolve()))
    except ValueError:
        shown = str(venv_python)
    command = " ".join([shlex.quote(shown), "-m", "primer", *map(shlex.quote, argv)])
    return (f"python -m primer: this Python ({sys.executable}) lacks the course's packages "
            f"(no module named {module!r}); run it with the course's environment: {command} "
            f"(`make lab` sets it up)")


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
