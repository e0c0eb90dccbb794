"""A plain Messages-API conversation saved as JSON, read as a
:class:`~primer.harness.tracing.trace.Trace`.

Any framework, or the ``anthropic`` SDK itself, can dump the conversation of a run: the
``messages`` list in the Anthropic Messages shape. :func:`read_conversation` turns that dump
into an in-memory :class:`Trace` (no ``stop`` line: a conversation does not say why it ended),
so everything that reads traces reads it too. :func:`load_run` reads a file that holds either.

The file holds one JSON value, either the list of messages or an object::

    {"system": "...",                       # optional: a string or a list of text blocks
     "tools": [{"name", "description", "input_schema"}, ...],   # optional
     "messages": [
        {"role": "user", "content": "What does order A123 cost?"},
        {"role": "assistant", "content": [...blocks...],
         "stop_reason": "tool_use",          # optional (the SDK's Message has it)
         "usage": {"input_tokens": 812, "output_tokens": 40}},   # optional
        {"role": "user", "content": [{"type": "tool_result", ...}]},
        ...],
     "usage": [{...}, ...]}                  # optional: one usage per assistant message

which is what ``{"messages": [m.model_dump() for m in history], ...}`` gives for the SDK's
message objects. Each assistant message is one model call. Usage a call does not report is
estimated the way :class:`~primer.loop.model.ScriptedLLM` reports it (characters / 4 of the
system prompt, tool definitions and messages sent; of the reply for output), and
:attr:`Trace.notes` says so. :func:`to_conversation` writes a trace back in this shape.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from primer.harness.files import UnreadableFile, read_text
from primer.loop.config import AgentConfig
from primer.loop.messages import Block, Message, ToolUseBlock, text_block, text_of, tool_uses_of
from primer.loop.model import STOP_REASONS, Usage, estimate_tokens
from primer.loop.result import not_run
from primer.loop.state import Stop, StopCause
from primer.loop.text import JSONRefused, parse_json

from .trace import (
    FORMAT_NAME,
    FORMAT_VERSION,
    PathLike,
    Trace,
    TraceError,
    check_record,
    load_trace,
)

#: The ``recorded_as`` field of the ``run_start`` event of a trace read from a conversation.
RECORDED_AS = "conversation"

#: The limits a conversation is read with: none of the harness's guards are on (a
#: conversation records no settings), so a what-if replay changes one guard at a time.
CONVERSATION_CONFIG: dict[str, Any] = {
    "max_steps": 1, "token_budget": None, "repeat_threshold": None, "offer_handoff": False,
    "context_stop_share": 1.0, "compact_share": None, "tool_timeout_s": None,
    "tool_retries": 0, "model_retries": 0}


def load_run(path: PathLike, *, context_window: int | None = None) -> Trace:
    """Read ``path``: a primer trace (JSON Lines) or a Messages-API conversation (JSON).

    A file whose text is one JSON list, or one object with a ``messages`` key, is a
    conversation (:func:`read_conversation`; ``context_window``, in tokens, is the model's
    window, default :class:`AgentConfig`'s); anything else is read by
    :func:`~primer.harness.tracing.trace.load_trace`. Either way the record is checked
    (:func:`~primer.harness.tracing.trace.check_record`). The file is read with
    :func:`~primer.harness.files.read_bounded` (a FIFO or a device never is). Raises
    :class:`TraceError` with one clear sentence for a missing, unreadable or malformed file.
    """
    p = Path(path)
    try:
        stripped = read_text(p).lstrip()
    except UnreadableFile as e:
        if e.missing:
            raise TraceError(f"{p}: no such file. Give a trace (JSON Lines, as run_agent(..., "
                             f"trace=PATH) writes it) or a conversation saved as JSON.") \
                from None
        raise TraceError(f"{p}: {e.reason}; give a trace or conversation file (JSON text).") \
            from None
    whole = None
    if stripped[:1] in ("[", "{"):
        try:
            whole = parse_json(stripped)
        except JSONRefused as e:  # JSON Lines (a trace) is not one JSON value: fine
            if stripped[:1] == "[" or not _first_line_is_event(stripped):
                raise TraceError(f"{p}: {e.reason}. A conversation file holds one JSON value "
                                 f"(a list of messages, or an object with 'messages').") \
                    from None
    if isinstance(whole, list) or (isinstance(whole, dict) and "messages" in whole):
        return read_conversation(whole, source=p, context_window=context_window)
    return load_trace(p)


def _first_line_is_event(text: str) -> bool:
    try:
        first = parse_json(text.split("\n", 1)[0])
    except JSONRefused:
        return False
    return isinstance(first, dict) and "event" in first


def read_conversation(data: Any, *, source: PathLike | None = None,
                      context_window: int | None = None) -> Trace:
    """A conversation (a list of messages, or an object with ``messages``) as a :class:`Trace`.

    The first message must be the user's task; each assistant message becomes a
    ``model_call`` event and each ``tool_result`` in the user message after it a
    ``tool_execution`` event (paired with its ``tool_use`` by id). The trace's config is
    :data:`CONVERSATION_CONFIG` with ``max_steps`` = the number of model calls. Raises
    :class:`TraceError` naming the first bad place (e.g. ``messages[3].content[0]``).
    """
    where = str(source) if source is not None else "conversation"
    if isinstance(data, list):
        data = {"messages": data}
    if not isinstance(data, dict):
        raise TraceError(f"{where}: a conversation is a list of messages or an object with "
                         f"'messages', not {type(data).__name__}.")
    messages = _checked_messages(where, data.get("messages"))
    system = _system_text(where, data.get("system", ""))
    tools = _checked_tools(where, data.get("tools") or [])
    usages = data.get("usage")
    if usages is not None and not isinstance(usages, list):
        raise TraceError(f"{where}: 'usage' must be a list with one usage per assistant "
                         f"message.")
    window: dict[str, Any] = {"context_window": context_window} if context_window else {}
    config = AgentConfig(**{**CONVERSATION_CONFIG,
                            "max_steps": max(1, sum(m["role"] == "assistant"
                                                    for m in messages))},
                         **window)
    # the library's prompt estimate (characters/4), kept as messages arrive
    prompt_estimate = estimate_tokens(system) + estimate_tokens(tools)
    events: list[dict[str, Any]] = [{
        "event": "run_start", "seq": 0, "t": 0.0, "format": FORMAT_NAME,
        "version": FORMAT_VERSION, "recorded_as": RECORDED_AS,
        "task": text_of(messages[0]["content"]), "system": system, "config": config.to_dict(),
        "tools": tools}]
    estimated = 0
    step = 0
    calls: dict[str, ToolUseBlock] = {}
    for k, m in enumerate(messages):
        if m["role"] == "assistant":
            step += 1
            content = _blocks(m["content"])
            usage = _usage(where, k, m.get("usage") if m.get("usage") is not None else (
                usages[step - 1] if usages is not None and step <= len(usages) else None))
            if usage is None:
                estimated += 1
                usage = Usage(prompt_estimate, estimate_tokens(content))
            stop_reason = m.get("stop_reason") or ("tool_use" if tool_uses_of(content)
                                                   else "end_turn")
            if stop_reason not in STOP_REASONS:
                raise TraceError(f"{where}: messages[{k}].stop_reason {stop_reason!r} is not "
                                 f"one of {', '.join(STOP_REASONS)}.")
            events.append({"event": "model_call", "step": step,
                           "prompt_estimate": prompt_estimate,
                           "reply": {"content": content, "stop_reason": stop_reason,
                                     "usage": usage.to_dict(), "model": m.get("model", "")},
                           "latency_s": 0.0})
            calls = {b.get("id"): b for b in tool_uses_of(content)}
        else:
            for b in _blocks(m["content"]):
                if b.get("type") == "tool_result" and step:
                    # read as a plain mapping: its tool_use_id is checked to be a string, but
                    # a conversation's result content may be a list of blocks (as the API's)
                    result: Mapping[str, Any] = b
                    call: Mapping[str, Any] = calls.get(result["tool_use_id"], {})
                    events.append({"event": "tool_execution", "step": step,
                                   "tool_use_id": str(result.get("tool_use_id")),
                                   "name": str(call.get("name", "?")),
                                   "input": call.get("input", {}),
                                   "content": _result_text(result.get("content")),
                                   "is_error": bool(result.get("is_error")), "error_kind": None,
                                   "attempts": 1, "latency_s": 0.0})
        prompt_estimate += estimate_tokens({"role": m["role"], "content": m["content"]})
    for n, e in enumerate(events):
        e.setdefault("seq", n)
        e.setdefault("t", 0.0)
    notes = []
    if estimated:
        notes.append(f"{estimated} of {step} model calls report no usage: their tokens are "
                     f"estimated (characters / 4)")
    if not tools:
        notes.append("no tool definitions saved: tool names and inputs are not checked")
    return check_record(Trace(Path(source) if source is not None else None, events, notes))


def to_conversation(trace: Trace) -> dict[str, Any]:
    """A trace as the conversation JSON :func:`read_conversation` reads (usage per call).

    The messages are :meth:`Trace.messages` with each assistant message carrying its
    ``stop_reason`` and ``usage``; ``system`` and ``tools`` come from the trace. When the
    run stopped on a reply that asked for tools, the loop answered those calls "not run"
    (the trace records the stop, not those answers): they are written as the loop wrote
    them, so the conversation is the one the run ended with. A run paused for approval, or
    one with no stop line, ends on its unanswered ``tool_use``, as it did.
    """
    replies = iter(trace.replies())
    messages: list[Mapping[str, Any]] = []
    for m in trace.messages():
        entry: Mapping[str, Any] = m
        if m["role"] == "assistant":
            reply = next(replies)
            entry = {**m, "stop_reason": reply.stop_reason, "usage": reply.usage.to_dict()}
        messages.append(entry)
    stop = trace.stop
    last = messages[-1]
    if (stop is not None and last["role"] == "assistant" and trace.stop_cause
            is not StopCause.AWAITING_APPROVAL and tool_uses_of(last["content"])):
        why = Stop(StopCause(stop["cause"]), str(stop.get("detail", "")))
        messages.append({"role": "user", "content": [
            not_run(b, why).result_block() for b in tool_uses_of(last["content"])]})
    return {"system": trace.system, "tools": trace.tools, "messages": messages}


def _checked_messages(where: str, messages: Any) -> list[Message]:
    if not isinstance(messages, list) or not messages:
        raise TraceError(f"{where}: 'messages' must be a non-empty list of messages.")
    for k, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
            raise TraceError(f"{where}: messages[{k}] must be an object with role 'user' or "
                             f"'assistant'.")
        content = m.get("content")
        if not isinstance(content, str | list):
            raise TraceError(f"{where}: messages[{k}].content must be a string or a list of "
                             f"blocks.")
        if isinstance(content, list):
            for j, b in enumerate(content):
                if not isinstance(b, dict) or not isinstance(b.get("type"), str):
                    raise TraceError(f"{where}: messages[{k}].content[{j}] must be a block "
                                     f"with a 'type'.")
                if b["type"] == "text" and not isinstance(b.get("text"), str):
                    raise TraceError(f"{where}: messages[{k}].content[{j}] is a text block "
                                     f"whose text is not a string.")
                if b["type"] == "tool_use" and not (
                        isinstance(b.get("id"), str) and isinstance(b.get("name"), str)
                        and isinstance(b.get("input"), dict)):
                    raise TraceError(f"{where}: messages[{k}].content[{j}] is a tool_use "
                                     f"block whose id and name must be strings and input an "
                                     f"object.")
                if b["type"] == "tool_result" and not isinstance(b.get("tool_use_id"), str):
                    raise TraceError(f"{where}: messages[{k}].content[{j}] is a tool_result "
                                     f"block whose tool_use_id must be a string.")
    if messages[0]["role"] != "user":
        raise TraceError(f"{where}: messages[0] must be the user's task (role 'user').")
    return messages


def _checked_tools(where: str, tools: Any) -> list[dict[str, Any]]:
    if not isinstance(tools, list) or not all(
            isinstance(t, dict) and isinstance(t.get("name"), str) for t in tools):
        raise TraceError(f"{where}: 'tools' must be a list of tool definitions, each with a "
                         f"'name'.")
    return tools


def _system_text(where: str, system: Any) -> str:
    if isinstance(system, str):
        return system
    if isinstance(system, list) and all(isinstance(b, dict) for b in system):
        return "\n".join(str(b.get("text", "")) for b in system)
    raise TraceError(f"{where}: 'system' must be a string or a list of text blocks.")


def _usage(where: str, k: int, usage: Any) -> Usage | None:
    if usage is None:
        return None
    try:
        if not isinstance(usage, dict):
            raise TypeError
        u = Usage.from_dict(usage)
    except (TypeError, ValueError) as e:
        raise TraceError(f"{where}: the usage of messages[{k}] must be an object of token "
                         f"counts, e.g. {{\"input_tokens\": 812, \"output_tokens\": 40}} "
                         f"({e}).") from None
    return u


def _blocks(content: str | list[Block]) -> list[Block]:
    return [text_block(content)] if isinstance(content, str) else list(content)


def _result_text(content: Any) -> str:
    """A ``tool_result``'s content as text: a string, or its text blocks joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return "" if content is None else json.dumps(content, ensure_ascii=False)
