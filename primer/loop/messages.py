"""Messages and content blocks in the Anthropic Messages shape.

The whole state of a run is one list of messages. Each message is a plain dict::

    {"role": "user" | "assistant", "content": str | [block, ...]}

and each block is one of::

    {"type": "text", "text": str}
    {"type": "tool_use", "id": str, "name": str, "input": dict}
    {"type": "tool_result", "tool_use_id": str, "content": str, "is_error": bool}

and, from a model with extended thinking, ``{"type": "thinking", "thinking": str,
"signature": str}`` and ``{"type": "redacted_thinking", "data": str}``: kept exactly as they
came and sent back unchanged (the API checks the signature).

The system prompt is not a message: it travels beside the list (the ``system`` argument
of every model call). Everything here is JSON-serialisable, so a message list can be
written to a trace or a checkpoint and read back unchanged.

Source of the shape: the Anthropic Messages API reference (content blocks ``text``,
``tool_use`` and ``tool_result``).
"""

from __future__ import annotations

from typing import Any

Block = dict[str, Any]
Message = dict[str, Any]

#: Content block types that carry a model's extended thinking.
THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})


def text_block(text: str) -> Block:
    """A ``text`` content block."""
    return {"type": "text", "text": text}


def tool_use_block(id: str, name: str, input: Any) -> Block:  # noqa: A002 - the field's names
    """A ``tool_use`` block: the model asking the harness to run tool ``name`` with ``input``.

    ``input`` is normally a dict (a JSON object). It is kept as given, even when it is not
    a dict, so that the harness can answer a malformed request with an error result rather
    than crash while building it.
    """
    return {"type": "tool_use", "id": id, "name": name, "input": input}


def thinking_block(thinking: str, signature: str = "") -> Block:
    """A ``thinking`` block: the model's extended thinking and the ``signature`` the API
    gives it (a scripted model leaves it empty; a server that speaks the API signs it)."""
    return {"type": "thinking", "thinking": thinking, "signature": signature}


def tool_result_block(tool_use_id: str, content: str, is_error: bool = False) -> Block:
    """A ``tool_result`` block answering the ``tool_use`` whose id is ``tool_use_id``."""
    return {"type": "tool_result", "tool_use_id": tool_use_id, "content": content,
            "is_error": is_error}


def user_message(content: str | list[Block]) -> Message:
    """A message with role ``user`` (the task, or a turn of tool results)."""
    return {"role": "user", "content": content}


def assistant_message(content: str | list[Block]) -> Message:
    """A message with role ``assistant`` (a model reply, kept exactly as returned)."""
    return {"role": "assistant", "content": content}


#: The text of the one block an assistant turn with no content is sent as: the Messages API
#: accepts empty content only on the final message, and a run's next request would fail.
EMPTY_REPLY_TEXT = "(empty reply)"


def transcript_content(content: str | list[Block]) -> str | list[Block]:
    """An assistant turn's content as it is sent: itself, or one text block of
    :data:`EMPTY_REPLY_TEXT` when it is empty."""
    return content if content else [text_block(EMPTY_REPLY_TEXT)]


def blocks_of(content: str | list[Block]) -> list[Block]:
    """The content as a list of blocks: a plain string becomes one text block."""
    if isinstance(content, str):
        return [text_block(content)] if content else []
    return list(content)


def text_of(content: str | list[Block]) -> str:
    """All the text of a message's content, text blocks joined by newlines."""
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content
                     if isinstance(b, dict) and b.get("type") == "text")


def tool_uses_of(content: str | list[Block]) -> list[Block]:
    """The ``tool_use`` blocks of a message's content, in the order the model wrote them."""
    if isinstance(content, str):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
