"""``python -m primer trace show FILE``: print a recorded trace as a table, one row per step.

Record one with ``python -m primer demo NAME --trace FILE`` or ``run_agent(..., trace=FILE)``.
Exit codes: 0 shown; 2 when the file is missing or is not a readable trace (the message says
what is wrong with which line), and when no action is given (the message names ``show``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from primer.agents.trace import TraceError, load_trace
from primer.commands.hints import primer_command

USAGE_ERROR = 2


def register(subparsers: Any) -> None:
    """Add the ``trace`` sub-command (with its ``show`` action) to ``subparsers``."""
    p = subparsers.add_parser("trace", help="read a recorded trace",
                              description="Read a JSON Lines trace written by a run.")
    p.set_defaults(func=run_no_action)
    actions = p.add_subparsers(dest="trace_action", metavar="ACTION")
    show = actions.add_parser("show", help="print the trace as a table, one row per step")
    show.add_argument("file", metavar="FILE", help="the trace file (JSON Lines)")
    show.add_argument("--width", type=int, default=60, help="widest cell, in characters")
    show.set_defaults(func=run_show)


def run_no_action(args: argparse.Namespace) -> int:
    """``trace`` without an action: say which actions exist; returns 2."""
    print(f"trace: choose an action: show FILE prints a recorded trace as a table, one row "
          f"per step, e.g. {primer_command('trace', 'show', 'run.jsonl')}", file=sys.stderr)
    return USAGE_ERROR


def run_show(args: argparse.Namespace) -> int:
    """Print the trace's table; returns the exit code."""
    try:
        trace = load_trace(args.file)
    except TraceError as e:
        print(f"trace show: {e}", file=sys.stderr)
        return USAGE_ERROR
    print(trace.table(width=args.width))
    return 0
