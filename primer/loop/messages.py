"""Messages and content blocks in the Anthropic Messages shape, and a history made safe to send.

The whole state of a run is one list of messages. Each message is a plain dict::

    {"role": "user" | "assistant", "content": str | [block, ...]}

and each block is one of::

    {"type": "text", "text": str}
    {"type": "tool_use", "id": str, "name": str, "input": dict}
    {"type": "tool_result", "tool_use_id": str, "content": str, "is_error": bool}

or, from a model with extended thinking, a ``thinking`` or ``redacted_thinking`` block, sent
back exactly as it came (the API checks the signature). The types below are for a type
checker; at run time these are plain dicts, JSON end to end (traces, checkpoints). The system
prompt is not a message: it travels beside the list. Source: the Anthropic Messages API
reference (content blocks ``text``, ``tool_use``, ``tool_result``, ``thinking``).

What is sent is text: :func:`valid_text` makes any string valid Unicode, :func:`result_text`
turns a tool's return value into ``tool_result`` text, and :func:`compact` writes a value as
the compact JSON the token estimate counts (:func:`compact_length`; one C encoder built once,
since building one is most of the cost of a small value). A conversation that goes on sends
its whole list again, so :func:`repair_history` answers a ``tool_use`` left without its
``tool_result`` (the API refuses such a list) and :func:`with_new_turn` adds the next turn.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict, cast

import orjson

try:
    from json.encoder import (  # type: ignore[attr-defined]  # (typeshed lists neither)
        c_make_encoder,
        encode_basestring,
    )
except ImportError:  # pragma: no cover - no C accelerator
    c_make_encoder = None


class TextBlock(TypedDict):
    """Text the model wrote, or a user's text."""

    type: Literal["text"]
    text: str


class ToolUseBlock(TypedDict):
    """The model asking the harness to run tool ``name`` with ``input`` (a JSON object)."""

    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any]


class ToolResultBlock(TypedDict):
    """The harness's answer to the ``tool_use`` whose id is ``tool_use_id``."""

    type: Literal["tool_result"]
    tool_use_id: str
    content: str
    is_error: bool


class ThinkingBlock(TypedDict):
    """A model's extended thinking and the ``signature`` the API gives it."""

    type: Literal["thinking"]
    thinking: str
    signature: str


class RedactedThinkingBlock(TypedDict):
    """Extended thinking the API sends encrypted (``data``), sent back as it came."""

    type: Literal["redacted_thinking"]
    data: str


#: One content block. A reply may also hold server-tool blocks (``server_tool_use``,
#: ``web_search_tool_result``, ...), which the loop passes on as they came and never reads.
Block = TextBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock | RedactedThinkingBlock
Role = Literal["user", "assistant"]


class Message(TypedDict):
    """One message: who wrote it and what it holds."""

    role: Role
    content: str | list[Block]


#: Content block types that carry a model's extended thinking.
THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})
ROLES: tuple[Role, ...] = ("user", "assistant")

#: The text of the one block an assistant turn with no content is sent as: the Messages API
#: accepts empty content only on the final message, and a run's next request would fail.
EMPTY_REPLY_TEXT = "(empty reply)"

#: The result text a repair gives each unanswered call (``is_error: true``).
UNANSWERED_RESULT = ("No result: the run that made this call ended before its result was "
                     "recorded (it crashed, was cancelled, or paused and was never resumed). "
                     "Whether the call ran is unknown; check before repeating a call that "
                     "changes anything.")


def text_block(text: str) -> TextBlock:
    """A ``text`` content block."""
    return {"type": "text", "text": text}


def tool_use_block(id: str, name: str, input: Any) -> ToolUseBlock:  # noqa: A002
    """A ``tool_use`` block. ``input`` is kept as given even when it is not a dict, so a
    scripted model can write a malformed call and the harness answer it with an error."""
    return {"type": "tool_use", "id": id, "name": name, "input": input}


def thinking_block(thinking: str, signature: str = "") -> ThinkingBlock:
    """A ``thinking`` block (a scripted model leaves the signature empty; the API signs it)."""
    return {"type": "thinking", "thinking": thinking, "signature": signature}


def tool_result_block(tool_use_id: str, content: str, is_error: bool = False) -> ToolResultBlock:
    """A ``tool_result`` block answering the ``tool_use`` whose id is ``tool_use_id``."""
    return {"type": "tool_result", "tool_use_id": tool_use_id, "content": content,
            "is_error": is_error}


def user_message(content: str | list[Block] | Sequence[Block]) -> Message:
    """A message with role ``user`` (the task, or a turn of tool results)."""
    return {"role": "user", "content": content if isinstance(content, str) else list(content)}


