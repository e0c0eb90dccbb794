"""The agent loop from scratch: one short module, no framework, no tool-calling API.

The model here only writes text. The loop asks it for one JSON object per reply::

    {"tool": "get_order", "input": {"order_id": "A123"}}   # run a tool, or
    {"answer": "Order A123 costs 5900.0 rupees."}           # finish

and does everything else itself: it parses the reply, looks the tool up in a plain dict
(name → Python function, the allow-list), runs it, and writes the observation back as the
next user message. A reply that is not JSON, a tool that does not exist, arguments that do
not fit and a tool that raises all become observations the model can read, never a crash.

Arguments are checked the way the course's registry checks them (lesson 02): each function's
type hints become a JSON Schema (built by :func:`~primer.loop.tools.tool`, through pydantic)
and the model's ``input`` is validated against it with ``jsonschema``, names *and* types,
nothing converted. So ``calculator(expression=5)`` is answered with an error naming the field
and the expected schema, instead of failing inside the tool.

The loop owns its exits, each ending the run with a named stop cause: ``end_turn`` (the model
answered), ``max_steps`` (model calls), ``token_budget`` (prompt + reply of every call,
counted with :func:`~primer.loop.model.estimate_tokens`, characters / 4, checked after each
call) and ``loop_detected`` (the same tool with the same input requested ``repeat_threshold``
times). The names are the production loop's, :func:`primer.loop.loop.run_agent`, which has the
same shape with more exits; this module does not use it, so it reads top to bottom on its own.

Roles: the system prompt (the tools and the protocol) travels beside the list, as in every
model call of the course; the list is ``[{"role": "user", "content": task}]``, then one
``assistant`` reply and one ``user`` observation per step. Contents are strings: with no
tool-calling API there are no ``tool_use`` or ``tool_result`` blocks, so an observation is
plain user text.
"""

from __future__ import annotations

import inspect
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from .model import estimate_tokens
from .tools import Tool, tool


class TextModel(Protocol):
    """A text model: ``model(system=..., messages=...) -> str``, the reply text.

    ``system`` is the system prompt, ``messages`` the whole list (user and assistant turns,
    string contents). Like every model of the course it is called fresh each step and knows
    only what it is sent.
    """

    def __call__(self, *, system: str, messages: list[dict[str, str]]) -> str: ...

PROTOCOL = ('Reply with one JSON object and nothing else: {"tool": "<name>", "input": '
            '{<arguments>}} to call a tool, or {"answer": "<text>"} when you are done.')


@dataclass
class MiniResult:
    """What a mini run returns.

    ``answer`` is the model's answer, or ``None`` when a limit stopped the run.
    ``stop_cause`` is the harness's reason for stopping: ``"end_turn"`` (the model answered),
    ``"max_steps"``, ``"token_budget"`` or ``"loop_detected"``. ``rows`` is the trace, one
    dict per step (``step``, ``model wrote``, ``observation``, ``tokens`` of that call,
    running ``total``). ``total_tokens`` is the run's token count (tokens), ``system`` the
    system prompt and ``messages`` the full message list.
    """

    answer: str | None
    stop_cause: str
    rows: list[dict[str, Any]]
    total_tokens: int
    system: str
    messages: list[dict[str, str]]


def system_prompt(tools: dict[str, Callable[..., Any]]) -> str:
    """The system prompt: one line per tool (name, signature, first docstring paragraph),
    then the reply protocol."""
    lines = ["You can use these tools:"]
    for name, fn in tools.items():
        doc = " ".join((inspect.getdoc(fn) or "").split("\n\n")[0].split())
        lines.append(f"- {name}{signature(fn)}: {doc}")
    return "\n".join([*lines, PROTOCOL])


def signature(fn: Callable[..., Any]) -> inspect.Signature:
    """``fn``'s signature with its type hints as real types (shown to the model)."""
    return inspect.signature(fn, eval_str=True)


