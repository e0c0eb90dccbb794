"""Extended thinking: the setting, the signature, and the rule of a tool round.

With ``thinking: {"type": "enabled", "budget_tokens": n}`` a Claude model thinks before it
answers; ``n`` must be at least :data:`MIN_THINKING_BUDGET` and below ``max_tokens`` (the
thinking tokens are output tokens). Its reply then starts with a ``thinking`` block whose
``signature`` lets the API check, later, that the block was not changed (or with a
``redacted_thinking`` block whose ``data`` is encrypted). The rule that breaks harnesses:
when such a reply asks for tools, the next request must send that assistant turn back with
its thinking blocks first and exactly as they came. Source: the Anthropic "Extended
thinking" docs.

:func:`checked_thinking` checks a setting the way the API would; :func:`tool_round_problem`
is the tool-round rule as the fake server applies it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from primer.loop.messages import THINKING_TYPES, Block, Message

#: The smallest thinking budget the API accepts (tokens).
MIN_THINKING_BUDGET = 1024


def checked_thinking(thinking: dict[str, Any] | None) -> dict[str, Any] | None:
    """``thinking`` (a copy), after the checks the API would make first: a dict with a
    ``type``; ``enabled`` needs an integer ``budget_tokens`` of at least 1,024. Raises
    ``ValueError`` saying what to fix."""
    if thinking is None:
        return None
    if not isinstance(thinking, dict) or not isinstance(thinking.get("type"), str):
        raise ValueError(f"thinking must be a dict with a 'type', e.g. {{'type': 'enabled', "
                         f"'budget_tokens': 2048}} (got {thinking!r})")
    budget = thinking.get("budget_tokens")
    if thinking["type"] == "enabled" and (not isinstance(budget, int) or isinstance(budget, bool)
                                          or budget < MIN_THINKING_BUDGET):
        raise ValueError(f"thinking of type 'enabled' needs budget_tokens, an integer of at "
                         f"least {MIN_THINKING_BUDGET:,} (got {budget!r})")
    return dict(thinking)


def tool_round_problem(messages: list[Message], issued: Callable[[Block], bool]) -> str | None:
    """What the API would refuse (with a 400) in ``messages`` sent with thinking enabled,
    or ``None``: the latest assistant message of a tool round must start with a thinking
    block, and each of its thinking blocks must be one ``issued(block)`` recognises as sent
    unchanged."""
    last = next((i for i in range(len(messages) - 1, -1, -1)
                 if messages[i].get("role") == "assistant"), None)
    if last is None or not isinstance(messages[last].get("content"), list):
        return None
    content = messages[last]["content"]
    uses_tools = any(isinstance(b, dict) and b.get("type") == "tool_use" for b in content)
    first = content[0].get("type") if content and isinstance(content[0], dict) else None
    if uses_tools and last + 1 < len(messages) and first not in THINKING_TYPES:
        return (f"messages.{last}.content.0.type: Expected `thinking` or `redacted_thinking`, "
                f"but found `{first}`. When `thinking` is enabled, the final `assistant` "
                f"message of a tool round must start with a thinking block: send back the "
                f"thinking blocks of that turn, or disable `thinking`.")
    for j, b in enumerate(content):
        if isinstance(b, dict) and b.get("type") in THINKING_TYPES and not issued(b):
            return (f"messages.{last}.content.{j}: `thinking` or `redacted_thinking` blocks in "
                    f"the latest assistant message cannot be modified. These blocks must "
                    f"remain as they were in the original response.")
    return None
