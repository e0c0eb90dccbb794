"""The loop's steps: call the model, run a reply's tools, pause for approval, finish.

:func:`continue_run <primer.loop.loop.continue_run>` strings these together with the
checks of :mod:`primer.loop.checks`. :func:`after_tools` is the one path by which a reply's
calls run and their results join the messages: the loop takes it after every reply, a
resumed run takes it for the calls of the reply it paused on
(:mod:`primer.harness.durable.resume`), and so does the thread that carries a run on after a call
hung (:func:`primer.loop.loop.carry_on`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from types import CoroutineType
from typing import Any

from primer.harness.hooks import after_reply_hooks, after_tool_hooks, before_tool_hooks
from primer.harness.runner import ModelRetriesExhausted, call_model_with_retries, failed_usage
from primer.harness.streaming import MODEL_EVENT_KINDS
from primer.harness.timeouts import inline_calls, raise_if_abandoned, watched

from .checks import AFTER_TOOLS, HANDOFF_TOOL_NAME, first_stop
from .coroutines import run_to_completion
from .cost import cost_usd
from .messages import Block, assistant_message, transcript_content, user_message
from .model import PromptTooLong, Reply, ScriptExhausted, TransientModelError
from .replies import accept_reply
from .result import AgentResult, summarize
from .state import EventSink, RunState, Step, Stop, StopCause
from .text import safe_str
from .tools import ToolExecution, call_needs_approval, execute_tools

# ---------------------------------------------------------------- the model call


def call_model(state: RunState) -> Stop | None:
    """Make one model call (with retries of transient errors); record its reply and step.

    The reply is appended to the messages and its usage to the run's totals, then the
    ``after_reply`` hooks see it. Returns a ``model_error`` stop when the call failed (the
    work so far is kept) or returned something the loop cannot act on, else ``None``.
    :class:`~primer.loop.model.ScriptExhausted` (a bug in a script) propagates.
    """
    assert state.llm is not None, "call_model needs state.llm"
    prompt_estimate = state.prompt_estimate
    failed: list[dict[str, Any]] = []  # transient failures of this call, retried
    raise_if_abandoned()
    start = time.perf_counter()
    try:
        try:  # the first attempt; a transient error goes on to the retries
            raw = ask_model(state)
        except TransientModelError as e:
            c = state.config
            raw = call_model_with_retries(
                lambda: ask_model(state), retries=c.model_retries, policy=c.retry,
                sleep=c.sleep, key=f"model-call-{state.model_calls + 1}", failed=failed,
                first=e)
    except ScriptExhausted:
        raise
    except (Exception, GeneratorExit) as e:  # noqa: BLE001 - a failed call ends the run
        return model_failed(state, e, failed)
    return take_reply(state, raw, prompt_estimate, time.perf_counter() - start, failed)


def ask_model(state: RunState, on_delta: EventSink | None = None) -> Any:
    """One attempt of the model call: ``state.llm`` asked with :func:`model_request`; a
    coroutine it returns (an ``async def`` model) is run to completion. Returns what the
    model returned, not yet checked."""
    llm = state.llm
    assert llm is not None
    if getattr(llm, "stream", False) is True:
        raw = llm(**model_request(state, on_delta))
    else:  # (the common case, without building a dict of the request)
        raw = llm(system=state.system, messages=state.messages, tools=state.tool_defs,
                  max_tokens=state.config.max_tokens)
    if type(raw) is Reply:
        return raw
    return run_to_completion(raw) if isinstance(raw, CoroutineType) else raw


def model_request(state: RunState, on_delta: EventSink | None = None) -> dict[str, Any]:
    """The keyword arguments of one model call: the run's ``system``, ``messages``,
    ``tools`` and ``max_tokens``, and for a streaming model (one whose ``stream`` attribute
    is ``True``) ``on_delta``, where its deltas go tagged with the step (default: the run's
    ``on_delta``; see :func:`delta_sink`)."""
    request = {"system": state.system, "messages": state.messages, "tools": state.tool_defs,
               "max_tokens": state.config.max_tokens}
    if getattr(state.llm, "stream", False) is True:
        request["on_delta"] = delta_sink(state, on_delta or state.on_delta)
    return request


def delta_sink(state: RunState, sink: EventSink | None) -> EventSink | None:
    """``sink`` with each delta's data tagged ``step`` (the call being made), or ``None``.
    Only the kinds of :data:`~primer.harness.streaming.MODEL_EVENT_KINDS` with a dict of
    data pass; anything else the model sends is dropped (it cannot forge loop events)."""
    if sink is None:
        return None
    step = state.model_calls + 1

    def on_delta(kind: str, data: dict[str, Any]) -> None:
        if type(kind) is str and kind in MODEL_EVENT_KINDS and type(data) is dict:
            sink(kind, {**data, "step": step})

    return on_delta


def model_failed(state: RunState, error: BaseException, failed: list[dict[str, Any]]) -> Stop:
    """The ``model_error`` stop for a call that raised ``error`` (after ``failed``, its
    retried attempts, whose usage is counted); ``context_window`` for
    :class:`~primer.loop.model.PromptTooLong`."""
    _count_failed_attempts(state, failed)
    if isinstance(error, PromptTooLong):  # the request did not fit: the window's stop
        return Stop(StopCause.CONTEXT_WINDOW, f"the API refused model call "
                                              f"{state.model_calls + 1}: {safe_str(error)}")
    what = (safe_str(error) if isinstance(error, ModelRetriesExhausted)
            else f"{type(error).__name__}: {safe_str(error)}")
    return Stop(StopCause.MODEL_ERROR, f"model call {state.model_calls + 1} failed: {what}")


def take_reply(state: RunState, raw: Any, prompt_estimate: int, latency_s: float,
               failed: list[dict[str, Any]]) -> Stop | None:
    """The end of a model call that returned ``raw``: count ``failed`` attempts, accept the
    reply (:func:`accept_reply`) and record it (:func:`record_reply`); a ``model_error``
    stop when it cannot be acted on, else ``None``."""
    if failed:
        _count_failed_attempts(state, failed)
    n = len(state.steps) + 1
    reply = accept_reply(raw, n, state.tool_use_ids)
    if isinstance(reply, str):
        return Stop(StopCause.MODEL_ERROR,
                    f"model call {n} returned {reply}; nothing in it was acted on")
    record_reply(state, reply, prompt_estimate, latency_s, failed)
    return None


def record_reply(state: RunState, reply: Reply, prompt_estimate: int, latency_s: float,
                 failed: list[dict[str, Any]]) -> None:
    """Add an accepted reply to the run: its usage (tokens; USD at its model's prices, see
    :meth:`~primer.loop.config.AgentConfig.prices_for`), its
    :class:`Step`, the assistant message, a ``model_call`` event, the ``after_reply`` hooks.
    The tool-call limits apply first (:func:`limit_calls`).
    ``prompt_estimate`` is the estimate of the prompt it answered (tokens), ``latency_s``
    the call's wall seconds, ``failed`` its retried attempts."""
    n = len(state.steps) + 1
    uses = reply.tool_uses  # (one call never passes a per-reply limit, which is >= 1)
    if uses and (len(uses) > 1 or state.config.max_tool_calls_per_run is not None):
        limit_calls(state, reply)
    c = state.config
    state.add_usage(reply.usage, cost_usd(reply.usage, c.prices_for(reply.model))
                    if c.model_prices else None)
    state.steps.append(Step(n, reply, reply.usage, state.usage, state.cost_usd,
                            prompt_estimate, latency_s, [], failed))
    state.append(assistant_message(reply.content or transcript_content(reply.content)))
    if state.on_event is not None:  # (the event's dicts are built only for a listener)
        state.on_event("model_call", {"step": n, "prompt_estimate": prompt_estimate,
                                      "reply": reply.to_dict(), "latency_s": latency_s})
    if state.hooks:
        for hook, error in after_reply_hooks(state.hooks, reply):
            state.emit("hook_error", step=n, hook=hook, point="after_reply", error=error)


