"""Orchestrator-workers: a model splits the task at run time, workers do the parts, one call
combines them.

The workflow pattern Anthropic's "Building effective agents" (2024) calls
*orchestrator-workers*. Unlike plan-and-execute (:mod:`primer.harness.patterns.workflows`),
whose plan
fixes tool calls and their arguments, the orchestrator writes *instructions*, and how many
depends on the input: a message with three problems gets three workers, one with a single
problem gets one. Each worker is one model call that sees only its own instruction; a last
call (the synthesis) writes the answer from their results. A cap on subtasks bounds the cost
before any worker runs.

Workers are independent, so they could run at the same time (lesson 06 does that for tool
calls); here they run one after another so that the calls, and their order, are the same
on every run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from primer.loop.model import LLM, Prices, Usage
from primer.loop.text import JSONRefused, parse_json

from .workflows import CountedCalls, ModelCalls, PatternCall, PatternError

ORCHESTRATOR_PROMPT = (
    "Split this task into independent subtasks, one per distinct part of it, as few as the "
    "task needs and at most {cap}. Answer with a JSON list of objects with the keys \"id\" "
    "and \"instruction\" (a complete instruction a worker can follow alone).\n\nTask: {task}")
WORKER_PROMPT = "{instruction}"
SYNTHESIS_PROMPT = ("Write one answer to the task from the workers' results.\n\nTask: {task}"
                    "\n\nResults:\n{results}")


@dataclass(frozen=True)
class Subtask:
    """One part of the task, as the orchestrator wrote it: ``id`` and ``instruction``."""

    id: str
    instruction: str


@dataclass
class WorkerResult:
    """What one worker returned for its ``subtask``: ``output`` text, or ``error``."""

    subtask: Subtask
    output: str | None
    error: str | None = None


@dataclass
class OrchestratorRun(CountedCalls):
    """One orchestrated run.

    ``outcome`` is ``done``; ``partial`` (a worker failed; the synthesis saw which);
    or ``too_many_subtasks`` (the orchestrator asked for more than the cap: no worker ran,
    ``final_text`` is ``None``). ``calls`` holds every model call in order (labels
    ``orchestrate``, ``worker <id>``, ``synthesise``); ``usage`` (tokens) and ``cost_usd``
    are their totals; ``model_calls`` is one to split, one per worker, one to combine.
    """

    outcome: str
    subtasks: list[Subtask]
    results: list[WorkerResult]
    final_text: str | None
    calls: list[PatternCall]
    usage: Usage
    cost_usd: float


def parse_subtasks(text: str) -> list[Subtask]:
    """The orchestrator's reply (a JSON list of ``{"id", "instruction"}``) as subtasks.

    Raises :class:`PatternError` for text that is not such a list, an empty list, an
    item without a non-empty string ``instruction``, or two items with one id.
    """
    try:
        items: Any = parse_json(text)
    except JSONRefused as e:
        raise PatternError(f"the orchestrator's reply is not JSON ({e}): {text[:120]!r}") from None
    if not isinstance(items, list) or not items:
        raise PatternError(f"the orchestrator's reply is not a non-empty JSON list: "
                           f"{text[:120]!r}")
    subtasks = []
    for k, item in enumerate(items, start=1):
        if not isinstance(item, dict) or not isinstance(item.get("instruction"), str) \
                or not item["instruction"].strip():
            raise PatternError(f"subtask {k} has no instruction: {item!r}")
        subtasks.append(Subtask(str(item.get("id", k)), item["instruction"]))
    ids = [s.id for s in subtasks]
    if len(set(ids)) != len(ids):
        raise PatternError(f"two subtasks share an id: {ids}")
    return subtasks


def orchestrate(orchestrator: LLM, worker: LLM, task: str, *, max_subtasks: int = 5,
                system: str = "", worker_system: str = "",
                prices: Prices | None = None) -> OrchestratorRun:
    """Split ``task`` with one ``orchestrator`` call, run one ``worker`` call per subtask,
    and combine the results with one more ``orchestrator`` call (the synthesis).

    At most ``max_subtasks`` workers run: a split into more ends the run with the outcome
    ``too_many_subtasks`` before any worker is called. A worker whose reply is cut off or
    refused is recorded as failed and the synthesis is told (outcome ``partial``). Costs
    ``2 + len(subtasks)`` model calls, priced at ``prices``. Raises ``ValueError`` for a
    ``max_subtasks`` below 1 and :class:`PatternError` for a split that cannot be parsed
    (see :func:`parse_subtasks`) or a synthesis that is cut off or refused.
    """
    if max_subtasks < 1:
        raise ValueError(f"max_subtasks must be at least 1, got {max_subtasks}")
    lead, work = ModelCalls(orchestrator, prices), ModelCalls(worker, prices)
    subtasks = parse_subtasks(lead.ask(ORCHESTRATOR_PROMPT.format(cap=max_subtasks, task=task),
                                       system=system, label="orchestrate"))
    if len(subtasks) > max_subtasks:
        return _run("too_many_subtasks", subtasks, [], None, lead, work)
    results = []
    for s in subtasks:
        try:
            results.append(WorkerResult(s, work.ask(WORKER_PROMPT.format(
                instruction=s.instruction), system=worker_system, label=f"worker {s.id}")))
        except PatternError as e:
            results.append(WorkerResult(s, None, str(e)))
    # a worker with no error has its output (the text work.ask returned)
    listing = "\n".join(f"[{r.subtask.id}] " + (cast(str, r.output) if r.error is None
                                                 else f"(failed: {r.error})") for r in results)
    final = lead.ask(SYNTHESIS_PROMPT.format(task=task, results=listing), system=system,
                     label="synthesise")
    outcome = "partial" if any(r.error for r in results) else "done"
    return _run(outcome, subtasks, results, final, lead, work)


def _run(outcome: str, subtasks: list[Subtask], results: list[WorkerResult],
         final: str | None, lead: ModelCalls, work: ModelCalls) -> OrchestratorRun:
    """The run's record, its calls in the order they were made."""
    calls = lead.records[:1] + work.records + lead.records[1:]
    return OrchestratorRun(outcome, subtasks, results, final, calls, lead.usage + work.usage,
                           lead.cost_usd + work.cost_usd)