def parse_reply(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """``(action, None)`` for a usable reply, else ``(None, what was wrong)``."""
    try:
        action = json.loads(text)
    except json.JSONDecodeError as e:
        return None, f"Your reply was not valid JSON ({e.msg} at character {e.pos}). {PROTOCOL}"
    if not isinstance(action, dict) or not ("tool" in action or "answer" in action):
        return None, f"Your reply had neither a 'tool' nor an 'answer' key. {PROTOCOL}"
    return action, None


def checked_tools(tools: dict[str, Callable[..., Any]]) -> dict[str, Tool]:
    """Each function with the JSON Schema of its type hints, ready to check input against.

    The schema is the one :func:`~primer.loop.tools.tool` builds (pydantic, with
    ``additionalProperties: false``), and :meth:`~primer.loop.tools.Tool.input_errors` is the
    registry's own check, so this loop validates exactly as the production one does. Raises
    ``TypeError`` naming the function and parameter when a parameter has no type hint.
    """
    out = {}
    for name, fn in tools.items():
        try:
            out[name] = tool(fn, name=name)
        except TypeError as e:
            raise TypeError(f"run_mini: tool {name!r}: {e}") from None
    return out


def run_tool(tools: dict[str, Tool], action: dict[str, Any]) -> tuple[str, bool]:
    """Run the requested tool; returns ``(result text, is_error)``. Never raises.

    ``tools`` come from :func:`checked_tools`. The input must be a JSON object that passes
    the tool's schema (names and types); only then does the function run.
    """
    name, args = action.get("tool"), action.get("input", {})
    checked = tools.get(name) if isinstance(name, str) else None
    if checked is None:
        return f"Unknown tool {name!r}. Available tools: {', '.join(tools)}.", True
    problem = checked.input_errors(args)
    if problem:
        return problem, True
    try:
        value = checked.fn(**args)
    except Exception as e:  # noqa: BLE001 - every failure becomes an observation
        return f"{name} failed: {e}" if str(e) else f"{name} failed: {type(e).__name__}", True
    return (value if isinstance(value, str) else json.dumps(value)), False


def observation(tool: Any, content: str, is_error: bool) -> str:
    """The user message carrying a result back: ``{"tool", "is_error", "result"}`` as JSON."""
    return json.dumps({"tool": tool, "is_error": is_error, "result": content})


def last_observation(messages: list[dict[str, str]]) -> tuple[str, Any, str, bool] | None:
    """``(tool, input, result, is_error)`` of the last step, or ``None`` if there is none.

    This is the model's side: it reads its own last reply and the observation after it.
    """
    if len(messages) < 3 or messages[-1]["role"] != "user":
        return None
    action, _ = parse_reply(messages[-2]["content"])
    seen = json.loads(messages[-1]["content"])
    args = action.get("input") if action else None
    return str(seen.get("tool")), args, str(seen["result"]), bool(seen["is_error"])


def run_mini(model: TextModel, task: str, tools: dict[str, Callable[..., Any]], *,
             max_steps: int = 10, token_budget: int = 50_000,
             repeat_threshold: int = 3) -> MiniResult:
    """Run the loop on ``task`` until the model answers or a limit stops it.

    ``model(system=..., messages=...) -> str`` is called once per step; ``tools`` maps names
    to typed functions, called with the JSON ``input`` as keyword arguments once it passes
    their schema. Limits: ``max_steps`` model calls, ``token_budget`` tokens (checked after
    each call), ``repeat_threshold`` identical requests. Raises ``ValueError`` for a limit
    below 1 (below 2 for the threshold), ``TypeError`` for a tool parameter with no type hint.
    """
    if max_steps < 1 or token_budget < 1 or repeat_threshold < 2:
        raise ValueError("run_mini needs max_steps >= 1, token_budget >= 1 and "
                         "repeat_threshold >= 2")
    checked = checked_tools(tools)
    system = system_prompt(tools)                           # beside the list, not in it
    messages = [{"role": "user", "content": task}]
    prompt_tokens = estimate_tokens(system) + estimate_tokens(task)  # kept as we append
    total, rows, requests = 0, [], Counter()

    def append(role: str, content: str) -> None:
        nonlocal prompt_tokens
        messages.append({"role": role, "content": content})
        prompt_tokens += estimate_tokens(content)

    def stop(answer: str | None, cause: str) -> MiniResult:
        return MiniResult(answer, cause, rows, total, system, messages)

    for step in range(1, max_steps + 1):
        text = model(system=system, messages=messages)      # 1-2. perceive, reason
        tokens = prompt_tokens + estimate_tokens(text)
        total += tokens
        append("assistant", text)
        row = {"step": step, "model wrote": text, "observation": "", "tokens": tokens,
               "total": total}
        rows.append(row)
        action, problem = parse_reply(text)                 # 3. plan: the action it chose
        if action is not None and "answer" in action:
            return stop(str(action["answer"]), "end_turn")
        if total > token_budget:                            # the harness's exits
            return stop(None, "token_budget")
        if action is None:
            result = observation(None, problem or "", True)
        else:
            key = json.dumps([action.get("tool"), action.get("input")], sort_keys=True)
            requests[key] += 1
            if requests[key] >= repeat_threshold:
                return stop(None, "loop_detected")
            content, is_error = run_tool(checked, action)   # 4. act
            result = observation(action.get("tool"), content, is_error)
        row["observation"] = result
        append("user", result)                              # 5. observe, and go round
    return stop(None, "max_steps")