def limit_calls(state: RunState, reply: Reply) -> None:
    """Apply ``max_tool_calls_per_reply`` and ``max_tool_calls_per_run`` to a new reply.

    A reply asking for more calls than either allows runs none of them: each call is refused
    (``Reply.refused``, error kind ``too_many_calls``) and answered with an error result
    saying the limit, so the model can ask for fewer or answer with what it has, and the
    run's exits still end a model that keeps asking. While the per-run limit is on, the
    calls let through are counted in ``state.tool_calls``.
    """
    c = state.config
    asked = len(reply.tool_uses) - len(reply.refused or ())
    if c.max_tool_calls_per_reply is not None and asked > c.max_tool_calls_per_reply:
        why = (f"this reply asked for {asked} tool calls and at most "
               f"{c.max_tool_calls_per_reply} may run per reply, so none of them ran; ask "
               f"again for at most {c.max_tool_calls_per_reply} at a time")
    elif c.max_tool_calls_per_run is not None and \
            state.tool_calls + asked > c.max_tool_calls_per_run:
        why = (f"the run may make {c.max_tool_calls_per_run} tool calls in all and has made "
               f"{state.tool_calls}, so none of this reply's {asked} ran; answer with what "
               f"you have")
    else:
        if c.max_tool_calls_per_run is not None:
            state.tool_calls += asked
        return
    reply.refused = {**(reply.refused or {}), **{
        b["id"]: {"error_kind": "too_many_calls", "problem": why}
        for b in reply.tool_uses if not (reply.refused and b["id"] in reply.refused)}}


