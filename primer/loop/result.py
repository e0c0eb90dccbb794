"""What a run returns: ``AgentResult``, its one-paragraph summary, and its table of steps.

:func:`step_row` is the one row builder of the course's step tables: a run's own
(:meth:`AgentResult.rows`) and a trace read back from a file
(:meth:`primer.harness.tracing.trace.Trace.rows`) build their rows with it, so both tables have the
same columns under the same names. :func:`format_trace_table` prints rows as fixed-width
text.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pydantic

from .jsontext import compact_json
from .messages import THINKING_TYPES, Block, Message
from .model import Reply, Usage
from .state import Step, Stop, StopCause
from .text import one_line
from .tools import ToolExecution


@dataclass
class AgentResult:
    """The outcome of a run.

    ``final_text`` is the model's answer only when the run ended with ``end_turn``; on any
    other stop it is ``None``, so a limit is never passed off as an answer. ``stop_cause``
    names the exit, ``stop_detail`` says what fired, ``summary`` says what the run finished
    and why it stopped. ``usage`` and ``cost_usd`` are totals (tokens; USD). ``messages``
    is the full message list; on every stop but ``awaiting_approval`` each ``tool_use`` in
    it has exactly one ``tool_result``. ``pending`` holds tool calls awaiting approval.
    ``checkpoint`` is the path of the run's checkpoint journal, or ``None`` if none was
    written. ``output`` is the validated ``output_model`` instance, when one was asked for.
    """

    final_text: str | None
    stop_cause: StopCause
    steps: list[Step]
    usage: Usage
    cost_usd: float
    messages: list[Message]
    summary: str
    stop_detail: str = ""
    pending: list[Block] = field(default_factory=list)
    checkpoint: str | None = None
    output: pydantic.BaseModel | None = None

    @property
    def executions(self) -> list[ToolExecution]:
        """Every tool call of the run, in order."""
        return [e for s in self.steps for e in s.executions]

    def rows(self) -> list[dict[str, Any]]:
        """The run as one dict per step (see :func:`step_row`), for tables and tests."""
        return [step_row(s.index, s.reply, [e.to_dict() for e in s.executions],
                         s.total_usage.total_tokens, s.cost_usd) for s in self.steps]

    def table(self, width: int = 60) -> str:
        """The run as a fixed-width text table, one row per step, then the stop cause."""
        return format_trace_table(self.rows(), width=width) + (
            f"\nstop cause: {self.stop_cause.value}\n{self.summary}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"final_text": self.final_text, "stop_cause": self.stop_cause.value,
                "stop_detail": self.stop_detail, "summary": self.summary,
                "usage": self.usage.to_dict(), "cost_usd": self.cost_usd,
                "steps": [s.to_dict() for s in self.steps], "messages": self.messages,
                "pending": self.pending, "checkpoint": self.checkpoint}


_HEADLINES = {
    StopCause.END_TURN: "Finished: {detail}",
    StopCause.MAX_TOKENS: "Stopped at max_tokens: {detail}",
    StopCause.REFUSAL: "Stopped on a refusal: {detail}",
    StopCause.TOKEN_BUDGET: "Stopped at the token budget: {detail}",
    StopCause.COST_BUDGET: "Stopped at the dollar budget: {detail}",
    StopCause.HANDOFF: "Handed off: {detail}",
    StopCause.LOOP_DETECTED: "Stopped on a loop: {detail}",
    StopCause.MAX_STEPS: "Stopped at the step limit after {steps}",
    StopCause.WALL_CLOCK: "Stopped at the wall clock: {detail}",
    StopCause.NO_PROGRESS: "Stopped for lack of progress: {detail}",
    StopCause.CONTEXT_WINDOW: "Stopped at the context window: {detail}",
    StopCause.AWAITING_APPROVAL: "Paused for approval: {detail}",
    StopCause.MODEL_ERROR: "Stopped on a model error: {detail}",
    StopCause.INVALID_OUTPUT: "Stopped on an invalid final answer: {detail}",
    StopCause.CANCELLED: "Cancelled: {detail}",
}


def summarize(steps: list[Step], stop: Stop) -> str:
    """One or two sentences: why the run stopped, and which tool calls succeeded or not.

    For example: "Stopped at the step limit after 4 model calls. Succeeded: none. Failed:
    get_order ×4."
    """
    ok: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    not_run: Counter[str] = Counter()
    for s in steps:
        for e in s.executions:
            (not_run if e.error_kind == "not_run" else failed if e.is_error else ok)[e.name] += 1
    calls = f"{len(steps)} model call{'' if len(steps) == 1 else 's'}"
    head = _HEADLINES[stop.cause].format(detail=stop.detail, steps=calls)

    def names(c: Counter[str]) -> str:
        return ", ".join(f"{n} ×{k}" if k > 1 else n for n, k in c.items()) or "none"

    parts = [f"Tool calls succeeded: {names(ok)}"]
    if failed:
        parts.append(f"failed: {names(failed)}")
    if not_run:
        parts.append(f"not run: {names(not_run)}")
    return f"{head.rstrip('.')}. {'; '.join(parts)}."


# ---------------------------------------------------------------- tables


def call_cells(tool_uses: list[Block], ran: list[dict[str, Any]],
               unrun: str = "awaiting approval") -> tuple[str, str]:
    """The "tool calls" and "results / answer" cells of one row (see :func:`step_row`).

    ``tool_uses`` are the reply's calls; ``ran`` the results it got, as dicts with
    ``tool_use_id``, ``name``, ``input``, ``content`` and ``is_error`` (a
    :class:`ToolExecution`'s ``to_dict()``, or a trace's ``tool_execution`` event). A
    requested call with no result is listed in request order as ``[unrun] name(input)`` (the
    mark first, so a cut cell still shows it), with ``unrun`` as its result: only a pause
    for approval leaves calls unanswered (every other stop answers them with ``not_run``
    results).
    """
    def result(x: dict[str, Any]) -> str:
        return ("error: " if x["is_error"] else "") + str(x["content"])

    by_id = {x["tool_use_id"]: x for x in ran}
    if all(b.get("id") in by_id for b in tool_uses):
        return ("; ".join(f"{x['name']}({compact_json(x['input'])})" for x in ran) or "-",
                "; ".join(map(result, ran)))
    calls = "; ".join(("" if b.get("id") in by_id else f"[{unrun}] ")
                      + f"{b.get('name')}({compact_json(b.get('input'))})" for b in tool_uses)
    results = "; ".join(result(by_id[b.get("id")]) if b.get("id") in by_id else unrun
                        for b in tool_uses)
    return calls, results


#: How a step table marks a reply that thought before it answered or asked for tools.
THOUGHT_MARK = "[thought]"


def step_row(index: int, reply: Reply, ran: list[dict[str, Any]], tokens_so_far: int,
             cost_so_far_usd: float, *, unrun: str = "awaiting approval",
             request: str | None = None) -> dict[str, Any]:
    """One step as a table row: the one row builder of results and traces.

    Columns: ``step``; ``request`` (only when given: what was sent, e.g. ``"3 msgs, ~536
    tok"``); ``stop_reason``; ``tool calls`` and ``results / answer`` (see
    :func:`call_cells`; a step with no results shows the reply's text, and with
    ``unrun="not run"`` names the calls that did not run); ``in`` / ``out`` (the call's
    reported prompt and output tokens); ``tokens so far`` and ``cost so far USD`` (the run's
    running totals after this step: tokens; USD, four decimals). A reply that thought
    (a ``thinking`` or ``redacted_thinking`` block) has its ``tool calls`` cell start with
    :data:`THOUGHT_MARK`.
    """
    calls, results = call_cells(reply.tool_uses, ran, unrun)
    if not ran:
        results = reply.text or "-"
        if unrun == "not run":
            asked = ", ".join(str(b.get("name")) for b in reply.tool_uses)
            calls = f"not run: {asked}" if asked else "-"
    if any(isinstance(b, dict) and b.get("type") in THINKING_TYPES for b in reply.content):
        calls = f"{THOUGHT_MARK} {calls}"
    row: dict[str, Any] = {"step": index}
    if request is not None:
        row["request"] = request
    row.update({"stop_reason": reply.stop_reason, "tool calls": calls,
                "results / answer": results, "in": reply.usage.prompt_tokens,
                "out": reply.usage.output_tokens, "tokens so far": tokens_so_far,
                "cost so far USD": f"{cost_so_far_usd:.4f}"})
    return row


def format_trace_table(rows: list[dict[str, Any]], width: int = 60) -> str:
    """Rows of equal keys as a fixed-width text table; long cells are cut at ``width``."""
    if not rows:
        return "(no steps)"
    headers = list(rows[0])

    cells = [[one_line(r[h], width) for h in headers] for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    body = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            for r in cells]
    return "\n".join([line.rstrip(), "  ".join("-" * w for w in widths), *body])
