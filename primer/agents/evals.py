"""Evals: a fixed set of tasks that measures an agent's outcome *and* its path.

An :class:`EvalTask` is an input (the user's task), a check of the outcome (a function of
the :class:`~primer.agents.AgentResult` returning ``True`` on success), the expected tool
path and optional limits. The path is the names of the tool calls the harness ran, in
order (error results included; calls the run stopped before running are not). An expected
path that is a list or tuple must match exactly, in order; one that is a set must match as
a set (every tool in it used, no other tool used, order and repeats ignored).

:func:`run_evals` runs every task with a fresh model and fresh tools, on any
:class:`concurrent.futures.Executor` (a thread pool by default), and returns an
:class:`EvalReport`: one :class:`EvalRow` per task (success, path right, steps, input and
output tokens, cost, latency, stop cause) and an :class:`EvalSummary` (success rate, path
accuracy, mean steps, total cost, p50 / p95 latency).

Executors: ``make_llm`` and ``tools`` are sent to the workers, so for a
``ProcessPoolExecutor`` they must be picklable: module-level functions, or instances of
module-level classes (such as :class:`~primer.scenarios.relay.SkilledModel`), never lambdas
or closures. Anything with the ``Executor`` interface works, e.g. Dask's
``distributed.Client(...).get_executor()`` to spread tasks over a cluster.

A failure found in production becomes a new task with :func:`task_from_trace`: its input,
system prompt and limits come from the trace, its check from you.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .agent_loop import run_agent
from .config import AgentConfig
from .llm import LLM
from .result import AgentResult, format_trace_table
from .state import StopCause
from .tools import Tool, ToolRegistry

ExpectedPath = Sequence[str] | frozenset[str] | set[str]


@dataclass
class EvalTask:
    """One eval task.

    ``name`` identifies it (and names its trace file); ``input`` is the user's task;
    ``check(result)`` says whether the outcome is right; ``expected_path`` is the tool path
    a good run takes (list: in order; set: order ignored; ``None``: not checked);
    ``limits`` are :class:`AgentConfig` fields that override the run's config for this task
    (e.g. ``{"max_steps": 6}``); ``system`` the system prompt; ``meta`` anything the
    ``make_llm`` / ``tools`` factories need (a scenario name, a seed).
    """

    name: str
    input: str
    check: Callable[[AgentResult], bool]
    expected_path: ExpectedPath | None = None
    limits: dict[str, Any] = field(default_factory=dict)
    system: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AnswerContains:
    """Check: the run ended with ``end_turn`` and its answer contains every one of ``texts``."""

    texts: tuple[str, ...]

    def __init__(self, *texts: str) -> None:
        object.__setattr__(self, "texts", tuple(texts))

    def __call__(self, result: AgentResult) -> bool:
        answer = result.final_text
        return answer is not None and all(t in answer for t in self.texts)


@dataclass(frozen=True)
class StopCauseIs:
    """Check: the run stopped with ``cause`` (e.g. ``"handoff"`` for a task a person must take)."""

    cause: str

    def __call__(self, result: AgentResult) -> bool:
        return result.stop_cause.value == StopCause(self.cause).value


def tool_path(result: AgentResult) -> list[str]:
    """The names of the tool calls the harness ran, in order (calls not run left out)."""
    return [e.name for e in result.executions if e.error_kind != "not_run"]


def path_matches(expected: ExpectedPath, path: Sequence[str]) -> bool:
    """Whether ``path`` is right: equal to a list/tuple, or equal as a set to a set."""
    if isinstance(expected, set | frozenset):
        return set(path) == set(expected)
    return list(path) == list(expected)


@dataclass
class EvalRow:
    """One task's outcome.

    ``success``: the check passed; ``path_ok``: the path matched (``None`` when the task has
    no expected path); ``steps``: model calls; ``input_tokens``: prompt tokens (cache reads
    and writes included) and ``output_tokens``; ``cost_usd`` at the run's prices;
    ``latency_s``: wall seconds of the whole run; ``stop_cause``: the exit, or ``"error"``
    when the run or its check raised (``error`` then says what); ``trace``: the trace file.
    """

    task: str
    success: bool
    path_ok: bool | None
    path: list[str]
    steps: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    latency_s: float
    stop_cause: str
    error: str | None = None
    trace: str | None = None

    def as_dict(self, *, latency: bool = True) -> dict[str, Any]:
        """The row for a table (``latency=False`` leaves out the time column)."""
        d = {"task": self.task, "success": self.success,
             "path ok": "-" if self.path_ok is None else self.path_ok,
             "steps": self.steps, "in": self.input_tokens, "out": self.output_tokens,
             "cost USD": f"{self.cost_usd:.4f}", "stop cause": self.stop_cause}
        if latency:
            d["latency ms"] = f"{self.latency_s * 1000:.1f}"
        return d


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by linear interpolation between the closest ranks.

    This is the "inclusive" method of :func:`statistics.quantiles` (numpy's default,
    ``linear``). One value is its own percentile. Raises ``ValueError`` for no values or a
    ``q`` outside [0, 100].
    """
    if not values:
        raise ValueError("percentile of no values: run at least one task")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be in [0, 100] (got {q})")
    data = sorted(values)
    if len(data) == 1 or q == 0:
        return data[0]
    if q == 100:
        return data[-1]
    cuts = statistics.quantiles(data, n=100, method="inclusive")
    lo = int(q)
    if lo == q:
        return cuts[lo - 1]
    a, b = cuts[lo - 1] if lo else data[0], cuts[lo]
    return a + (b - a) * (q - lo)


