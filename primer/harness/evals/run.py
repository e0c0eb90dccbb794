"""Evals: a fixed set of tasks that measures an agent's outcome *and* its path, on any executor.

An :class:`EvalTask` is an input (the user's task), a check of the outcome (a scorer, or a
list of scorers that must all pass: see :mod:`primer.harness.evals.scorers`), the expected tool
path and optional limits. The path is the names of the tool calls the harness ran, in
order (error results included; calls the run stopped before running are not). An expected
path that is a list or tuple must match exactly, in order; one that is a set must match as
a set (every tool in it used, no other tool used, order and repeats ignored).

:func:`run_evals` runs every task ``repeats`` times, each trial with a fresh model and fresh
tools, and returns an :class:`EvalReport`: one :class:`EvalRow` per trial and an
:class:`EvalSummary` (success rate with its 95% interval, pass@k and pass^k, path accuracy,
mean steps, cost, p50 / p95 latency; definitions and sources in
:mod:`primer.harness.evals.results`).

Where the trials run
--------------------
On any :class:`concurrent.futures.Executor` (a thread pool by default), or on a Dask
cluster: pass a ``distributed.Client`` (or its ``get_executor()``); see
:mod:`primer.harness.evals.pools`. The driver keeps at most ``max_in_flight`` trials submitted
at a time and submits the next as each finishes, so neither it nor a Dask scheduler holds
every trial at once. ``make_llm`` and
``tools`` travel to the workers: for a process pool they must be picklable (module-level
functions, or instances of module-level classes such as
:class:`~primer.scenarios.relay.SkilledModel`, never lambdas); Dask pickles with
cloudpickle, which also takes lambdas, but the workers must be able to import ``primer``.

Streaming, resume, timeouts
---------------------------
With ``results=PATH`` each row is appended to a JSON Lines file and flushed as its trial
finishes (:mod:`primer.harness.evals.store`), rows are not kept in the driver, and the summary
is computed from the file. Running again with the same ``results`` resumes: trials already
in the file are not run again. ``timeout_s`` limits each trial's wall time on its worker;
a trial past it becomes a ``"timeout"`` row. Python cannot stop a thread, so the timed-out
work goes on in the background of that worker until it returns, and its result is dropped.

A failure found in production becomes a new task with :func:`task_from_trace`: its input,
system prompt and limits come from the trace, its check from you.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field, fields, is_dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from primer.loop.config import AgentConfig
from primer.loop.model import LLM
from primer.loop.result import AgentResult, format_trace_table
from primer.loop.tools import Tool, ToolRegistry

from ..production import run_production
from .pools import Pool, Work, as_pool
from .results import EvalRow, EvalSummary, percentile
from .scorers import (
    AnswerContains,
    ExpectedPath,
    Scorer,
    StopCauseIs,
    Verdict,
    path_matches,
    scorer_name,
    tool_path,
)
from .store import ResultsFile, fingerprint

if TYPE_CHECKING:
    import distributed

__all__ = ["AnswerContains", "EvalReport", "EvalRow", "EvalSummary", "EvalTask",
           "StopCauseIs", "path_matches", "percentile", "run_evals", "run_task",
           "task_from_trace", "tool_path"]

Scoring = Scorer | Sequence[Scorer]


@dataclass
class EvalTask:
    """One eval task.

    ``name`` identifies it (and names its trace file); ``input`` is the user's task;
    ``check(result)`` says whether the outcome is right (a scorer, or a list of scorers
    that must all pass); ``expected_path`` is the tool path a good run takes (list: in
    order; set: order ignored; ``None``: not checked); ``limits`` are :class:`AgentConfig`
    fields that override the run's config for this task (e.g. ``{"max_steps": 6}``);
    ``system`` the system prompt; ``meta`` anything the ``make_llm`` / ``tools`` factories
    need (a scenario name, a seed). With ``repeats > 1`` each trial's task carries
    ``meta["trial"]`` (0, 1, ...), so a factory can seed a nondeterministic model per trial.
    """

    name: str
    input: str
    check: Scoring
    expected_path: ExpectedPath | None = None
    limits: dict[str, Any] = field(default_factory=dict)
    system: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class EvalReport:
    """What :func:`run_evals` returns: its ``summary``, and its rows.

    ``rows``: in task order, trial by trial (from the results file when there is one, read
    when first asked for). ``results``: the results file, or ``None``; ``notes``: what
    reading it had to leave out.
    """

    _rows: list[EvalRow] | None
    summary: EvalSummary
    results: Path | None = None
    notes: list[str] = field(default_factory=list)
    order: dict[str, int] = field(default_factory=dict, repr=False)

    @property
    def rows(self) -> list[EvalRow]:
        """Every row, in task order then trial order."""
        if self._rows is None:
            assert self.results is not None
            rows = list(ResultsFile(self.results).rows())
            self._rows = sorted(rows, key=lambda r: (self.order.get(r.task, len(self.order)),
                                                     r.trial))
        return self._rows

    def failures(self) -> list[EvalRow]:
        """The rows whose check failed."""
        return [r for r in self.rows if not r.success]

    def table(self, *, latency: bool = True, width: int = 40) -> str:
        """One line per trial (one per task, with pass@k and pass^k, when tasks ran more
        than once), then the summary (``latency=False``: no wall times)."""
        if self.summary.trials == self.summary.tasks:
            rows = [r.as_dict(latency=latency) for r in self.rows]
        else:
            rows = sorted(self.summary.task_rows(),
                          key=lambda d: self.order.get(d["task"], len(self.order)))
        return format_trace_table(rows, width=width) + "\n\n" + self.summary.text(
            latency=latency)


ToolsArg = ToolRegistry | Iterable[Tool] | Callable[[EvalTask], Iterable[Tool]]


class TaskTimeout(Exception):
    """A trial ran past ``timeout_s``."""


def run_task(task: EvalTask, make_llm: Callable[[EvalTask], LLM], tools: ToolsArg,
             config: AgentConfig | None = None, trace_dir: str | Path | None = None, *,
             timeout_s: float | None = None) -> EvalRow:
    """Run one trial of ``task`` with a fresh model and tools and score it (the unit of
    work of a worker).

    ``tools`` is a list or registry of tools, or a factory ``tools(task)`` (use a factory
    for tools that hold state, so trials running at the same time do not share it).
    ``timeout_s``: the trial's wall-time limit (seconds; see the module docstring). A run
    or check that raises gives a row with ``stop_cause == "error"``, and a trial past its
    limit one with ``"timeout"``, rather than an exception, so one broken task never loses
    the others' results.
    """
    cfg = replace(config or AgentConfig(), **task.limits) if task.limits else (
        config or AgentConfig())
    trial = int(task.meta.get("trial", 0))
    trace = None
    if trace_dir is not None:
        stem = f"{task.name}.trial-{trial}" if "trial" in task.meta else task.name
        trace = str(Path(trace_dir) / f"{stem}.jsonl")
    start = time.perf_counter()

    def attempt() -> tuple[AgentResult, float, tuple[bool, dict[str, bool], dict[str, str]]]:
        task_tools = tools(task) if callable(tools) and not isinstance(tools, Tool) else tools
        result = run_production(make_llm(task), task.input, task_tools, system=task.system,
                                config=cfg, trace=trace)
        return result, time.perf_counter() - start, score(task.check, result)

    try:
        result, latency, (success, scores, reasons) = _within(attempt, timeout_s)
    except Exception as e:  # noqa: BLE001 - a broken task is a row, not a crash
        timed_out = isinstance(e, TaskTimeout)
        return EvalRow(task.name, False, None if task.expected_path is None else False, [], 0,
                       0, 0, 0.0, time.perf_counter() - start,
                       "timeout" if timed_out else "error",
                       str(e) if timed_out else f"{type(e).__name__}: {e}", trace, trial)
    path = tool_path(result)
    return EvalRow(task.name, success,
                   None if task.expected_path is None else path_matches(task.expected_path,
                                                                         path),
                   path, len(result.steps), result.usage.prompt_tokens,
                   result.usage.output_tokens, result.cost_usd, latency,
                   result.stop_cause.value, None, trace, trial, scores, reasons)


def score(check: Scoring, result: AgentResult) -> tuple[bool, dict[str, bool], dict[str, str]]:
    """Apply ``check`` (one scorer or a list) to ``result``: whether all passed, each
    verdict by :func:`~primer.harness.evals.scorers.scorer_name`, and the reasons given."""
    # Scoring is a list or tuple of scorers, or else one scorer
    scorers: list[Scorer] = (list(check) if isinstance(check, list | tuple)
                             else [cast(Scorer, check)])
    scores: dict[str, bool] = {}
    reasons: dict[str, str] = {}
    for s in scorers:
        name = scorer_name(s)
        if name in scores:  # two scorers of one kind: number the second
            name = f"{name}_{sum(1 for n in scores if n.startswith(name))}"
        verdict = s(result)
        scores[name] = bool(verdict)
        if isinstance(verdict, Verdict) and verdict.reason:
            reasons[name] = verdict.reason
    return all(scores.values()), scores, reasons


def _within(fn: Callable[[], Any], timeout_s: float | None) -> Any:
    """``fn()``, or :class:`TaskTimeout` when it runs past ``timeout_s`` (in a daemon
    thread, left running: Python cannot stop it)."""
    if timeout_s is None:
        return fn()
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed back to the caller below
            box["error"] = e

    worker = threading.Thread(target=target, name="eval-trial", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise TaskTimeout(f"the trial ran past its {timeout_s:g} s limit; it was left "
                          f"running in the background and its result is dropped")
    if "error" in box:
        raise box["error"]
    return box["value"]


def run_evals(tasks: Iterable[EvalTask], make_llm: Callable[[EvalTask], LLM], tools: ToolsArg,
              config: AgentConfig | None = None,
              executor: Executor | distributed.Client | None = None, *,
              repeats: int = 1, results: str | Path | None = None, resume: bool = True,
              timeout_s: float | None = None, progress: bool | None = None,
              trace_dir: str | Path | None = None,
              max_in_flight: int | None = None) -> EvalReport:
    """Run every task ``repeats`` times and return an :class:`EvalReport`.

    ``make_llm(task)`` builds a fresh model per trial; ``tools`` as in :func:`run_task`;
    ``config`` the base limits (each task's ``limits`` override it). ``executor``: any
    :class:`concurrent.futures.Executor`, or a ``distributed.Client``; by default a thread
    pool of up to 4 threads, shut down afterwards (an executor you pass stays open).
    ``repeats``: trials per task (``meta["trial"]`` tells them apart). ``results``: stream
    rows to this JSON Lines file and resume from it (``resume=False`` starts it over).
    ``timeout_s``: wall-time limit per trial (seconds). ``progress``: show a tqdm bar;
    ``None`` shows one for 20 trials or more when stderr is a terminal. ``trace_dir``:
    write each trial's trace there as ``<task>.jsonl`` (``<task>.trial-<k>.jsonl`` with
    repeats). ``max_in_flight``: trials submitted at once (default: twice the workers of a
    thread or process pool, else 16; on Dask 32 per worker thread, at least 64).

    Raises ``ValueError`` for no tasks, two tasks with one name, ``repeats < 1`` or a
    ``timeout_s`` that is not positive;
    :class:`~primer.harness.evals.store.EvalResultsError` for a results file of another
    suite. An interrupt (``KeyboardInterrupt``) cancels the trials not started and
    propagates; rows already written stay in the results file.
    """
    tasks = list(tasks)
    _check_arguments(tasks, repeats, timeout_s)
    names = [t.name for t in tasks]
    store = ResultsFile(results) if results is not None else None
    done = (store.start(names, repeats, resume=resume, suite=suite_fingerprint(tasks),
                        config=fingerprint((config or AgentConfig()).to_dict()))
            if store is not None else set())
    own_pool = None if executor is not None else ThreadPoolExecutor(
        max_workers=min(4, len(tasks) * repeats), thread_name_prefix="eval")
    # own_pool is made exactly when no executor is given: one of the two is set
    pool = as_pool(cast("Executor | distributed.Client", own_pool or executor))
    window = max_in_flight or pool.default_window()
    work = partial(run_task, make_llm=make_llm, tools=tools, config=config,
                   trace_dir=trace_dir, timeout_s=timeout_s)
    kept: list[EvalRow] = []
    jobs = _trials(tasks, repeats, done)
    bar = _progress(len(tasks) * repeats, len(done), progress)
    try:
        _fill(pool, jobs, window, work)
        while len(pool):
            for row in pool.wait_some():
                if store is not None:
                    store.append(row)
                else:
                    kept.append(row)
                if bar is not None:
                    bar.update(1)
            _fill(pool, jobs, window, work)
    except BaseException:
        pool.cancel()
        raise
    finally:
        if bar is not None:
            bar.close()
        if store is not None:
            store.close()
        if own_pool is not None:
            own_pool.shutdown(wait=True, cancel_futures=True)
    order = {n: i for i, n in enumerate(names)}
    if store is not None:
        summary = store.summary()
        return EvalReport(None, summary, store.path, list(store.notes), order)
    kept.sort(key=lambda r: (order[r.task], r.trial))
    return EvalReport(kept, EvalSummary.of(kept), None, [], order)


def suite_fingerprint(tasks: Sequence[EvalTask]) -> str:
    """The fingerprint (:func:`~primer.harness.evals.store.fingerprint`) of a suite: each
    task's name, input, system prompt, limits, expected path, scorers (by name, with their
    settings) and meta, in order. A results file records it, so its rows count only for the
    suite that wrote them."""
    def scorer(s: object) -> object:
        settings = ({f.name: getattr(s, f.name) for f in fields(s)}
                    if is_dataclass(s) else None)
        return [scorer_name(s), settings]

    def path(p: ExpectedPath | None) -> object:
        return sorted(p) if isinstance(p, set | frozenset) else p

    return fingerprint([{"name": t.name, "input": t.input, "system": t.system,
                         "limits": t.limits, "expected_path": path(t.expected_path),
                         "ordered": not isinstance(t.expected_path, set | frozenset),
                         "check": [scorer(c) for c in (t.check if isinstance(t.check, list |
                                                       tuple) else [t.check])],
                         "meta": t.meta} for t in tasks])


def _check_arguments(tasks: Sequence[EvalTask], repeats: int, timeout_s: float | None) -> None:
    if not tasks:
        raise ValueError("run_evals needs at least one EvalTask")
    names = [t.name for t in tasks]
    dupes = sorted({n for n in names if names.count(n) > 1}) if len(set(names)) < len(
        names) else []
    if dupes:
        raise ValueError(f"task names must be unique (rows, results and traces are kept by "
                         f"name); repeated: {dupes}")
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        raise ValueError(f"repeats is a whole number of trials per task, >= 1 (got "
                         f"{repeats!r})")
    if timeout_s is not None and not timeout_s > 0:
        raise ValueError(f"timeout_s must be a positive number of seconds (got {timeout_s})")


def _trials(tasks: Sequence[EvalTask], repeats: int,
            done: set[tuple[str, int]]) -> Iterator[EvalTask]:
    """Each trial still to run, trial by trial (so a stopped run has covered every task
    evenly); with ``repeats > 1`` each trial's task carries ``meta["trial"]``."""
    for trial in range(repeats):
        for task in tasks:
            if (task.name, trial) not in done:
                yield task if repeats == 1 else replace(task,
                                                        meta={**task.meta, "trial": trial})


