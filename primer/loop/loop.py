"""The loop: ``run_agent``, and ``continue_run``, the loop itself, every phase a line.

The model is stateless and cannot stop itself; the harness owns every exit. One step is one
model call. :func:`continue_run` reads top to bottom as one turn: the checks before the call
(:mod:`primer.loop.checks`), the model call, the checks on the reply, the tools, the checks
after them (each step one of :mod:`primer.loop.steps`). The lines that wait on the world
``yield`` what they wait for: :func:`drive` does it on the caller's thread, and the async loop
(:mod:`primer.harness.async_loop`) awaits the very same loop. Every run ends with a
:class:`~primer.loop.state.StopCause` and a summary of what it finished and why it stopped.
"""

from __future__ import annotations

import sys
from collections.abc import Generator, Iterable, Sequence
from types import CoroutineType
from typing import TYPE_CHECKING, Any

from .checks import (
    AFTER_REPLY,
    BEFORE_CALL,
    BEFORE_SEND,
    check_output,
    first_stop,
)
from .config import DEFAULT_CONFIG, AgentConfig, Summarizer
from .messages import (
    Block,
    Message,
    blocks_of,
    history_problem,
    repair_history,
    text_block,
    tool_use_ids,
    unanswered_tool_uses,
    user_message,
    valid_text,
    with_new_turn,
)
from .model import LLM, EventSink, Reply, Usage, estimate_tokens, run_to_completion
from .result import AgentResult, finish_pause, start_pause
from .state import (
    BlockCheck,
    CallRunner,
    CancelSignal,
    Recorder,
    RunInputs,
    RunState,
    StopCause,
    prompt_tokens,
    registry_for_run,
)
from .steps import (
    ModelCall,
    Raised,
    ToolCalls,
    Wait,
    add_results,
    call_model,
    calls_to_run,
    run_calls,
    wrap_up,
)
from .text import safe_repr, safe_str
from .tools import Tool, ToolRegistry

if TYPE_CHECKING:
    import pydantic

#: The loop as the drivers see it: it yields what it waits for and returns the result.
Turns = Generator[Wait, Any, AgentResult]


def run_agent(llm: LLM, task: str, tools: ToolRegistry | Iterable[Tool] = (), *,
              system: str = "", config: AgentConfig | None = None,
              on_event: EventSink | None = None,
              output_model: type[pydantic.BaseModel] | None = None,
              cancel: CancelSignal | None = None,
              messages: Sequence[Message] | None = None) -> AgentResult:
    """Run the agent loop on ``task`` until one of its exits fires, on this thread.

    ``llm`` is any :class:`~primer.loop.model.LLM`; ``tools`` a registry or a list (the
    allow-list); ``config`` every limit and price. ``on_event(kind, data)`` is called as the
    run goes (``run_start``, ``model_call``, ``tool_execution``, ``stop``, ...; a streaming
    model's deltas too). ``output_model`` (a pydantic model class) is the shape of the final
    answer (JSON text): a failing one gets ``config.output_retries`` corrective turns, then
    the run stops with ``invalid_output``; else ``AgentResult.output`` holds it. ``cancel``
    (anything with ``is_set()``, read before each model call and tool call, while a tool
    runs and at each streamed delta): once set, the run stops with ``cancelled``, every
    ``tool_use`` answered. A running tool holds it at most
    :data:`~primer.loop.steps.CANCEL_POLL_S` + :data:`~primer.loop.steps.CANCEL_GRACE_S`
    (0.27 s), then is answered ``cancelled`` (:func:`~primer.loop.steps.run_watched`); a
    streaming call closes at its next delta (its text kept in ``partial_text``); a call that
    does not stream is waited for. ``messages``, a conversation's
    history, goes before ``task`` (repaired first, never changed: :func:`repair_history`).

    The core loop: no time limits, no tool retries (a model call's transient error is retried,
    ``config.model_retries``); :func:`primer.harness.production.run_production` plugs those in
    (and traces, hooks, checkpoints) through :class:`~primer.loop.state.RunInputs`.
    Returns an :class:`AgentResult`; never raises for bad model output or failing tools: a
    raising model call ends the run with ``model_error`` (work kept), but
    :class:`~primer.loop.model.ScriptExhausted` (a bug in a script) propagates. ``ValueError``
    for ``messages`` that are not a history and for a blank task.
    """
    state = start_run(llm, task, tools, system=system, config=config, on_event=on_event,
                      output_model=output_model, cancel=cancel, messages=messages)
    return drive(state, continue_run(state))


