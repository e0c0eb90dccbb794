"""Lesson 13b's exercise: read a streamed reply's ``stop_reason`` and ``usage`` from its events.

The learner writes ``outcome(events) -> {"stop_reason": ..., "usage": {...}}``. ``events`` are
the server-sent events of one streamed Messages API reply, each a dict as the API sends it.
``message_start`` carries the message with ``stop_reason`` still ``None`` and a ``usage``
whose ``input_tokens`` and cache fields are final but whose ``output_tokens`` is only a
start; each ``message_delta`` carries the ``stop_reason`` and the output tokens *so far* (a
running count, not an increment). ``ping`` and the content events change neither. The usage
returned has ``input_tokens``, ``output_tokens``, ``cache_creation_input_tokens`` and
``cache_read_input_tokens``. A stream that ends before any ``message_delta`` (a dropped
connection) has ``stop_reason`` ``None``: the caller must not take it for a finished reply.

:func:`check_stream_outcome` feeds it streams made by
:func:`primer.harness.streaming.wire_events` for replies the learner has not seen.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from primer.course.checking import Case, ExerciseReport, Problem, run_cases, short
from primer.harness.streaming import wire_events

_Outcome = Callable[[list[dict[str, Any]]], Any]
_FIELDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens",
           "cache_read_input_tokens")
#: What ``message_start`` reports as output so far (the API sends a small number there).
_START_OUTPUT = 1


def _message(content: list[dict[str, Any]], stop_reason: str, **usage: int) -> dict[str, Any]:
    full = {"input_tokens": 412, "output_tokens": 57, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0, **usage}
    return {"id": "msg_check", "type": "message", "role": "assistant", "model": "checker",
            "content": content, "stop_reason": stop_reason, "stop_sequence": None,
            "usage": full}


_TEXT = _message([{"type": "text", "text": "64 keyboards: 40 in Pune, 24 in Delhi."}],
                 "end_turn")
_CALL = _message([{"type": "text", "text": "Checking Pune."},
                  {"type": "tool_use", "id": "toolu_01", "name": "check_stock",
                   "input": {"warehouse": "Pune", "sku": "KB-100"}}], "tool_use",
                 output_tokens=83)
_CACHED = _message([{"type": "text", "text": "Yes."}], "end_turn", input_tokens=22,
                   output_tokens=9, cache_read_input_tokens=3228)


def _events(message: dict[str, Any], *, deltas: int = 1, cut: str | None = None
            ) -> list[dict[str, Any]]:
    """``message``'s events as the API sends them: ``message_start`` with the input counts
    and a small output count, ``message_delta`` with the running output count only;
    ``deltas`` > 1 splits the output over that many ``message_delta`` events."""
    events = wire_events(message, cut=cut)
    out = message["usage"]["output_tokens"]
    for e in events:
        if e["type"] == "message_start":
            e["message"]["usage"]["output_tokens"] = _START_OUTPUT
    if deltas > 1:
        at = next(i for i, e in enumerate(events) if e["type"] == "message_delta")
        last = events[at]
        early = [{"type": "message_delta", "delta": {"stop_reason": None,
                                                     "stop_sequence": None},
                  "usage": {"output_tokens": out * k // deltas}} for k in range(1, deltas)]
        events[at:at] = early
        last["usage"] = {"output_tokens": out}
    for e in events:
        if e["type"] == "message_delta":
            e["usage"] = {"output_tokens": e["usage"].get("output_tokens", 0)}
    return events


def _judge(fn: _Outcome, events: list[dict[str, Any]], stop_reason: str | None,
           usage: dict[str, int]) -> Problem:
    result = fn(copy.deepcopy(events))
    if not isinstance(result, dict) or not isinstance(result.get("usage"), dict):
        return (f"returned {short(repr(result))}; return {{'stop_reason': ..., "
                f"'usage': {{...}}}}")
    if result.get("stop_reason") != stop_reason:
        where = ("the stream ended before any message_delta, so nothing says why the model "
                 "stopped: leave it None" if stop_reason is None else
                 "message_start always says None; take it from the last message_delta")
        return (f"stop_reason is {result.get('stop_reason')!r}, expected {stop_reason!r}; "
                f"{where}")
    got = {k: result["usage"].get(k, 0) for k in _FIELDS}
    for k in _FIELDS:
        if got[k] != usage[k]:
            if k == "output_tokens" and got[k] == usage[k] + _START_OUTPUT:
                why = ("message_delta's output_tokens is the count so far, not an increment: "
                       "replace message_start's figure, do not add to it")
            elif k == "output_tokens" and got[k] == _START_OUTPUT:
                why = "message_start's output_tokens is only a start: take message_delta's"
            elif k == "output_tokens":
                why = "take the last message_delta's output_tokens (a running count)"
            else:
                why = f"{k} comes in message_start's usage and does not change: keep it"
            return f"usage {k} is {got[k]!r}, expected {usage[k]}; {why}"
    return None


def _expected(message: dict[str, Any]) -> dict[str, int]:
    return {k: message["usage"][k] for k in _FIELDS}


def _cases() -> list[Case]:
    dropped = {**_expected(_CALL), "output_tokens": _START_OUTPUT}
    noisy = [e for event in _events(_CALL)
             for e in (event, {"type": "ping"}, {"type": "some_future_event", "data": 1})]
    return [
        Case("text reply", lambda fn: _judge(fn, _events(_TEXT), "end_turn", _expected(_TEXT)),
             "end_turn and the usage of a text reply"),
        Case("tool call", lambda fn: _judge(fn, _events(_CALL), "tool_use", _expected(_CALL)),
             "stop_reason tool_use, from message_delta"),
        Case("running count", lambda fn: _judge(fn, _events(_CALL, deltas=3), "tool_use",
                                                 _expected(_CALL)),
             "three message_delta events: the last count is the output"),
        Case("cache fields", lambda fn: _judge(fn, _events(_CACHED), "end_turn",
                                                _expected(_CACHED)),
             "the cache read from message_start is kept"),
        Case("pings and new events", lambda fn: _judge(fn, noisy, "tool_use", _expected(_CALL)),
             "ping and unknown event types change nothing"),
        Case("dropped stream", lambda fn: _judge(fn, _events(_CALL, cut="disconnect"), None,
                                                  dropped),
             "a stream cut before message_delta has no stop_reason"),
    ]


def check_stream_outcome(fn: _Outcome, *, show: bool = True) -> ExerciseReport:
    """Judge ``outcome(events)`` (see the module) on six streams of its own.

    Prints one ``PASS``/``FAIL`` line per case and ``score: k/n`` (unless ``show`` is
    false) and returns the :class:`~primer.course.checking.ExerciseReport`. Raises
    ``TypeError`` only when ``fn`` is not callable.
    """
    return run_cases(fn, _cases(), what="outcome", show=show)
