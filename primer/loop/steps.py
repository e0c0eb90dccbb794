"""The loop's steps: call the model, take its reply, run a reply's tools, record the results.

The steps that wait on the world do not wait themselves: they ``yield`` a :class:`ModelCall`,
a :class:`ToolCalls` or (between retries) a :class:`Sleep` to the loop's driver and get back
what it returned. The sync driver (:func:`~primer.loop.loop.drive`) does that on the caller's
thread, the async one (:mod:`primer.harness.async_loop`) awaits it, so the control flow, the
model-call retry included, is written once for both. :func:`add_results` is the one path by
which a reply's results join the messages (after every reply, and in a resumed run).
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, cast

from .checks import AFTER_TOOLS, first_stop, wrap_up_room
from .config import seconds_asked
from .messages import (
    Block,
    Message,
    ToolUseBlock,
    assistant_message,
    blocks_of,
    text_block,
    transcript_content,
    user_message,
)
from .model import (
    MODEL_EVENT_KINDS,
    CallCancelled,
    EventSink,
    ModelRetriesExhausted,
    PromptTooLong,
    Reply,
    ScriptExhausted,
    TransientModelError,
    Usage,
    cost_usd,
    estimate_tokens,
)
from .replies import accept_reply
from .result import (
    AgentResult,
    WrapUp,
    account_executions,
    answer_unrun,
    cancelled_call,
    cancelled_while_running,
    finish,
    refusals,
)
from .state import CallRunner, CancelSignal, RunState, Step, Stop, StopCause
from .text import safe_str
from .tools import ToolExecution, ToolRegistry

# ---------------------------------------------------------------- what the loop waits for


@dataclass(slots=True)
class ModelCall:
    """Call the run's model with ``request`` (its keyword arguments); send back the reply,
    or :class:`Raised` with what the call raised."""

    request: dict[str, Any]


@dataclass(slots=True)
class ToolCalls:
    """Run ``calls`` (each through :func:`run_call`, concurrently); send back their
    executions in the same order. ``record_all``: record every result durably."""

    calls: list[ToolUseBlock]
    record_all: bool = False


@dataclass(slots=True)
class Sleep:
    """Wait ``seconds`` before the next attempt of a model call; send back ``None``."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Raised:
    """What a model call raised, handed back to the loop as a value."""

    error: BaseException


Wait = ModelCall | ToolCalls | Sleep
#: What a step that waits returns to the loop: a generator of :data:`Wait`.
Waits = Generator[Wait, Any, "Stop | None"]


# ---------------------------------------------------------------- the model call


def call_model(state: RunState, tools_off: bool = False) -> Waits:
    """One model call, with retries of a transient error; the reply accepted and recorded
    (``tools_off``: the wrap-up's request, :func:`model_request`).
    A :class:`~primer.loop.model.TransientModelError` is retried up to ``config.model_retries``
    times after :meth:`~primer.loop.config.RetryPolicy.delay_at` seconds (a :class:`Sleep`),
    counting the usage failed attempts reported; no tool runs again. Returns a ``model_error``
    stop when the call failed for good or returned something unusable, else ``None``.
    :class:`~primer.loop.model.ScriptExhausted` (a bug in a script) propagates."""
    prompt_estimate, start = state.prompt_estimate, time.perf_counter()
    failed: list[dict[str, Any]] = []
    while True:
        answer = yield ModelCall(model_request(state, tools_off=tools_off))
        if not isinstance(answer, Raised):
            return take_reply(state, answer, prompt_estimate, time.perf_counter() - start,
                              failed)
        error = answer.error
        if isinstance(error, ScriptExhausted):
            raise error
        if isinstance(error, CallCancelled):
            return stream_cancelled(state, error, failed)
        if not isinstance(error, TransientModelError):
            return model_failed(state, error, failed)
        delay = retry_delay(state, error, failed)
        if delay is None:
            return model_failed(state, ModelRetriesExhausted(failed), failed)
        yield Sleep(delay)


