"""Lesson 13's exercise: turn a chat history of another provider's shape into a valid Messages
API request.

The learner writes ``to_request(history, tools, *, model, max_tokens) -> dict``. ``history``
is a chat log in the shape other APIs use: a first message ``{"role": "system", "content":
str}``, user and assistant messages (an assistant's ``content`` is a string or a list of
blocks, ``tool_use`` blocks included), and one ``{"role": "tool", "tool_use_id": id,
"content": str}`` message per tool result. ``tools`` are ``{"name", "description",
"parameters"}`` dicts. The request is the body of ``POST /v1/messages``: ``model``,
``max_tokens``, ``system`` (a parameter, not a message), ``messages`` (only ``user`` and
``assistant``; the results of one reply as ``tool_result`` blocks in ONE user message, in
order) and ``tools`` (``name``, ``description``, ``input_schema``).

:func:`check_api_request` runs it on histories of its own and judges each request with
:func:`primer.harness.request_check.request_problems`, the validator the course's server
answers with.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from primer.course.checking import Case, ExerciseReport, Problem, run_cases, short
from primer.harness.request_check import request_problems

_SYSTEM = "You answer questions about warehouse stock. Use the tools; be brief."
_TOOLS = [{"name": "check_stock", "description": "Units of a SKU in one warehouse. Use it for "
           "any stock question.",
           "parameters": {"type": "object", "properties": {"warehouse": {"type": "string"},
                                                            "sku": {"type": "string"}},
                          "required": ["warehouse", "sku"]}},
          {"name": "list_warehouses", "description": "The warehouses' names.",
           "parameters": {"type": "object", "properties": {}}}]
_History = list[dict[str, Any]]
_ASK: dict[str, Any] = {"role": "user",
                        "content": "How many KB-100 keyboards are in Pune and Delhi?"}


def _call(k: int, warehouse: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_0{k}", "name": "check_stock",
            "input": {"warehouse": warehouse, "sku": "KB-100"}}


_ONE: _History = [{"role": "system", "content": _SYSTEM}, _ASK,
        {"role": "assistant", "content": [{"type": "text", "text": "Checking Pune."},
                                          _call(1, "Pune")]},
        {"role": "tool", "tool_use_id": "toolu_01", "content": '{"units": 40}'}]
_TWO: _History = [{"role": "system", "content": _SYSTEM}, _ASK,
        {"role": "assistant", "content": [_call(1, "Pune"), _call(2, "Delhi")]},
        {"role": "tool", "tool_use_id": "toolu_01", "content": '{"units": 40}'},
        {"role": "tool", "tool_use_id": "toolu_02", "content": '{"units": 24}'}]
_LONG: _History = [*_TWO, {"role": "assistant", "content": "64 in all: 40 in Pune, 24 in Delhi."},
         {"role": "user", "content": "And in Jaipur?"},
         {"role": "assistant", "content": [_call(3, "Jaipur")]},
         {"role": "tool", "tool_use_id": "toolu_03", "content": '{"units": 7}'}]
_MODEL, _MAX = "claude-check-1", 777


def _request(fn: Callable[..., Any], history: list[dict[str, Any]]) -> Any:
    return fn(copy.deepcopy(history), copy.deepcopy(_TOOLS), model=_MODEL, max_tokens=_MAX)


def _not_a_request(request: Any) -> Problem:
    if not isinstance(request, dict):
        return f"returned {short(repr(request))}; return the request body as a dict"
    if not isinstance(request.get("messages"), list):
        return "the request has no 'messages' list; put the conversation under 'messages'"
    return None


def _fields(fn: Callable[..., Any]) -> Problem:
    request = _request(fn, _ONE)
    problem = _not_a_request(request)
    if problem:
        return problem
    wrong = [f"{k}={request.get(k)!r} (expected {v!r})"
             for k, v in (("model", _MODEL), ("max_tokens", _MAX)) if request.get(k) != v]
    if wrong:
        return (f"{'; '.join(wrong)}: every request names the model and its max_tokens, "
                f"from the arguments")
    return None


def _system(fn: Callable[..., Any]) -> Problem:
    request = _request(fn, _ONE)
    problem = _not_a_request(request)
    if problem:
        return problem
    roles = [m.get("role") if isinstance(m, dict) else None for m in request["messages"]]
    if "system" in roles:
        return ("a message with role 'system' is in the list; the Messages API takes the "
                "system prompt as the 'system' parameter, beside the list")
    if request.get("system") != _SYSTEM:
        return (f"request['system'] is {short(repr(request.get('system')))}, expected the "
                f"history's system message's text")
    return None


def _tools(fn: Callable[..., Any]) -> Problem:
    request = _request(fn, _ONE)
    problem = _not_a_request(request)
    if problem:
        return problem
    tools = request.get("tools")
    if not isinstance(tools, list) or len(tools) != len(_TOOLS):
        return (f"request['tools'] is {short(repr(tools))}; send one definition per tool, "
                f"every call")
    for got, want in zip(tools, _TOOLS, strict=True):
        expected = {"name": want["name"], "description": want["description"],
                    "input_schema": want["parameters"]}
        if got != expected:
            keys = sorted(got) if isinstance(got, dict) else type(got).__name__
            return (f"tool {want['name']!r} is sent with keys {keys}; the Messages API "
                    f"wants name, description and input_schema (the schema is what other "
                    f"APIs call parameters)")
    return None


def _results(fn: Callable[..., Any], history: list[dict[str, Any]], what: str) -> Problem:
    request = _request(fn, history)
    problem = _not_a_request(request)
    if problem:
        return problem
    messages = request["messages"]
    roles = [m.get("role") if isinstance(m, dict) else None for m in messages]
    if "tool" in roles:
        return ("a message with role 'tool' is in the list; the Messages API has only user "
                "and assistant: send each result as a tool_result block in a user message")
    calls = [b["id"] for m in history if m["role"] == "assistant"
             and isinstance(m["content"], list) for b in m["content"] if b["type"] == "tool_use"]
    answered = [b.get("tool_use_id") for m in messages
                if isinstance(m, dict) and m.get("role") == "user"
                and isinstance(m.get("content"), list)
                for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]
    if answered != calls:
        return (f"{what}: the tool_result blocks answer {answered}, the calls were {calls}; "
                f"one block per tool message, with its tool_use_id, in the order asked")
    for i, m in enumerate(messages[:-1]):
        asked = [b.get("id") for b in m.get("content") or [] if isinstance(b, dict)
                 and b.get("type") == "tool_use"] if isinstance(m.get("content"), list) else []
        nxt = messages[i + 1].get("content")
        got = [b.get("tool_use_id") for b in nxt if isinstance(b, dict)] \
            if isinstance(nxt, list) else []
        if asked and got != asked:
            return (f"{what}: the user message after the reply asking for {asked} answers "
                    f"{got}; put all the results of one reply in ONE user message, right "
                    f"after it")
    problems = request_problems(request)
    if problems:
        hint = (" (all the results of one reply go in ONE user message, right after it)"
                if "immediately after" in problems[0] or "alternate" in problems[0] else "")
        return f"{what}: the API would refuse it: {short(problems[0], 160)}{hint}"
    return None


def _one(fn: Callable[..., Any]) -> Problem:
    return _results(fn, _ONE, "one result")


def _two(fn: Callable[..., Any]) -> Problem:
    return _results(fn, _TWO, "two results of one reply")


def _long(fn: Callable[..., Any]) -> Problem:
    problem = _results(fn, _LONG, "two rounds")
    if problem:
        return problem
    texts = [m.get("content") for m in _request(fn, _LONG)["messages"]
             if m.get("role") == "assistant"]
    wanted = [m["content"] for m in _LONG if m["role"] == "assistant"]
    if texts != wanted:
        return "the assistant turns changed; copy each reply's content unchanged"
    return None


def _inputs_alone(fn: Callable[..., Any]) -> Problem:
    history, tools = copy.deepcopy(_TWO), copy.deepcopy(_TOOLS)
    request = fn(history, tools, model=_MODEL, max_tokens=_MAX)
    problem = _not_a_request(request)
    if problem:
        return problem
    if history != _TWO or tools != _TOOLS:
        return ("your function changed the history or tools it was given; build new "
                "messages and definitions instead")
    try:
        json.dumps(request)
    except (TypeError, ValueError):
        return "the request is not JSON-serialisable; it is sent as a JSON body"
    return None


def _cases() -> list[Case]:
    return [
        Case("model and max_tokens", _fields, "the request names the model and max_tokens"),
        Case("system prompt", _system, "the system prompt is the 'system' parameter"),
        Case("tool definitions", _tools,
             "each tool is sent as name, description and input_schema"),
        Case("one result", _one, "a tool result is a tool_result block in a user message"),
        Case("two results", _two,
             "both results of one reply travel in one user message, in order"),
        Case("two rounds", _long, "a longer history passes the validator, replies unchanged"),
        Case("inputs untouched", _inputs_alone,
             "the caller's history and tools are left as they were"),
    ]


def check_api_request(fn: Callable[..., Any], *, show: bool = True) -> ExerciseReport:
    """Judge ``to_request(history, tools, *, model, max_tokens)`` (see the module): seven
    cases, each request also checked with
    :func:`~primer.harness.request_check.request_problems`.

    Prints one ``PASS``/``FAIL`` line per case and ``score: k/n`` (unless ``show`` is
    false) and returns the :class:`~primer.course.checking.ExerciseReport`. Raises
    ``TypeError`` only when ``fn`` is not callable.
    """
    return run_cases(fn, _cases(), what="to_request", show=show)