@dataclass
class EvalSummary:
    """The figures over all tasks.

    ``success_rate``: share of tasks whose check passed (0-1); ``path_accuracy``: share of
    tasks *with an expected path* whose path matched (``None`` when no task has one);
    ``mean_steps``: model calls per task; ``total_cost_usd``; ``input_tokens`` and
    ``output_tokens`` summed; ``p50_latency_s`` / ``p95_latency_s``: :func:`percentile` of
    the per-task wall times (seconds).
    """

    tasks: int
    success_rate: float
    path_accuracy: float | None
    mean_steps: float
    total_cost_usd: float
    input_tokens: int
    output_tokens: int
    p50_latency_s: float
    p95_latency_s: float

    @classmethod
    def of(cls, rows: Sequence[EvalRow]) -> EvalSummary:
        """Summarise ``rows``; ``ValueError`` when there are none."""
        if not rows:
            raise ValueError("no eval rows to summarise: give run_evals at least one task")
        with_path = [r.path_ok for r in rows if r.path_ok is not None]
        latencies = [r.latency_s for r in rows]
        return cls(tasks=len(rows),
                   success_rate=sum(r.success for r in rows) / len(rows),
                   path_accuracy=sum(with_path) / len(with_path) if with_path else None,
                   mean_steps=sum(r.steps for r in rows) / len(rows),
                   total_cost_usd=sum(r.cost_usd for r in rows),
                   input_tokens=sum(r.input_tokens for r in rows),
                   output_tokens=sum(r.output_tokens for r in rows),
                   p50_latency_s=percentile(latencies, 50),
                   p95_latency_s=percentile(latencies, 95))

    def text(self, *, latency: bool = True) -> str:
        """The summary as a few lines (``latency=False`` leaves out the wall times)."""
        path = "-" if self.path_accuracy is None else f"{self.path_accuracy:.0%}"
        lines = [f"tasks: {self.tasks}", f"success rate: {self.success_rate:.0%}",
                 f"path accuracy: {path}", f"mean steps: {self.mean_steps:.2f}",
                 f"tokens: {self.input_tokens:,} in, {self.output_tokens:,} out",
                 f"total cost: {self.total_cost_usd:.4f} USD"]
        if latency:
            lines.append(f"latency p50 / p95: {self.p50_latency_s * 1000:.1f} ms / "
                         f"{self.p95_latency_s * 1000:.1f} ms")
        return "\n".join(lines)


@dataclass
class EvalReport:
    """What :func:`run_evals` returns: ``rows`` in task order and their ``summary``."""

    rows: list[EvalRow]
    summary: EvalSummary

    def failures(self) -> list[EvalRow]:
        """The rows whose check failed."""
        return [r for r in self.rows if not r.success]

    def table(self, *, latency: bool = True, width: int = 40) -> str:
        """One line per task, then the summary (``latency=False``: no wall times)."""
        rows = [r.as_dict(latency=latency) for r in self.rows]
        return format_trace_table(rows, width=width) + "\n\n" + self.summary.text(
            latency=latency)


ToolsArg = ToolRegistry | Iterable[Tool] | Callable[[EvalTask], Iterable[Tool]]