def _count_failed_attempts(state: RunState, failed: list[dict[str, Any]]) -> None:
    """Add the reported usage of failed model attempts to the run's totals; emit each retry."""
    if failed:
        state.add_usage(failed_usage(failed))
        for record in failed:
            state.emit("model_retry", step=state.model_calls + 1, **record)


# ---------------------------------------------------------------- the tools


def after_tools(state: RunState, calls: list[Block],
                settled: dict[str, ToolExecution] | None = None) -> Stop | None:
    """Run the last reply's ``calls``, record every result in one user message, check.

    The one after-tools path of the loop, of resume and of a run carried on after a hung
    call. Calls whose result is already on the step (run at a pause) or in ``settled``
    (decided without running now: a rejection, an outcome recorded before a crash, a
    timeout) are not run, nor are calls refused where the reply entered the loop
    (:func:`refusals`); the rest run concurrently (:func:`run_calls`). All results go
    into one user message in request order, the new ones are counted (usage of models
    inside tools, the no-progress window, ``tool_execution`` events) and recorded, then the
    :data:`~primer.loop.checks.AFTER_TOOLS` checks run; returns the first that fires. A
    reply without calls (``pause_turn``) adds nothing. (The async loop runs the calls its
    own way and records them through the same :func:`calls_to_run` and :func:`add_results`.)
    """
    if not calls:
        return None
    todo = calls_to_run(state, calls, settled)
    return add_results(state, calls, run_calls(state, todo, reply_calls=calls, settled=settled),
                       settled)


def calls_to_run(state: RunState, calls: list[Block],
                 settled: dict[str, ToolExecution] | None = None) -> list[Block]:
    """The calls of ``calls`` that still need to run: those with no result on the last step
    (run at a pause), none in ``settled`` and not refused where the reply entered the loop
    (``calls`` itself in the common case)."""
    step = state.steps[-1]
    if not step.executions and not settled and not step.reply.refused:
        return calls
    known = {e.tool_use_id for e in step.executions} | set(settled or ()) \
        | set(step.reply.refused or ())
    return [b for b in calls if b["id"] not in known]


def add_results(state: RunState, calls: list[Block], ran: list[ToolExecution],
                settled: dict[str, ToolExecution] | None = None) -> Stop | None:
    """Record the results of a reply's ``calls``: those that just ``ran`` (the calls of
    :func:`calls_to_run`, in order), those in ``settled`` and those already on the step, in
    request order in one user message; count the new ones; then the
    :data:`~primer.loop.checks.AFTER_TOOLS` checks (the first that fires, or ``None``)."""
    step = state.steps[-1]
    if not step.executions and not settled and not step.reply.refused:  # the common case
        executions = new = ran  # (every call ran now)
    else:
        earlier = {e.tool_use_id: e for e in step.executions}
        known = {**(settled or {}), **refusals(state, calls), **earlier}
        known.update((e.tool_use_id, e) for e in ran)
        executions = [known[b["id"]] for b in calls]
        new = [e for e in executions if e.tool_use_id not in earlier]
    step.executions = executions
    account_executions(state, new)
    state.append(user_message(list(map(ToolExecution.result_block, executions))))
    if state.recorder is not None:
        state.recorder.results_added(state)
    return first_stop(AFTER_TOOLS, state)


