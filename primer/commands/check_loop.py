"""``python -m primer check-loop FILE[:FUNCTION]``: run the coding round's checker on a file.

Runs ``FUNCTION`` (default ``my_loop``) of the Python file ``FILE`` through the battery of
:mod:`primer.course.exercises`, with the file imported and run in a child process
(:func:`primer.course.loop_process.check_loop_file`): one line per behaviour and the score,
each behaviour within a time limit, the verdicts computed here from what the model was sent.
A loop that cannot be called the way the checker calls it (:data:`INTERFACE`), or that calls
the model another way, gets one message saying so instead. Exit status 0 on full marks, 1
when a behaviour failed or the interface is wrong, 2 when the file or function cannot be
loaded.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

USAGE_ERROR = 2

#: The interface the checker expects (as in :mod:`primer.course.exercises`; shown by ``--help``).
INTERFACE = """\
Your function is called as
  my_loop(model, task, tools, *, max_steps, token_budget)
and returns {"answer": str | None, "stop_cause": str}:
  the answer (the text of every text block of the last reply, joined) and "end_turn", or
  None and the stop cause: max_tokens, refusal, token_budget, loop_detected, max_steps.
  (stop_reason is the model's field in each reply; the loop's reason to stop is its stop
  cause.)

  model(messages, tool_definitions) -> reply dict
      one model call: messages is the whole history (Anthropic-shape dicts, starting with
      {"role": "user", "content": task}); tool_definitions is tools.definitions, on every
      call. Each call is checked as the Messages API checks a request: one that the API
      would refuse (a tool_result whose content is not a string or text blocks, a tool_use
      left unanswered, an empty message, a role other than user and assistant) fails. The
      reply is {"content": [text and tool_use blocks], "stop_reason": "end_turn" |
      "tool_use" | "max_tokens" | "refusal", "usage": {"input_tokens": int,
      "output_tokens": int}}.
      (Not the LLM protocol model(system=..., messages=..., tools=..., max_tokens=...).)
  task        the user's request, a string
  tools       a dict name -> function: call tools[name](**tool_use_input)
  max_steps   the most model calls the run may make
  token_budget  the most input + output tokens it may use, summed over every reply's usage
"""


def register(subparsers: Any) -> None:
    """Add the ``check-loop`` sub-command to ``subparsers``."""
    p = subparsers.add_parser(
        "check-loop", help="check your own agent loop against the lesson 14 battery",
        description="Run your loop function against scripted models that misbehave, and "
                    "print what passed and what did not. Your file runs in a separate "
                    "process, each behaviour within a time limit.",
        epilog=INTERFACE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", metavar="FILE[:FUNCTION]",
                   help="a Python file and the loop function in it (default my_loop)")
    p.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                   help="wall-clock seconds each behaviour may take (default 5)")
    p.add_argument("--show-output", action="store_true",
                   help="print what your loop printed in each behaviour (on stderr)")
    p.set_defaults(func=run)


def split_target(target: str) -> tuple[Path, str]:
    """``FILE[:FUNCTION]`` as (file, function name, default ``my_loop``)."""
    file, name = target, "my_loop"
    if ":" in target and not Path(target).exists():
        file, name = target.rsplit(":", 1)
    return Path(file), name


def run(args: argparse.Namespace) -> int:
    """Check the loop; returns the exit code."""
    from primer.course.loop_process import (  # imports the battery: only when used
        DEFAULT_TIME_LIMIT_S,
        LoadError,
        check_loop_file,
    )

    limit = DEFAULT_TIME_LIMIT_S if args.time_limit is None else args.time_limit
    if not limit > 0:
        print("check-loop: --time-limit must be a positive number of seconds",
              file=sys.stderr)
        return USAGE_ERROR
    if os.name != "posix":
        print("check-loop: runs your file in a separate process, which needs Linux or macOS "
              "(on Windows, use WSL); in a notebook, check_loop(my_loop) checks it in place",
              file=sys.stderr)
        return USAGE_ERROR
    path, name = split_target(args.target)
    try:
        report = check_loop_file(path, name, time_limit_s=limit)
    except LoadError as e:
        print(f"check-loop: {e}", file=sys.stderr)
        return USAGE_ERROR
    if args.show_output:
        for behaviour, text in report.outputs:
            print(f"--- what your loop printed in {behaviour!r}:\n{text}", file=sys.stderr)
    elif report.outputs:
        print(f"check-loop: your loop printed something in {len(report.outputs)} "
              f"behaviour(s); add --show-output to see it", file=sys.stderr)
    if report.interface_problem:
        print(f"check-loop: {name} cannot be checked: {report.interface_problem}\n\n"
              f"{INTERFACE}", file=sys.stderr)
        return 1
    print(report)
    return 0 if report.score == report.total else 1
