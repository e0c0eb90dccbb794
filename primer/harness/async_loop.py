r"""``run_agent_async``: the same loop on ``asyncio``, for harnesses that are async already.

Same arguments as :func:`~primer.harness.production.run_production`, the same
:class:`~primer.loop.result.AgentResult`, the same exits: it drives the very loop the sync
driver does, :func:`~primer.loop.loop.continue_run`, whose two waits (the model call and a
reply's tools) are ``yield``\ s; only how each wait is done is its own:

* the model: an ``async def`` model (an ``async def __call__``, such as
  :class:`~primer.providers.claude.AsyncClaudeLLM`) is awaited; a sync one runs on a worker
  thread, so it never blocks the event loop, and its stream deltas are handed back to the
  event loop's thread, so every event reaches ``on_event`` there, in order;
* the tools: the calls of one reply run concurrently as tasks (at most
  ``max_parallel_tools`` at a time), results in request order. An ``async def`` tool is
  awaited on the event loop; a sync tool goes to a worker thread. A time limit is kept with
  ``asyncio.timeout`` (``asyncio.wait`` before Python 3.11): a late ``async def`` tool is
  *cancelled* (it really stops, at its next ``await``), a late sync tool is abandoned (a
  thread cannot be stopped). Hooks wrap each call as in the sync runner, and what follows
  each attempt (retry, give up) is the sync runner's rule,
  :meth:`~primer.harness.runner.ToolRunner.after_attempt`;
* backoff: with the default ``sleep`` (``time.sleep``) the loop awaits ``asyncio.sleep``;
  an injected ``sleep`` (a :class:`~primer.harness.retry.ManualClock`) is called as it is.

Cancel with ``cancel=`` (an ``asyncio.Event`` or a ``threading.Event``): the run stops with
``cancelled`` at the same points as the sync loop. Cancelling the task that awaits the run
abandons it instead (``CancelledError`` propagates, as asyncio expects; the run's journal,
if any, is closed but records no stop). A ``CancelledError`` a tool raises on its own (an
inner cancel scope, not a cancel of the run's task) is that call's error ``tool_result``;
one an ``async def`` model raises ends the run with ``model_error``, not retried. On Python
3.10, which cannot tell the two kinds of ``CancelledError`` apart, every one propagates. A
cancelled run recorded in a journal is continued with
:func:`~primer.harness.durable.resume.resume`.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import os
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from primer.loop.config import AgentConfig
from primer.loop.loop import Turns, ask, continue_run
from primer.loop.messages import Message, ToolUseBlock
from primer.loop.model import LLM, CallCancelled, EventSink, is_async_callable
from primer.loop.result import AgentResult, cancelled_call, cancelled_while_running
from primer.loop.state import CancelSignal, RunState
from primer.loop.steps import (
    CANCEL_GRACE_S,
    CANCEL_POLL_S,
    ModelCall,
    Raised,
    StreamWatch,
    ToolCalls,
    finish_call,
    start_call,
)
from primer.loop.tools import Tool, ToolExecution, ToolRegistry, is_tool_failure

from .allowance import running
from .hooks import Hooks, after_tool_hooks, before_tool_hooks
from .production import start_production
from .retry import ToolTimeout, TransientToolError
from .runner import ToolRunner, client_timeout
from .timeouts import start_daemon

if TYPE_CHECKING:
    import pydantic

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
    """:func:`~primer.harness.production.run_production` on asyncio:
    ``await run_agent_async(...)``.

    Arguments, result and errors as for ``run_production``; ``llm`` may be a sync or an
    ``async def`` model, each tool a sync or an ``async def`` function, ``cancel`` an
    ``asyncio.Event`` or a ``threading.Event``. Every event reaches ``on_event`` in the
    event loop's thread. An ``async def`` tool is stopped at its limit only at an
    ``await``: one that blocks the event loop (``time.sleep``, a loop with no ``await``)
    holds the whole run until it returns and is then answered as a timeout; such tools
    need :func:`~primer.harness.timeouts.run_in_subprocess`.
    """
    state, writer = start_production(llm, task, tools, system=system, config=config,
                                     on_event=on_event, trace=trace, hooks=hooks,
                                     output_model=output_model, scenario=scenario,
                                     cancel=cancel, messages=messages)
    try:
        with running(state):  # the current run, for tools that spend (sub-agents)
            return await drive_async(state, continue_run(state))
    finally:
        if writer is not None:
            writer.close()


async def drive_async(state: RunState, turns: Turns) -> AgentResult:
    """:func:`~primer.loop.loop.drive` on asyncio: each model call, batch of tool calls and
    backoff ``turns`` asks for is awaited. The run's recorder is closed at the end."""
    model_is_async = is_async_callable(state.inputs.llm)
    outcome: Any = None
    try:
        while True:
            try:
                wait = turns.send(outcome)
            except StopIteration as end:
                result: AgentResult = end.value
                return result
            if isinstance(wait, ModelCall):
                outcome = await ask_async(state, wait.request, model_is_async)
            elif isinstance(wait, ToolCalls):
                outcome = await run_calls_async(state, wait.calls, wait.record_all)
            else:  # a Sleep, answered with None
                await sleep_async(state.config.sleep, wait.seconds)
                outcome = None
    finally:
        if state.inputs.recorder is not None:
            state.inputs.recorder.close()


