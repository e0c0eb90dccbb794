"""``python -m primer eval``: run an eval suite and print one row per task, then the summary.

The built-in suite (:mod:`primer.scenarios.suite`) holds the course's scenario demos and
relay tasks whose model is right each step with probability ``--p``; ``--suite FILE`` runs
the tasks of a YAML or JSON suite file instead (:mod:`primer.harness.evals.suite`), with the
scenario models and tools its tasks name. ``--repeats K`` runs each task K times and adds
pass@K and pass^K; ``--results FILE`` streams rows to a JSON Lines file and resumes from it
(``--fresh`` starts it over); ``--timeout S`` limits each trial. Where the trials run:
threads by default (``--workers``), ``--processes``, or ``--dask ADDRESS`` (a running
scheduler, or ``local`` for a LocalCluster of ``--workers`` processes started and closed
here). ``--judge scripted`` grades the suite file's ``model_graded`` checks offline,
``--judge claude`` with Claude (needs ``ANTHROPIC_API_KEY``).

``--agentdojo SUITE`` runs the user tasks of an AgentDojo suite (workspace, travel, banking,
slack; the optional extra ``.[agentdojo]``) with its tools and environments, scored by
AgentDojo's own utility check (:mod:`primer.harness.evals.agentdojo`). ``--model`` picks the
model: the ground-truth replay (offline: ``replay``, one call a reply; ``replay-batched``;
``replay-all``, every call in one reply) or ``claude`` (needs ``ANTHROPIC_API_KEY``).
``--tasks`` picks tasks by id. After the table, the limits every task ran with (from the
suite's longest ground truth) and which tasks a plain ``AgentConfig()`` would stop.

Exit code 0 (failing tasks are results, not errors); 2 for impossible settings, a suite or
results file that cannot be used, a trace directory that cannot be used or a scheduler that
cannot be reached (one line says which).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from primer.commands.paths import os_error_line, output_dir_problem
from primer.harness.evals.run import EvalTask, run_evals
from primer.harness.evals.store import EvalResultsError
from primer.harness.evals.suite import SuiteError
from primer.loop.model import LLM
from primer.scenarios.suite import (
    builtin_suite,
    load_suite_file,
    scripted_judge,
    suite_llm,
    suite_tools,
)

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
  stop cause  why the loop stopped (end_turn, max_steps, loop_detected, ...), error when
              the task itself raised, timeout past --timeout (printed after the table)
  latency ms  wall time of the run, in milliseconds (varies between runs and machines)
With --repeats K > 1, one row per task instead: trials, passed, pass rate, pass@K (at least
one of K trials passes) and pass^K (all K pass).
Then the summary: success rate with its 95% interval (Wilson), pass@K and pass^K, path
accuracy (share of trials with a path whose path was right), mean steps, tokens, total
cost and the p50 / p95 latency."""


