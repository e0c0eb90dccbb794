"""The agent loop from scratch, twice: the ten-line loop and the mini loop (lesson 03).

**The ten-line loop** (:func:`ten_line_loop`) is the loop over the Messages API with no harness
around it, the one an interviewer asks for ("write an agent loop without a framework"). Tools
run through a :class:`~primer.loop.tools.ToolRegistry`, so a bad call comes back as an error
result (lesson 04). Its one exit is the model's own ``stop_reason``, and that is the point: no
step limit, no budget, no loop detection, a ``max_tokens`` reply taken as an answer. Each of
those is the harness's job; :func:`primer.loop.loop.run_agent` (lesson 05) adds each as a check.

**The mini loop** (:func:`run_mini`) has no tool-calling API: the model only writes text, one
JSON object per reply::

    {"tool": "get_order", "input": {"order_id": "A123"}}   # run a tool, or
    {"answer": "Order A123 costs 5900.0 rupees."}           # finish

The loop does the rest: it parses the reply, looks the tool up in a plain dict (the
allow-list), checks the input against the JSON Schema of the function's type hints (as the
registry does, lesson 02: names *and* types, nothing converted, so ``calculator(expression=5)``
gets an error naming the field), runs it, and writes the observation back as the next user
message. A reply that is not JSON, an unknown tool, bad arguments and a raising tool all become
observations, never a crash. Its exits carry the production loop's names: ``end_turn``,
``max_steps``, ``token_budget`` (characters / 4, checked after each call) and
``loop_detected``; it does not use that loop, so it reads top to bottom on its own. The system
prompt travels beside the list; contents are strings (no ``tool_use`` or ``tool_result``
blocks), so an observation is plain user text.
"""

from __future__ import annotations

import inspect
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from .messages import Message, assistant_message, user_message
from .model import LLM, Reply, estimate_tokens
from .tools import Tool, ToolRegistry, tool


def ten_line_loop(llm: LLM, task: str, registry: ToolRegistry, *, system: str = "",
                  max_tokens: int = 1024) -> tuple[list[Message], list[Reply]]:
    """Run ``task`` until the model's ``stop_reason`` is not ``"tool_use"``.

    ``llm`` is any :class:`~primer.loop.model.LLM`; ``registry`` the tools (rendered into
    the definitions sent on every call, and the allow-list); ``system`` the system prompt,
    sent beside the list; ``max_tokens`` caps each reply (tokens). Returns the message list
    and the model's replies, one per call (their ``usage`` counts tokens). Never stops on
    its own: a model that keeps asking for tools keeps it running (a
    :class:`~primer.loop.model.ScriptedLLM` raises ``ScriptExhausted`` when its script ends).
    """
    messages, replies = [user_message(task)], []
    while True:
        reply = llm(system=system, messages=messages, tools=registry.definitions(),
                    max_tokens=max_tokens)
        replies.append(reply)
        messages.append(assistant_message(reply.content))
        if reply.stop_reason != "tool_use":                 # the model's field, the one exit
            return messages, replies
        results = [registry.run(call).result_block() for call in reply.tool_uses]
        messages.append(user_message(results))              # one user turn, in request order


# ---------------------------------------------------------------- the mini loop over JSON text


class TextModel(Protocol):
    """A text model: ``model(system=..., messages=...) -> str``, the reply text. Called fresh
    each step, it knows only the system prompt and the whole list (string contents)."""

    def __call__(self, *, system: str, messages: list[dict[str, str]]) -> str: ...

PROTOCOL = ('Reply with one JSON object and nothing else: {"tool": "<name>", "input": '
            '{<arguments>}} to call a tool, or {"answer": "<text>"} when you are done.')


@dataclass
class MiniResult:
    """What a mini run returns: ``answer`` (``None`` when a limit stopped the run),
    ``stop_cause`` (``"end_turn"``, ``"max_steps"``, ``"token_budget"`` or
    ``"loop_detected"``), ``rows`` (the trace, one dict per step: ``step``, ``model wrote``,
    ``observation``, that call's ``tokens``, running ``total``), ``total_tokens`` (tokens),
    ``system`` (the system prompt) and ``messages`` (the full list)."""

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
    """Each function as a :func:`~primer.loop.tools.tool`, whose schema and
    :meth:`~primer.loop.tools.Tool.input_errors` check input exactly as the production loop
    does. Raises ``TypeError`` naming the function and a parameter with no type hint."""
    out = {}
    for name, fn in tools.items():
        try:
            out[name] = tool(fn, name=name)
        except TypeError as e:
            raise TypeError(f"run_mini: tool {name!r}: {e}") from None
    return out


def run_tool(tools: dict[str, Tool], action: dict[str, Any]) -> tuple[str, bool]:
    """Run the requested tool (of :func:`checked_tools`) if its input passes the schema;
    returns ``(result text, is_error)``. Never raises."""
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
    """``(tool, input, result, is_error)`` of the last step, or ``None``: the model's side,
    reading its own last reply and the observation after it."""
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
    total = 0
    rows: list[dict[str, Any]] = []
    requests: Counter[str] = Counter()

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