def run_cancelled(error: BaseException) -> bool:
    """Whether ``error`` is the cancellation of the task running this code (it must
    propagate), not a ``CancelledError`` a model or a tool raised on its own. Python 3.10
    cannot tell them apart (no ``Task.cancelling``): there every ``CancelledError``
    propagates."""
    if not isinstance(error, asyncio.CancelledError):
        return False
    task = asyncio.current_task()
    return task is None or sys.version_info < (3, 11) or task.cancelling() > 0


async def ask_async(state: RunState, request: dict[str, Any], model_is_async: bool) -> object:
    """One attempt of a model call: an async model awaited here, a sync one on a worker
    thread (its deltas handed back to this event loop's thread); what it raised comes back
    as :class:`~primer.loop.steps.Raised`, but the cancellation of this task propagates.
    A streaming call in a run that can be cancelled (its ``on_delta`` a
    :class:`~primer.loop.steps.StreamWatch`) is raced against the signal: once it is set,
    an async model's task is cancelled at once (its stream closed where it waits), a sync
    model's stream ends at its next delta or is abandoned after
    :data:`~primer.loop.steps.CANCEL_GRACE_S`; the answer is
    :class:`~primer.loop.model.CallCancelled` with the text shown."""
    llm = state.inputs.llm
    sink = request.get("on_delta")
    cancel = state.inputs.cancel
    watch = sink if isinstance(sink, StreamWatch) and cancel is not None else None
    try:
        if model_is_async:
            raw = llm(**request)
            if watch is not None and cancel is not None and inspect.isawaitable(raw):
                return await watched_call(raw, cancel, stop_first=True,
                                          cancelled=lambda _stopped: Raised(
                                              CallCancelled(watch.shown)))
            return await raw if inspect.isawaitable(raw) else raw
        if sink is not None:
            loop = asyncio.get_running_loop()
            check = watch.check if watch is not None else None
            show = sink.show if isinstance(sink, StreamWatch) else sink

            def threadsafe(kind: str, data: dict[str, Any]) -> None:
                if check is not None:
                    check()  # raised in the model's thread: its stream ends there
                loop.call_soon_threadsafe(show, kind, data)

            request = {**request, "on_delta": threadsafe}
        if watch is not None and cancel is not None:
            return await watched_call(in_worker(lambda: ask(llm, request)), cancel,
                                      stop_first=False, cancelled=lambda _stopped: Raised(
                                          CallCancelled(watch.shown)))
        return await in_worker(lambda: ask(llm, request))
    except (Exception, GeneratorExit) as e:  # noqa: BLE001 - the loop decides what follows
        return Raised(e)
    except asyncio.CancelledError as e:  # the model's own (an inner cancel scope): not retried
        if run_cancelled(e):
            raise
        return Raised(e)


# ---------------------------------------------------------------- the tools


async def run_calls_async(state: RunState, calls: list[ToolUseBlock],
                          record_all: bool = False) -> list[ToolExecution]:
    """Run ``calls`` concurrently (at most ``max_parallel_tools`` at a time); results in
    request order. ``record_all`` as for :func:`~primer.loop.steps.run_calls`."""
    if len(calls) <= 1:
        return [await run_call_async(state, b, record_all) for b in calls]
    cap = state.config.max_parallel_tools
    gate = asyncio.Semaphore(cap) if len(calls) > cap else None

    async def one(block: ToolUseBlock) -> ToolExecution:
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


