"""The production agent loop: ``run_agent``, and ``continue_run``, the loop itself.

The model is stateless and cannot stop itself; the harness owns every exit. One step is one
model call. :func:`continue_run` reads top to bottom as one turn: the checks before the call
(:data:`~primer.loop.checks.BEFORE_CALL`), compaction of older turns, the checks on the
request (:data:`~primer.loop.checks.BEFORE_SEND`), the model call, the checks on the reply
(:data:`~primer.loop.checks.AFTER_REPLY`), the output check when the run asked for a shape,
the approval pause, then the tools and the checks after them
(:func:`~primer.loop.steps.after_tools`). Each check is a small function of
:mod:`primer.loop.checks`; each step one of :mod:`primer.loop.steps`.

Every run ends with a :class:`~primer.loop.state.StopCause` and a summary saying what it
finished and why it stopped. The harness's own work per step does not grow with the history:
the prompt-size estimate, usage and cost totals and the repeat counts are kept
incrementally, and a checkpoint journal appends only what is new.

Tool timeouts without a thread hand-off per call: when any call can have a time limit, the
loop runs on a daemon worker thread and the caller's thread watches it
(:func:`~primer.harness.timeouts.run_watched`); a call that hangs past its limit is answered
with a timeout by :func:`carry_on`, which finishes the run from its state.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import pydantic

from primer.harness.allowance import running
from primer.harness.durable.recorder import JournalRecorder
from primer.harness.hooks import Hooks, as_hook_list
from primer.harness.timeouts import HungCall, run_watched
from primer.harness.tracing.trace import TraceWriter

from .checks import (
    AFTER_REPLY,
    BEFORE_CALL,
    BEFORE_SEND,
    first_stop,
    registry_for_run,
    validate_output,
)
from .config import AgentConfig
from .context import compact_if_needed
from .history import history_problem, repair_history, tool_use_ids, with_new_turn
from .messages import Message, user_message
from .model import LLM
from .result import AgentResult
from .state import CancelSignal, EventSink, RunState, StopCause
from .steps import after_tools, call_model, finish, finish_call, pause
from .text import safe_repr, valid_text
from .tools import Tool, ToolRegistry


def run_agent(llm: LLM, task: str, tools: ToolRegistry | Iterable[Tool] = (), *,
              system: str = "", config: AgentConfig | None = None,
              on_event: EventSink | None = None, trace: str | os.PathLike[str] | None = None,
              hooks: Hooks | Iterable[Hooks] | None = None,
              output_model: type[pydantic.BaseModel] | None = None,
              scenario: str | None = None, cancel: CancelSignal | None = None,
              messages: Sequence[Message] | None = None) -> AgentResult:
    """Run the agent loop on ``task`` until one of its exits fires.

    ``llm`` is any :class:`~primer.loop.model.LLM`; ``tools`` a registry or a list of tools
    (the allow-list); ``system`` the system prompt; ``config`` every limit and price.
    ``on_event(kind, data)``, if given, is called as the run goes (``run_start``,
    ``model_call``, ``tool_execution``, ``stop``; with a streaming model also its deltas,
    ``text_delta`` and the others of :mod:`primer.harness.streaming`, which go to
    ``on_event`` only, never into a trace). ``trace``, a file path, records every
    event there as JSON Lines while the run goes (see :mod:`primer.harness.tracing.trace`).
    ``hooks``, a :class:`~primer.harness.hooks.Hooks` or a list of them, run before and after
    each tool call and after each model reply (see :mod:`primer.harness.hooks`).
    ``output_model``, a pydantic model class, is the shape the final answer must have (JSON
    text); an answer that fails gets ``config.output_retries`` corrective turns, then the run
    stops with ``invalid_output`` and ``final_text`` is ``None``; on success
    ``AgentResult.output`` holds the validated instance. ``scenario``, the name of the demo
    the run belongs to, is recorded in its checkpoint (if one is written). ``cancel``, a
    ``threading.Event`` (anything with ``is_set()``), is read before each model call and
    before each tool call starts: once set, the run stops with ``cancelled``, every
    finished result kept and every ``tool_use`` answered (calls that had not started get a
    ``not_run`` result); with ``config.checkpoint_dir`` the run is recorded there and
    :func:`~primer.harness.durable.checkpoint.resume` continues it.

    ``messages``, the history of a conversation that goes on (e.g. ``earlier.messages``),
    is sent before ``task``, which becomes the next user turn
    (:func:`~primer.loop.history.with_new_turn`); a ``tool_use`` in it without a result
    gets an error result first (:func:`~primer.loop.history.repair_history`, reported as
    a ``history_repaired`` event). The list is copied, never changed. Limits, budgets and
    ``steps`` are this run's; ``AgentResult.messages`` holds the whole conversation.

    Returns an :class:`AgentResult` (in the caller's thread); never raises for bad model
    output or failing tools. Exceptions from the model call end the run with
    ``model_error`` (work so far kept), except :class:`~primer.loop.model.ScriptExhausted`,
    a bug in a script, which propagates. ``TypeError`` for hooks that are not ``Hooks``;
    ``ValueError`` for ``messages`` that are not a history (:func:`history_problem`) and
    for a ``task`` that is blank or not a string (:func:`task_text`).

    A call that passes its time limit is answered as a timeout; a call that returns only
    after it is too (never as a late success). A tool holding the GIL in C code cannot be
    interrupted at all and holds the run until it returns: run it with
    :func:`~primer.harness.timeouts.run_in_subprocess` (see there for which tools need it).
    """
    state, writer = start_run(llm, task, tools, system=system, config=config,
                              on_event=on_event, trace=trace, hooks=hooks,
                              output_model=output_model, scenario=scenario, cancel=cancel,
                              messages=messages)
    try:
        return drive(state, lambda: continue_run(state))
    finally:
        if writer is not None:
            writer.close()


def start_run(llm: LLM, task: str, tools: ToolRegistry | Iterable[Tool] = (), *,
              system: str = "", config: AgentConfig | None = None,
              on_event: EventSink | None = None, trace: str | os.PathLike[str] | None = None,
              hooks: Hooks | Iterable[Hooks] | None = None,
              output_model: type[pydantic.BaseModel] | None = None,
              scenario: str | None = None, cancel: CancelSignal | None = None,
              messages: Sequence[Message] | None = None,
              ) -> tuple[RunState, TraceWriter | None]:
    """A new run's state, with ``task`` as its next user turn (after ``messages``, repaired)
    and ``run_start`` emitted, and its trace writer (``None`` without ``trace``): how
    :func:`run_agent` and the async loop both begin (arguments as for :func:`run_agent`;
    ``ValueError`` for ``messages`` that are not a history, and a blank ``task``: see
    :func:`task_text`). A lone surrogate in ``task`` or ``system`` becomes U+FFFD. The caller
    closes the writer."""
    task = task_text(task)
    if type(system) is str:
        system = valid_text(system)
    if messages is not None and (problem := history_problem(messages)) is not None:
        raise ValueError(f"run_agent(messages=...): {problem}")
    config = config or AgentConfig()
    writer = TraceWriter(trace, forward=on_event) if trace is not None else None
    registry = registry_for_run(tools, config)
    recorder = (JournalRecorder(Path(config.checkpoint_dir), scenario=scenario)
                if config.checkpoint_dir is not None else None)
    state = RunState(config=config, system=system, messages=[], registry=registry,
                     tool_defs=registry.definitions(), llm=llm,
                     recent_errors=deque(maxlen=config.no_progress_window or 1),
                     started_at=config.clock(), on_event=writer or on_event,
                     recorder=recorder, hooks=as_hook_list(hooks), output_model=output_model,
                     on_delta=on_event, cancel=cancel)
    if not messages:
        state.recount_prompt_estimate()
        state.emit("run_start", task=task, system=system, config=config.to_dict(),
                   tools=state.tool_defs)
        state.append(user_message(task))
    else:
        history = repair_history(messages)
        state.messages = with_new_turn(history.messages, task)
        state.tool_use_ids = tool_use_ids(history.messages)
        state.recount_prompt_estimate()
        state.emit("run_start", task=task, system=system, config=config.to_dict(),
                   tools=state.tool_defs, history=history.messages)
        if history.repaired:
            state.emit("history_repaired", tool_use_ids=history.repaired_ids)
    return state, writer


def task_text(task: object) -> str:
    """``task`` as the text of a user turn: valid Unicode (a lone surrogate becomes U+FFFD,
    as :func:`~primer.loop.text.valid_text` does). Raises ``ValueError`` for a task
    that is not a string or is blank (the Messages API rejects a turn with no text), before
    any model call."""
    if not isinstance(task, str) or not task.strip():
        raise ValueError(f"a turn needs some text to send, got {safe_repr(task, 60)}")
    return valid_text(task)


def continue_run(state: RunState) -> AgentResult:
    """The loop, from any state: check, call the model, check, run the tools, until an exit
    fires. Returns the run's :class:`AgentResult` (see :func:`run_agent`)."""
    while True:
        stop = first_stop(BEFORE_CALL, state)        # step limit, wall clock
        if stop is None:
            compact_if_needed(state)                 # summarise older turns past compact_share
            stop = first_stop(BEFORE_SEND, state) or call_model(state)
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
            return pause(state, stop)
        if stop is not None:
            return finish(state, stop, reply)
        stop = after_tools(state, reply.tool_uses)   # run them, one message of results, check
        if stop is not None:
            return finish(state, stop)


def drive(state: RunState, start: Callable[[], AgentResult]) -> AgentResult:
    """Run ``start()`` (the loop, or a resume's first step and then the loop) to its result.

    When no call of the run can have a time limit it runs in this thread. Otherwise it runs
    on a watched daemon worker thread while this thread waits, so that single calls run
    inline with no thread hand-off and a hung one is answered by :func:`carry_on`
    (:func:`~primer.harness.timeouts.run_watched`). The run is the current run meanwhile
    (:func:`~primer.harness.allowance.running`). The run's recorder is closed at the end.
    """
    limits = [t.timeout_s for t in state.registry if t.timeout_s is not None]
    if state.config.tool_timeout_s is not None:
        limits.append(state.config.tool_timeout_s)
    try:
        with running(state):  # the current run, for tools that spend (sub-agents)
            if not limits:
                return start()
            return run_watched(start, lambda hung: carry_on(state, hung), min(limits))
    finally:
        if state.recorder is not None:
            state.recorder.close()


def carry_on(state: RunState, hung: HungCall) -> AgentResult:
    """Finish a run whose inline call passed its time limit, from the run's state.

    The call's attempt counts as timed out: the runner goes on as if it had raised (a
    read-only tool may be retried), its ``after_tool`` hooks run and a side effect's outcome
    is recorded; then the rest of the reply's calls go the usual :func:`after_tools` way
    (``hung.section`` holds the reply's calls and those already settled) and the loop
    continues. The thread that was running the call is abandoned.
    """
    calls, settled = hung.section
    assert state.runner is not None
    tool = state.registry.get(hung.block.get("name"))
    execution = finish_call(state, hung.block, state.runner.resume_timed_out(hung),
                            tool is not None and tool.side_effecting)
    stop = after_tools(state, calls, {**settled, execution.tool_use_id: execution})
    return finish(state, stop) if stop is not None else continue_run(state)