def run_calls(state: RunState, calls: list[Block], *, reply_calls: list[Block] | None = None,
              settled: dict[str, ToolExecution] | None = None,
              record_all: bool = False) -> list[ToolExecution]:
    """Run ``calls`` through :func:`run_call`; results in request order.

    Several calls run concurrently on a pool sized to them (under ``max_parallel_tools``).
    A single call runs in this thread; given ``reply_calls`` (all the reply's calls, with
    those already ``settled``: what to carry the run on with if the call hangs, see
    :func:`primer.loop.loop.carry_on`) and on a watched loop thread, a timed call
    runs inline too. ``record_all`` records every call's result in the journal, not only the
    side-effecting ones' (a pause does, so a resume never re-runs them).
    """
    if len(calls) == 1:
        if reply_calls is None or not watched():
            return [run_call(state, calls[0], record_all)]
        with inline_calls((reply_calls, settled or {})):
            return [run_call(state, calls[0], record_all)]
    return execute_tools(state.registry, calls, max_workers=state.config.max_parallel_tools,
                         run=lambda b: run_call(state, b, record_all))


def run_call(state: RunState, block: Block, record: bool = False) -> ToolExecution:
    """One call: ``before_tool`` hooks, the runner (timeouts, retries), ``after_tool`` hooks.

    With a recorder, a side-effecting call is recorded as started (with its idempotency key)
    before it runs and done after; ``record`` records the result of any call. A call that
    has not started when the run's cancel signal is set does not run: it gets a ``not_run``
    result (:func:`cancelled_call`).
    """
    assert state.runner is not None
    if state.cancel is not None and state.cancel.is_set():
        return cancelled_call(state, block)
    if not state.hooks and state.recorder is None:
        return state.runner(block)  # nothing to wrap the call in
    call, refused, durable = start_call(state, block)
    if refused is not None:
        return refused
    return finish_call(state, call, state.runner(call), record or durable)


def start_call(state: RunState, block: Block) -> tuple[Block, ToolExecution | None, bool]:
    """The start of :func:`run_call` (and of the async loop's call): the ``before_tool``
    hooks, then, for a side-effecting call with a recorder, its ``started`` record.

    Returns ``(the call as the hooks left it, the result of a hook that refused it or None,
    whether its result must be recorded)``.
    """
    call = block
    if state.hooks:
        call, refused = before_tool_hooks(state.hooks, block, state.registry)
        if refused is not None:
            return call, refused, False
    tool = state.registry.get(call.get("name"))
    side_effect = tool is not None and tool.side_effecting and state.recorder is not None
    if side_effect:
        state.recorder.call_started(state, call)  # type: ignore[union-attr]
    return call, None, side_effect


def cancelled_call(state: RunState, block: Block) -> ToolExecution:
    """The ``not_run`` result of a call that had not started when the run was cancelled."""
    return not_run(block, Stop(StopCause.CANCELLED, "the cancel signal was set before this "
                                                    "call started"))


def finish_call(state: RunState, call: Block, execution: ToolExecution,
                record: bool) -> ToolExecution:
    """The end of :func:`run_call`: ``after_tool`` hooks, then (``record``) the result made
    durable. Also how a call answered by the watchdog ends."""
    if state.hooks:
        execution = after_tool_hooks(state.hooks, call, execution)
    if record and state.recorder is not None:
        state.recorder.call_done(state, execution)
    return execution


def account_executions(state: RunState, executions: Iterable[ToolExecution]) -> None:
    """Count calls that just ran: usage of models inside them, the error window, and one
    ``tool_execution`` event each for the trace (exactly once per call that ran). A call
    that did not run (``not_run``: the run was cancelled before it started) is no evidence
    of progress or of its lack: it stays out of the error window."""
    index = state.steps[-1].index
    for e in executions:
        if e.usage is not None:  # models that ran inside the tool (a sub-agent)
            state.add_usage(e.usage, e.cost_usd)
        if e.error_kind != "not_run":
            state.recent_errors.append(e.is_error)
        if state.on_event is not None:  # (a dict: unpacking one into keywords costs more)
            state.on_event("tool_execution", {"step": index, **e.to_dict()})