def assistant_message(content: str | list[Block]) -> Message:
    """A message with role ``assistant`` (a model reply, kept exactly as returned)."""
    return {"role": "assistant", "content": content}


def transcript_content(content: str | list[Block]) -> str | list[Block]:
    """An assistant turn's content as it is sent: itself, or one text block of
    :data:`EMPTY_REPLY_TEXT` when it is empty."""
    return content if content else [text_block(EMPTY_REPLY_TEXT)]


def blocks_of(content: str | Sequence[Block]) -> list[Block]:
    """The content as a list of blocks: a plain string becomes one text block."""
    if isinstance(content, str):
        return [text_block(content)] if content else []
    return list(content)


def text_of(content: str | Sequence[Block]) -> str:
    """All the text of a message's content, text blocks joined by newlines."""
    if isinstance(content, str):
        return content
    return "\n".join(text for b in content if isinstance(b, dict) and b.get("type") == "text"
                     and isinstance(text := cast(dict[str, Any], b).get("text"), str))


def tool_uses_of(content: str | Sequence[Any]) -> list[ToolUseBlock]:
    """The ``tool_use`` blocks of a message's content, in the order the model wrote them."""
    if isinstance(content, str):
        return []
    return [cast(ToolUseBlock, b) for b in content
            if isinstance(b, dict) and b.get("type") == "tool_use"]


# ---------------------------------------------------------------- their text


