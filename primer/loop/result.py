"""How a run ends and what it returns: ``AgentResult``, its summary, its table of steps.

:func:`finish` ends every run (a pause through :func:`start_pause` and :func:`finish_pause`).
:func:`step_row` builds the rows of a run's table (:meth:`AgentResult.rows`) and of a trace
read back (:meth:`primer.harness.tracing.trace.Trace.rows`), so both have the same columns.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .messages import THINKING_TYPES, Message, ToolUseBlock, user_message
from .model import Reply, Usage
from .state import HANDOFF_TOOL_NAME, RunState, Step, Stop, StopCause
from .text import compact_json, one_line
from .tools import ToolExecution

if TYPE_CHECKING:
    import pydantic


@dataclass
class AgentResult:
    """The outcome of a run.

    ``final_text`` is the answer only on ``end_turn`` (``None`` on any other stop: a limit is
    never passed off as an answer), or at a limit a wrap-up's best-effort answer, marked by
    ``wrapped_up``. ``stop_cause`` names the exit, ``stop_detail`` what
    fired, ``summary`` what the run finished and why it stopped. ``usage`` and ``cost_usd``
    are totals (tokens; USD). In ``messages`` every ``tool_use`` has one ``tool_result``, except
    on ``awaiting_approval``: ``pending`` holds the waiting calls. ``checkpoint``: the journal's
    path, or ``None``; ``output``: the validated ``output_model`` instance, if one was asked.
    ``partial_text``: on ``cancelled`` during a streaming call, the text it had shown (kept
    for the person who saw it; not an answer, not in ``messages``), else ``None``.
    ``wrapped_up``: ``final_text`` is a wrap-up's best-effort answer, given at a limit with
    tools off (``AgentConfig.wrap_up``), not a finished one; the stop cause is the limit's.
    """

    final_text: str | None
    stop_cause: StopCause
    steps: list[Step]
    usage: Usage
    cost_usd: float
    messages: list[Message]
    summary: str
    stop_detail: str = ""
    pending: list[ToolUseBlock] = field(default_factory=list)
    checkpoint: str | None = None
    output: pydantic.BaseModel | None = None
    partial_text: str | None = None
    wrapped_up: bool = False

    @property
    def stop_details(self) -> dict[str, Any] | None:
        """What the provider said about the last reply's stop, or ``None``: on a ``refusal``,
        Claude's ``{"type": "refusal", "category": ..., "explanation": ...}`` (the category
        is also in ``stop_detail`` and ``summary``)."""
        return self.steps[-1].reply.stop_details if self.steps else None

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
                "pending": self.pending, "checkpoint": self.checkpoint,
                **({"partial_text": self.partial_text} if self.partial_text is not None else {}),
                **({"wrapped_up": True} if self.wrapped_up else {})}


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


def summarize(steps: list[Step], stop: Stop, wrap_up: WrapUp | None = None) -> str:
    """Why the run stopped and which tool calls succeeded or not, in one or two sentences:
    "Stopped at the step limit after 4 model calls. Tool calls succeeded: none; failed:
    get_order ×4.", for example. With a ``wrap_up``, a last sentence on it (its call is not
    counted among the model calls before the stop)."""
    ok: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    not_run: Counter[str] = Counter()
    cancelled: Counter[str] = Counter()
    for s in steps:
        for e in s.executions:
            (not_run if e.error_kind == "not_run" else cancelled if e.error_kind == "cancelled"
             else failed if e.is_error else ok)[e.name] += 1
    made = len(steps) - (wrap_up is not None and wrap_up.called)
    calls = f"{made} model call{'' if made == 1 else 's'}"
    head = _HEADLINES[stop.cause].format(detail=stop.detail, steps=calls)

    def names(c: Counter[str]) -> str:
        return ", ".join(f"{n} ×{k}" if k > 1 else n for n, k in c.items()) or "none"

    parts = [f"Tool calls succeeded: {names(ok)}"]
    if failed:
        parts.append(f"failed: {names(failed)}")
    if not_run:
        parts.append(f"not run: {names(not_run)}")
    if cancelled:
        parts.append(f"cancelled while running: {names(cancelled)}")
    wrap = f" {wrap_up.detail}." if wrap_up is not None else ""
    return f"{head.rstrip('.')}. {'; '.join(parts)}.{wrap}"


# ---------------------------------------------------------------- tables


def call_cells(tool_uses: list[ToolUseBlock], ran: list[dict[str, Any]],
               unrun: str = "awaiting approval") -> tuple[str, str]:
    """The "tool calls" and "results / answer" cells of one row (see :func:`step_row`).
    ``ran`` are the results of the reply's ``tool_uses`` as dicts (a :class:`ToolExecution`'s
    ``to_dict()``, or a trace's ``tool_execution`` event). A call with no result (only a
    pause leaves one) shows as ``[unrun] name(input)``, mark first so a cut cell still shows
    it, with ``unrun`` as its result."""
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

    Columns: ``step``; ``request`` (if given: what was sent, e.g. ``"3 msgs, ~536 tok"``);
    ``stop_reason``; ``tool calls`` and ``results / answer`` (:func:`call_cells`; with no
    results, the reply's text, and with ``unrun="not run"`` the calls that did not run);
    ``in`` / ``out`` (the call's reported prompt and output tokens); ``tokens so far`` and
    ``cost so far USD`` (running totals: tokens; USD, four decimals). A reply that thought
    starts its ``tool calls`` cell with :data:`THOUGHT_MARK`.
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


# ---------------------------------------------------------------- results of calls


def account_executions(state: RunState, executions: Iterable[ToolExecution]) -> None:
    """Count calls that just ran: usage of models inside them, the error window, and one
    ``tool_execution`` event each (exactly once per call). A ``not_run`` or ``cancelled``
    call is no evidence of progress or of its lack: it stays out of the error window."""
    index, on_event = state.steps[-1].index, state.inputs.on_event
    for e in executions:
        if e.usage is not None:  # models that ran inside the tool (a sub-agent)
            state.add_usage(e.usage, e.cost_usd)
        if e.error_kind != "not_run" and e.error_kind != "cancelled":
            state.recent_errors.append(e.is_error)
        if on_event is not None:  # (a dict: unpacking one into keywords costs more)
            on_event("tool_execution", {"step": index, **e.to_dict()})


def refusals(state: RunState, calls: list[ToolUseBlock]) -> dict[str, ToolExecution]:
    """The error results of the ``calls`` the last step refused (broken input, too many
    calls), by ``tool_use`` id. They never run."""
    refused = state.steps[-1].refused
    if not refused:
        return {}
    return {b["id"]: state.inputs.registry.refuse(b, refused[b["id"]]) for b in calls
            if b["id"] in refused}


def cancelled_call(state: RunState, block: ToolUseBlock) -> ToolExecution:
    """The ``not_run`` result of a call that had not started when the run was cancelled."""
    return not_run(block, Stop(StopCause.CANCELLED, "the cancel signal was set before this "
                                                    "call started"))


def cancelled_while_running(state: RunState, block: ToolUseBlock, *,
                            stopped: bool) -> ToolExecution:
    """The ``cancelled`` result of a call that was running when the run was cancelled:
    ``stopped`` when it ended (with an error) once the signal was set, else abandoned (it
    may still finish). Either way its outcome is unknown: for a side-effecting tool the
    result says to check the state before calling it again (a resume never runs it again)."""
    name = str(block.get("name"))
    how = ("it was stopped before it finished" if stopped
           else "it was abandoned, not stopped, so it may still finish")
    tool = state.inputs.registry.get(name)
    check = (f" {name} changes state: check the current state before calling it again."
             if tool is not None and tool.side_effecting else "")
    return ToolExecution(str(block.get("id")), name, block.get("input"),
                         f"Cancelled: the run was cancelled while {name} ran; {how}. Its "
                         f"outcome is unknown.{check}", True, "cancelled")


# ---------------------------------------------------------------- pausing and finishing


def start_pause(state: RunState) -> list[ToolUseBlock]:
    """The approval gate fired on the last reply: record the pause (with a recorder) and
    return its calls that need no approval and were not refused, to run now (once; their
    results are kept for the resumed run). Without a recorder nothing in the reply runs."""
    recorder = state.inputs.recorder
    if recorder is None:
        return []
    step = state.steps[-1]
    recorder.paused(state, step.reply.tool_uses)
    return [b for b in step.reply.tool_uses if not (step.refused and b["id"] in step.refused)
            and step.approval_reason(state.inputs.registry, b) is None]


def finish_pause(state: RunState, stop: Stop, ran: list[ToolExecution]) -> AgentResult:
    """End a pause: the refused calls' error results and the calls that ``ran``
    (:func:`start_pause`) join the step and are counted; the run finishes, the rest pending."""
    answered = list(refusals(state, state.last_reply.tool_uses).values()) + ran
    if answered:
        state.steps[-1].executions.extend(answered)
        account_executions(state, answered)
    return finish(state, stop, state.last_reply)


def finish(state: RunState, stop: Stop, reply: Reply | None = None,
           pending: list[ToolUseBlock] | None = None,
           wrap_up: WrapUp | None = None) -> AgentResult:
    """End the run with ``stop``: answer the reply's unrun calls, summarise, record, report.
    On a pause the calls without a result stay ``pending`` (unless given); on any other stop
    each call of ``reply`` gets a ``not_run`` result, so every ``tool_use`` is answered.
    ``wrap_up``: what a wrap-up at a limit came to (its text becomes ``final_text``)."""
    if reply is not None and reply.tool_uses:
        if stop.cause is StopCause.AWAITING_APPROVAL:
            answered = {e.tool_use_id for e in state.steps[-1].executions}
            if pending is None:
                pending = [b for b in reply.tool_uses if b["id"] not in answered]
        else:
            answer_unrun(state, stop, reply)
    final = reply.text if stop.cause is StopCause.END_TURN and reply is not None else None
    if wrap_up is not None:
        final = wrap_up.text
    summary = summarize(state.steps, stop, wrap_up)
    recorder = state.inputs.recorder
    path = recorder.stopped(state, stop, summary, final) if recorder is not None else None
    result = AgentResult(final, stop.cause, state.steps, state.usage, state.cost_usd,
                         state.messages, summary, stop.detail, pending or [], path,
                         state.output, state.partial_text)
    result.wrapped_up = final is not None and wrap_up is not None
    state.emit("stop", cause=stop.cause.value, detail=stop.detail, summary=summary,
               usage=state.usage.to_dict(), cost_usd=state.cost_usd, steps=state.model_calls,
               **({"wrapped_up": True} if result.wrapped_up else {}))
    return result


@dataclass(frozen=True)
class WrapUp:
    """What the wrap-up at a limit came to (:func:`~primer.loop.steps.wrap_up`): ``text``,
    its best-effort answer or ``None``; ``called``, whether its model call was made and
    recorded (the run's last step); ``detail``, the summary's sentence about it."""

    text: str | None
    called: bool
    detail: str


def answer_unrun(state: RunState, stop: Stop, reply: Reply | None) -> None:
    """Give each call of ``reply`` (the last step's) a ``not_run`` result, in one user
    message, so every ``tool_use`` is answered; nothing when it asked for none."""
    if reply is not None and reply.tool_uses:
        unrun = [not_run(b, stop) for b in reply.tool_uses]
        state.steps[-1].executions.extend(unrun)
        state.append(user_message([e.result_block() for e in unrun]))


def not_run(block: ToolUseBlock, stop: Stop) -> ToolExecution:
    """The error result for a call the run stopped before running (error_kind "not_run")."""
    if stop.cause is StopCause.HANDOFF and block.get("name") == HANDOFF_TOOL_NAME:
        text = "Handed off to a person; the run has ended."
    else:
        text = f"Not run: the run stopped ({stop.cause.value}: {stop.detail})."
    return ToolExecution(str(block.get("id")), str(block.get("name")), block.get("input"),
                         text, True, "not_run")

