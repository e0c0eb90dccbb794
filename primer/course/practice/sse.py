"""Lesson 15's exercise: turn a Messages API event stream back into the reply.

The learner writes ``accumulate(events) -> reply``: ``events`` is the list of server-sent
events of one streamed reply, each a dict as the API sends it (``message_start``,
``content_block_start``, ``content_block_delta`` with a ``text_delta``,
``input_json_delta``, ``thinking_delta`` or ``signature_delta``, ``content_block_stop``,
``message_delta``, ``message_stop``, ``ping``, ``error``); the reply is the message dict
``{"content": [block, ...], "stop_reason": str, "usage": {...}, ...}``. A stream that ends
without ``message_stop``, or carries an ``error`` event, must raise: it is not a reply.

:func:`check_accumulator` feeds it streams made by :func:`primer.harness.streaming.wire_events`
(the events the course's server sends) for replies the learner has not seen.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from primer.course.checking import Case, ExerciseReport, Problem, run_cases, short
from primer.harness.streaming import wire_events

Accumulate = Callable[[list[dict[str, Any]]], Any]

_USAGE = {"input_tokens": 310, "output_tokens": 57}


def _message(content: list[dict[str, Any]], stop_reason: str = "end_turn") -> dict[str, Any]:
    return {"id": "msg_check", "type": "message", "role": "assistant", "model": "checker",
            "content": content, "stop_reason": stop_reason, "stop_sequence": None,
            "usage": dict(_USAGE)}


_TEXT = _message([{"type": "text", "text": "Stock across the 8 warehouses: 64 keyboards."}])
_CALLS = _message([
    {"type": "text", "text": "Checking two warehouses at once."},
    {"type": "tool_use", "id": "toolu_01", "name": "check_stock",
     "input": {"warehouse": "Pune", "sku": "KB-100", "note": "quote \" and ü"}},
    {"type": "tool_use", "id": "toolu_02", "name": "check_stock",
     "input": {"warehouse": "Delhi", "sku": "KB-100", "tags": ["a", "b"], "n": 2}}],
    "tool_use")
_THOUGHT = _message([
    {"type": "thinking", "thinking": "Two warehouses; ask both at once.", "signature": "sig-7f3a"},
    {"type": "tool_use", "id": "toolu_03", "name": "check_stock",
     "input": {"warehouse": "Jaipur"}}], "tool_use")
_EMPTY_INPUT = _message([{"type": "tool_use", "id": "toolu_04", "name": "list_warehouses",
                          "input": {}}], "tool_use")


def _events(message: dict[str, Any], cut: str | None = None, **options: Any
            ) -> list[dict[str, Any]]:
    """The events of ``message`` as the API sends them: ``message_delta`` carries only the
    output tokens (the input tokens came in ``message_start``)."""
    events = wire_events(message, cut=cut, **options)
    for e in events:
        if e["type"] == "message_delta":
            e["usage"] = {"output_tokens": e["usage"].get("output_tokens", 0)}
    return events


def _run(fn: Accumulate, events: list[dict[str, Any]]) -> Any:
    return fn(copy.deepcopy(events))


def _same_reply(fn: Accumulate, message: dict[str, Any], what: str) -> Problem:
    reply = _run(fn, _events(message))
    if not isinstance(reply, dict):
        return f"returned {short(repr(reply))}; return the reply as a dict"
    content = reply.get("content")
    if content != message["content"]:
        if not isinstance(content, list):
            return f"the reply's content is {short(repr(content))}; make it a list of blocks"
        if len(content) != len(message["content"]):
            return (f"the reply has {len(content)} blocks, the stream had "
                    f"{len(message['content'])}; add each block at its content_block_stop")
        for got, want in zip(content, message["content"], strict=True):
            if got != want:
                return (f"{what}: got block {short(repr(got), 90)}, expected "
                        f"{short(repr(want), 90)}")
    for key in ("id", "model", "role"):
        if reply.get(key) != message[key]:
            return (f"the reply's {key} is {reply.get(key)!r}, message_start says "
                    f"{message[key]!r}; start the reply from message_start's message")
    if reply.get("stop_reason") != message["stop_reason"]:
        return (f"stop_reason is {reply.get('stop_reason')!r}, the stream's message_delta "
                f"says {message['stop_reason']!r}; take it from message_delta")
    usage = reply.get("usage") or {}
    if usage.get("output_tokens") != _USAGE["output_tokens"] \
            or usage.get("input_tokens") != _USAGE["input_tokens"]:
        return (f"usage is {short(repr(usage), 80)}; input_tokens come in message_start, "
                f"output_tokens in message_delta: keep both")
    return None


def _text(fn: Accumulate) -> Problem:
    return _same_reply(fn, _TEXT, "join the text_delta pieces of a text block in order")


def _calls(fn: Accumulate) -> Problem:
    return _same_reply(fn, _CALLS, "a tool_use block's input is the JSON of its "
                                   "input_json_delta pieces, joined, parsed at "
                                   "content_block_stop")


def _thinking(fn: Accumulate) -> Problem:
    return _same_reply(fn, _THOUGHT, "a thinking block keeps its thinking_delta text and its "
                                     "signature_delta, unchanged")


def _empty_input(fn: Accumulate) -> Problem:
    return _same_reply(fn, _EMPTY_INPUT, "a tool_use with no input_json_delta has input {}")


def _pings(fn: Accumulate) -> Problem:
    events = _events(_CALLS)
    noisy = [e for event in events for e in (event, {"type": "ping"})]
    reply = _run(fn, noisy)
    if not isinstance(reply, dict):
        return f"returned {short(repr(reply))}; return the reply as a dict"
    if reply.get("content") != _CALLS["content"]:
        return "a ping between events changed the reply; pass over ping events"
    return None


def _raises(fn: Accumulate, how: str, what: str,
            then: list[dict[str, Any]] | None = None) -> Problem:
    """The stream of :data:`_CALLS` cut by ``how`` must raise; judged only once the whole
    stream reads right, so a reader that fails on everything does not pass by crashing."""
    whole = _run(fn, _events(_CALLS))
    if not isinstance(whole, dict) or whole.get("content") != _CALLS["content"]:
        return ("not judged until the complete stream reads right (see 'two tool calls'): "
                "a reader that raises on everything would pass this by accident")
    try:
        reply = _run(fn, _events(_CALLS, cut=how) + (then or []))
    except Exception:  # noqa: BLE001 - raising is what is asked for
        return None
    return (f"{what} returned {short(repr(reply), 70)}; raise instead: it is not a reply, "
            f"and a half-written tool call in it must never run")


def _dropped(fn: Accumulate) -> Problem:
    return _raises(fn, "disconnect", "a stream that ended without message_stop")


def _error(fn: Accumulate) -> Problem:
    """An ``error`` event ends the reply even when more events follow it (so a reader that
    passes over errors, then returns at ``message_stop``, is caught)."""
    whole = _events(_CALLS)
    tail = [e for e in whole if e["type"] in ("message_delta", "message_stop")]
    return _raises(fn, "overloaded", "a stream with an error event (overloaded_error)",
                   then=tail)


def _max_tokens(fn: Accumulate) -> Problem:
    events = _events(_CALLS, cut="max_tokens", max_tokens=57)
    reply = _run(fn, events)
    if not isinstance(reply, dict) or reply.get("stop_reason") != "max_tokens":
        return (f"a reply cut off at max_tokens inside a tool call came back as "
                f"{short(repr(reply), 70)}; return it with stop_reason 'max_tokens' (its "
                f"last input JSON is incomplete: do not fail on it, the loop never runs it)")
    return None


CASES = (
    Case("text reply", _text, "text_delta pieces joined, stop_reason and usage kept"),
    Case("two tool calls", _calls, "input_json_delta pieces joined and parsed per block"),
    Case("thinking before a call", _thinking, "thinking text and signature kept unchanged"),
    Case("call with no input", _empty_input, "input {} when no input_json_delta came"),
    Case("pings in between", _pings, "ping events passed over"),
    Case("cut at max_tokens", _max_tokens, "returned with stop_reason max_tokens"),
    Case("connection dropped", _dropped, "raised: no message_stop, no reply"),
    Case("error event", _error, "raised on the error event"),
)


def check_accumulator(fn: Accumulate, *, show: bool = True) -> ExerciseReport:
    """Judge the learner's ``accumulate(events) -> reply`` on :data:`CASES` (streams of
    replies it has not seen). Prints the report when ``show``; raises ``TypeError`` only
    when ``fn`` is not callable."""
    return run_cases(fn, CASES, what="accumulate", show=show)