def _fill(pool: Pool, jobs: Iterator[EvalTask], window: int, work: Work) -> None:
    """Submit trials from ``jobs`` until ``window`` are in flight (or none is left)."""
    while len(pool) < window:
        task = next(jobs, None)
        if task is None:
            return
        pool.submit(work, task)


def _progress(total: int, initial: int, progress: bool | None) -> Any:
    show = progress if progress is not None else (total >= 20 and sys.stderr.isatty())
    if not show:
        return None
    from tqdm.auto import tqdm
    return tqdm(total=total, initial=initial, desc="eval trials", unit="trial")


def task_from_trace(trace: Any, check: Scoring, *,
                    expected_path: ExpectedPath | None = None, name: str | None = None,
                    meta: dict[str, Any] | None = None) -> EvalTask:
    """Turn a recorded run (a :class:`~primer.harness.tracing.trace.Trace` or a trace path) into
    a task.

    The task's input, system prompt and limits are the recorded ones; ``check`` says what
    the right outcome was; ``name`` defaults to ``"from-<file stem>"``. Raises
    :class:`~primer.harness.tracing.trace.TraceError` for an unreadable trace.
    """
    from primer.harness.tracing.trace import Trace, load_trace

    if not isinstance(trace, Trace):
        trace = load_trace(trace)
    stem = trace.path.stem if trace.path else "trace"
    return EvalTask(name or f"from-{stem}", trace.task, check, expected_path,
                    dict(trace.run_start.get("config", {})), trace.system,
                    dict(meta or {}))
