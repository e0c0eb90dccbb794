"""``run_agent_async``: the same loop on ``asyncio``, for harnesses that are async already.

Same arguments, same :class:`~primer.loop.result.AgentResult`, the same exits: the loop
below makes the checks of :mod:`primer.loop.checks` by iterating the same declared tuples
(:data:`~primer.loop.checks.BEFORE_CALL`, ``BEFORE_SEND``, ``AFTER_REPLY``, ``AFTER_TOOLS``)
in the same order as :func:`~primer.loop.loop.continue_run`, and every step that
needs no waiting is the sync loop's own function of :mod:`primer.loop.steps` (starting the
run, accepting and recording a reply, output validation, the pause, recording the results
of a reply in one user message, finishing). Only the waiting is its own:

* the model: an ``async def`` model (an ``async def __call__``, such as
  :class:`~primer.providers.claude.AsyncClaudeLLM`) is awaited; a sync one runs on a worker
  thread, so it never blocks the event loop, and its stream deltas are handed back to the
  event loop's thread, so every event reaches ``on_event`` there, in order;
* the tools: the calls of one reply run concurrently as tasks (at most
  ``max_parallel_tools`` at a time), results in request order. An ``async def`` tool is
  awaited on the event loop; a sync tool goes to a worker thread. A time limit is kept with
  ``asyncio.timeout`` (``asyncio.wait`` before Python 3.11): a late ``async def`` tool is
  *cancelled* (it really stops, at its next
  ``await``), a late sync tool is abandoned (a thread cannot be stopped). What follows each
  attempt (retry, give up) is the sync loop's rule,
  :meth:`~primer.harness.runner.ToolRunner.after_attempt`;
* backoff: with the default ``sleep`` (``time.sleep``) the loop awaits ``asyncio.sleep``;
  an injected ``sleep`` (a :class:`~primer.harness.retry.ManualClock`) is called as it is.

Cancel with ``cancel=`` (an ``asyncio.Event`` or a ``threading.Event``): the run stops with
``cancelled`` at the same points as the sync loop. Cancelling the task that awaits the run
abandons it instead (``CancelledError`` propagates, as asyncio expects; the run's journal,
if any, is closed but records no stop). A ``CancelledError`` a tool raises on its own (an
inner cancel scope, not a cancel of the run's task) is that call's error ``tool_result``;
one an ``async def`` model raises ends the run with ``model_error``, not retried (nothing
says the call may succeed again). On Python 3.10, which cannot tell the two kinds of
``CancelledError`` apart, every one propagates. A cancelled run recorded in a journal is continued
with :func:`~primer.harness.durable.checkpoint.resume`.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import os
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

import pydantic

from primer.loop.checks import AFTER_REPLY, BEFORE_CALL, BEFORE_SEND, first_stop, validate_output
from primer.loop.config import AgentConfig
from primer.loop.context import compact_if_needed
from primer.loop.coroutines import is_async_callable
from primer.loop.loop import start_run
from primer.loop.messages import Block, Message
from primer.loop.model import LLM, ScriptExhausted, TransientModelError
from primer.loop.result import AgentResult
from primer.loop.state import CancelSignal, EventSink, RunState, Stop, StopCause
from primer.loop.steps import (
    add_results,
    ask_model,
    calls_to_run,
    cancelled_call,
    finish,
    finish_call,
    finish_pause,
    model_failed,
    model_request,
    start_call,
    start_pause,
    take_reply,
)
from primer.loop.tools import Tool, ToolExecution, ToolRegistry, is_tool_failure

from .allowance import running
from .hooks import Hooks
from .retry import ToolTimeout, TransientToolError
from .runner import client_timeout, model_failure
from .timeouts import start_daemon

T = TypeVar("T")


async def run_agent_async(llm: LLM, task: str, tools: ToolRegistry | Iterable[Tool] = (), *,
                          system: str = "", config: AgentConfig | None = None,
                          on_event: EventSink | None = None,
                          trace: str | os.PathLike[str] | None = None,
                          hooks: Hooks | Iterable[Hooks] | None = None,
                          output_model: type[pydantic.BaseModel] | None = None,
                          scenario: str | None = None,
                          cancel: CancelSignal | None = None,
                          messages: Sequence[Message] | None = None) -> AgentResult:
    """:func:`~primer.loop.loop.run_agent` on asyncio: ``await run_agent_async(...)``.

    Arguments, result and errors as for ``run_agent`` (see there); ``llm`` may be a sync or
    an ``async def`` model, each tool a sync or an ``async def`` function, ``cancel`` an
    ``asyncio.Event`` or a ``threading.Event``. Every event reaches ``on_event`` in the
    event loop's thread. See the module docstring for what runs where.

    An ``async def`` tool is stopped at its limit only at an ``await``: one that blocks the
    event loop (``time.sleep``, a loop with no ``await``), like a sync tool holding the GIL
    in C code, holds the whole run until it returns and is then answered as a timeout. Such
    tools need :func:`~primer.harness.timeouts.run_in_subprocess`.
    """
    state, writer = start_run(llm, task, tools, system=system, config=config,
                              on_event=on_event, trace=trace, hooks=hooks,
                              output_model=output_model, scenario=scenario, cancel=cancel,
                              messages=messages)
    try:
        with running(state):  # the current run, for tools that spend (sub-agents)
            return await continue_run_async(state)
    finally:
        if state.recorder is not None:
            state.recorder.close()
        if writer is not None:
            writer.close()


async def continue_run_async(state: RunState) -> AgentResult:
    """The loop, from any state, on asyncio: line for line the turn of
    :func:`~primer.loop.loop.continue_run`, awaiting the model and the tools."""
    model_is_async = is_async_callable(state.llm)
    while True:
        stop = first_stop(BEFORE_CALL, state)        # step limit, wall clock, cancel
        if stop is None:
            compact_if_needed(state)                 # summarise older turns past compact_share
            stop = first_stop(BEFORE_SEND, state) or await call_model_async(state,
                                                                            model_is_async)
        if stop is not None:
            return finish(state, stop)
        reply = state.last_reply
        stop = first_stop(AFTER_REPLY, state)        # stop_reason ... approval gate
        if stop is not None and stop.cause is StopCause.END_TURN and state.output_model:
            verdict = validate_output(state)         # accept, retry, or stop
            if verdict.corrective is not None:
                state.append(verdict.corrective)     # a corrective turn: ask again
                continue
            stop = verdict.stop
        if stop is not None and stop.cause is StopCause.AWAITING_APPROVAL:
            ran = await run_calls_async(state, start_pause(state), record_all=True)
            return finish_pause(state, stop, ran)
        if stop is not None:
            return finish(state, stop, reply)
        stop = await after_tools_async(state, reply.tool_uses)
        if stop is not None:
            return finish(state, stop)


# ---------------------------------------------------------------- the model call


async def call_model_async(state: RunState, model_is_async: bool) -> Stop | None:
    """:func:`~primer.loop.steps.call_model`, awaiting the model (and the backoff between
    retries of a transient error); the reply is accepted and recorded by the same steps."""
    c, n = state.config, state.model_calls + 1
    prompt_estimate = state.prompt_estimate
    failed: list[dict[str, Any]] = []
    start = time.perf_counter()
    try:
        try:
            raw = await ask_model_async(state, model_is_async)
        except TransientModelError as e:
            error = e
            while True:
                await sleep_async(c.sleep, model_failure(error, retries=c.model_retries,
                                                         policy=c.retry, key=f"model-call-{n}",
                                                         failed=failed))
                try:
                    raw = await ask_model_async(state, model_is_async)
                    break
                except TransientModelError as again:
                    error = again
    except ScriptExhausted:
        raise
    except (Exception, GeneratorExit) as e:  # noqa: BLE001 - a failed call ends the run
        return model_failed(state, e, failed)
    except asyncio.CancelledError as e:  # the model's own (an inner cancel scope): not retried
        if run_cancelled(e):
            raise
        return model_failed(state, e, failed)
    return take_reply(state, raw, prompt_estimate, time.perf_counter() - start, failed)


def run_cancelled(error: BaseException) -> bool:
    """Whether ``error`` is the cancellation of the task running this code (it must
    propagate), not a ``CancelledError`` a model or a tool raised on its own. Python 3.10
    cannot tell them apart (no ``Task.cancelling``): there every ``CancelledError``
    propagates."""
    if not isinstance(error, asyncio.CancelledError):
        return False
    task = asyncio.current_task()
    return task is None or sys.version_info < (3, 11) or task.cancelling() > 0


async def ask_model_async(state: RunState, model_is_async: bool) -> Any:
    """One attempt: an async model awaited here; a sync one on a worker thread, its deltas
    handed back to this event loop's thread."""
    if model_is_async:
        raw = state.llm(**model_request(state))  # type: ignore[misc]
        return await raw if inspect.isawaitable(raw) else raw
    sink, threadsafe = state.on_delta, None
    if sink is not None:
        loop = asyncio.get_running_loop()

        def threadsafe(kind: str, data: dict[str, Any]) -> None:
            loop.call_soon_threadsafe(sink, kind, data)

    return await in_worker(lambda: ask_model(state, threadsafe))