def run_task(task: EvalTask, make_llm: Callable[[EvalTask], LLM], tools: ToolsArg,
             config: AgentConfig | None = None, trace_dir: str | Path | None = None) -> EvalRow:
    """Run one task with a fresh model and tools and score it (the unit of work of a worker).

    ``tools`` is a list or registry of tools, or a factory ``tools(task)`` (use a factory
    for tools that hold state, so tasks running at the same time do not share it). A run
    or check that raises gives a row with ``stop_cause == "error"`` rather than an
    exception, so one broken task never loses the others' results.
    """
    cfg = replace(config or AgentConfig(), **task.limits) if task.limits else (
        config or AgentConfig())
    trace = str(Path(trace_dir) / f"{task.name}.jsonl") if trace_dir is not None else None
    start = time.perf_counter()
    try:
        llm = make_llm(task)
        task_tools = tools(task) if callable(tools) and not isinstance(tools, Tool) else tools
        result = run_agent(llm, task.input, task_tools, system=task.system, config=cfg,
                           trace=trace)
        latency = time.perf_counter() - start
        success = bool(task.check(result))
    except Exception as e:  # noqa: BLE001 - a broken task is a row, not a crash
        return EvalRow(task.name, False, None if task.expected_path is None else False, [], 0,
                       0, 0, 0.0, time.perf_counter() - start, "error",
                       f"{type(e).__name__}: {e}", trace)
    path = tool_path(result)
    return EvalRow(task.name, success,
                   None if task.expected_path is None else path_matches(task.expected_path,
                                                                         path),
                   path, len(result.steps), result.usage.prompt_tokens,
                   result.usage.output_tokens, result.cost_usd, latency,
                   result.stop_cause.value, None, trace)


def run_evals(tasks: Sequence[EvalTask], make_llm: Callable[[EvalTask], LLM], tools: ToolsArg,
              config: AgentConfig | None = None, executor: Executor | None = None, *,
              progress: bool | None = None, trace_dir: str | Path | None = None) -> EvalReport:
    """Run every task concurrently and return an :class:`EvalReport` (rows in task order).

    ``make_llm(task)`` builds a fresh model per task; ``tools`` as in :func:`run_task`;
    ``config`` the base limits (each task's ``limits`` override it). ``executor``: any
    :class:`concurrent.futures.Executor`; by default a thread pool of up to 4 threads,
    shut down afterwards (an executor you pass stays open). For a process pool, pass
    picklable factories (see the module docstring). ``progress``: show a tqdm bar (in a
    terminal or a notebook); ``None`` shows one for 20 tasks or more when stderr is a
    terminal. ``trace_dir``: write each task's trace there as ``<task name>.jsonl``.

    Raises ``ValueError`` for no tasks or, with ``trace_dir``, two tasks with one name.
    """
    tasks = list(tasks)
    if not tasks:
        raise ValueError("run_evals needs at least one EvalTask")
    if trace_dir is not None:
        names = [t.name for t in tasks]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"task names must be unique to name their trace files; "
                             f"repeated: {dupes}")
    own = executor is None
    pool = executor or ThreadPoolExecutor(max_workers=min(4, len(tasks)),
                                          thread_name_prefix="eval")
    rows: list[EvalRow | None] = [None] * len(tasks)
    try:
        futures = {pool.submit(run_task, t, make_llm, tools, config, trace_dir): i
                   for i, t in enumerate(tasks)}
        for future in _progress(as_completed(futures), len(tasks), progress):
            rows[futures[future]] = future.result()
    finally:
        if own:
            pool.shutdown()
    done = [r for r in rows if r is not None]
    return EvalReport(done, EvalSummary.of(done))


def _progress(items: Iterable[Any], total: int, progress: bool | None) -> Iterable[Any]:
    show = progress if progress is not None else (total >= 20 and sys.stderr.isatty())
    if not show:
        return items
    from tqdm.auto import tqdm
    return tqdm(items, total=total, desc="eval tasks", unit="task")


def task_from_trace(trace: Any, check: Callable[[AgentResult], bool], *,
                    expected_path: ExpectedPath | None = None, name: str | None = None,
                    meta: dict[str, Any] | None = None) -> EvalTask:
    """Turn a recorded run (a :class:`~primer.agents.trace.Trace` or a trace path) into a task.

    The task's input, system prompt and limits are the recorded ones; ``check`` says what
    the right outcome was; ``name`` defaults to ``"from-<file stem>"``. Raises
    :class:`~primer.agents.trace.TraceError` for an unreadable trace.
    """
    from .trace import Trace, load_trace

    if not isinstance(trace, Trace):
        trace = load_trace(trace)
    stem = trace.path.stem if trace.path else "trace"
    return EvalTask(name or f"from-{stem}", trace.task, check, expected_path,
                    dict(trace.run_start.get("config", {})), trace.system,
                    dict(meta or {}))
