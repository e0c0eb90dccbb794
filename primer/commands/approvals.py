"""Approvals from the command line: list paused runs, decide, resume.

* ``python -m primer approvals list DIR``: every checkpoint in DIR with its status and each
  call awaiting a decision (``tool_use`` id, tool, exact arguments, decision so far).
* ``python -m primer approve CHECKPOINT TOOL_USE_ID --yes|--no|--edit JSON|--respond TEXT
  [--note TEXT] [--approver NAME] [--expires-in 4h]``: record a person's decision for one
  call (approve it, reject it, approve it with other arguments, or answer it in the tool's
  place), who made it and when (UTC), and how long an approval holds. Nothing runs yet.
* ``python -m primer resume CHECKPOINT [--scenario NAME]``: continue the run with the scripted
  model and tools of the demo that started it (recorded in the checkpoint; ``--scenario``
  overrides it, see ``python -m primer demo --list``), and print how it ended. Tools that
  keep durable state (the refund ledger) find it beside the checkpoint.

Each can run in a different process, hours apart; the checkpoint file carries the run.
Exit codes, as for ``trace`` and ``replay``: 0 on success (any stop cause is an outcome, not a
failure; resuming a run that already finished says so and runs nothing), 2 when the
checkpoint, the directory or an argument cannot be used (one line on stderr says why;
nothing ran).
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from primer.commands.hints import primer_command
from primer.harness.durable.checkpoint import (
    CheckpointError,
    approve,
    decision_terms,
    decision_verb,
    edit,
    list_checkpoints,
    read_checkpoint,
    reject,
    respond,
    resume,
)

#: The exit code for a checkpoint, directory or argument that cannot be used (argparse's
#: convention for usage errors, and what ``trace`` and ``replay`` return for a bad file).
USAGE_ERROR = 2


def register(subparsers: Any) -> None:
    """Add ``approvals``, ``approve`` and ``resume`` to ``subparsers`` (argparse sub-parsers)."""
    p = subparsers.add_parser("approvals", help="list checkpoints and the calls awaiting approval",
                              description="Show the checkpoints of paused or finished runs.")
    sub = p.add_subparsers(dest="approvals_command", metavar="ACTION")
    ls = sub.add_parser("list", help="list the checkpoints in a directory (or one file)")
    ls.add_argument("directory", metavar="DIR",
                    help="the run's checkpoint_dir, or one checkpoint file (run-NNN.jsonl)")
    ls.set_defaults(func=run_list)
    p.set_defaults(func=lambda args: _usage(p))

    a = subparsers.add_parser("approve", help="approve or reject one paused tool call",
                              description="Record a person's decision for one tool call of a "
                                          "paused run. Nothing runs until `resume`.")
    a.add_argument("checkpoint", metavar="CHECKPOINT", help="the checkpoint file (run-NNN.jsonl)")
    a.add_argument("tool_use_id", metavar="TOOL_USE_ID", help="the call to decide on")
    yes_no = a.add_mutually_exclusive_group(required=True)
    yes_no.add_argument("--yes", dest="approved", action="store_true", default=None,
                        help="approve the call")
    yes_no.add_argument("--no", dest="approved", action="store_false", help="reject the call")
    yes_no.add_argument("--edit", metavar="JSON", type=_json_object,
                        help="approve the call with these arguments instead (a JSON object, "
                             "checked against the tool's input_schema)")
    yes_no.add_argument("--respond", metavar="TEXT",
                        help="do not run the tool; TEXT goes back to the model as its result")
    a.add_argument("--note", default="", help="a note for the record (a rejection's note "
                                              "reaches the model)")
    a.add_argument("--approver", metavar="NAME",
                   help="who decides, for the record (default: your login name)")
    a.add_argument("--expires-in", metavar="DURATION", type=_duration,
                   help="an approval's lifetime, like 30m, 4h or 2d: past it, resume refuses "
                        "to run the call and asks for a new decision")
    a.set_defaults(func=run_approve)

    r = subparsers.add_parser("resume", help="continue a paused run from its checkpoint",
                              description="Continue a paused run: approved calls run with the "
                                          "approved arguments, rejected ones are reported to "
                                          "the model, undecided ones never run.")
    r.add_argument("checkpoint", metavar="CHECKPOINT", help="the checkpoint file (run-NNN.jsonl)")
    r.add_argument("--scenario", metavar="NAME",
                   help="the demo whose scripted model and tools the run uses, e.g. refund "
                        "(default: the demo recorded in the checkpoint)")
    r.add_argument("--json", action="store_true", help="print the whole result as JSON")
    r.set_defaults(func=run_resume)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return USAGE_ERROR


def run_list(args: argparse.Namespace) -> int:
    """``approvals list DIR``: one block per checkpoint file."""
    try:
        infos = list_checkpoints(args.directory)
    except CheckpointError as e:
        print(f"approvals list: {e}", file=sys.stderr)
        return USAGE_ERROR
    if not infos:
        print(f"no checkpoints in {args.directory}")
    elif Path(args.directory).is_file():
        if infos[0].status == "invalid":  # one file asked for, and it cannot be used
            print(f"approvals list: {args.directory}: {infos[0].error}", file=sys.stderr)
            return USAGE_ERROR
        print(f"{args.directory} is one checkpoint file (pass its directory to list them all):")
    for info in infos:
        print(info.describe())
    return 0


def run_approve(args: argparse.Namespace) -> int:
    """``approve CHECKPOINT TOOL_USE_ID --yes|--no|--edit JSON|--respond TEXT``: record the
    decision and say what it was."""
    approving = bool(args.approved) or args.edit is not None
    if args.expires_in is not None and not approving:
        print("approve: --expires-in applies to an approval (--yes or --edit) only",
              file=sys.stderr)
        return USAGE_ERROR
    ends = None if args.expires_in is None else datetime.now(timezone.utc) + args.expires_in
    try:
        if args.edit is not None:
            call = edit(args.checkpoint, args.tool_use_id, args.edit, note=args.note,
                        approver=args.approver, expires_at=ends)
        elif args.respond is not None:
            call = respond(args.checkpoint, args.tool_use_id, args.respond,
                           approver=args.approver)
        elif args.approved:
            call = approve(args.checkpoint, args.tool_use_id, note=args.note,
                           approver=args.approver, expires_at=ends)
        else:
            call = reject(args.checkpoint, args.tool_use_id, note=args.note,
                          approver=args.approver)
    except (CheckpointError, ValueError) as e:
        print(f"approve: {e}", file=sys.stderr)
        return USAGE_ERROR
    arguments = json.dumps(call["input"], ensure_ascii=False, sort_keys=True)
    d = call["decision"]
    print(f"{decision_verb(d)} {call['tool_use_id']}: "
          f"{call['name']}({arguments}) {decision_terms(d)}")
    option = [] if recorded_scenario(args.checkpoint) else ["--scenario", "NAME"]
    print(f"run `{primer_command('resume', shlex.quote(args.checkpoint), *option)}` "
          f"to continue")
    return 0


def _json_object(text: str) -> dict[str, Any]:
    """``--edit``'s JSON object, for argparse."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not JSON ({e.msg}); give the arguments as an "
                                         f"object, like '{{\"amount_usd\": 30}}'") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("give the arguments as a JSON object, like "
                                         "'{\"amount_usd\": 30}'")
    return value


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _duration(text: str) -> timedelta:
    """``30m``, ``4h``, ``2d``, ``90s`` (or plain seconds) as a timedelta, for argparse."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text)
    if m is None or float(m.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 30m, 4h or 2d")
    try:
        duration = timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2) or "s"])
        datetime.now(timezone.utc) + duration  # a date past the calendar's end is refused
    except (OverflowError, ValueError):
        raise argparse.ArgumentTypeError(f"{text!r} is too long a duration; give one like "
                                         f"30m, 4h or 2d") from None
    return duration


def recorded_scenario(checkpoint: str | Path) -> str | None:
    """The demo name a checkpoint records (``None`` if it records none or cannot be read)."""
    try:
        return read_checkpoint(checkpoint).get("scenario")
    except CheckpointError:
        return None


def run_resume(args: argparse.Namespace) -> int:
    """``resume CHECKPOINT [--scenario NAME]``: continue the run and print how it ended.

    The demo is ``--scenario`` if given, else the one the checkpoint records.
    """
    from primer.scenarios import get_demo

    try:
        saved = read_checkpoint(args.checkpoint)
    except CheckpointError as e:
        print(f"resume: {e}", file=sys.stderr)
        return USAGE_ERROR
    recorded = saved.get("scenario")
    if saved["status"] == "finished" and not args.json:  # say so: nothing runs again
        result = saved["result"] or {}
        print(f"{args.checkpoint}: the run had already finished; nothing was run again.")
        print(f"it ended with stop cause: {result.get('stop_cause')}")
        print(result.get("summary", ""))
        if result.get("final_text") is not None:
            print(f"its answer was: {result['final_text']}")
        return 0
    name = args.scenario or recorded
    if name is None:
        print(f"resume: {args.checkpoint} does not record which demo started the run; pass "
              f"--scenario NAME (see `{primer_command('demo', '--list')}`).", file=sys.stderr)
        return USAGE_ERROR
    try:
        scenario = get_demo(name)
    except KeyError as e:
        print(f"resume: {e.args[0]}", file=sys.stderr)
        return USAGE_ERROR
    try:
        result = resume(args.checkpoint, scenario.make_llm(),
                        scenario.tools(Path(args.checkpoint).parent))
    except CheckpointError as e:
        hint = (f" The checkpoint was written by the demo {recorded!r}: leave out --scenario "
                f"or pass --scenario {recorded}." if recorded and recorded != name else "")
        print(f"resume: {e}{hint}", file=sys.stderr)
        return USAGE_ERROR
    if args.json:
        print(json.dumps(result.to_dict(), indent=1, ensure_ascii=False))
        return 0
    print(f"stop cause: {result.stop_cause.value}")
    print(result.summary)
    if result.final_text is not None:
        print(f"answer: {result.final_text}")
    for block in result.pending:
        print(f"awaiting approval: {block['id']} {block['name']}"
              f"({json.dumps(block['input'], ensure_ascii=False, sort_keys=True)})")
    return 0