def register(subparsers: Any) -> None:
    """Add the ``eval`` sub-command to ``subparsers``."""
    p = subparsers.add_parser("eval", help="run an eval suite and print the table",
                              description="Run the built-in eval suite, or a suite file, "
                                          "offline.",
                              epilog=COLUMNS,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suite", metavar="FILE",
                   help="run the tasks of this YAML or JSON suite file (see "
                        "primer/scenarios/builtin_suite.yaml for the format)")
    p.add_argument("--relay-tasks", type=int, default=20,
                   help="relay tasks to add to the built-in suite (default 20)")
    p.add_argument("--hops", type=int, default=5, help="steps per relay task (default 5)")
    p.add_argument("--p", type=float, default=0.9,
                   help="the relay model's per-step accuracy (default 0.9)")
    p.add_argument("--repeats", type=int, default=1, metavar="K",
                   help="trials per task (default 1); adds pass@K and pass^K")
    p.add_argument("--results", metavar="FILE",
                   help="stream rows to this JSON Lines file; run again to resume")
    p.add_argument("--fresh", action="store_true", help="start --results FILE over")
    p.add_argument("--timeout", type=float, metavar="S", help="seconds allowed per trial")
    p.add_argument("--workers", type=int, default=4, help="trials run at once (default 4)")
    p.add_argument("--processes", action="store_true", help="use processes, not threads")
    p.add_argument("--dask", metavar="ADDRESS",
                   help="run on a Dask cluster: a scheduler address (tcp://host:8786), or "
                        "'local' for a LocalCluster of --workers processes")
    p.add_argument("--judge", choices=["scripted", "claude"],
                   help="the judge of model_graded checks in --suite FILE")
    p.add_argument("--trace-dir", metavar="DIR",
                   help="write each trial's trace to DIR as TASK.jsonl (DIR may be created; "
                        "its parent must exist)")
    p.add_argument("--agentdojo", metavar="SUITE",
                   help="run an AgentDojo suite (workspace, travel, banking or slack; needs "
                        "the extra: pip install -e '.[agentdojo]')")
    p.add_argument("--agentdojo-version", default="v1.2.2", metavar="VERSION",
                   help="AgentDojo's benchmark version (default v1.2.2)")
    p.add_argument("--model", choices=list(AGENTDOJO_MODELS), default="replay",
                   help="the model for --agentdojo: the ground-truth replay (replay: one call "
                        "a reply; replay-batched; replay-all: all calls in one reply) or "
                        "claude (needs ANTHROPIC_API_KEY); default replay")
    p.add_argument("--tasks", metavar="IDS",
                   help="with --agentdojo: only these task ids, comma-separated "
                        "(user_task_0,user_task_3)")
    p.add_argument("--summary-only", action="store_true", help="print the summary, no table")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the suite and print the table; returns 0, or 2 for a setting or file that
    cannot be used."""
    problem = _settings_problem(args)
    if problem:
        print(f"eval: {problem}", file=sys.stderr)
        return 2
    try:
        if args.trace_dir:  # every task writes here: create it now, not in each worker
            Path(args.trace_dir).mkdir(exist_ok=True)
        tasks, make_llm, tools = _tasks(args)
        with _executor(args) as executor:
            report = run_evals(tasks, make_llm, tools, executor=executor,
                               repeats=args.repeats, results=args.results,
                               resume=not args.fresh, timeout_s=args.timeout,
                               progress=False if args.no_progress else None,
                               trace_dir=args.trace_dir)
    except (SuiteError, EvalResultsError, _Unreachable, ImportError, ValueError) as e:
        print(f"eval: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(os_error_line("eval", e), file=sys.stderr)
        return 2
    print(report.summary.text() if args.summary_only else report.table())
    for note in report.notes:
        print(f"eval: {note}", file=sys.stderr)
    for row in report.rows if not args.summary_only else ():
        if row.error:
            print(f"eval: task {row.task} trial {row.trial}: {row.stop_cause}: {row.error}",
                  file=sys.stderr)
    if args.agentdojo:
        from primer.harness.evals.agentdojo.limits import limits_report

        print(limits_report(args.agentdojo, args.agentdojo_version,
                            [t.name for t in tasks]))
    return 0


def _settings_problem(args: argparse.Namespace) -> str | None:
    if args.relay_tasks < 0 or args.hops < 1 or not 0 <= args.p <= 1 or args.workers < 1:
        return "need --relay-tasks >= 0, --hops >= 1, 0 <= --p <= 1, --workers >= 1"
    if args.repeats < 1:
        return f"--repeats must be 1 or more (got {args.repeats})"
    if args.timeout is not None and not args.timeout > 0:
        return f"--timeout must be a positive number of seconds (got {args.timeout})"
    if args.processes and args.dask:
        return "choose one of --processes and --dask"
    if args.fresh and not args.results:
        return "--fresh starts a --results FILE over; give one"
    if args.agentdojo and args.suite:
        return "choose one of --suite and --agentdojo"
    if (args.tasks or args.model != "replay") and not args.agentdojo:
        return "--tasks and --model choose tasks and the model of an --agentdojo suite; give one"
    if args.judge and not args.suite:
        return "--judge grades the model_graded checks of a --suite FILE; give one"
    return args.trace_dir and output_dir_problem(args.trace_dir, "--trace-dir") or None


#: ``--model`` for ``--agentdojo``: the replay mode, or ``None`` for Claude.
AGENTDOJO_MODELS = {"replay": "sequential", "replay-batched": "batched", "replay-all": "all",
                    "claude": None}


def _tasks(args: argparse.Namespace) -> tuple[list[EvalTask], Any, Any]:
    """The tasks, the model factory and the tools for the run."""
    if args.agentdojo:
        return _agentdojo(args)
    if not args.suite:
        return (builtin_suite(relay_tasks=args.relay_tasks, hops=args.hops, p=args.p),
                suite_llm, suite_tools)
    return load_suite_file(args.suite, judge=_judge(args.judge)), suite_llm, suite_tools


def _agentdojo(args: argparse.Namespace) -> tuple[list[EvalTask], Any, Any]:
    from primer.harness.evals.agentdojo.replay import ReplayModels
    from primer.harness.evals.agentdojo.world import eval_tasks, world_tools

    only = [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None
    tasks = eval_tasks(args.agentdojo, args.agentdojo_version, only=only)
    mode = AGENTDOJO_MODELS[args.model]
    if mode is None:
        from primer.providers.claude import NO_KEY_HELP, has_api_key

        if not has_api_key():
            raise _Unreachable(f"--model claude: {NO_KEY_HELP}")
        return tasks, ClaudeModels(), world_tools
    return tasks, ReplayModels(mode), world_tools


class ClaudeModels:
    """A fresh :class:`~primer.providers.claude.ClaudeLLM` per trial (picklable)."""

    def __call__(self, task: EvalTask) -> LLM:
        from primer.providers.claude import ClaudeLLM

        return ClaudeLLM()


def _judge(name: str | None) -> LLM | None:
    if name == "scripted":
        return scripted_judge()
    if name == "claude":
        from primer.providers.claude import NO_KEY_HELP, ClaudeLLM, has_api_key

        if not has_api_key():
            raise _Unreachable(f"--judge claude: {NO_KEY_HELP}")
        return ClaudeLLM()
    return None


class _Unreachable(Exception):
    """A judge or scheduler the command cannot use."""


@contextlib.contextmanager
def _executor(args: argparse.Namespace) -> Iterator[Any]:
    """The executor the trials run on, closed afterwards (a Dask LocalCluster too)."""
    if not args.dask:
        pool_type = ProcessPoolExecutor if args.processes else ThreadPoolExecutor
        with pool_type(max_workers=args.workers) as pool:
            yield pool
        return
    import distributed

    with contextlib.ExitStack() as stack:
        try:
            if args.dask == "local":
                cluster = stack.enter_context(distributed.LocalCluster(
                    n_workers=args.workers, threads_per_worker=1, processes=True,
                    dashboard_address=None))
                address: Any = cluster
            else:
                address = args.dask
            client = stack.enter_context(distributed.Client(address, timeout="10s"))
        except (OSError, TimeoutError, ValueError) as e:
            raise _Unreachable(f"--dask {args.dask}: cannot reach the scheduler ({e})") from e
        yield client