# ---------------------------------------------------------------- pausing and finishing


def pause(state: RunState, stop: Stop) -> AgentResult:
    """The approval gate fired on the last reply: record the pause, run its calls that need
    no approval (once; their results are kept for the resumed run), finish.

    Without a recorder nothing in the reply runs: every call stays pending. Calls refused
    where the reply entered the loop get their error results either way (they never run).
    """
    return finish_pause(state, stop, run_calls(state, start_pause(state), record_all=True))


def start_pause(state: RunState) -> list[Block]:
    """Record the pause on the last reply (with a recorder) and return its calls that need
    no approval and were not refused, to run now; ``[]`` without a recorder (nothing in the
    reply runs)."""
    if state.recorder is None:
        return []
    reply = state.last_reply
    state.recorder.paused(state, reply.tool_uses)
    return [b for b in reply.tool_uses if not (reply.refused and b["id"] in reply.refused)
            and not call_needs_approval(state.registry, b, reply.refused)]


def finish_pause(state: RunState, stop: Stop, ran: list[ToolExecution]) -> AgentResult:
    """The end of a pause: the error results of the reply's refused calls (they never run,
    so nothing waits for them) and the calls that ``ran`` (of :func:`start_pause`) join the
    step and are counted, then the run finishes, its other calls pending."""
    answered = list(refusals(state, state.last_reply.tool_uses).values()) + ran
    if answered:
        state.steps[-1].executions.extend(answered)
        account_executions(state, answered)
    return finish(state, stop, state.last_reply)


def refusals(state: RunState, calls: list[Block]) -> dict[str, ToolExecution]:
    """The error results of the ``calls`` the last reply's ``refused`` names (broken input,
    too many calls: see :func:`~primer.loop.replies.accept_reply` and
    :func:`limit_calls`), by ``tool_use`` id. They never run."""
    refused = state.steps[-1].reply.refused
    if not refused:
        return {}
    return {b["id"]: state.registry.refuse(b, refused[b["id"]]) for b in calls
            if b["id"] in refused}


def finish(state: RunState, stop: Stop, reply: Reply | None = None,
           pending: list[Block] | None = None) -> AgentResult:
    """End the run with ``stop``: answer the reply's unrun calls, summarise, record, report.

    On a pause the calls without a result stay unanswered (``pending``, unless given); on any
    other stop each call of ``reply`` gets a ``not_run`` result, so every ``tool_use`` in the
    messages has its ``tool_result``. ``final_text`` is the reply's text only on ``end_turn``.
    """
    if reply is not None and reply.tool_uses:
        if stop.cause is StopCause.AWAITING_APPROVAL:
            answered = {e.tool_use_id for e in state.steps[-1].executions}
            if pending is None:
                pending = [b for b in reply.tool_uses if b["id"] not in answered]
        else:
            unrun = [not_run(b, stop) for b in reply.tool_uses]
            state.steps[-1].executions.extend(unrun)
            state.append(user_message([e.result_block() for e in unrun]))
    final = reply.text if stop.cause is StopCause.END_TURN and reply is not None else None
    summary = summarize(state.steps, stop)
    path = (state.recorder.stopped(state, stop, summary, final)
            if state.recorder is not None else None)
    result = AgentResult(final, stop.cause, state.steps, state.usage, state.cost_usd,
                         state.messages, summary, stop.detail, pending or [], path,
                         state.output)
    state.emit("stop", cause=stop.cause.value, detail=stop.detail, summary=summary,
               usage=state.usage.to_dict(), cost_usd=state.cost_usd, steps=state.model_calls)
    return result


def not_run(block: Block, stop: Stop) -> ToolExecution:
    """The error result for a call the run stopped before running (error_kind "not_run")."""
    if stop.cause is StopCause.HANDOFF and block.get("name") == HANDOFF_TOOL_NAME:
        text = "Handed off to a person; the run has ended."
    else:
        text = f"Not run: the run stopped ({stop.cause.value}: {stop.detail})."
    return ToolExecution(str(block.get("id")), str(block.get("name")), block.get("input"),
                         text, True, "not_run")
