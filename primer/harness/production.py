"""The production loop: the core's ``continue_run`` with the harness plugged into its seams.

:func:`primer.loop.loop.run_agent` is the whole loop: every exit, budget and check. What
production adds changes none of it; each piece plugs into a seam the core already has
(:class:`~primer.loop.state.RunInputs`), and :func:`start_production` is the list:

* the **tool runner** (``runner``): :class:`~primer.harness.runner.ToolRunner` gives each
  call a time limit (:mod:`primer.harness.timeouts`: a timer on the main thread, a worker
  thread elsewhere; the loop stays on the caller's thread), retries transient errors with
  backoff, keeps side effects to one attempt unless they take an idempotency key, and wraps
  each call in the run's ``before_tool`` / ``after_tool`` hooks;
* the **event sink** (``on_event``): a :class:`~primer.harness.tracing.trace.TraceWriter`
  records every event as a JSON Lines trace, and forwards it to the caller's listener;
  ``after_reply`` hooks listen there too;
* the **recorder** (``recorder``): with ``config.checkpoint_dir``, a
  :class:`~primer.harness.durable.recorder.JournalRecorder` makes the run durable (a pause
  for approval, every side effect), so :func:`~primer.harness.durable.resume.resume` can
  continue it in another process;
* the **reply check** (``block_check``): a reply's thinking and server-tool blocks are
  checked against the Messages API's own request types
  (:func:`~primer.harness.request_check.block_problem`) before they are sent back;
* the **current run** (:func:`~primer.harness.allowance.running`): a tool that spends
  tokens itself (a sub-agent) can see what the run has left.

Model wrappers plug in where any model does: a :class:`~primer.harness.fallback.FallbackLLM`
or a streaming model is just the ``llm``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from primer.loop.config import DEFAULT_CONFIG, AgentConfig
from primer.loop.loop import continue_run, drive, start_run
from primer.loop.messages import Message
from primer.loop.model import LLM, EventSink
from primer.loop.result import AgentResult
from primer.loop.state import CancelSignal, RunState, registry_for_run
from primer.loop.tools import Tool, ToolRegistry

from .allowance import running
from .durable.recorder import JournalRecorder
from .hooks import Hooks, after_reply_sink, as_hook_list
from .request_check import block_problem
from .runner import ToolRunner
from .tracing.trace import TraceWriter

if TYPE_CHECKING:
    import pydantic


def run_production(llm: LLM, task: str, tools: ToolRegistry | Iterable[Tool] = (), *,
                   system: str = "", config: AgentConfig | None = None,
                   on_event: EventSink | None = None,
                   trace: str | os.PathLike[str] | None = None,
                   hooks: Hooks | Iterable[Hooks] | None = None,
                   output_model: type[pydantic.BaseModel] | None = None,
                   scenario: str | None = None, cancel: CancelSignal | None = None,
                   messages: Sequence[Message] | None = None,
                   session: tuple[str, int] | None = None) -> AgentResult:
    """:func:`~primer.loop.loop.run_agent` with the production harness plugged in.

    Arguments as for ``run_agent``, plus ``trace`` (a file path: every event recorded there
    as JSON Lines while the run goes; a streaming model's deltas go to ``on_event`` only),
    ``hooks`` (a :class:`~primer.harness.hooks.Hooks` or a list: before and after each tool
    call, after each model reply), ``scenario`` (the demo's name, kept in a checkpoint) and
    ``session`` (``(session id, turn)``: signed into the checkpoint, so only that turn resumes
    it).
    ``config.tool_timeout_s``, ``tool_retries`` and ``checkpoint_dir`` take effect here (the
    core loop has no time limits, tool retries or journal).

    The loop runs on this thread. A call that passes its limit is answered as a timeout (one
    that returns only after it too, never as a late success): on the main thread a timer
    interrupts it, elsewhere it is abandoned on a worker thread. A tool holding the GIL in C
    code cannot be interrupted and holds the run until it returns: run it with
    :func:`~primer.harness.timeouts.run_in_subprocess`. With ``cancel`` each call runs on a
    thread of its own (:func:`~primer.loop.steps.run_watched`), so its limit is kept the
    second way, and a cancel kills a subprocess tool's process and cancels an MCP request
    (:func:`~primer.harness.allowance.cancel_requested`). Raises what ``run_agent`` raises,
    and ``TypeError`` for hooks that are not ``Hooks``.
    """
    state, writer = start_production(llm, task, tools, system=system, config=config,
                                     on_event=on_event, trace=trace, hooks=hooks,
                                     output_model=output_model, scenario=scenario,
                                     cancel=cancel, messages=messages, session=session)
    try:
        with running(state):  # the current run, for tools that spend (sub-agents)
            return drive(state, continue_run(state))
    finally:
        if writer is not None:
            writer.close()


def start_production(llm: LLM, task: str, tools: ToolRegistry | Iterable[Tool] = (), *,
                     system: str = "", config: AgentConfig | None = None,
                     on_event: EventSink | None = None,
                     trace: str | os.PathLike[str] | None = None,
                     hooks: Hooks | Iterable[Hooks] | None = None,
                     output_model: type[pydantic.BaseModel] | None = None,
                     scenario: str | None = None, cancel: CancelSignal | None = None,
                     messages: Sequence[Message] | None = None,
                     session: tuple[str, int] | None = None
                     ) -> tuple[RunState, TraceWriter | None]:
    """A new production run's state and its trace writer (``None`` without ``trace``; the
    caller closes it): what the harness adds, one seam a line. Arguments as for
    :func:`run_production`."""
    config = config or DEFAULT_CONFIG
    hook_list = as_hook_list(hooks)
    writer = TraceWriter(trace, forward=on_event) if trace is not None else None
    registry = registry_for_run(tools, config.offer_handoff)
    state = start_run(
        llm, task, registry, system=system, config=config, output_model=output_model,
        cancel=cancel, messages=messages,
        runner=ToolRunner.from_config(registry, config, hook_list),  # limits, retries, hooks
        on_event=writer or on_event,                                 # the trace
        on_delta=on_event,                                           # deltas: the caller only
        recorder=(JournalRecorder(Path(config.checkpoint_dir), scenario=scenario,
                                  session=session)
                  if config.checkpoint_dir is not None else None),   # the checkpoint journal
        block_check=block_problem)                                   # the API's block types
    if hook_list:                                                    # after_reply hooks
        sink = after_reply_sink(hook_list, state, state.inputs.on_event)
        state.inputs = dataclasses.replace(state.inputs, on_event=sink)
    return state, writer
