"""``python -m primer trace show FILE``: print a recorded trace as a table, one row per step.

Record one with ``python -m primer demo NAME --trace FILE`` or ``run_agent(..., trace=FILE)``.
Exit codes: 0 shown; 2 when the file is missing or is not a readable trace (the message says
what is wrong with which line).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from primer.agents.trace import TraceError, load_trace

USAGE_ERROR = 2


def register(subparsers: Any) -> None:
    """Add the ``trace`` sub-command (with its ``show`` action) to ``subparsers``."""
    p = subparsers.add_parser("trace", help="read a recorded trace",
                              description="Read a JSON Lines trace written by a run.")
    actions = p.add_subparsers(dest="trace_action", metavar="ACTION", required=True)
    show = actions.add_parser("show", help="print the trace as a table, one row per step")
    show.add_argument("file", metavar="FILE", help="the trace file (JSON Lines)")
    show.add_argument("--width", type=int, default=60, help="widest cell, in characters")
    show.set_defaults(func=run_show)


def run_show(args: argparse.Namespace) -> int:
    """Print the trace's table; returns the exit code."""
    try:
        trace = load_trace(args.file)
    except TraceError as e:
        print(f"trace show: {e}", file=sys.stderr)
        return USAGE_ERROR
    print(trace.table(width=args.width))
    return 0