def retry_delay(state: RunState, error: TransientModelError,
                failed: list[dict[str, Any]]) -> float | None:
    """Record a failed attempt in ``failed`` (``{"attempt", "error", "retry_after_s",
    "delay_s", "usage"}``, and ``"gave_up"`` saying why when a wait is not worth it); the
    seconds to wait before the next, or ``None`` when the run's ``model_retries`` are used up
    or the wait would be too long (:meth:`~primer.loop.config.RetryPolicy.why_not_wait`)."""
    usage = Usage(**Usage.to_dict(error.usage)) if isinstance(error.usage, Usage) else None
    if usage is not None and usage.problem() is None:
        state.add_usage(usage)  # counted now: a run interrupted in the backoff still has it
    else:
        usage = None  # (a broken figure is not counted)
    record: dict[str, Any] = {"attempt": len(failed) + 1,
                              "error": f"{type(error).__name__}: {safe_str(error)}",
                              "retry_after_s": seconds_asked(error.retry_after_s),
                              "delay_s": None, "usage": usage.to_dict() if usage else None}
    failed.append(record)
    c = state.config
    if len(failed) > c.model_retries:
        return None
    delay = c.retry.delay_at(len(failed), f"model-call-{state.model_calls + 1}",
                             error.retry_after_s)
    time_left = None if c.wall_clock_s is None \
        else c.wall_clock_s - (c.clock() - state.started_at)
    why = c.retry.why_not_wait(delay, time_left)
    if why:
        record["gave_up"] = why
        return None
    record["delay_s"] = delay
    return delay


def model_request(state: RunState, on_delta: EventSink | None = None, *,
                  tools_off: bool = False) -> dict[str, Any]:
    """The keyword arguments of one model call: ``system``, ``messages``, ``tools`` and
    ``max_tokens``, and for a streaming model (its ``stream`` attribute is ``True``)
    ``on_delta``, where its deltas go tagged with the step (see :func:`delta_sink`).
    ``tools_off`` (the wrap-up): ``max_tokens`` is ``wrap_up_max_tokens`` and no tool is
    offered (``tools=[]``); a model whose ``takes_tool_choice`` attribute is ``True`` keeps
    the definitions, which the Messages API wants beside ``tool_use`` blocks, and gets
    ``tool_choice={"type": "none"}``."""
    inputs = state.inputs
    request = {"system": inputs.system, "messages": state.messages, "tools": inputs.tool_defs,
               "max_tokens": state.config.max_tokens}
    if tools_off:
        request["max_tokens"] = state.config.wrap_up_max_tokens
        if getattr(inputs.llm, "takes_tool_choice", False) is True:
            request["tool_choice"] = {"type": "none"}
        else:
            request["tools"] = []
    if getattr(inputs.llm, "stream", False) is True:
        request["on_delta"] = delta_sink(state, on_delta or inputs.on_delta)
    return request


def delta_sink(state: RunState, sink: EventSink | None) -> EventSink | None:
    """A :class:`StreamWatch` passing each delta on to ``sink`` tagged ``step`` (the call
    being made) and watching the run's cancel signal; ``None`` when there is neither a
    listener nor a cancel signal."""
    if sink is None and state.inputs.cancel is None:
        return None
    return StreamWatch(sink, state.model_calls + 1, state.inputs.cancel)


