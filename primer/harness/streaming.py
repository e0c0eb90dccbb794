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
from collections.abc import Callable
from typing import Any

from primer.loop.jsontext import compact
from primer.loop.messages import Block

#: The kinds of delta event the loop sends to ``on_event`` while a reply streams.
DELTA_KINDS = ("text_delta", "thinking_delta", "tool_use_start", "input_json_delta",
               "tool_use_input")
#: The event kinds a streaming model may send through the ``on_delta`` the loop hands it:
#: the deltas above and ``model_fallback`` (a :class:`~primer.harness.fallback.FallbackLLM`
#: switching model). The loop drops any other kind, so a model cannot send events under the
#: loop's own names (``stop``, ``tool_execution``, ...).
MODEL_EVENT_KINDS = frozenset(DELTA_KINDS) | {"model_fallback"}

#: How :func:`wire_events` can cut a stream off in the middle of its first ``tool_use``
#: block's input: ``"max_tokens"`` (the model reached its limit: the block closes half
#: written and the reply's ``stop_reason`` is ``max_tokens``), ``"disconnect"`` (the
#: connection drops: no more events) and ``"overloaded"`` (an ``error`` event, as the API
#: sends one mid-stream).
CUTS = ("max_tokens", "disconnect", "overloaded")

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
    if kind == "text":
        start, deltas = {"type": "text", "text": ""}, [
            {"type": "text_delta", "text": p} for p in pieces(block.get("text", ""))]
    elif kind == "thinking":
        start, deltas = {"type": "thinking", "thinking": "", "signature": ""}, [
            {"type": "thinking_delta", "thinking": p} for p in pieces(block.get("thinking", ""))]
        deltas.append({"type": "signature_delta", "signature": block.get("signature", "")})
    elif kind == "tool_use":
        start = {"type": "tool_use", "id": block.get("id"), "name": block.get("name"),
                 "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": p}
                  for p in _json_pieces(block.get("input"))]
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
        return block_events(index, {**block, "input": None})[:1] + [
            {"type": "content_block_delta", "index": index, "delta": d} for d in half]
    if kind in ("text", "thinking"):
        text = block.get(kind, "")
        events = block_events(index, {"type": kind, kind: text[:len(text) // 2]})
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
    ``message_delta`` the stop reason and the full usage. ``cut`` (one of :data:`CUTS`)
    cuts the stream off half-way through the first ``tool_use`` block's input (the last
    block's, when there is none); with ``"max_tokens"`` the reply reports ``max_tokens``
    output tokens (when given). Raises ``ValueError`` for an unknown ``cut``.
    """
    if cut is not None and cut not in CUTS:
        raise ValueError(f"cut must be one of {', '.join(CUTS)} or None, not {cut!r}")
    usage = dict(message.get("usage") or {})
    head = {**message, "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {**usage, "output_tokens": 0}}
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
        if cut == "disconnect":
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
    return events + [{"type": "message_delta",
                      "delta": {"stop_reason": stop_reason,
                                "stop_sequence": message.get("stop_sequence")},
                      "usage": usage},
                     {"type": "message_stop"}]


class DeltaRelay:
    """Turns stream events (dicts in the wire shape, fed in order) into the loop's deltas.

    ``relay.feed(event)`` calls ``on_delta(kind, data)`` for each delta the event gives (see
    the module docstring); events that give none (``message_start``, ``ping``,
    ``signature_delta``, ``message_delta``, ...) are passed over.
    """

    def __init__(self, on_delta: DeltaSink) -> None:
        self.on_delta = on_delta
        self._calls: dict[int, tuple[Any, Any, list[str]]] = {}

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
                self._calls[index] = (block.get("id"), block.get("name"), [])  # type: ignore[index]
                self.on_delta("tool_use_start", {"index": index, "id": block.get("id"),
                                                 "name": block.get("name")})
        elif kind == "content_block_stop" and index in self._calls:
            call_id, name, parts = self._calls.pop(index)  # type: ignore[arg-type]
            try:
                value = json.loads("".join(parts) or "{}")
            except ValueError:
                return  # cut off half-way through its input: never complete
            self.on_delta("tool_use_input", {"index": index, "id": call_id, "name": name,
                                             "input": value})
