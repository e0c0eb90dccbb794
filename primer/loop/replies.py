"""The boundary: where a model's return value enters the loop, checked once and repaired.

An adapter, a scripted policy or an attacker decides what comes back from ``llm(...)``;
:func:`accept_reply` looks at it before anything else does. It either refuses the reply (a
string saying why: the run ends with ``model_error``, nothing in it acted on) or returns it
(:class:`Accepted`) with its ``content`` in *transcript form*: valid for the Messages API, so
every later request stays valid whatever the model wrote. The rules:

* the reply: a :class:`Reply` with content (a list of blocks, a string or one block) and a
  usage (a :class:`Usage` or a dict) whose every field is a whole number of tokens from 0 to
  :data:`~primer.loop.model.MAX_USAGE_TOKENS`; budgets cannot be enforced on any other count.
* text blocks: empty or whitespace-only ones are dropped (the API rejects them), a lone
  surrogate becomes U+FFFD, a text that is not a string becomes a text block saying so.
* ``tool_use`` blocks: an id unique in the run and safe as an id (else a fresh one, so every
  call gets one ``tool_result`` and its own idempotency key); a name that can be a tool's; an
  input that is a JSON object within the limits of :mod:`primer.loop.text`. A call whose
  input is not (broken JSON text, an array, a value nested 500 deep) is *refused*: its input
  becomes ``{}``, ``Accepted.refused`` records why, and the harness answers it with an error.
* any other block: a type a reply can hold (:data:`ASSISTANT_BLOCK_TYPES`, e.g. ``thinking``,
  kept exactly as sent) within the same limits and valid for the run's ``block_check`` (the
  harness's is :func:`~primer.harness.request_check.block_problem`; without one only plain
  ``thinking`` and ``redacted_thinking`` pass), else a text block describing it. A text
  block's ``citations`` are kept only when valid the same way.

When anything was repaired, ``Accepted.received`` keeps the content as it arrived, so traces
and checkpoints record what the model really said. An empty assistant turn is sent as one text
block (:data:`~primer.loop.messages.EMPTY_REPLY_TEXT`): the API accepts empty content only on
the final message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, cast

from .messages import Block, ToolUseBlock, text_block, tool_use_block, valid_text
from .model import MAX_USAGE_TOKENS, STOP_REASONS, THINKING_FIELD, USAGE_FIELDS, Reply, Usage
from .schema import json_type, object_problem
from .state import BlockCheck
from .text import MAX_INPUT_DEPTH, MAX_INT_DIGITS, json_problem, safe_repr, safe_str
from .tools import Refusal

#: Content block types a model reply may hold: the ``ContentBlock`` union of the ``anthropic``
#: SDK's response types (a test keeps the two in step). Others become a text block saying so.
ASSISTANT_BLOCK_TYPES = frozenset({
    "text", "tool_use", "thinking", "redacted_thinking", "server_tool_use",
    "web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result",
    "bash_code_execution_tool_result", "text_editor_code_execution_tool_result",
    "tool_search_tool_result", "container_upload",
    "compaction",  # (the beta union's: a server-side compaction's summary, sent back as is)
})

_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")


@dataclass
class Accepted:
    """A reply the loop may act on: ``reply`` (content in transcript form), ``refused`` (each
    refused ``tool_use`` id → ``{"error_kind", "problem"}``; its input is then ``{}``) and
    ``received`` (the content as it arrived, if repaired); both ``None`` when nothing was."""

    reply: Reply
    refused: dict[str, Refusal] | None = None
    received: list[Any] | str | None = None


_COMPACTION_KEYS = frozenset({"type", "content", "encrypted_content", "signature"})


def plain_block_problem(block: dict[str, Any], role: str) -> str | None:
    """The core's own check of a reply's ``thinking`` and ``redacted_thinking`` blocks (the
    plain shapes, every field a string) and ``compaction`` blocks (``content`` and any of
    ``encrypted_content``, ``signature``: each a string or ``null``); any other type needs
    the harness's check. The answer reads like
    :func:`~primer.harness.request_check.block_problem`'s."""
    if block.get("type") == "compaction":
        if "content" not in block or not set(block) <= _COMPACTION_KEYS or not all(
                v is None or isinstance(v, str) for k, v in block.items() if k != "type"):
            return (f".{'/'.join(sorted(_COMPACTION_KEYS - {'type'}))}: content, and strings or "
                    f"null only")
        return None
    shapes = {"thinking": {"type", "thinking", "signature"}, "redacted_thinking": {"type", "data"}}
    keys = shapes.get(block.get("type"))  # type: ignore[arg-type]
    if keys is None:
        return f": a {block.get('type')} block needs the harness's request check to be sent on"
    if set(block) != keys or not all(isinstance(block[k], str) for k in keys):
        return f".{'/'.join(sorted(keys - {'type'}))}: must be strings, and nothing else"
    return None
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def accept_reply(raw: Any, call_no: int, taken: set[str],
                 block_check: BlockCheck | None = None) -> Accepted | str:
    """A model's return value as a reply safe to act on (:class:`Accepted`, content in the
    transcript form of the module docstring), or why not: a string (:func:`reply_problem`).
    ``call_no`` numbers the model call (for fresh ids); ``taken`` holds the run's
    ``tool_use`` ids so far and gains this reply's; ``block_check`` checks blocks other than
    text and ``tool_use`` (default :func:`plain_block_problem`)."""
    if type(raw) is Reply and type(raw.content) is list and type(raw.usage) is Usage \
            and type(raw.stop_reason) is str and type(raw.model) is str:
        u = raw.usage  # the common shape: check the counts in place
        if not (type(u.input_tokens) is int and type(u.output_tokens) is int
                and 0 <= u.input_tokens <= _MAX and 0 <= u.output_tokens <= _MAX
                and (type(u.cache_creation_input_tokens) is int
                     and type(u.cache_read_input_tokens) is int
                     and not (u.cache_creation_input_tokens or u.cache_read_input_tokens
                              or u.thinking_tokens)
                     or u.problem() is None)):
            return f"an untrustworthy usage ({u.problem()}), so the run's budgets could not " \
                   f"be enforced"
        calls = _plain(raw.content, taken)
        if calls is not None:  # every block plain and valid: taken as it is, no copy made
            reply = Reply(raw.content[:], raw.stop_reason, u, raw.model,
                          stop_details(raw.stop_details))
            reply.tool_uses = calls
            return Accepted(reply)
        usage = u
    else:  # the uncommon shapes: read each field once, check, then convert
        try:
            raw = _fields_once(raw)
        except Exception as e:  # noqa: BLE001 - a field that raises when read
            return f"a reply whose fields could not be read ({type(e).__name__}: " \
                   f"{safe_str(e, 200)})"
        problem = reply_problem(raw)
        if problem:
            return problem
        usage = raw.usage if isinstance(raw.usage, Usage) else Usage.from_dict(raw.usage)
    content = raw.content if isinstance(raw.content, (list, str)) else [raw.content]
    blocks, received, refused = normalize_content(content, call_no, taken, block_check)
    model = str.__str__(raw.model) if isinstance(raw.model, str) else safe_str(raw.model)
    reply = Reply(blocks, str.__str__(raw.stop_reason), usage, model,
                  stop_details(getattr(raw, "stop_details", None)))
    # (plain strings: a subclass or an enum of str is not)
    reply.tool_uses = [b for b in blocks if b["type"] == "tool_use"]  # known: no second scan
    return Accepted(reply, refused or None, received)