# ---------------------------------------------------------------- the tools


async def after_tools_async(state: RunState, calls: list[Block],
                            settled: dict[str, ToolExecution] | None = None) -> Stop | None:
    """:func:`~primer.loop.steps.after_tools` with the calls awaited: the same
    :func:`~primer.loop.steps.calls_to_run` before, the same
    :func:`~primer.loop.steps.add_results` (one user message, the AFTER_TOOLS checks)
    after."""
    if not calls:
        return None
    todo = calls_to_run(state, calls, settled)
    return add_results(state, calls, await run_calls_async(state, todo), settled)


async def run_calls_async(state: RunState, calls: list[Block], *,
                          record_all: bool = False) -> list[ToolExecution]:
    """Run ``calls`` concurrently (at most ``max_parallel_tools`` at a time); results in
    request order. ``record_all`` as for :func:`~primer.loop.steps.run_calls`."""
    if len(calls) <= 1:
        return [await run_call_async(state, b, record_all) for b in calls]
    cap = state.config.max_parallel_tools
    gate = asyncio.Semaphore(cap) if len(calls) > cap else None

    async def one(block: Block) -> ToolExecution:
        if gate is None:
            return await run_call_async(state, block, record_all)
        async with gate:
            return await run_call_async(state, block, record_all)

    tasks = [asyncio.ensure_future(one(b)) for b in calls]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for t in tasks:
            t.cancel()
        raise


