"""The shape of a trace's events, checked: what every reader of a trace may rely on.

:func:`check_events` is the one check of a trace's content, applied by
:func:`~primer.agents.trace.load_trace` to every file it reads and by
:mod:`primer.agents.conversation` to conversations read as traces, so ``trace show``,
``replay``, ``diagnose`` and the OpenTelemetry export all meet a wrong field as one
:class:`TraceError` naming the line, never as a traceback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .bounded import safe_repr
from .config import AgentConfig
from .llm import Usage
from .state import StopCause


class TraceError(ValueError):
    """A trace file that cannot be read: the message names the file, the line and the fix."""


def check_events(events: list[dict[str, Any]], where: str) -> None:
    """Check that every event a reader uses has the shape the trace format gives it.

    Checked: the ``run_start`` task and system prompt (strings), config (an
    :class:`AgentConfig`) and tool definitions (objects with a string ``name``); each
    ``model_call``'s ``step`` (1, 2, 3, ... in order) and ``reply`` (content blocks with a
    ``type``, text blocks with text, a string ``stop_reason``, a usage
    :meth:`~primer.agents.llm.Usage.from_dict` accepts); each ``tool_execution``'s ``step``
    (one a ``model_call`` recorded), ids, ``content`` and ``is_error``; ``model_retry``
    usage; the ``stop`` cause (a :class:`StopCause`) and summary. Raises
    :class:`TraceError` naming ``where`` (the file), the event's line (``seq`` + 1) and the
    field.
    """

    def bad(e: dict[str, Any], what: str) -> TraceError:
        seq = e.get("seq")
        line = seq + 1 if isinstance(seq, int) and not isinstance(seq, bool) else "?"
        return TraceError(f"{where}, line {line}: {e.get('event')} event: {what}.")

    first = events[0]
    try:
        AgentConfig.from_dict(first.get("config") or {})
    except (TypeError, ValueError) as e:
        raise bad(first, f"config is not a valid AgentConfig ({_why(e)})") from None
    tools = first.get("tools", [])
    if not isinstance(tools, list) or not all(isinstance(t, dict) and isinstance(
            t.get("name"), str) for t in tools):
        raise bad(first, "tools must be a list of tool definitions, each with a name")
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
            if not isinstance(e.get("is_error"), bool):
                raise bad(e, "is_error must be true or false")
        elif kind == "model_retry" and e.get("usage") is not None:
            _check_usage(e, e["usage"], "usage", bad)
        elif kind == "stop":
            if e.get("cause") not in _CAUSES:
                raise bad(e, f"cause {_shown(e.get('cause'))} is not a stop cause")
            if not isinstance(e.get("summary", ""), str):
                raise bad(e, "summary must be a string")


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
    if not isinstance(reply.get("refused", {}), dict):
        raise bad(e, "reply.refused must be an object")
    _check_usage(e, reply.get("usage") or {}, "reply.usage", bad)


def _shown(value: Any) -> str:
    return safe_repr(value, 40)
