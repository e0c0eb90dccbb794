"""The shape of a trace's events, checked: what every reader of a trace may rely on.

:func:`check_events` is the one check of a trace's content, applied by
:func:`~primer.harness.tracing.trace.load_trace` to every file it reads and by
:mod:`primer.harness.tracing.conversation` to conversations read as traces, so ``trace show``,
``replay``, ``diagnose`` and the OpenTelemetry export all meet a wrong field as one
:class:`TraceError` naming the line, never as a traceback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from primer.loop.config import AgentConfig
from primer.loop.model import Usage
from primer.loop.state import StopCause
from primer.loop.text import json_problem, safe_repr


class TraceError(ValueError):
    """A trace file that cannot be read: the message names the file, the line and the fix."""


def check_events(events: list[dict[str, Any]], where: str) -> None:
    """Check that every event a reader uses has the shape the trace format gives it.

    Checked: every event's text is valid Unicode (no lone surrogate) and its ``t`` a number
    of seconds from 0 to :data:`MAX_SECONDS`; the ``run_start`` task and system prompt
    (strings), config (an object, its ``prices`` and ``retry`` objects, every number within
    :data:`MAX_SETTING`, a valid :class:`AgentConfig`) and tool definitions (objects with a
    string ``name`` and an object ``input_schema``); each ``model_call``'s ``step`` (1, 2,
    3, ... in order), ``reply`` (content blocks with a ``type``, text blocks with text,
    tool_use blocks with string ids and names, a string ``stop_reason`` and ``model``, a
    usage :meth:`~primer.loop.model.Usage.from_dict` accepts) and ``latency_s``; each
    ``tool_execution``'s ``step`` (one a ``model_call`` recorded), ids, ``input`` (an
    object), ``content``, ``is_error``, ``error_kind``, ``attempts`` and ``latency_s``;
    ``model_retry`` usage; the ``stop`` cause (a :class:`StopCause`), summary, detail,
    usage, ``cost_usd`` and ``steps``. These are the fields ``trace show``, ``replay``,
    ``diagnose`` and the OpenTelemetry export read. Raises :class:`TraceError` naming
    ``where`` (the file), the event's line (``seq`` + 1) and the field.
    """

    def bad(e: dict[str, Any], what: str) -> TraceError:
        seq = e.get("seq")
        line = seq + 1 if isinstance(seq, int) and not isinstance(seq, bool) else "?"
        return TraceError(f"{where}, line {line}: {e.get('event')} event: {what}.")

    first = events[0]
    for e in events:
        problem = json_problem(e, text=True)
        if problem:
            raise bad(e, f"it holds {problem}; a trace's text is valid Unicode")
        if "t" in e and not _number(e["t"], 0, MAX_SECONDS):
            raise bad(e, f"t must be the seconds since the trace was opened, from 0 to "
                         f"{MAX_SECONDS:,} (got {_shown(e['t'])})")
    _check_config(first, bad)
    tools = first.get("tools", [])
    if not isinstance(tools, list) or not all(isinstance(t, dict) and isinstance(
            t.get("name"), str) and isinstance(t.get("description", ""), str)
            and isinstance(t.get("input_schema", {}), dict) for t in tools):
        raise bad(first, "tools must be a list of tool definitions, each with a name (a "
                         "string) and an input_schema (an object)")
    if not all(isinstance(first.get(k, ""), str) for k in ("task", "system")):
        raise bad(first, "task and system must be strings")
    steps = 0
    for e in events[1:]:
        kind = e.get("event")
        if kind == "model_call":
            _check_call(e, bad)
            if e["step"] != steps + 1:
                raise bad(e, f"step {e['step']} follows step {steps}; model calls are numbered "
                             f"1, 2, 3, ... in order")
            steps = e["step"]
        elif kind == "tool_execution":
            if not _whole(e.get("step"), 1) or e["step"] > steps:
                raise bad(e, "step must be the number of a model call recorded before it")
            if not all(isinstance(e.get(k), str) for k in ("tool_use_id", "name", "content")):
                raise bad(e, "tool_use_id, name and content must be strings")
            if not isinstance(e.get("input"), dict):
                raise bad(e, "input must be the call's arguments (an object)")
            if not isinstance(e.get("is_error"), bool):
                raise bad(e, "is_error must be true or false")
            if not isinstance(e.get("error_kind"), str | None):
                raise bad(e, "error_kind must be a string or null")
            if "attempts" in e and not _whole(e["attempts"], 0):
                raise bad(e, "attempts must be a whole number")
            _check_latency(e, bad)
        elif kind == "model_retry" and e.get("usage") is not None:
            _check_usage(e, e["usage"], "usage", bad)
        elif kind == "stop":
            cause = e.get("cause")
            if not isinstance(cause, str) or cause not in _CAUSES:
                raise bad(e, f"cause {_shown(cause)} is not a stop cause")
            if not all(isinstance(e.get(k, ""), str) for k in ("summary", "detail")):
                raise bad(e, "summary and detail must be strings")
            if e.get("usage") is not None:
                _check_usage(e, e["usage"], "usage", bad)
            if e.get("cost_usd") is not None and not _number(e["cost_usd"], 0, 1e12):
                raise bad(e, "cost_usd must be a number of USD from 0")
            if e.get("steps") is not None and not _whole(e["steps"], 0):
                raise bad(e, "steps must be a whole number of model calls")


#: The largest time a trace may record (seconds; about 31 years) and the largest number a
#: setting in its config may hold: far above any run, far below what overflows a reader.
MAX_SECONDS = 10**9
MAX_SETTING = 10**15


def _check_config(first: dict[str, Any], bad: Callable[[dict[str, Any], str], TraceError]
                  ) -> None:
    """The ``run_start`` config: an object of :class:`AgentConfig` settings (``prices`` and
    ``retry`` objects too), every number within :data:`MAX_SETTING`."""
    config = first.get("config", {})
    if not isinstance(config, dict):
        raise bad(first, f"config must be an object of AgentConfig settings, not "
                         f"{_shown(config)}")
    parts = {"config": config}
    for name in ("prices", "retry"):
        if name in config:
            if not isinstance(config[name], dict):
                raise bad(first, f"config.{name} must be an object, not {_shown(config[name])}")
            parts[f"config.{name}"] = config[name]
    for owner, part in parts.items():
        for k, v in part.items():
            if type(v) in (int, float) and not -MAX_SETTING <= v <= MAX_SETTING:
                raise bad(first, f"{owner}.{k} is {_shown(v)}, beyond the {MAX_SETTING:.0e} "
                                 f"a setting may be")
    try:
        AgentConfig.from_dict(config)
    except (TypeError, ValueError, AttributeError) as e:
        raise bad(first, f"config is not a valid AgentConfig ({_why(e)})") from None


def _number(value: Any, low: float, high: float) -> bool:
    return type(value) in (int, float) and low <= value <= high


def _check_latency(e: dict[str, Any], bad: Callable[[dict[str, Any], str], TraceError]) -> None:
    if "latency_s" in e and not _number(e["latency_s"], 0, MAX_SECONDS):
        raise bad(e, f"latency_s must be a number of seconds from 0 (got "
                     f"{_shown(e['latency_s'])})")


_CAUSES = frozenset(c.value for c in StopCause)


def _why(e: BaseException) -> str:
    return str(e).split(";")[0]


def _whole(value: Any, low: int) -> bool:
    return type(value) is int and value >= low


def _check_usage(e: dict[str, Any], usage: Any, name: str,
                 bad: Callable[[dict[str, Any], str], TraceError]) -> None:
    try:
        Usage.from_dict(usage)
    except (TypeError, ValueError) as err:
        raise bad(e, f"{name}: {_why(err)}") from None


def _check_call(e: dict[str, Any], bad: Callable[[dict[str, Any], str], TraceError]) -> None:
    if not _whole(e.get("step"), 1):
        raise bad(e, "step must be a whole number from 1")
    if "prompt_estimate" in e and not _whole(e["prompt_estimate"], 0):
        raise bad(e, "prompt_estimate must be a whole number of tokens")
    reply = e.get("reply")
    if not isinstance(reply, dict) or not isinstance(reply.get("content"), list):
        raise bad(e, "reply must be an object with a list of content blocks")
    for b in reply["content"]:
        if not isinstance(b, dict) or not isinstance(b.get("type"), str):
            raise bad(e, "every content block needs a 'type'")
        if b["type"] == "text" and not isinstance(b.get("text"), str):
            raise bad(e, "a text block's text must be a string")
        if b["type"] == "tool_use" and not (isinstance(b.get("name"), str)
                                            and isinstance(b.get("id"), str)):
            raise bad(e, "a tool_use block's id and name must be strings")
    if not isinstance(reply.get("stop_reason"), str):
        raise bad(e, "reply.stop_reason must be a string")
    if not isinstance(e.get("refused", {}), dict):
        raise bad(e, "refused must be an object")
    if not isinstance(reply.get("model", ""), str):
        raise bad(e, "reply.model must be a string")
    _check_usage(e, reply.get("usage") or {}, "reply.usage", bad)
    _check_latency(e, bad)


def _shown(value: Any) -> str:
    return safe_repr(value, 40)