def _fields_once(raw: Any) -> Any:
    """A plain :class:`Reply` holding what each field of ``raw`` (a :class:`Reply` subclass,
    say) answered when read once, so that a field that answers differently on each read
    cannot pass the check and then be something else; its usage a plain :class:`Usage` too.
    Anything else is returned as it is (:func:`reply_problem` refuses it)."""
    if not isinstance(raw, Reply):
        return raw
    content, usage = raw.content, raw.usage
    if isinstance(content, list) and type(content) is not list:
        content = list(content)
    if isinstance(usage, Usage) and type(usage) is not Usage:
        usage = Usage(*(getattr(usage, name) for name in (*USAGE_FIELDS, THINKING_FIELD)))
    return Reply(content, raw.stop_reason, usage, raw.model, raw.stop_details)


def stop_details(details: Any) -> dict[str, str | None] | None:
    """A reply's ``stop_details`` as the loop keeps them: a dict of its text (or ``null``)
    fields, each at most 2,000 characters (a refusal's ``type``, ``category`` and
    ``explanation``); ``None`` for anything else."""
    if details is None or type(details) is not dict:
        return None
    return {k: (safe_str(v, 2000) if v is not None else None) for k, v in details.items()
            if type(k) is str and (v is None or type(v) is str)}


_MAX = MAX_USAGE_TOKENS  # bound here for the fast path
_BIG = 10**MAX_INT_DIGITS
_GOOD_NAMES: set[str] = set()  # names that passed _NAME (a few hundred at most are kept)