def continue_run(state: RunState) -> Turns:
    """The loop, from any state, as a generator: each line that waits yields a ``ModelCall``,
    ``ToolCalls`` or ``Sleep`` (:mod:`~primer.loop.steps`) to the driver and gets back what it
    got; when an exit fires it returns the run's :class:`AgentResult` (``StopIteration``)."""
    while True:
        stop = first_stop(BEFORE_CALL, state)                # 1. before the call: steps, clock
        if stop is None:
            compact_if_needed(state)                         #    (older turns summarised)
            stop = first_stop(BEFORE_SEND, state)            #    context window, budgets ahead
        if stop is None:
            stop = yield from call_model(state)              # 2. the model call
        if stop is not None:
            return (yield from wrap_up(state, stop))         #    (at a limit: a last answer)
        reply = state.last_reply
        stop = first_stop(AFTER_REPLY, state)                # 3. checks on the reply
        if stop is not None and stop.cause is StopCause.END_TURN and state.inputs.output_model:
            verdict = check_output(state)                    #    the answer's shape
            if verdict.corrective is not None:
                state.append(verdict.corrective)             #    a corrective turn: ask again
                continue
            stop = verdict.stop
        if stop is not None and stop.cause is StopCause.AWAITING_APPROVAL:
            ran = yield ToolCalls(start_pause(state), record_all=True)
            return finish_pause(state, stop, ran)            #    paused for a person
        if stop is not None:
            return (yield from wrap_up(state, stop, reply))
        ran = yield ToolCalls(calls_to_run(state, reply.tool_uses))   # 4. running the tools
        stop = add_results(state, reply.tool_uses, ran)      # 5. checks after the tools
        if stop is not None:
            return (yield from wrap_up(state, stop))


def drive(state: RunState, turns: Turns) -> AgentResult:
    """Run ``turns`` (:func:`continue_run`, or a resume that ends in it) on this thread:
    make each model call it asks for, run each batch of tool calls, sleep each backoff, and
    hand back what came of it. Returns the run's result; the run's recorder is closed."""
    outcome: Any = None
    try:
        while True:
            try:
                wait = turns.send(outcome)
            except StopIteration as end:
                result: AgentResult = end.value
                return result
            if isinstance(wait, ModelCall):
                outcome = ask(state.inputs.llm, wait.request)
            elif isinstance(wait, ToolCalls):
                outcome = run_calls(state, wait.calls, wait.record_all)
            else:  # a Sleep: the backoff before a model call's next attempt
                state.config.sleep(wait.seconds)
                outcome = None
    finally:
        if state.inputs.recorder is not None:
            state.inputs.recorder.close()


def ask(llm: LLM, request: dict[str, Any]) -> object:
    """One attempt of a model call: what ``llm(**request)`` returned (a coroutine, from an
    ``async def`` model, run to completion), or :class:`~primer.loop.steps.Raised` with what
    it raised (``KeyboardInterrupt``, ``SystemExit`` and other ``BaseException`` s propagate,
    but not ``asyncio.CancelledError``: nothing cancels a sync run, so it is the model's own,
    an SDK's inner cancel scope say)."""
    try:
        raw = llm(**request)
        if type(raw) is Reply:
            return raw
        return run_to_completion(raw) if isinstance(raw, CoroutineType) else raw
    except (Exception, GeneratorExit) as e:  # noqa: BLE001 - the loop decides what follows
        return Raised(e)
    except BaseException as e:
        asyncio = sys.modules.get("asyncio")  # not imported: nothing could have raised it
        if asyncio is not None and isinstance(e, asyncio.CancelledError):
            return Raised(e)
        raise