async def run_call_async(state: RunState, block: Block, record: bool = False) -> ToolExecution:
    """:func:`~primer.loop.steps.run_call` with the tool awaited: the cancel check, the
    same :func:`~primer.loop.steps.start_call` (hooks, the ``started`` record) and
    :func:`~primer.loop.steps.finish_call` around :func:`run_tool_async`."""
    if state.cancel is not None and state.cancel.is_set():
        return cancelled_call(state, block)
    if not state.hooks and state.recorder is None:
        return await run_tool_async(state, block)
    call, refused, durable = start_call(state, block)
    if refused is not None:
        return refused
    return finish_call(state, call, await run_tool_async(state, call), record or durable)


async def run_tool_async(state: RunState, block: Block) -> ToolExecution:
    """One call through the run's :class:`~primer.harness.runner.ToolRunner` rules,
    awaited: validated first (an unknown tool or bad input is answered as the sync loop
    answers it), then attempts under the time limit until
    :meth:`~primer.harness.runner.ToolRunner.after_attempt` gives the final execution."""
    runner = state.runner
    assert runner is not None
    t = runner.registry.get(block.get("name"))
    if t is None or t.input_errors(block.get("input")) is not None:
        return runner.registry.run(block)
    timeout = runner.timeout_for(t)
    log: list[dict[str, Any]] = []
    while True:
        execution, error = await _attempt(runner.registry, block, t, timeout)
        outcome = runner.after_attempt(block, t, execution, error, log)
        if isinstance(outcome, ToolExecution):
            return outcome
        await sleep_async(runner.sleep, outcome)


