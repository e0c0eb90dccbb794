"""A conversation's history, made safe to send again: check it, repair it, add a new turn.

A conversation that goes on sends its whole message list again with the next user turn.
The Messages API refuses a list in which a ``tool_use`` has no ``tool_result`` in the
message right after it (HTTP 400: "``tool_use`` ids were found without ``tool_result``
blocks immediately after"). A run that crashed, was killed or was cancelled while a call
was in flight leaves exactly that: an assistant message asking for a tool, and no answer.

:func:`repair_history` is the one repair: every unanswered ``tool_use`` gets an error
``tool_result`` that says so, in the user message right after it (a new one if there is
none). The text does not claim the call did not run; a crash can fall after a side effect
and before its result was written, so it tells the model the outcome is unknown. Nothing is
run and nothing is removed; a history that needs no repair comes back unchanged (the same
message objects), so repairing twice changes nothing.

:func:`history_problem` says what makes a list unusable as a history (wrong shapes), and
:func:`with_new_turn` adds the next user turn: appended, or joined to a trailing user
message (the results of a run stopped by a limit, or of a repair), so user and assistant
messages still alternate. :func:`unanswered_tool_uses` lists what a repair would answer.

``run_agent(..., messages=earlier.messages)`` uses all three; so can any other loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .messages import (
    Block,
    Message,
    blocks_of,
    text_block,
    tool_result_block,
    tool_uses_of,
    user_message,
)

#: The result text a repair gives each unanswered call (``is_error: true``).
UNANSWERED_RESULT = ("No result: the run that made this call ended before its result was "
                     "recorded (it crashed, was cancelled, or paused and was never resumed). "
                     "Whether the call ran is unknown; check before repeating a call that "
                     "changes anything.")

ROLES = ("user", "assistant")


@dataclass
class RepairedHistory:
    """What :func:`repair_history` returns: the history to send, and what it answered.

    ``messages`` is a new list (the caller's list is never changed); ``repaired`` holds the
    ``tool_use`` blocks that had no result and now have an error result, in order.
    """

    messages: list[Message]
    repaired: list[Block] = field(default_factory=list)

    @property
    def repaired_ids(self) -> list[str]:
        """The ids of the repaired calls."""
        return [b["id"] for b in self.repaired]


def history_problem(messages: Any) -> str | None:
    """Why ``messages`` cannot be a conversation's history, or ``None`` when it can.

    A history is a list of messages in the Anthropic Messages shape: dicts with ``role``
    ``"user"`` or ``"assistant"`` and ``content`` a string or a list of blocks, each block a
    dict with a string ``type``; a ``tool_use`` needs a non-empty string ``id`` and a string
    ``name``, a ``tool_result`` a string ``tool_use_id``. The answer names the first bad
    message by its index.
    """
    if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Sequence):
        return f"a history is a list of messages, not a {type(messages).__name__}"
    for i, m in enumerate(messages):
        problem = _message_problem(m)
        if problem:
            return f"message {i}: {problem}"
    return None


def _message_problem(m: Any) -> str | None:
    if not isinstance(m, dict):
        return f"a {type(m).__name__}, not a message dict"
    if m.get("role") not in ROLES:
        return f"role {m.get('role')!r} is not 'user' or 'assistant'"
    content = m.get("content")
    if isinstance(content, str):
        return None
    if not isinstance(content, list):
        return f"content of type {type(content).__name__}, not a string or a list of blocks"
    for k, b in enumerate(content):
        if not isinstance(b, dict) or not isinstance(b.get("type"), str):
            return f"block {k} is not a dict with a string 'type'"
        if b["type"] == "tool_use" and not (isinstance(b.get("id"), str) and b["id"]
                                            and isinstance(b.get("name"), str)):
            return f"block {k}: a tool_use needs a non-empty string id and a string name"
        if b["type"] == "tool_result" and not isinstance(b.get("tool_use_id"), str):
            return f"block {k}: a tool_result needs a string tool_use_id"
    return None


def _unanswered(messages: Sequence[Message]) -> list[tuple[int, list[Block]]]:
    """``(index, calls)`` for each assistant message whose calls are not all answered in the
    message right after it; ``calls`` are the unanswered ``tool_use`` blocks."""
    out: list[tuple[int, list[Block]]] = []
    for k, m in enumerate(messages):
        if m.get("role") != "assistant":
            continue
        calls = tool_uses_of(m.get("content", []))
        if not calls:
            continue
        answered: set[Any] = set()
        if k + 1 < len(messages) and messages[k + 1].get("role") == "user":
            answered = {b.get("tool_use_id") for b in blocks_of(messages[k + 1].get("content", ""))
                        if b.get("type") == "tool_result"}
        missing = [b for b in calls if b.get("id") not in answered]
        if missing:
            out.append((k, missing))
    return out


def unanswered_tool_uses(messages: Sequence[Message]) -> list[str]:
    """Ids of ``tool_use`` blocks with no ``tool_result`` in the next message (should be [])."""
    return [b.get("id") for _, calls in _unanswered(messages) for b in calls]


def repair_history(messages: Sequence[Message],
                   reason: str = UNANSWERED_RESULT) -> RepairedHistory:
    """The history with every unanswered ``tool_use`` answered by an error ``tool_result``.

    For an assistant message whose calls are not all answered, the missing results (text
    ``reason``, ``is_error: true``) go into the user message right after it, with the results
    first in the order of the calls (the API wants results before any text); when the next
    message is not a user message, or there is none, a user message of results is inserted.
    Messages that need nothing are kept as the same objects; the caller's list and dicts are
    never changed. Call :func:`history_problem` first: this expects well-formed messages.
    O(messages) once per call, never per step.
    """
    gaps = _unanswered(messages)
    if not gaps:
        return RepairedHistory(list(messages))
    out = list(messages)
    repaired: list[Block] = []
    for k, missing in reversed(gaps):  # from the end, so earlier indexes stay valid
        new = {b["id"]: tool_result_block(b["id"], reason, True) for b in missing}
        calls = tool_uses_of(out[k].get("content", []))
        nxt = out[k + 1] if k + 1 < len(out) and out[k + 1].get("role") == "user" else None
        if nxt is None:
            out.insert(k + 1, user_message([new[b["id"]] for b in missing]))
        else:
            blocks = blocks_of(nxt.get("content", ""))
            ids = {b["id"] for b in calls}
            given = {b.get("tool_use_id"): b for b in blocks
                     if b.get("type") == "tool_result" and b.get("tool_use_id") in ids}
            results = [given.get(b["id"]) or new[b["id"]] for b in calls]
            rest = [b for b in blocks if not (b.get("type") == "tool_result"
                                              and b.get("tool_use_id") in ids)]
            out[k + 1] = {**nxt, "content": results + rest}
        repaired[:0] = missing
    return RepairedHistory(out, repaired)


def with_new_turn(messages: Sequence[Message], text: str) -> list[Message]:
    """``messages`` plus the next user turn ``text``, as a new list.

    After an assistant message the turn is a new user message. After a user message (tool
    results, a repair's error results, or a question that got no answer) the text joins it
    as a last text block, so the roles still alternate and results stay first.
    """
    if messages and messages[-1].get("role") == "user":
        last = messages[-1]
        joined = {**last, "content": [*blocks_of(last.get("content", "")), text_block(text)]}
        return [*messages[:-1], joined]
    return [*messages, user_message(text)]


def tool_use_ids(messages: Sequence[Message]) -> set[str]:
    """Every ``tool_use`` id in ``messages`` (a new run must not reuse one)."""
    return {b["id"] for m in messages if m.get("role") == "assistant"
            for b in tool_uses_of(m.get("content", [])) if isinstance(b.get("id"), str)}