def start_run(llm: LLM, task: str, tools: ToolRegistry | Iterable[Tool] = (), *,
              system: str = "", config: AgentConfig | None = None,
              on_event: EventSink | None = None,
              output_model: type[pydantic.BaseModel] | None = None,
              cancel: CancelSignal | None = None,
              messages: Sequence[Message] | None = None,
              runner: CallRunner | None = None, recorder: Recorder | None = None,
              on_delta: EventSink | None = None,
              block_check: BlockCheck | None = None) -> RunState:
    """A new run's state, with ``task`` as its next user turn (after ``messages``, repaired)
    and ``run_start`` emitted: how every loop begins (arguments as for :func:`run_agent`).

    The seams are :class:`~primer.loop.state.RunInputs`' (``on_delta`` defaults to
    ``on_event``). ``ValueError`` for ``messages`` that are not a history and a blank ``task``
    (:func:`task_text`); a lone surrogate in ``task`` or ``system`` becomes U+FFFD.
    """
    task = task_text(task)
    if type(system) is str:
        system = valid_text(system)
    if messages is not None and (problem := history_problem(messages)) is not None:
        raise ValueError(f"run_agent(messages=...): {problem}")
    config = config or DEFAULT_CONFIG
    registry = registry_for_run(tools, config.offer_handoff)
    inputs = RunInputs(config, system, registry, registry.definitions(), llm,
                       runner or registry.run, recorder, on_event,
                       on_delta if on_delta is not None else on_event, output_model, cancel,
                       block_check)
    state = RunState(inputs, started_at=config.clock())
    history = repair_history(messages) if messages else None
    state.messages = with_new_turn(history.messages, task) if history else [user_message(task)]
    if history is not None:
        state.tool_use_ids = tool_use_ids(history.messages)
    state.recount_prompt_estimate()  # (each message estimated once)
    if on_event is not None:  # (the event's dicts are built only for a listener)
        state.emit("run_start", task=task, system=system, config=config.to_dict(),
                   tools=inputs.tool_defs,
                   **({"history": history.messages} if history is not None else {}))
        if history is not None and history.repaired:
            state.emit("history_repaired", tool_use_ids=history.repaired_ids)
    return state


def task_text(task: object) -> str:
    """``task`` as the text of a user turn: valid Unicode (a lone surrogate becomes U+FFFD).
    Raises ``ValueError`` for a task that is not a string or is blank (the Messages API
    rejects a turn with no text), before any model call."""
    if not isinstance(task, str) or not task.strip():
        raise ValueError(f"a turn needs some text to send, got {safe_repr(task, 60)}")
    return valid_text(task)


# ---------------------------------------------------------------- compaction

#: The text that opens the summary block in the first user message.
SUMMARY_HEADER = "Summary of earlier turns (older messages were compacted):"


def compaction_cut(messages: list[Message], keep_turns: int) -> int | None:
    """The index where the kept tail starts, or ``None`` when there is nothing to compact: the
    ``keep_turns``-th assistant message from the end, so a ``tool_use`` and its
    ``tool_result`` are summarised together or kept together, never split."""
    assistants = [k for k, m in enumerate(messages) if m.get("role") == "assistant" and k > 0]
    if len(assistants) <= keep_turns:
        return None
    cut = assistants[-keep_turns]
    return cut if cut > 1 else None


def latest_user_text(messages: Sequence[Message]) -> int | None:
    """The index of the last user message holding text (not only ``tool_result`` blocks, not
    only a compaction summary): in a conversation (``run_agent(messages=...)``) the current
    question, else the task or a corrective turn. ``None`` when there is none."""
    for k in range(len(messages) - 1, -1, -1):
        m = messages[k]
        if m.get("role") == "user" and _texts(m):
            return k
    return None


def _texts(message: Message) -> list[Block]:
    """The text blocks of ``message`` that are not a compaction summary."""
    return [b for b in blocks_of(message.get("content", ""))
            if b.get("type") == "text" and not str(b.get("text", "")).startswith(SUMMARY_HEADER)]


