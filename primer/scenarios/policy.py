"""Helpers for scripted models: read what the last turn observed, reply with an action.

A scripted *policy* is a function of the message list that returns the model's next reply
(see :class:`primer.loop.model.ScriptedLLM`). The scenario models decide from what they can see,
like a real model would: the tool results of the last user turn. These helpers pair those
results with the calls that asked for them and turn a decision into a reply.

A decision is an *action* dict, the same JSON the stand-alone loop of
:mod:`primer.loop.mini` reads from a model's text::

    {"tool": "get_order", "input": {"order_id": "A123"}, "thought": "..."}   # a tool call
    {"answer": "..."}                                                          # a final answer

so one decision function can speak to both loops. :func:`last_observations` looks only at the
last two messages, so a policy built on it does no more work per call as the history grows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from primer.loop.messages import Message, ToolResultBlock, blocks_of, tool_uses_of
from primer.loop.model import Reply, text_reply, tool_reply

Action = dict[str, Any]


@dataclass(frozen=True)
class Observation:
    """One tool result as the model sees it, with the call that produced it.

    ``name`` and ``input`` are what the model asked for (even a tool that does not exist);
    ``content`` is the result text and ``is_error`` its flag.
    """

    name: str
    input: Any
    content: str
    is_error: bool


def last_observations(messages: list[Message]) -> list[Observation]:
    """The tool results of the last user turn, each paired with its ``tool_use`` block.

    ``messages`` is an Anthropic-shape list. Returns ``[]`` when the last message holds no
    ``tool_result`` blocks (for example on the first call, when it is the task).
    """
    if len(messages) < 2 or messages[-1].get("role") != "user":
        return []
    return _pair(messages[-2], messages[-1])


def all_observations(messages: list[Message]) -> list[Observation]:
    """Every tool result of the run so far, in order, each paired with its call.

    Reads the whole history (as a model does); use :func:`last_observations` when the last
    turn is enough.
    """
    return [o for k in range(1, len(messages))
            if messages[k].get("role") == "user" and messages[k - 1].get("role") == "assistant"
            for o in _pair(messages[k - 1], messages[k])]


def _pair(assistant: Message, user: Message) -> list[Observation]:
    calls = {b.get("id"): b for b in tool_uses_of(assistant.get("content", []))}
    out = []
    for block in blocks_of(user.get("content", [])):
        if block.get("type") != "tool_result":
            continue
        result = cast(ToolResultBlock, block)  # its type is tool_result; fields read with .get
        call: Mapping[str, Any] = calls.get(result.get("tool_use_id"), {})
        out.append(Observation(str(call.get("name", "?")), call.get("input"),
                               str(result.get("content", "")), bool(result.get("is_error"))))
    return out


def call_number(messages: list[Message]) -> int:
    """The number of the model call about to be answered (1 for the first call).

    The list alternates user / assistant and starts with the task, so before call ``n`` it
    holds ``2n - 1`` messages.
    """
    return len(messages) // 2 + 1


def action_reply(action: Action) -> Reply:
    """A scripted :class:`Reply` for an action: ``tool_use`` for a call, text for an answer.

    Raises ``ValueError`` for a dict that has neither ``"tool"`` nor ``"answer"``.
    """
    if "answer" in action:
        return text_reply(str(action["answer"]))
    if "tool" in action:
        return tool_reply((action["tool"], action.get("input", {})), text=action.get("thought"))
    raise ValueError(f"an action needs a 'tool' or an 'answer' key, got {sorted(action)}")