class StreamWatch:
    """The ``on_delta`` of a streaming call: each delta goes on to ``sink`` tagged with
    ``step``; only the kinds of :data:`~primer.loop.model.MODEL_EVENT_KINDS` with a dict of
    data pass (a model cannot forge the loop's own events). The text it shows is kept
    (:attr:`shown`), and once ``cancel`` is set the next delta raises
    :class:`~primer.loop.model.CallCancelled` inside the model, which ends its stream there:
    the call is closed at its next delta, and the run keeps what had been shown."""

    def __init__(self, sink: EventSink | None, step: int, cancel: CancelSignal | None) -> None:
        self.sink, self.step, self.cancel = sink, step, cancel
        self.parts: list[str] = []

    @property
    def shown(self) -> str:
        """The text the call's ``text_delta`` s have shown so far."""
        return "".join(self.parts)

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        self.check()
        self.show(kind, data)
        self.check()  # (the listener itself may have pressed stop)

    def check(self) -> None:
        """Raise :class:`~primer.loop.model.CallCancelled` once the run is cancelled."""
        if self.cancel is not None and self.cancel.is_set():
            raise CallCancelled(self.shown)

    def show(self, kind: str, data: dict[str, Any]) -> None:
        """Pass one delta on and keep its text; never raises for the cancel."""
        if type(kind) is str and kind in MODEL_EVENT_KINDS and type(data) is dict:
            if kind == "text_delta" and type(data.get("text")) is str:
                self.parts.append(data["text"])
            elif kind == "model_fallback":
                self.parts.clear()  # a display drops what the failed model had shown
            if self.sink is not None:
                self.sink(kind, {**data, "step": self.step})


def stream_cancelled(state: RunState, error: CallCancelled,
                     failed: list[dict[str, Any]]) -> Stop:
    """The ``cancelled`` stop for a streaming call the cancel closed (:class:`StreamWatch`):
    the text it had shown is kept in ``state.partial_text`` (``AgentResult.partial_text``;
    never an answer, never sent back to the model)."""
    _count_failed_attempts(state, failed)
    state.partial_text = error.shown
    return Stop(StopCause.CANCELLED,
                f"the run was cancelled during model call {state.model_calls + 1}; its stream "
                f"was closed after {len(error.shown):,} characters of text, kept in "
                f"partial_text")


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


def take_reply(state: RunState, raw: object, prompt_estimate: int, latency_s: float,
               failed: list[dict[str, Any]]) -> Stop | None:
    """The end of a model call that returned ``raw``: count ``failed`` attempts, accept the
    reply (:func:`~primer.loop.replies.accept_reply`) and record it (:func:`record_reply`);
    a ``model_error`` stop when it cannot be acted on, else ``None``."""
    if failed:
        _count_failed_attempts(state, failed)
    n = len(state.steps) + 1
    accepted = accept_reply(raw, n, state.tool_use_ids, state.inputs.block_check)
    if isinstance(accepted, str):
        return Stop(StopCause.MODEL_ERROR,
                    f"model call {n} returned {accepted}; nothing in it was acted on")
    step = Step(n, accepted.reply, accepted.reply.usage, state.usage, state.cost_usd,
                prompt_estimate, latency_s, [], failed, accepted.refused, accepted.received)
    record_reply(state, step)
    return None


def record_reply(state: RunState, step: Step) -> None:
    """Add an accepted reply's ``step`` to the run, after :func:`limit_calls`: its usage
    (tokens; USD at :meth:`~primer.loop.config.AgentConfig.prices_for`) to the totals, the
    assistant message, a ``model_call`` event."""
    reply, c = step.reply, state.config
    uses = reply.tool_uses  # (one call never passes a per-reply limit, which is >= 1)
    if uses and (len(uses) > 1 or c.max_tool_calls_per_run is not None):
        limit_calls(state, step)
    state.add_usage(reply.usage, cost_usd(reply.usage, c.prices_for(reply.model))
                    if c.model_prices else None)
    step.total_usage, step.cost_usd = state.usage, state.cost_usd
    state.steps.append(step)
    state.append(assistant_message(reply.content or transcript_content(reply.content)))
    on_event = state.inputs.on_event
    if on_event is not None:  # (the event's dicts are built only for a listener)
        event = {"step": step.index, "prompt_estimate": step.prompt_estimate,
                 "reply": reply.to_dict(), "latency_s": step.model_latency_s}
        if step.refused:
            event["refused"] = step.refused
        if step.received is not None:
            event["received"] = step.received
        on_event("model_call", event)


