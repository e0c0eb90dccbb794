"""``python -m primer replay FILE``: re-run a recorded trace offline and report divergence.

The model's replies come from the trace; the tools are a demo's tools as they are now
(``--scenario NAME``, as ``resume`` names it; ``--demo NAME`` is kept as a hidden alias;
by default the demo whose tool names match the ones the trace offered).
Prints what was recorded, what the replay did and the first step where they differ.
Exit codes: 0 the replay matches; 1 it diverged; 2 the trace or the demo could not be used.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, cast

from primer.harness.tracing.replay import replay
from primer.harness.tracing.trace import Trace, TraceError, load_trace
from primer.loop.state import HANDOFF_TOOL_NAME
from primer.scenarios import Scenario, all_demos, get_demo

USAGE_ERROR = 2


def register(subparsers: Any) -> None:
    """Add the ``replay`` sub-command to ``subparsers``."""
    p = subparsers.add_parser(
        "replay", help="re-run a trace offline and report where it diverges",
        description="Replay a recorded run with its recorded model replies and today's tools; "
                    "report the first step whose tool results differ.")
    p.add_argument("file", metavar="FILE", help="the trace file (JSON Lines)")
    p.add_argument("--scenario", metavar="NAME",
                   help="take the tools from this scenario, as in `demo NAME` (default: the "
                        "one whose tool names match the trace's)")
    p.add_argument("--demo", dest="scenario", help=argparse.SUPPRESS)  # the older name
    p.set_defaults(func=run)


def demo_for(trace: Trace) -> Scenario:
    """The first demo (by name) whose tool names are the ones the trace offered.

    Raises ``LookupError`` naming the trace's tools when no demo matches.
    """
    # a checked trace's tool definitions each have a string name
    wanted = {cast(str, t.get("name")) for t in trace.tools} - {HANDOFF_TOOL_NAME}
    for _name, demo in sorted(all_demos().items()):
        if {t.name for t in demo.make_tools()} - {HANDOFF_TOOL_NAME} == wanted:
            return demo
    raise LookupError(f"no demo offers the trace's tools ({', '.join(sorted(wanted))}); "
                      f"replay it from Python with replay(trace, tools)")


def run(args: argparse.Namespace) -> int:
    """Replay and print the report; returns the exit code."""
    try:
        trace = load_trace(args.file)
        demo = get_demo(args.scenario) if args.scenario else demo_for(trace)
        result = replay(trace, demo.make_tools())
    except (TraceError, KeyError, LookupError) as e:
        print(f"replay: {e.args[0] if isinstance(e, KeyError) else e}", file=sys.stderr)
        return USAGE_ERROR
    print(f"tools from demo: {demo.name}")
    print(result.report())
    return 0 if result.matches else 1