def _plain(content: list[Any], taken: set[str]) -> list[ToolUseBlock] | None:
    """:func:`accept_reply`'s fast path, written for speed: the ``tool_use`` blocks of
    ``content`` when every block is a plain text or ``tool_use`` block needing no repair
    (their ids then added to ``taken``), else ``None`` (nothing added)."""
    calls: list[ToolUseBlock] = []
    try:
        for b in content:
            if type(b) is not dict or type(kind := b.get("type")) is not str:
                return None
            if kind == "tool_use":
                cid, name, args = b["id"], b["name"], b["input"]
                if len(b) != 4 or type(cid) is not str or type(args) is not dict \
                        or type(name) is not str or cid in taken \
                        or not (cid.isascii() and cid.isidentifier() or _ID.fullmatch(cid)) \
                        or (name not in _GOOD_NAMES and not _good_name(name)):
                    return None
                for k, v in args.items():  # a flat object of plain values needs no walk
                    tv = type(v)
                    if tv is str:
                        if not v.isascii():
                            return None
                    elif tv is int:
                        if not -_BIG < v < _BIG:
                            return None
                    elif tv is not bool and v is not None:
                        return None
                    if type(k) is not str or not k.isascii():
                        return None
                if calls and any(c["id"] == cid for c in calls):
                    return None  # an id repeated within the reply
                calls.append(cast(ToolUseBlock, b))
            elif kind == "text":
                text = b["text"]
                if type(text) is not str or len(b) != 2 or not text.strip() \
                        or valid_text(text) is not text:
                    return None
            else:
                return None
    except KeyError:
        return None
    for c in calls:
        taken.add(c["id"])
    return calls


def _good_name(name: str) -> bool:
    """Whether ``name`` can be a tool's name (remembered for the fast path when it can)."""
    if not _NAME.fullmatch(name):
        return False
    if len(_GOOD_NAMES) < 512:
        _GOOD_NAMES.add(name)
    return True


def reply_problem(reply: Any) -> str | None:
    """Why a model's return value cannot be acted on, or ``None``: it must be a :class:`Reply`
    with content, a string ``stop_reason`` and a usage to trust (see the module docstring)."""
    if not isinstance(reply, Reply):
        return f"a {type(reply).__name__}, not a Reply (a model adapter must return one)"
    if not isinstance(reply.content, (list, str, dict)):
        return f"content of type {type(reply.content).__name__}, not a list of blocks"
    if not isinstance(reply.stop_reason, str):
        return (f"a stop_reason of type {type(reply.stop_reason).__name__}, not a string (a "
                f"model adapter must map it to one of {', '.join(STOP_REASONS)})")
    if isinstance(reply.usage, dict):
        try:
            Usage.from_dict(reply.usage)
        except (TypeError, ValueError) as e:
            return f"an unreadable usage ({safe_str(e, 200)})"
    elif isinstance(reply.usage, Usage):
        problem = Usage.problem(reply.usage)  # the class's own check, not a subclass's
        if problem:
            return f"an untrustworthy usage ({problem}), so the run's budgets could not be " \
                   f"enforced"
    else:
        return (f"no usage (got {type(reply.usage).__name__}), so the run's budgets could not "
                f"be enforced")
    return None


