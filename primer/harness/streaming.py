"""Streaming: a reply as the server-sent events of the Messages API, and those events as deltas.

With ``stream: true`` the Messages API sends a reply piece by piece, as server-sent events:
``message_start`` (the message with no content yet), then for each content block a
``content_block_start``, its ``content_block_delta`` events (``text_delta``,
``input_json_delta`` for a ``tool_use`` block's input, ``thinking_delta`` and
``signature_delta`` for a ``thinking`` block) and a ``content_block_stop``; then
``message_delta`` with the ``stop_reason`` and the usage, and ``message_stop``. ``ping``
events may come at any time. Source: the Anthropic "Streaming messages" reference.

:func:`wire_events` writes those events for a reply (the fake server streams them, and a
streaming :class:`~primer.loop.model.ScriptedLLM` replays them); :class:`DeltaRelay` turns
the events, from there or from the SDK, into the loop's deltas, which reach ``on_event``
as they arrive, each with the ``step`` of the call:

* ``text_delta`` ``{index, text}`` and ``thinking_delta`` ``{index, thinking}``;
* ``tool_use_start`` ``{index, id, name}`` when a ``tool_use`` block opens, then its
  ``input_json_delta`` ``{index, partial_json}`` pieces;
* ``tool_use_input`` ``{index, id, name, input}`` when the block closed with its input
  JSON complete. That says the *input* is whole, not that the call will run: the loop runs
  calls only once the whole reply is in and checked, and never those of a reply cut off at
  ``max_tokens``. A call cut off in the middle of its input never gets one.

A streamed reply ends up identical to the unstreamed one; the deltas only show it earlier.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, cast

from primer.loop.messages import (
    Block,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    compact,
    text_block,
    thinking_block,
)
from primer.loop.model import DELTA_KINDS, Reply, ScriptedLLM

__all__ = ["CUTS", "DELTA_KINDS", "DeltaRelay", "StreamingScriptedLLM", "block_events",
           "pieces", "wire_events"]

#: How :func:`wire_events` can cut a stream off in the middle of its first ``tool_use``
#: block's input: ``"max_tokens"`` (the model reached its limit: the block closes half
#: written and the reply's ``stop_reason`` is ``max_tokens``), ``"disconnect"`` (no more
#: events: the body ends in good order, without ``message_stop``), ``"abort"`` (the same
#: events, then the connection breaks inside the body: on a chunked HTTP stream the client
#: sees an incomplete chunk) and ``"overloaded"`` (an ``error`` event, as the API sends one
#: mid-stream).
CUTS = ("max_tokens", "disconnect", "abort", "overloaded")

#: Characters of a tool call's input JSON per ``input_json_delta``.
JSON_PIECE = 16

_WORDS = re.compile(r"\S+\s*|\s+")

DeltaSink = Callable[[str, dict[str, Any]], None]


def pieces(text: str) -> list[str]:
    """``text`` cut into the pieces a stream sends it in: words with their trailing spaces."""
    return _WORDS.findall(text)


def block_events(index: int, block: Block) -> list[dict[str, Any]]:
    """The ``content_block_start`` / ``_delta`` / ``_stop`` events of one content block."""
    kind = block.get("type")
    start: Mapping[str, Any]
    deltas: list[dict[str, Any]]
    # each branch reads the block as the type its "type" names, with .get: a block off the
    # wire may lack a field
    if kind == "text":
        text = cast(TextBlock, block)
        start, deltas = {"type": "text", "text": ""}, [
            {"type": "text_delta", "text": p} for p in pieces(text.get("text", ""))]
    elif kind == "thinking":
        thinking = cast(ThinkingBlock, block)
        start, deltas = {"type": "thinking", "thinking": "", "signature": ""}, [
            {"type": "thinking_delta", "thinking": p}
            for p in pieces(thinking.get("thinking", ""))]
        deltas.append({"type": "signature_delta", "signature": thinking.get("signature", "")})
    elif kind == "tool_use":
        call = cast(ToolUseBlock, block)
        start = {"type": "tool_use", "id": call.get("id"), "name": call.get("name"),
                 "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": p}
                  for p in _json_pieces(call.get("input"))]
    else:  # redacted_thinking and any other block arrive whole
        start, deltas = block, []
    return ([{"type": "content_block_start", "index": index, "content_block": start}]
            + [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
            + [{"type": "content_block_stop", "index": index}])


def _half_written(index: int, block: Block) -> list[dict[str, Any]]:
    """The events of ``block`` up to half-way through it (no ``content_block_stop``): a
    ``tool_use`` block's input JSON, a text's or a thinking's text, cut in the middle."""
    kind = block.get("type")
    if kind == "tool_use":
        text = compact(block.get("input"))
        half = [{"type": "input_json_delta", "partial_json": p}
                for p in _json_pieces_of(text[:max(1, len(text) // 2)])]
        # input None is no ToolUseBlock's, but only the start event is kept, which has none
        no_input = cast(ToolUseBlock, {**block, "input": None})
        return block_events(index, no_input)[:1] + [
            {"type": "content_block_delta", "index": index, "delta": d} for d in half]
    if kind in ("text", "thinking"):
        if kind == "text":  # read with .get as in block_events
            text = cast(TextBlock, block).get("text", "")
            events = block_events(index, text_block(text[:len(text) // 2]))
        else:
            text = cast(ThinkingBlock, block).get("thinking", "")
            events = block_events(index, thinking_block(text[:len(text) // 2]))
        return [e for e in events if e["type"] != "content_block_stop"  # and no signature:
                and e.get("delta", {}).get("type") != "signature_delta"]  # it comes last
    return block_events(index, block)[:1]


def _json_pieces(value: Any) -> list[str]:
    return _json_pieces_of(compact(value))


def _json_pieces_of(text: str) -> list[str]:
    return [text[k:k + JSON_PIECE] for k in range(0, len(text), JSON_PIECE)]


def wire_events(message: dict[str, Any], *, cut: str | None = None,
                max_tokens: int | None = None) -> list[dict[str, Any]]:
    """The server-sent events that stream ``message`` (a Messages API response body, with
    ``content``, ``stop_reason`` and ``usage``), each a dict with its ``type``.

    ``message_start`` carries the message without content, stop reason or output tokens;
    ``message_delta`` the stop reason (with its ``stop_details``, if any) and the full
    usage. ``cut`` (one of :data:`CUTS`) cuts the stream off half-way through the first
    ``tool_use`` block's input (the last block's, when there is none); with
    ``"max_tokens"`` the reply reports ``max_tokens`` output tokens (when given). Raises
    ``ValueError`` for an unknown ``cut``.
    """
    if cut is not None and cut not in CUTS:
        raise ValueError(f"cut must be one of {', '.join(CUTS)} or None, not {cut!r}")
    usage = dict(message.get("usage") or {})
    head = {**{k: v for k, v in message.items() if k != "stop_details"}, "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {k: v for k, v in {**usage, "output_tokens": 0}.items()
                      if k != "output_tokens_details"}}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": head},
                                    {"type": "ping"}]
    content = list(message.get("content") or [])
    stop_reason = message.get("stop_reason")
    if cut is not None and content:
        at = next((i for i, b in enumerate(content) if b.get("type") == "tool_use"),
                  len(content) - 1)
        for i, block in enumerate(content[:at]):
            events += block_events(i, block)
        events += _half_written(at, content[at])
        if cut in ("disconnect", "abort"):
            return events
        if cut == "overloaded":
            return events + [{"type": "error", "error": {"type": "overloaded_error",
                                                         "message": "Overloaded"}}]
        events.append({"type": "content_block_stop", "index": at})
        stop_reason = "max_tokens"
        if max_tokens is not None:
            usage["output_tokens"] = max_tokens
    else:
        for i, block in enumerate(content):
            events += block_events(i, block)
    delta = {"stop_reason": stop_reason, "stop_sequence": message.get("stop_sequence")}
    if message.get("stop_details") is not None:  # (a refusal's category, SDK 2.x)
        delta["stop_details"] = message["stop_details"]
    return events + [{"type": "message_delta", "delta": delta, "usage": usage},
                     {"type": "message_stop"}]


class DeltaRelay:
    """Turns stream events (dicts in the wire shape, fed in order) into the loop's deltas.

    ``relay.feed(event)`` calls ``on_delta(kind, data)`` for each delta the event gives (see
    the module docstring); events that give none (``message_start``, ``ping``,
    ``signature_delta``, ``message_delta``, ...) are passed over.
    """

    def __init__(self, on_delta: DeltaSink) -> None:
        self.on_delta = on_delta
        # keyed by the event's ``index`` as it came (an int from a well-formed stream)
        self._calls: dict[Any, tuple[Any, Any, list[str]]] = {}

    def feed(self, event: dict[str, Any]) -> None:
        """Relay one event."""
        kind, index = event.get("type"), event.get("index")
        if kind == "content_block_delta":
            delta = event.get("delta") or {}
            d = delta.get("type")
            if d == "text_delta":
                self.on_delta("text_delta", {"index": index, "text": delta.get("text", "")})
            elif d == "thinking_delta":
                self.on_delta("thinking_delta", {"index": index,
                                                 "thinking": delta.get("thinking", "")})
            elif d == "input_json_delta" and index in self._calls:
                piece = delta.get("partial_json", "")
                self._calls[index][2].append(piece)
                self.on_delta("input_json_delta", {"index": index, "partial_json": piece})
        elif kind == "content_block_start":
            block = event.get("content_block") or {}
            if block.get("type") == "tool_use":
                self._calls[index] = (block.get("id"), block.get("name"), [])
                self.on_delta("tool_use_start", {"index": index, "id": block.get("id"),
                                                 "name": block.get("name")})
        elif kind == "content_block_stop" and index in self._calls:
            call_id, name, parts = self._calls.pop(index)
            try:
                value = json.loads("".join(parts) or "{}")
            except ValueError:
                return  # cut off half-way through its input: never complete
            self.on_delta("tool_use_input", {"index": index, "id": call_id, "name": name,
                                             "input": value})


class StreamingScriptedLLM(ScriptedLLM):
    """A :class:`~primer.loop.model.ScriptedLLM` that streams like a real model: the loop
    passes ``on_delta`` and each reply reaches it as the deltas the Messages API's events
    for it would give (:func:`wire_events` through a :class:`DeltaRelay`) before the reply
    is returned, unchanged. Arguments as for ``ScriptedLLM``."""

    stream = True

    def __call__(self, *, system: str, messages: list[Message], tools: list[dict[str, Any]],
                 max_tokens: int, on_delta: DeltaSink | None = None) -> Reply:
        reply = super().__call__(system=system, messages=messages, tools=tools,
                                 max_tokens=max_tokens)
        if on_delta is not None:
            relay = DeltaRelay(on_delta)
            for event in wire_events({"content": reply.content, "stop_reason": reply.stop_reason,
                                      "usage": reply.usage.to_dict()}):
                relay.feed(event)
        return reply