def compact_messages(messages: list[Message], summarizer: Summarizer,
                     keep_turns: int = 2) -> tuple[list[Message], Usage] | None:
    """Older turns replaced by a summary: ``(new_messages, usage)``, or ``None`` if too short.

    ``new_messages[0]`` holds the task, the latest user text word for word when the cut
    passes it (:func:`latest_user_text`: the current question is never summarised away), and
    :data:`SUMMARY_HEADER` with the summary of the rest of ``messages[:cut]``; then the kept
    tail, unchanged. An earlier summary reaches the summariser inside ``messages[0]`` and is
    folded in, not lost. ``usage``: what the summariser reported (zero for an offline one).
    """
    cut = compaction_cut(messages, keep_turns)
    if cut is None:
        return None
    head = list(messages[:cut])
    latest = latest_user_text(messages)
    pinned: list[Block] = []
    if latest is not None and 0 < latest < cut:  # the cut passes the latest user text
        pinned = _texts(messages[latest])
        rest = [b for b in blocks_of(messages[latest].get("content", "")) if b not in pinned]
        head[latest] = {**messages[latest], "content": rest}  # summarise only its results
    out = summarizer(head)
    text, usage = out if isinstance(out, tuple) else (out, Usage())
    first = user_message([*_texts(messages[0]), *pinned,
                          text_block(f"{SUMMARY_HEADER}\n{text}")])
    return [first, *messages[cut:]], usage


def compact_if_needed(state: RunState) -> None:
    """The loop's compaction step, before each model call: once :func:`prompt_tokens` passes
    ``compact_share × context_window``, first the cheaper rung, ``config.context_editor``
    (:func:`edit_context`); if the prompt is still past the share and ``config.summarizer``
    is set (e.g. one of
    :mod:`primer.harness.summaries`), compact ``state.messages`` in place, add the
    summariser's usage to the totals and emit ``compaction`` (the prompt's tokens before and
    after). A summariser that raises is a ``compaction_failed`` event; the run goes on
    uncompacted, still guarded by the context-window stop."""
    c = state.config
    if c.compact_share is None or (c.summarizer is None and c.context_editor is None):
        return
    limit = int(c.context_window * c.compact_share)
    before = prompt_tokens(state)
    if before <= limit:
        return
    before = edit_context(state, before)
    if before <= limit or c.summarizer is None:
        return
    try:
        done = compact_messages(state.messages, c.summarizer, c.compact_keep_turns)
    except Exception as e:  # noqa: BLE001 - a failed summary must not end the run
        state.emit("compaction_failed", step=state.model_calls + 1,
                   error=f"{type(e).__name__}: {e}")
        return
    if done is None:
        return
    new, usage = done
    if not isinstance(usage, Usage) or not isinstance(new, list):
        state.emit("compaction_failed", step=state.model_calls + 1,
                   error=f"the summariser returned usage of type {type(usage).__name__}; "
                         f"it must return a Usage")
        return
    state.messages[:] = new
    state.recount_prompt_estimate()
    state.add_usage(usage)
    state.compactions += 1
    state.emit("compaction", step=state.model_calls + 1, before_tokens=before,
               after_tokens=prompt_tokens(state), messages=len(state.messages))


def edit_context(state: RunState, before: int) -> int:
    """The context editor's turn (``config.context_editor``, e.g.
    :class:`primer.harness.context_editing.ClearToolResults`), before a summary: the list it
    returns replaces ``state.messages`` (a new list; the prompt estimate counted again for the
    messages it changed) and ``context_edited`` is emitted (the prompt's tokens ``before`` and
    after). Returns the prompt's tokens after. An editor that raises, or returns a list that
    is not a valid history (:func:`history_problem`, or a ``tool_use`` left without its
    ``tool_result``), is a ``context_edit_failed`` event and changes nothing."""
    editor = state.config.context_editor
    if editor is None:
        return before
    old = state.messages
    try:
        new = editor(old, state.inputs.registry)
        problem = None if new is None else history_problem(new) or (
            f"the edit left tool_use ids without a tool_result: {', '.join(unanswered)}"
            if (unanswered := unanswered_tool_uses(new)) else None)
    except Exception as e:  # noqa: BLE001 - a failed edit must not end the run
        new, problem = None, f"{type(e).__name__}: {safe_str(e)}"
    if problem is not None:
        state.emit("context_edit_failed", step=state.model_calls + 1, error=problem)
    if new is None or problem is not None or new is old:
        return before
    state.messages = list(new)  # (a new list: a model that counts a list it saw counts afresh)
    if len(new) == len(old):
        state.prompt_estimate += sum(estimate_tokens(n) - estimate_tokens(o)
                                     for n, o in zip(new, old, strict=True) if n is not o)
    else:
        state.recount_prompt_estimate()
    after = prompt_tokens(state)
    state.emit("context_edited", step=state.model_calls + 1, before_tokens=before,
               after_tokens=after, messages=len(new))
    return after