def normalize_content(content: Any, call_no: int, taken: set[str] | None = None,
                      block_check: BlockCheck | None = None
                      ) -> tuple[list[Block], list[Any] | str | None, dict[str, Refusal]]:
    """A reply's content in transcript form: ``(blocks, received, refused)``, as in
    :class:`Accepted` (``received`` JSON-ready). ``taken`` (the run's ids so far) gains this
    reply's; ``block_check`` as for :func:`accept_reply`."""
    check = block_check or plain_block_problem
    if isinstance(content, str):
        fixed = valid_text(content)
        blocks: list[Block] = [text_block(fixed)] if fixed.strip() else []
        unchanged = fixed is content and blocks
        return blocks, (None if unchanged or not content else content), {}
    taken = taken if taken is not None else set()
    out: list[Block] = []
    refused: dict[str, Refusal] = {}
    changed = False
    present: set[str] | None = None  # the reply's own tool_use ids, found once when needed
    for k, raw in enumerate(content, start=1):
        block: dict[str, Any] = raw if type(raw) is dict else {}
        kind = block.get("type") if type(block.get("type")) is str else None
        if kind == "text":
            text = block.get("text")
            if type(text) is str and len(block) == 2 and text.strip() \
                    and valid_text(text) is text:
                out.append(cast(Block, block))  # the common case: exactly as sent
                continue
            changed = True
            if type(text) is not str:
                out.append(_note(f"(a text block whose text was {_described(text)})"))
            elif text.strip():
                out.append(_text_like(block, valid_text(text), check))
        elif kind == "tool_use":
            if present is None and _needs_fresh_id(block.get("id"), taken):
                present = {b["id"] for b in content if type(b) is dict
                           and b.get("type") == "tool_use" and type(b.get("id")) is str}
            call, refusal, repaired = _tool_use(block, present or set(), call_no, k, taken)
            changed = changed or repaired
            if refusal is not None:
                refused[call["id"]] = refusal
            out.append(call)
        elif kind in ASSISTANT_BLOCK_TYPES:  # thinking, server tools: kept exactly as sent
            problem = json_problem(block, text=True, max_depth=MAX_INPUT_DEPTH + 2)
            if problem is None:
                shape = check(block, "assistant")  # the request's own check
                if shape is None:
                    out.append(cast(Block, block))
                    continue
                problem = f"{kind}{shape}" if shape.startswith(".") else shape[2:]
            changed = True
            out.append(_note(f"(a {kind} block that cannot be sent on: {problem})"))
        else:
            changed = True
            if type(raw) is dict:
                out.append(_note(f"(a content block of type {_described(kind)}, which a "
                                      f"model reply cannot hold)"))
            else:
                out.append(_note(f"(unreadable content block: {safe_str(raw, 200)})"))
    received = [_as_received(b) for b in content] if changed else None
    return out, received, refused


def _tool_use(block: dict[str, Any], present: set[str], call_no: int, k: int,
              taken: set[str]) -> tuple[ToolUseBlock, Refusal | None, bool]:
    """One ``tool_use`` block in transcript form: ``(block, refusal or None, changed)``;
    ``present`` holds the ids the reply's ``tool_use`` blocks arrived with (a fresh id
    avoids them), needed only when this block's id must be replaced."""
    changed = len(block) != 4
    call_id: Any = block.get("id")
    if _needs_fresh_id(call_id, taken):
        call_id, j = f"toolu_fixed_{call_no:02d}_{k}", 1
        while call_id in taken or call_id in present:
            call_id, j = f"toolu_fixed_{call_no:02d}_{k}_{j}", j + 1
        changed = True
    taken.add(call_id)
    name, args = block.get("name"), block.get("input")
    problem: Refusal | None = None
    if type(name) is not str or not _NAME.fullmatch(name):
        problem = {"error_kind": "unknown_tool",
                   "problem": f"{_described(name)} is not a tool name (a name is 1-64 "
                              f"letters, digits, _ or -)"}
        name = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] if type(name) is str else ""
        name = name or "unnamed_tool"
        changed = True
    if type(args) is not dict or json_problem(args, text=True, max_depth=MAX_INPUT_DEPTH):
        problem = problem or {"error_kind": "invalid_input", "problem": object_problem(args)}
        args = {}
        changed = True
    out = tool_use_block(call_id, name, args) if changed else cast(ToolUseBlock, block)
    return out, problem, changed


def _needs_fresh_id(call_id: Any, taken: set[str]) -> bool:
    """Whether a ``tool_use`` id cannot be kept: not a string, already used, or unsafe."""
    return type(call_id) is not str or call_id in taken or not _ID.fullmatch(call_id)


def _described(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return safe_repr(valid_text(value), 60)
    return f"{json_type(value)} ({safe_repr(value, 40)})"


def _note(text: str) -> Block:
    """A text block the harness writes about what it received, made valid Unicode."""
    return text_block(valid_text(text))


def _text_like(block: dict[str, Any], text: str, check: BlockCheck) -> Block:
    """A text block with ``text`` that keeps the block's ``citations`` when a request may
    send them (JSON within the limits, and valid for the run's ``check``)."""
    out = text_block(text)
    citations = block.get("citations")
    if isinstance(citations, list) and citations and json_problem(
            citations, text=True, max_depth=MAX_INPUT_DEPTH) is None:
        cited = {**out, "citations": citations}
        if check(cited, "assistant") is None:
            return cast(Block, cited)
    return out


def _as_received(block: Any) -> Any:
    """A block as the trace can record it: itself when it is JSON within the limits, else a
    description (``{"unreadable": repr, "problem": why}``)."""
    problem = json_problem(block, max_depth=MAX_INPUT_DEPTH + 2)
    if problem is None:
        return block
    return {"unreadable": safe_repr(block, 200), "problem": problem}
