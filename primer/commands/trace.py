"""``python -m primer trace show FILE``: print a recorded trace as a table, one row per step.

Record one with ``python -m primer demo NAME --trace FILE`` or ``run_agent(..., trace=FILE)``.
Exit codes: 0 shown; 2 when the file is missing or is not a readable trace (the message says
what is wrong with which line), and when no action is given (the message names ``show``
and ``export``).

``python -m primer trace export FILE... --otlp-json [-o OUT]`` turns recorded traces into
OpenTelemetry GenAI spans (:mod:`primer.harness.tracing.otel`) and writes them as one OTLP/JSON
request body, to stdout or OUT: POST it to a collector's ``/v1/traces``. ``--content``
includes messages and tool arguments (redacted). Exit codes: 0 written; 2 for an unreadable
trace or an OUT that cannot be written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from primer.commands.hints import primer_command
from primer.commands.paths import os_error_line, output_file_problem
from primer.harness.tracing.trace import TraceError, load_trace

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
    export = actions.add_parser(
        "export", help="write traces as OpenTelemetry spans (OTLP/JSON)",
        description="Turn recorded traces into OpenTelemetry GenAI spans (invoke_agent, chat, "
                    "execute_tool) and write them as one OTLP/JSON ExportTraceServiceRequest, "
                    "the body a collector accepts at /v1/traces.")
    export.add_argument("files", metavar="FILE", nargs="+", help="trace files (JSON Lines)")
    export.add_argument("--otlp-json", action="store_true", required=True,
                        help="the output format (OTLP/JSON; the only one)")
    export.add_argument("-o", "--output", metavar="OUT", help="write here, not to stdout")
    export.add_argument("--content", action="store_true",
                        help="include the task, replies, tool arguments and results "
                             "(secrets redacted); off by default")
    export.add_argument("--agent-name", default="agent", help="gen_ai.agent.name")
    export.add_argument("--service-name", default="primer", help="the resource's service.name")
    export.set_defaults(func=run_export)


def run_no_action(args: argparse.Namespace) -> int:
    """``trace`` without an action: say which actions exist; returns 2."""
    print(f"trace: choose an action: show FILE prints a recorded trace as a table, one row "
          f"per step, e.g. {primer_command('trace', 'show', 'run.jsonl')}; export FILE "
          f"--otlp-json writes it as OpenTelemetry spans", file=sys.stderr)
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


def run_export(args: argparse.Namespace) -> int:
    """Write the traces' spans as OTLP/JSON; returns the exit code."""
    from primer.harness.tracing.otel import otlp_json

    problem = args.output and output_file_problem(args.output, "-o")
    if problem:
        print(f"trace export: {problem}", file=sys.stderr)
        return USAGE_ERROR
    try:
        traces = [load_trace(f) for f in args.files]
    except TraceError as e:
        print(f"trace export: {e}", file=sys.stderr)
        return USAGE_ERROR
    body = otlp_json(traces, service_name=args.service_name, agent_name=args.agent_name,
                     capture_content=args.content)
    if not args.output:
        print(body)
        return 0
    try:
        Path(args.output).write_text(body + "\n", encoding="utf-8")
    except OSError as e:
        print(os_error_line("trace export", e), file=sys.stderr)
        return USAGE_ERROR
    return 0