def limit_calls(state: RunState, step: Step) -> None:
    """Apply ``max_tool_calls_per_reply`` and ``max_tool_calls_per_run`` to a new reply: past
    either, every call is refused (``too_many_calls``, in ``step.refused``). While the per-run
    limit is on, the calls let through are counted in ``state.tool_calls``."""
    c, uses, refused = state.config, step.reply.tool_uses, step.refused or {}
    asked = len(uses) - len(refused)
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
    step.refused = {**refused, **{b["id"]: {"error_kind": "too_many_calls", "problem": why}
                                  for b in uses if b["id"] not in refused}}


def _count_failed_attempts(state: RunState, failed: list[dict[str, Any]]) -> None:
    """Emit a ``model_retry`` event for each failed attempt (:func:`retry_delay` counted its
    usage in the run's totals already)."""
    for record in failed:
        state.emit("model_retry", step=state.model_calls + 1, **record)


# ---------------------------------------------------------------- the wrap-up at a limit

#: The stops at which a run with ``config.wrap_up`` asks for one last answer: its limits.
WRAP_UP_CAUSES = frozenset({StopCause.MAX_STEPS, StopCause.TOKEN_BUDGET,
                            StopCause.COST_BUDGET, StopCause.WALL_CLOCK})
#: How the wrap-up's note to the model begins.
WRAP_UP_OPENING = "The run has reached a limit and stops here"


def wrap_up(state: RunState, stop: Stop,
            reply: Reply | None = None) -> Generator[Wait, Any, AgentResult]:
    """End the run with ``stop`` (:func:`~primer.loop.result.finish`); at a limit
    (:data:`WRAP_UP_CAUSES`) with ``config.wrap_up`` on, after one more model call with tools
    off that asks for a best-effort answer.

    ``reply``'s unrun calls get their ``not_run`` results first, so every ``tool_use`` is
    answered; :func:`wrap_up_note` joins the last user turn. The call is made only when
    :func:`~primer.loop.checks.wrap_up_room` finds room for its worst case in the budgets, so
    it never takes one past its limit. It is a step of the run (retried like any call, its
    usage counted); nothing it asks for runs. Its text, on ``end_turn``, is ``final_text``
    with ``wrapped_up`` set (not checked against an ``output_model``: ``output`` stays
    ``None``); the stop cause stays the limit's and the summary says what it came to."""
    if not state.config.wrap_up or stop.cause not in WRAP_UP_CAUSES:
        return finish(state, stop, reply)
    answer_unrun(state, stop, reply)
    note = text_block(wrap_up_note(state, stop))
    no_room = wrap_up_room(state, estimate_tokens(note))
    if no_room is not None:
        return finish(state, stop, wrap_up=WrapUp(None, False, f"No wrap-up call was made: "
                                                               f"{no_room}"))
    _add_to_last_turn(state, note)
    calls = state.model_calls
    failed = yield from call_model(state, tools_off=True)
    if state.model_calls == calls or failed is not None:
        why = failed.detail if failed is not None else "no reply was recorded"
        return finish(state, stop, wrap_up=WrapUp(None, False, f"The wrap-up call failed: {why}"))
    answer = state.last_reply
    if answer.tool_uses:
        why = "the model asked for tools, which were off; they did not run"
    elif answer.stop_reason not in ("end_turn", "stop_sequence"):
        why = f"its reply ended with {answer.stop_reason}"
    elif not answer.text.strip():
        why = "its reply held no text"
    else:
        return finish(state, stop, answer, wrap_up=WrapUp(
            answer.text, True, "Then one wrap-up call with tools off gave a best-effort "
                               "answer (final_text): what the model had, not a finished run"))
    return finish(state, stop, answer, wrap_up=WrapUp(None, True, f"Then one wrap-up call "
                                                                  f"with tools off: {why}"))


def wrap_up_note(state: RunState, stop: Stop) -> str:
    """The wrap-up's request to the model: the limit that fired (``stop.detail``), that tools
    are off, and how long the answer may be (``wrap_up_max_tokens``)."""
    return (f"{WRAP_UP_OPENING}: {stop.detail}. Tools are off: no tool will run. From what you "
            f"have found so far, give your best answer to the task now, in at most "
            f"{state.config.wrap_up_max_tokens:,} tokens, and say what is unfinished or "
            f"unchecked.")


