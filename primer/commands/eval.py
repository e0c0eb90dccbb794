"""``python -m primer eval``: run the built-in eval suite and print one row per task.

The suite (:mod:`primer.scenarios.suite`) holds the course's scenario demos and relay tasks
whose model is right each step with probability ``--p``. Prints each task's outcome, path,
steps, tokens, cost and stop cause, then the summary (success rate, path accuracy, mean
steps, total cost, p50 / p95 latency). ``--workers`` sets the thread pool; ``--processes``
uses a process pool instead. ``--trace-dir DIR`` writes one trace per task (DIR may be
created, its parent must exist). Exit code 0 (failing tasks are results, not errors); 2 for
impossible settings or a trace directory that cannot be used.
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from primer.agents import run_evals
from primer.commands.paths import os_error_line, output_dir_problem
from primer.scenarios.suite import builtin_suite, suite_llm, suite_tools

#: What the table's columns mean (``eval --help`` prints it).
COLUMNS = """\
columns, one row per task:
  task        the task's name (relay-H-S: the relay task of H hops with seed S)
  success     True when the task's check passed (e.g. the answer holds the expected text,
              or the run stopped the way the task requires)
  path ok     True when the tools the run called are the task's expected path (in order,
              or as a set when the order is free); - when the task has none
  steps       model calls the run made
  in, out     input and output tokens over the whole run
  cost USD    the run's cost at the course's prices (USD)
  stop cause  why the loop stopped (end_turn, max_steps, loop_detected, ...), or error
              when the task itself raised (the error is printed after the table)
  latency ms  wall time of the run, in milliseconds (varies between runs and machines)
Then the summary: success rate, path accuracy (share of tasks with a path whose path was
right), mean steps, tokens, total cost and the p50 / p95 latency."""


def register(subparsers: Any) -> None:
    """Add the ``eval`` sub-command to ``subparsers``."""
    p = subparsers.add_parser("eval", help="run the built-in eval suite and print the table",
                              description="Run the built-in eval suite offline.",
                              epilog=COLUMNS,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--relay-tasks", type=int, default=20,
                   help="relay tasks to add (default 20)")
    p.add_argument("--hops", type=int, default=5, help="steps per relay task (default 5)")
    p.add_argument("--p", type=float, default=0.9,
                   help="the relay model's per-step accuracy (default 0.9)")
    p.add_argument("--workers", type=int, default=4, help="tasks run at once (default 4)")
    p.add_argument("--processes", action="store_true", help="use processes, not threads")
    p.add_argument("--trace-dir", metavar="DIR",
                   help="write each task's trace to DIR as TASK.jsonl (DIR may be created; "
                        "its parent must exist)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the suite and print the table; returns 0, or 2 for impossible settings or an
    unusable ``--trace-dir``."""
    if args.relay_tasks < 0 or args.hops < 1 or not 0 <= args.p <= 1 or args.workers < 1:
        print("eval: need --relay-tasks >= 0, --hops >= 1, 0 <= --p <= 1, --workers >= 1",
              file=sys.stderr)
        return 2
    problem = args.trace_dir and output_dir_problem(args.trace_dir, "--trace-dir")
    if problem:
        print(f"eval: {problem}", file=sys.stderr)
        return 2
    try:
        if args.trace_dir:  # every task writes here: create it now, not in each worker
            Path(args.trace_dir).mkdir(exist_ok=True)
    except OSError as e:
        print(os_error_line("eval", e), file=sys.stderr)
        return 2
    tasks = builtin_suite(relay_tasks=args.relay_tasks, hops=args.hops, p=args.p)
    pool_type = ProcessPoolExecutor if args.processes else ThreadPoolExecutor
    pool: Executor
    with pool_type(max_workers=args.workers) as pool:  # a task that raises is a row
        report = run_evals(tasks, suite_llm, suite_tools, executor=pool,
                           progress=False if args.no_progress else None,
                           trace_dir=args.trace_dir)
    print(report.table())
    for row in report.rows:
        if row.error:
            print(f"eval: task {row.task} raised {row.error}", file=sys.stderr)
    return 0
