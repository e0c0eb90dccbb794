"""``python -m primer eval``: run the built-in eval suite and print one row per task.

The suite (:mod:`primer.scenarios.suite`) holds the course's scenario demos and relay tasks
whose model is right each step with probability ``--p``. Prints each task's outcome, path,
steps, tokens, cost and stop cause, then the summary (success rate, path accuracy, mean
steps, total cost, p50 / p95 latency). ``--workers`` sets the thread pool; ``--processes``
uses a process pool instead. Exit code 0 (failing tasks are results, not errors).
"""

from __future__ import annotations

import argparse
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

from primer.agents import run_evals
from primer.scenarios.suite import builtin_suite, suite_llm, suite_tools


def register(subparsers: Any) -> None:
    """Add the ``eval`` sub-command to ``subparsers``."""
    p = subparsers.add_parser("eval", help="run the built-in eval suite and print the table",
                              description="Run the built-in eval suite offline.")
    p.add_argument("--relay-tasks", type=int, default=20,
                   help="relay tasks to add (default 20)")
    p.add_argument("--hops", type=int, default=5, help="steps per relay task (default 5)")
    p.add_argument("--p", type=float, default=0.9,
                   help="the relay model's per-step accuracy (default 0.9)")
    p.add_argument("--workers", type=int, default=4, help="tasks run at once (default 4)")
    p.add_argument("--processes", action="store_true", help="use processes, not threads")
    p.add_argument("--trace-dir", metavar="DIR", help="write each task's trace to DIR")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the suite and print the table; returns 0, or 2 for impossible settings."""
    if args.relay_tasks < 0 or args.hops < 1 or not 0 <= args.p <= 1 or args.workers < 1:
        print("eval: need --relay-tasks >= 0, --hops >= 1, 0 <= --p <= 1, --workers >= 1")
        return 2
    tasks = builtin_suite(relay_tasks=args.relay_tasks, hops=args.hops, p=args.p)
    pool_type = ProcessPoolExecutor if args.processes else ThreadPoolExecutor
    pool: Executor
    with pool_type(max_workers=args.workers) as pool:
        report = run_evals(tasks, suite_llm, suite_tools, executor=pool,
                           progress=False if args.no_progress else None,
                           trace_dir=args.trace_dir)
    print(report.table())
    return 0