async def _attempt(registry: ToolRegistry, block: Block, t: Tool, timeout: float | None
                   ) -> tuple[ToolExecution, TransientToolError | None]:
    """One attempt: the tool awaited (on a worker thread if it is sync) within ``timeout``
    seconds; its value or exception is then turned into the execution by ``registry.run``
    itself, so results and error texts are those of the sync loop."""
    args, call_id = block.get("input"), str(block.get("id", ""))
    value: Any = None
    error: BaseException | None = None
    start = time.perf_counter()
    try:
        if t.is_async:
            value = await within(t.invoke_async(args, call_id), timeout, stopped=True)
        else:  # its failure comes back as a value: a GeneratorExit cannot be thrown in here
            value, failure = await within(in_worker(lambda: _outcome(t, args, call_id)),
                                          timeout, stopped=False)
            if failure is not None:
                raise failure
    except TimeoutError as e:  # the tool's own client gave up: as in the sync loop
        error = client_timeout(e)
    except BaseException as e:  # noqa: BLE001 - any failure is an observation
        if not is_tool_failure(e) or run_cancelled(e):
            raise
        error = e
    latency = time.perf_counter() - start

    def replay(_tool: Tool, _args: dict[str, Any], _id: str) -> Any:
        if error is not None:
            raise error
        return value

    execution = registry.run(block, invoke=replay)
    execution.latency_s = latency
    return execution, error if isinstance(error, TransientToolError) else None


def _outcome(t: Tool, args: Any, call_id: str) -> tuple[Any, BaseException | None]:
    """A sync tool's call on its worker thread: ``(value, None)`` or ``(None, failure)``."""
    try:
        return t.invoke(args, call_id), None
    except BaseException as e:  # noqa: BLE001 - raised again in the awaiting task
        if not is_tool_failure(e):
            raise
        return None, e


# ---------------------------------------------------------------- waiting


async def within(work: Awaitable[T], timeout_s: float | None, *, stopped: bool) -> T:
    """``await work``, or raise :class:`~primer.harness.retry.ToolTimeout` after
    ``timeout_s`` seconds (``None``: no limit). On timeout ``work`` is cancelled:
    ``stopped`` says whether that stops the work itself (a coroutine) or only the wait (a
    worker thread's call runs on). A ``TimeoutError`` the work raises itself is its own
    error, not a timeout."""
    if timeout_s is None:
        return await work
    start = time.monotonic()
    if sys.version_info >= (3, 11):  # a timer on this task: no task of its own per call
        limit = asyncio.timeout(timeout_s)
        try:
            async with limit:
                value = await work
        except TimeoutError:
            if not limit.expired():
                raise  # the tool's own TimeoutError, not the limit
            raise ToolTimeout(timeout_s, stopped=stopped, how="it was cancelled") from None
    else:
        task = asyncio.ensure_future(work)
        try:
            done, _ = await asyncio.wait({task}, timeout=timeout_s)
        except BaseException:
            task.cancel()
            raise
        if not done:
            task.cancel()
            raise ToolTimeout(timeout_s, stopped=stopped, how="it was cancelled")
        value = task.result()
    elapsed = time.monotonic() - start
    if elapsed > timeout_s:  # the timer could not fire: something blocked the event loop
        raise ToolTimeout.finished_late(timeout_s, elapsed)
    return value


def in_worker(fn: Callable[[], T]) -> asyncio.Future[T]:
    """``fn()`` on a daemon worker thread (with this context's ``contextvars``), as a future
    of the running event loop. A result that arrives after nobody waits is dropped."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():  # cancelled: the call passed its time limit
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def work() -> None:
        try:
            value, error = context.run(fn), None
        except BaseException as e:  # noqa: BLE001 - handed to the awaiting task
            value, error = None, e
        try:
            loop.call_soon_threadsafe(settle, value, error)
        except RuntimeError:  # the event loop has closed: nobody waits any more
            pass

    start_daemon(work)
    return future


async def sleep_async(sleep: Callable[[float], None], seconds: float) -> None:
    """Wait ``seconds``: ``asyncio.sleep`` in place of the default ``time.sleep``, else the
    run's injected ``sleep`` (a manual clock), called as it is."""
    if sleep is time.sleep:
        await asyncio.sleep(seconds)
    else:
        sleep(seconds)


__all__ = ["continue_run_async", "run_agent_async"]
