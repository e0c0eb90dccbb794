"""``python -m primer demo NAME``: run one of the course's scenarios offline and show its trace.

``python -m primer demo --list`` lists the demos. ``python -m primer demo orders`` prints the
scenario's description and task, the trace table (one row per model call), the stop cause
and the run's summary, and for a run that ended with ``end_turn`` the model's answer.
``--json`` prints the whole :class:`~primer.loop.result.AgentResult` as JSON instead.
``--trace FILE`` ends with a line naming FILE and the command that reads it (on stderr with
``--json``, so stdout stays JSON).
``--claude`` runs the same task, tools and limits against Claude (``ClaudeLLM``); without
``ANTHROPIC_API_KEY`` it says how to set one and exits with code 2.

Every stop cause exits with code 0: a stop is the run's outcome, not a failure of the
command. An unknown name exits with code 2 and lists the known names. So does an output path
that cannot be used (:mod:`primer.commands.paths`): ``--trace FILE`` needs FILE's directory
to exist (none is created), ``--checkpoint-dir DIR`` may create DIR but not its parents, and
an ``OSError`` while writing either is reported in one line.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import Any

from primer.commands.approvals import recorded_scenario
from primer.commands.hints import primer_command
from primer.commands.paths import os_error_line, output_dir_problem, output_file_problem
from primer.harness.durable.journal import CheckpointError
from primer.loop.result import AgentResult
from primer.loop.state import StopCause
from primer.scenarios import Scenario, all_demos, get_demo

#: Exit code for a command-line usage error (the convention argparse follows).
USAGE_ERROR = 2


def register(subparsers: Any) -> None:
    """Add the ``demo`` sub-command to ``subparsers`` (an argparse sub-parsers action)."""
    p = subparsers.add_parser(
        "demo", help="run a scenario offline and print its trace",
        description="Run one of the course's scenarios offline, with its scripted model, "
                    "and print the trace table, the stop cause and the summary.")
    p.add_argument("name", nargs="?", metavar="NAME",
                   help="the demo to run (see --list), e.g. orders")
    p.add_argument("--list", action="store_true", help="list the demos and exit")
    p.add_argument("--trace", metavar="FILE",
                   help="record the run as a JSON Lines trace in FILE (read it with "
                        f"`{primer_command('trace', 'show', 'FILE')}`)")
    p.add_argument("--checkpoint-dir", metavar="DIR",
                   help="save a checkpoint in DIR when the run pauses for approval, so a "
                        "person can approve it and another process can resume it")
    p.add_argument("--json", action="store_true",
                   help="print the run's full result (steps, messages, usage) as JSON")
    p.add_argument("--claude", action="store_true",
                   help="run the same task and tools against Claude instead of the scripted "
                        "model (needs ANTHROPIC_API_KEY; model from PRIMER_CLAUDE_MODEL)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Carry out ``demo``; returns the exit code (0, or 2 for an unknown or missing name or
    an output path that cannot be used)."""
    if args.list:
        print(list_text(all_demos()))
        return 0
    if not args.name:
        print("demo: give a demo NAME, or --list to see them.\n" + list_text(all_demos()),
              file=sys.stderr)
        return USAGE_ERROR
    try:
        scenario = get_demo(args.name)
    except KeyError as e:
        print(f"demo: {e.args[0]}. Run `{primer_command('demo', '--list')}` for "
              f"descriptions.",
              file=sys.stderr)
        return USAGE_ERROR
    problem = ((args.trace and output_file_problem(args.trace, "--trace"))
               or (args.checkpoint_dir
                   and output_dir_problem(args.checkpoint_dir, "--checkpoint-dir")))
    if problem:
        print(f"demo: {problem}", file=sys.stderr)
        return USAGE_ERROR
    llm = None
    if getattr(args, "claude", False):
        from primer.providers.claude import NO_KEY_HELP, ClaudeLLM, has_api_key

        if not has_api_key():
            print(f"demo --claude: {NO_KEY_HELP}\nOffline: "
                  f"{primer_command('demo', scenario.name)}", file=sys.stderr)
            return USAGE_ERROR
        llm = ClaudeLLM()
        print(f"(running against Claude: {llm.model})", file=sys.stderr)
    overrides = {"checkpoint_dir": args.checkpoint_dir} if args.checkpoint_dir else {}
    try:
        result = scenario.run(trace=args.trace, llm=llm, **overrides)
    except OSError as e:
        print(os_error_line("demo", e), file=sys.stderr)
        return USAGE_ERROR
    except CheckpointError as e:  # the checkpoint directory failed under the run
        print(f"demo: {e}", file=sys.stderr)
        return USAGE_ERROR
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
        if args.trace:
            print(trace_written(args.trace), file=sys.stderr)
        return 0
    print(f"{scenario.name}: {scenario.description}")
    print(f"task: {scenario.task}\n")
    print(result.table())
    if result.stop_cause is StopCause.END_TURN:
        print(f"\nanswer: {result.final_text}")
    if result.stop_cause is StopCause.AWAITING_APPROVAL:
        gated = {t.name for t in scenario.make_tools() if t.needs_approval}
        print("\n" + next_steps(scenario.name, result, gated))
    if args.trace:
        print("\n" + trace_written(args.trace))
    return 0


def trace_written(path: str) -> str:
    """The line that says where ``--trace`` wrote the trace and how to read it."""
    return (f"trace written to {path}; read it with "
            f"{primer_command('trace', 'show', shlex.quote(path))}")


def next_steps(name: str, result: AgentResult, gated: set[str]) -> str:
    """What to do after a pause for approval: the commands that decide and resume.

    ``gated`` holds the names of the tools that need approval; only their calls are listed.
    Without a checkpoint, says that none of the paused reply's calls ran (not even those
    that need no approval) and that a run with ``--checkpoint-dir`` runs those first. The
    commands name the running interpreter (:func:`primer.commands.hints.primer_command`);
    ``resume`` gets ``--scenario name`` only when the checkpoint does not record it.
    """
    waiting = [b for b in result.pending if b.get("name") in gated] or result.pending
    ids = ", ".join(f"{b.get('name')} ({b.get('id')})" for b in waiting)
    if result.checkpoint is None:
        others = sorted({str(b.get("name")) for b in result.pending if b not in waiting})
        unrun = (f", not even {', '.join(others)}, which need{'s' if len(others) == 1 else ''}"
                 f" no approval" if others else "")
        return (f"The run is waiting for a person to approve {ids}. Nothing was saved, and "
                f"none of the paused reply's calls ran{unrun}. Run again with "
                f"--checkpoint-dir DIR: the calls that need no approval run first, then a "
                f"checkpoint is written that you can approve and resume from another "
                f"process.")
    first = waiting[0].get("id") if waiting else "TOOL_USE_ID"
    checkpoint = shlex.quote(str(result.checkpoint))
    option = [] if recorded_scenario(result.checkpoint) else ["--scenario", name]
    return (f"Checkpoint saved: {result.checkpoint}\nDecide, then resume (any process):\n"
            f"  {primer_command('approve', checkpoint, str(first), '--yes')}   "
            f"(or --no --note \"why\")\n"
            f"  {primer_command('resume', checkpoint, *option)}")


def list_text(demos: dict[str, Scenario]) -> str:
    """One line per demo, ``name  description``, sorted by name."""
    if not demos:
        return "(no demos registered)"
    width = max(len(n) for n in demos)
    return "\n".join(f"{n.ljust(width)}  {demos[n].description}" for n in sorted(demos))