def _add_to_last_turn(state: RunState, block: Block) -> None:
    """Add ``block`` to the last user message (after its ``tool_result`` blocks, where the
    API allows text), or as a new user message after an assistant one."""
    last = state.messages[-1] if state.messages else None
    if last is None or last.get("role") != "user":
        state.append(user_message([block]))
        return
    new: Message = {**last, "content": [*blocks_of(last.get("content", "")), block]}
    state.messages[-1] = new
    state.prompt_estimate += estimate_tokens(new) - estimate_tokens(last)


# ---------------------------------------------------------------- the tools


def calls_to_run(state: RunState, calls: list[ToolUseBlock],
                 settled: dict[str, ToolExecution] | None = None) -> list[ToolUseBlock]:
    """The calls of ``calls`` still to run: not refused, with no result on the last step (run
    at a pause) and none in ``settled`` (decided without running now: a rejection, an
    outcome recorded before a crash)."""
    step = state.steps[-1]
    if not step.executions and not settled and not step.refused:
        return calls
    known = {e.tool_use_id for e in step.executions} | set(settled or ()) \
        | set(step.refused or ())
    return [b for b in calls if b["id"] not in known]


def add_results(state: RunState, calls: list[ToolUseBlock], ran: list[ToolExecution],
                settled: dict[str, ToolExecution] | None = None) -> Stop | None:
    """Record the results of a reply's ``calls``: those that just ``ran`` (the calls of
    :func:`calls_to_run`, in order), those in ``settled``, the refused ones and those
    already on the step, in request order in one user message; count the new ones; then the
    :data:`~primer.loop.checks.AFTER_TOOLS` checks (the first that fires, or ``None``).
    A reply without calls (``pause_turn``) adds nothing."""
    if not calls:
        return None
    step = state.steps[-1]
    if not step.executions and not settled and not step.refused:  # the common case
        executions = new = ran  # (every call ran now)
    else:
        earlier = {e.tool_use_id: e for e in step.executions}
        known = {**(settled or {}), **refusals(state, calls), **earlier}
        known.update((e.tool_use_id, e) for e in ran)
        executions = [known[b["id"]] for b in calls]
        new = [e for e in executions if e.tool_use_id not in earlier]
    step.executions = executions
    account_executions(state, new)
    state.append(user_message([e.result_block() for e in executions]))
    if state.inputs.recorder is not None:
        state.inputs.recorder.results_added(state)
    return first_stop(AFTER_TOOLS, state)


def run_calls(state: RunState, calls: list[ToolUseBlock],
              record_all: bool = False) -> list[ToolExecution]:
    """Run ``calls`` through :func:`run_call` (the sync driver's :class:`ToolCalls`):
    several concurrently on a pool sized to them (under ``max_parallel_tools``), one in
    this thread; results in request order."""
    if len(calls) == 1:
        return [run_call(state, calls[0], record_all)]
    return execute_tools(state.inputs.registry, calls,
                         max_workers=state.config.max_parallel_tools,
                         run=lambda b: run_call(state, b, record_all))


def execute_tools(registry: ToolRegistry, tool_uses: Sequence[ToolUseBlock], *,
                  max_workers: int = 16,
                  run: Callable[[ToolUseBlock], ToolExecution] | None = None
                  ) -> list[ToolExecution]:
    """Run one reply's ``tool_use`` blocks concurrently; results in request order. Calls of
    one reply cannot use each other's results, so they share a thread pool (at most
    ``max_workers``; ``1`` keeps an order): the wall time is about the slowest call, not the
    sum. One call runs in this thread; a failing call never loses its siblings' results;
    each sees the caller's ``contextvars``. ``run`` replaces ``registry.run`` (the runner)."""
    run_one = run or registry.run
    if len(tool_uses) <= 1:
        return [run_one(b) for b in tool_uses]
    with ThreadPoolExecutor(max_workers=max(1, min(len(tool_uses), max_workers)),
                            thread_name_prefix="tool") as pool:
        contexts = [contextvars.copy_context() for _ in tool_uses]  # the caller's, in each
        return list(pool.map(lambda b, ctx: ctx.run(run_one, b), tool_uses, contexts))