async def run_call_async(state: RunState, block: ToolUseBlock,
                         record: bool = False) -> ToolExecution:
    """:func:`~primer.loop.steps.run_call` with the tool awaited: the same cancel check and
    the same :func:`~primer.loop.steps.start_call` / :func:`~primer.loop.steps.finish_call`
    around :func:`run_tool_async`."""
    inputs = state.inputs
    if inputs.cancel is not None and inputs.cancel.is_set():
        return cancelled_call(state, block)
    if inputs.recorder is None:
        return await watched_tool(state, block)
    durable = start_call(state, block)
    execution = await watched_tool(state, block)
    return finish_call(state, execution, record or durable)


async def watched_tool(state: RunState, block: ToolUseBlock) -> ToolExecution:
    """:func:`run_tool_async`, and in a run that can be cancelled the same watch as the sync
    loop's :func:`~primer.loop.steps.run_watched`: an ``async def`` tool still running when
    the signal is set is cancelled at once (it stops at its next ``await``), a sync one is
    given :data:`~primer.loop.steps.CANCEL_GRACE_S` to stop by itself (a subprocess tool
    killed, an MCP request cancelled), then abandoned; either gets a ``cancelled`` result
    unless it ended with a success."""
    inputs = state.inputs
    work = run_tool_async(inputs.runner, block)
    if inputs.cancel is None:
        return await work
    tool = inputs.registry.get(block.get("name"))
    return await watched_call(
        work, inputs.cancel, stop_first=tool is not None and tool.is_async,
        cancelled=lambda stopped: cancelled_while_running(state, block, stopped=stopped))


async def watched_call(work: Awaitable[T], cancel: CancelSignal, *, stop_first: bool,
                       cancelled: Callable[[bool], Any]) -> Any:
    """``await work`` as a task, reading ``cancel`` every
    :data:`~primer.loop.steps.CANCEL_POLL_S` seconds. Once it is set: with ``stop_first``
    the task is cancelled at once, else it is given :data:`~primer.loop.steps.CANCEL_GRACE_S`
    to end by itself first; then (cancelled) it is given that long again. Returns what the
    work returned when it ended before the signal, or after it with a tool's success (a
    value whose ``is_error`` is false), else ``cancelled(stopped)`` (``stopped``: the work
    ended, rather than being left running on a worker thread). Bound: ``CANCEL_POLL_S + 2 ×
    CANCEL_GRACE_S`` (0.52 s) after the signal."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            finished, _ = await asyncio.wait({task}, timeout=CANCEL_POLL_S)
            if finished:
                result = task.result()
                if cancel.is_set() and getattr(result, "is_error", False) is True:
                    return cancelled(True)  # a failure once the signal was set: it saw it first
                return result
            if cancel.is_set():
                break
        if not stop_first:
            await asyncio.wait({task}, timeout=CANCEL_GRACE_S)
        stopped = task.done()
        if stopped and not task.cancelled() and task.exception() is None \
                and getattr(task.result(), "is_error", True) is False:
            return task.result()  # a tool that finished with a success: kept
        if not stopped:
            task.cancel()  # a coroutine stops at its await; a worker's thread runs on
            await asyncio.wait({task}, timeout=CANCEL_GRACE_S)
            stopped = stop_first and task.done()
        return cancelled(stopped)
    except BaseException:
        task.cancel()
        raise


async def run_tool_async(runner: Callable[[ToolUseBlock], ToolExecution],
                         block: ToolUseBlock) -> ToolExecution:
    """One call through the run's runner, awaited. A
    :class:`~primer.harness.runner.ToolRunner`'s rules are followed here with asyncio: its
    hooks around the call, the call validated first (an unknown tool or bad input answered
    as the sync loop answers it), then attempts under the time limit until
    :meth:`~primer.harness.runner.ToolRunner.after_attempt` gives the final execution. Any
    other runner runs on a worker thread."""
    if not isinstance(runner, ToolRunner):
        return await in_worker(lambda: runner(block))
    call = block
    if runner.hooks:
        call, refused = before_tool_hooks(runner.hooks, block, runner.registry)
        if refused is not None:
            return refused
    execution = await _attempts(runner, call)
    return after_tool_hooks(runner.hooks, call, execution) if runner.hooks else execution


async def _attempts(runner: ToolRunner, block: ToolUseBlock) -> ToolExecution:
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


async def _attempt(registry: ToolRegistry, block: ToolUseBlock, t: Tool, timeout: float | None
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
    if elapsed > timeout_s:  # the timer could not fire, or the work ignored its cancellation
        raise ToolTimeout.finished_late(
            timeout_s, elapsed, "a tool that blocks the event loop or swallows its "
            "cancellation (CancelledError) cannot be stopped")
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