def valid_text(text: str) -> str:
    """``text`` as valid Unicode: a surrogate pair written as two characters is joined into
    the one character it stands for, and each lone surrogate becomes U+FFFD (the replacement
    character). UTF-8, and so any request to a model, cannot carry a lone surrogate."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def result_text(value: object) -> tuple[str, str | None]:
    """A tool's return value as ``tool_result`` text: ``(text, None)`` or ``("", problem)``.
    Strings pass; ``None`` is ``"(no output)"``; UTF-8 ``bytes`` are decoded; other values go
    as JSON. Non-UTF-8 bytes and values JSON cannot encode are a problem, never sent garbled."""
    if type(value) is str:
        return valid_text(value), None
    if value is None:
        return "(no output)", None
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode("utf-8"), None
        except UnicodeDecodeError:
            return "", (f"returned {len(value)} bytes that are not UTF-8 text; a tool must "
                        f"return text or JSON")
    try:
        return valid_text(json.dumps(value, ensure_ascii=False, allow_nan=False)), None
    except (TypeError, ValueError, RecursionError) as e:
        return "", f"returned a {type(value).__name__} that cannot be sent as JSON ({e})"


_DEFAULT = json.JSONEncoder().default  # raises TypeError: "Object of type X is not JSON ..."


def _encoder(sort_keys: bool) -> Callable[[Any], str]:
    slow = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=sort_keys)
    if c_make_encoder is None:  # pragma: no cover
        return slow.encode
    # markers=None: no per-call state, so one encoder serves every call and thread; a
    # circular value then recurses instead, and the slow path reports it as json.dumps does
    fast = c_make_encoder(None, _DEFAULT, encode_basestring, None, ":", ",", sort_keys,
                          False, True)

    def encode(obj: Any) -> str:
        if isinstance(obj, str):
            return encode_basestring(obj)
        try:
            return "".join(fast(obj, 0))
        except RecursionError:
            return slow.encode(obj)

    return encode


#: ``json.dumps(obj, ensure_ascii=False, separators=(",", ":"))``, fast.
compact = _encoder(sort_keys=False)
#: The same with ``sort_keys=True``.
compact_sorted = _encoder(sort_keys=True)


#: orjson hands these to ``default`` (none given: ``TypeError``), so they go the standard
#: library's way: dataclasses and dates (orjson would write them, json.dumps refuses them)
#: and subclasses of str, int, dict and list (json.dumps writes them its own way).
_AS_JSON_DUMPS = (orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
                  | orjson.OPT_PASSTHROUGH_SUBCLASS)


def compact_length(obj: Any) -> int:
    """``len(compact(obj))``, measured on orjson's compact text (several times faster to make).
    The texts differ only in a few numbers: orjson writes a float between 1e-9 and 1e-4 in
    full (``0.00001``) or with a one-digit exponent (``1e-7``), and NaN or an infinity as
    ``null``. What orjson refuses (an integer past 64 bits, a non-string key, a lone
    surrogate) or should not write (:data:`_AS_JSON_DUMPS`) is measured on :func:`compact`,
    which raises what json.dumps raises."""
    try:
        text = orjson.dumps(obj, option=_AS_JSON_DUMPS)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return len(compact(obj))
    return len(text) if text.isascii() else len(text.decode("utf-8"))


# ---------------------------------------------------------------- a history to send again


@dataclass
class RepairedHistory:
    """What :func:`repair_history` returns: ``messages`` (a new list; the caller's is never
    changed) and ``repaired``, the ``tool_use`` blocks that now have an error result."""

    messages: list[Message]
    repaired: list[ToolUseBlock] = field(default_factory=list)

    @property
    def repaired_ids(self) -> list[str]:
        """The ids of the repaired calls."""
        return [b["id"] for b in self.repaired]


def history_problem(messages: object) -> str | None:
    """Why ``messages`` cannot be a conversation's history (naming the first bad message by
    index), or ``None``: a list of dicts with a ``role`` and ``content`` a string or a list of
    blocks with a string ``type``; a ``tool_use`` needs a non-empty string ``id`` and a string
    ``name``, a ``tool_result`` a string ``tool_use_id``."""
    if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Sequence):
        return f"a history is a list of messages, not a {type(messages).__name__}"
    for i, m in enumerate(messages):
        problem = _message_problem(m)
        if problem:
            return f"message {i}: {problem}"
    return None


def _message_problem(m: object) -> str | None:
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


def _result_ids(message: Message) -> set[str]:
    return {b["tool_use_id"] for b in blocks_of(message["content"])
            if b["type"] == "tool_result"}


def _unanswered(messages: Sequence[Message]) -> list[tuple[int, list[ToolUseBlock]]]:
    """``(index, calls)`` for each assistant message whose calls are not all answered in the
    message right after it; ``calls`` are the unanswered ``tool_use`` blocks."""
    out: list[tuple[int, list[ToolUseBlock]]] = []
    for k, m in enumerate(messages):
        calls = tool_uses_of(m["content"]) if m["role"] == "assistant" else []
        if not calls:
            continue
        nxt = messages[k + 1] if k + 1 < len(messages) else None
        answered = _result_ids(nxt) if nxt is not None and nxt["role"] == "user" else set()
        missing = [b for b in calls if b["id"] not in answered]
        if missing:
            out.append((k, missing))
    return out


def unanswered_tool_uses(messages: Sequence[Message]) -> list[str]:
    """Ids of ``tool_use`` blocks with no ``tool_result`` in the next message (should be [])."""
    return [b["id"] for _, calls in _unanswered(messages) for b in calls]


def repair_history(messages: Sequence[Message],
                   reason: str = UNANSWERED_RESULT) -> RepairedHistory:
    """The history with every unanswered ``tool_use`` answered by an error ``tool_result`` (the
    API refuses a call with no result in the next message): text ``reason``, in the user
    message after the call (inserted if none follows), results first in call order. Other
    messages stay the same objects, so repairing twice changes nothing; the caller's list is
    never changed. ``reason`` does not claim the call did not run: a crash can fall after a
    side effect. Call :func:`history_problem` first. O(messages), once per run."""
    gaps = _unanswered(messages)
    if not gaps:
        return RepairedHistory(list(messages))
    out = list(messages)
    repaired: list[ToolUseBlock] = []
    for k, missing in reversed(gaps):  # from the end, so earlier indexes stay valid
        new = {b["id"]: tool_result_block(b["id"], reason, True) for b in missing}
        calls = tool_uses_of(out[k]["content"])
        nxt = out[k + 1] if k + 1 < len(out) and out[k + 1]["role"] == "user" else None
        if nxt is None:
            out.insert(k + 1, user_message([new[b["id"]] for b in missing]))
        else:
            blocks = blocks_of(nxt["content"])
            ids = {b["id"] for b in calls}
            given = {b["tool_use_id"]: b for b in blocks
                     if b["type"] == "tool_result" and b["tool_use_id"] in ids}
            results: list[Block] = [given.get(b["id"]) or new[b["id"]] for b in calls]
            rest = [b for b in blocks if not (b["type"] == "tool_result"
                                              and b["tool_use_id"] in ids)]
            out[k + 1] = cast(Message, {**nxt, "content": results + rest})
        repaired[:0] = missing
    return RepairedHistory(out, repaired)


def with_new_turn(messages: Sequence[Message], text: str) -> list[Message]:
    """``messages`` plus the next user turn ``text``, as a new list: a new user message after
    an assistant message, else joined to the trailing user message as a last text block (so
    the roles alternate and results stay first)."""
    if messages and messages[-1]["role"] == "user":
        last = messages[-1]
        joined = cast(Message, {**last, "content": [*blocks_of(last["content"]),
                                                      text_block(text)]})
        return [*messages[:-1], joined]
    return [*messages, user_message(text)]


def tool_use_ids(messages: Sequence[Message]) -> set[str]:
    """Every ``tool_use`` id in ``messages`` (a new run must not reuse one)."""
    return {b["id"] for m in messages if m["role"] == "assistant"
            for b in tool_uses_of(m["content"]) if isinstance(b.get("id"), str)}