def run_call(state: RunState, block: ToolUseBlock, record: bool = False) -> ToolExecution:
    """One call through the run's ``runner``; with a recorder, a side-effecting call is
    recorded as started (with its idempotency key) before it runs and done after
    (``record``: any call). A call that has not started when the run's cancel signal is set
    does not run: it gets a ``not_run`` result (:func:`cancelled_call`); one that is running
    then is answered as ``cancelled`` (:func:`run_watched`)."""
    inputs = state.inputs
    cancel = inputs.cancel
    if cancel is not None and cancel.is_set():
        return cancelled_call(state, block)
    durable = inputs.recorder is not None and start_call(state, block)
    execution = inputs.runner(block) if cancel is None else run_watched(state, block, cancel)
    if inputs.recorder is None:
        return execution
    return finish_call(state, execution, record or durable)


#: Seconds between two looks at the cancel signal while a tool call runs.
CANCEL_POLL_S = 0.02
#: Seconds a running call is given, once the run is cancelled, to stop by itself (the
#: harness kills a subprocess tool and cancels an MCP request) before it is abandoned.
CANCEL_GRACE_S = 0.25


def run_watched(state: RunState, block: ToolUseBlock, cancel: CancelSignal,
                runner: CallRunner | None = None) -> ToolExecution:
    """``runner(block)`` (default: the run's) on a daemon thread of its own, with this
    thread's ``contextvars``, while this thread reads ``cancel`` every
    :data:`CANCEL_POLL_S` seconds. Once it is set the call has :data:`CANCEL_GRACE_S` to
    end: a call that ends with a success keeps its result; one that failed with the signal
    set, or still runs (its thread abandoned: a thread cannot be stopped), is answered as
    ``cancelled`` (:func:`~primer.loop.result.cancelled_while_running`). So a running call
    holds a cancelled run at most ``CANCEL_POLL_S + CANCEL_GRACE_S`` (0.27 s) after the
    signal. What the runner raises (a ``BaseException``: runners answer failures as
    results) is raised here."""
    run = runner or state.inputs.runner
    done, context = threading.Event(), contextvars.copy_context()
    box: list[Any] = []

    def work() -> None:
        try:
            box.append(context.run(run, block))
        except BaseException as e:  # noqa: BLE001 - raised again on the caller's thread
            box.append(e)
        finally:
            done.set()

    threading.Thread(target=work, name="tool-call", daemon=True).start()
    noticed = False
    while not done.wait(CANCEL_POLL_S):
        if cancel.is_set():
            noticed = True
            done.wait(CANCEL_GRACE_S)
            break
    if not done.is_set():
        return cancelled_while_running(state, block, stopped=False)
    outcome = box[0]
    if isinstance(outcome, BaseException):
        raise outcome
    if (noticed or cancel.is_set()) and outcome.is_error:  # (it may have seen it first)
        return cancelled_while_running(state, block, stopped=True)
    return cast(ToolExecution, outcome)


def start_call(state: RunState, block: ToolUseBlock) -> bool:
    """Before a call runs (both drivers): record a side-effecting call as started. Returns
    whether its result must be recorded."""
    tool = state.inputs.registry.get(block.get("name"))
    recorder = state.inputs.recorder
    if recorder is None or tool is None or not tool.side_effecting:
        return False
    recorder.call_started(state, block)
    return True


def finish_call(state: RunState, execution: ToolExecution, record: bool) -> ToolExecution:
    """After a call ran (both drivers): with ``record``, its result made durable."""
    if record and state.inputs.recorder is not None:
        state.inputs.recorder.call_done(state, execution)
    return execution
