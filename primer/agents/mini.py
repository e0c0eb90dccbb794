"""The agent loop from scratch: about 150 lines, no framework, no tool-calling API.

The model here only writes text. The loop asks it for one JSON object per reply::

    {"tool": "get_order", "input": {"order_id": "A123"}}   # run a tool, or
    {"answer": "Order A123 costs 5900.0 rupees."}           # finish

and does everything else itself: it parses the reply, looks the tool up in a plain dict
(name → Python function, the allow-list), runs it, and writes the observation back as the
next user message. A reply that is not JSON, a tool that does not exist, arguments that do
not fit and a tool that raises all become observations the model can read, never a crash.

The loop owns its exits: the answer, ``max_steps`` (model calls), a token budget (prompt +
reply of every call, counted with :func:`~primer.agents.llm.estimate_tokens`, characters / 4)
and repeat detection (the same tool with the same input requested ``repeat_threshold``
times). The production loop, :func:`primer.agents.run_agent`, has the same shape with more
exits; this module does not use it, so it reads top to bottom on its own.

Message list: ``[{"role": "system", ...}, {"role": "user", "content": task},`` then one
``assistant`` reply and one ``user`` observation per step. Contents are strings.
"""

from __future__ import annotations

import inspect
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .llm import estimate_tokens

#: A text model: the whole message list in, the reply text out.
TextModel = Callable[[list[dict[str, str]]], str]

PROTOCOL = ('Reply with one JSON object and nothing else: {"tool": "<name>", "input": '
            '{<arguments>}} to call a tool, or {"answer": "<text>"} when you are done.')


@dataclass
class MiniResult:
    """What a mini run returns.

    ``answer`` is the model's answer, or ``None`` when a limit stopped the run.
    ``stop_reason`` is ``"answer"``, ``"max_steps"``, ``"token_budget"`` or
    ``"loop_detected"``. ``rows`` is the trace, one dict per step (``step``, ``model wrote``,
    ``observation``, ``tokens`` of that call, running ``total``). ``total_tokens`` is the
    run's token count and ``messages`` the full message list.
    """

    answer: str | None
    stop_reason: str
    rows: list[dict[str, Any]]
    total_tokens: int
    messages: list[dict[str, str]]


def system_prompt(tools: dict[str, Callable[..., Any]]) -> str:
    """The system message: one line per tool (name, signature, first docstring paragraph)."""
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


def run_tool(tools: dict[str, Callable[..., Any]], action: dict[str, Any]) -> tuple[str, bool]:
    """Run the requested tool; returns ``(result text, is_error)``. Never raises."""
    name, args = action.get("tool"), action.get("input", {})
    fn = tools.get(name) if isinstance(name, str) else None
    if fn is None:
        return f"Unknown tool {name!r}. Available tools: {', '.join(tools)}.", True
    if not isinstance(args, dict):
        return f"{name}: input must be a JSON object of arguments, got {args!r}.", True
    try:
        inspect.signature(fn).bind(**args)
    except TypeError as e:
        return f"{name}: bad arguments ({e}). Expected: {name}{signature(fn)}.", True
    try:
        value = fn(**args)
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
    if len(messages) < 4 or messages[-1]["role"] != "user":
        return None
    action, _ = parse_reply(messages[-2]["content"])
    seen = json.loads(messages[-1]["content"])
    args = action.get("input") if action else None
    return str(seen.get("tool")), args, str(seen["result"]), bool(seen["is_error"])


def run_mini(model: TextModel, task: str, tools: dict[str, Callable[..., Any]], *,
             max_steps: int = 10, token_budget: int = 50_000,
             repeat_threshold: int = 3) -> MiniResult:
    """Run the loop on ``task`` until the model answers or a limit stops it.

    ``model(messages) -> str`` is called once per step; ``tools`` maps names to functions
    called with the JSON ``input`` as keyword arguments. Limits: ``max_steps`` model calls,
    ``token_budget`` tokens (checked after each call), ``repeat_threshold`` identical
    requests. Raises ``ValueError`` for a limit below 1 (below 2 for the threshold).
    """
    if max_steps < 1 or token_budget < 1 or repeat_threshold < 2:
        raise ValueError("run_mini needs max_steps >= 1, token_budget >= 1 and "
                         "repeat_threshold >= 2")
    messages = [{"role": "system", "content": system_prompt(tools)},
                {"role": "user", "content": task}]
    prompt_tokens = sum(estimate_tokens(m["content"]) for m in messages)  # kept as we append
    total, rows, requests = 0, [], Counter()

    def append(role: str, content: str) -> None:
        nonlocal prompt_tokens
        messages.append({"role": role, "content": content})
        prompt_tokens += estimate_tokens(content)

    def stop(answer: str | None, reason: str) -> MiniResult:
        return MiniResult(answer, reason, rows, total, messages)

    for step in range(1, max_steps + 1):
        text = model(messages)                              # 1-2. perceive, reason
        tokens = prompt_tokens + estimate_tokens(text)
        total += tokens
        append("assistant", text)
        row = {"step": step, "model wrote": text, "observation": "", "tokens": tokens,
               "total": total}
        rows.append(row)
        action, problem = parse_reply(text)                 # 3. plan: the action it chose
        if action is not None and "answer" in action:
            return stop(str(action["answer"]), "answer")
        if total > token_budget:                            # the harness's exits
            return stop(None, "token_budget")
        if action is None:
            result = observation(None, problem or "", True)
        else:
            key = json.dumps([action.get("tool"), action.get("input")], sort_keys=True)
            requests[key] += 1
            if requests[key] >= repeat_threshold:
                return stop(None, "loop_detected")
            content, is_error = run_tool(tools, action)     # 4. act
            result = observation(action.get("tool"), content, is_error)
        row["observation"] = result
        append("user", result)                              # 5. observe, and go round
    return stop(None, "max_steps")
