"""Context editing: old tool results cleared, the cheaper rung before a summary.

Every tool result stays in the message list and is re-sent on every later call, though most
are read once. :func:`clear_tool_results` replaces each result but the last ``keep`` with a
placeholder that names the call (tool, input, ``tool_use`` id), its size, and how to get it
back: call the tool again with the same input. The ``tool_use`` blocks and the order stay, so
every ``tool_use`` keeps its ``tool_result`` and the transcript stays valid. Results of
excluded tools, and of side-effecting tools (the record of what was done, which a re-run
would do again), are never cleared.

``AgentConfig(context_editor=ClearToolResults(keep=2))`` plugs it into the loop's compaction
step (:func:`primer.loop.loop.compact_if_needed`): once the prompt passes ``compact_share``
of the window it clears first, and a ``summarizer`` runs only if the prompt is still past
it. The same edit exists server-side in Anthropic's API (the ``clear_tool_uses_20250919``
context edit) and in LangChain (``ContextEditingMiddleware``). A cleared prompt no longer
matches a prompt cache's prefix: the call after an edit writes the cache afresh.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any, cast

from primer.loop.messages import Block, Message, blocks_of
from primer.loop.model import estimate_tokens
from primer.loop.text import compact_json, one_line
from primer.loop.tools import Tool

#: How a cleared result begins; a result that begins so is never cleared again.
CLEARED_MARK = "[cleared to save context]"


def placeholder(name: str, args: Any, tool_use_id: str, tokens: int) -> str:
    """The text that replaces a cleared result: what it was (the call, its ``tool_use`` id,
    about how many tokens) and how to get it back."""
    call = one_line(f"{name}({compact_json(args)})", 160)
    return (f"{CLEARED_MARK} The result of {call} (tool_use id {tool_use_id}, about "
            f"{tokens:,} tokens) was removed to save room. To see it again, call {name} again "
            f"with the same input.")


def clear_tool_results(messages: list[Message], keep: int,
                       exclude: Collection[str] = ()) -> tuple[list[Message], list[str]]:
    """``messages`` with every tool result but the last ``keep`` replaced by a
    :func:`placeholder`: ``(new_messages, cleared_ids)``, the ``tool_use`` ids cleared, oldest
    first. Results of the tools named in ``exclude`` are kept and not counted; a result
    already cleared stays as it is. ``messages`` is not changed (a changed message is a new
    dict; the others are shared). It reads back from the end and stops at the first result an
    earlier pass cleared, so clearing again after each new result reads about ``keep``
    results, not the whole history.
    """
    out, cleared, seen = list(messages), [], 0
    for k in range(len(messages) - 1, 0, -1):
        m = messages[k]
        if m.get("role") != "user" or isinstance(m.get("content"), str):
            continue
        calls = {b.get("id"): b for b in blocks_of(messages[k - 1].get("content", ""))
                 if b.get("type") == "tool_use"}
        blocks, changed, done = list(blocks_of(m.get("content", ""))), False, False
        for j in range(len(blocks) - 1, -1, -1):
            b = blocks[j]
            call = calls.get(b.get("tool_use_id")) if b.get("type") == "tool_result" else None
            if call is None or call.get("name") in exclude:
                continue
            if str(b.get("content", "")).startswith(CLEARED_MARK):
                done = True  # cleared by an earlier pass, as is every result before it
                break
            seen += 1
            if seen > keep:
                blocks[j] = cast(Block, {**b, "content": placeholder(
                    str(call.get("name")), call.get("input"), str(b.get("tool_use_id")),
                    estimate_tokens(b.get("content")))})
                cleared.append(str(b.get("tool_use_id")))
                changed = True
        if changed:
            out[k] = {**m, "content": blocks}
        if done:
            break
    return out, cleared[::-1]


@dataclass(frozen=True)
class ClearToolResults:
    """A context editor for ``AgentConfig(context_editor=...)``: clear every tool result but
    the last ``keep`` (:func:`clear_tool_results`), never those of ``exclude_tools`` nor of a
    side-effecting tool of the run. ``ValueError`` for a negative ``keep`` or
    ``exclude_tools`` given as one string."""

    keep: int = 3
    exclude_tools: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.keep, int) or isinstance(self.keep, bool) or self.keep < 0:
            raise ValueError(f"ClearToolResults: keep must be an integer >= 0 (got "
                             f"{self.keep!r}): the number of latest tool results kept whole")
        if isinstance(self.exclude_tools, str):
            raise ValueError(f"ClearToolResults: exclude_tools must be a list of tool names, "
                             f"not one string (got {self.exclude_tools!r}); write "
                             f"exclude_tools=[{self.exclude_tools!r}]")
        object.__setattr__(self, "exclude_tools", tuple(self.exclude_tools))

    def __call__(self, messages: list[Message], tools: Iterable[Tool]) -> list[Message] | None:
        """The edited messages, or ``None`` when there was nothing to clear."""
        exclude = {*self.exclude_tools, *(t.name for t in tools if t.side_effecting)}
        new, cleared = clear_tool_results(messages, self.keep, exclude)
        return new if cleared else None
