"""The boundary: where a model's return value enters the loop, checked once and repaired.

A model adapter, a provider, a scripted policy or an attacker decides what comes back from
``llm(...)``. :func:`accept_reply` is the one place the loop looks at it, before anything
else does. It either refuses the reply (a string saying why: the run ends with
``model_error`` and nothing in it is acted on) or returns a :class:`~primer.loop.model.Reply`
whose ``content`` is the *transcript form*: valid for the Messages API, so every later
request stays valid whatever the model wrote. What it checks and how it repairs:

* the reply: a :class:`Reply` with content (a list of blocks, a string or one block) and a
  usage (a :class:`Usage` or a usage dict) whose every field is a whole number of tokens
  from 0 to :data:`~primer.loop.model.MAX_USAGE_TOKENS`. A negative, infinite, fractional,
  textual or absurd count is refused: budgets cannot be enforced on it.
* text blocks: the text must be a non-empty string that is not only whitespace (the API
  rejects empty text blocks). Empty ones are dropped, a lone surrogate becomes U+FFFD, a
  text that is not a string becomes a text block saying so.
* ``tool_use`` blocks: a string id that is unique in the run and safe as an id (else a
  fresh one, so every call gets exactly one ``tool_result`` and its own idempotency key); a
  name that can be a tool's name; an input that is a JSON object within the limits of
  :mod:`primer.loop.text` (depth, integer size, finite numbers, valid Unicode, JSON
  types only). A call whose input is not (broken or concatenated JSON text, an array, a
  value nested 500 deep) is *refused*: its transcript input is ``{}``, ``Reply.refused``
  records why (the JSON parser's own message and position, for text), and the harness
  answers it with an error ``tool_result`` instead of running it.
* any other block: a block type a model reply can hold (:data:`ASSISTANT_BLOCK_TYPES`,
  e.g. ``thinking``, kept exactly as sent) within the same limits and valid as a request
  block (:func:`~primer.harness.request_check.block_problem`: a ``thinking`` block without
  its ``signature``, a ``server_tool_use`` whose input is a list), else a text block
  describing it. A text block's ``citations`` are kept only when they are valid the same
  way, else dropped.

When anything was repaired, ``Reply.received`` keeps the content as it arrived (each block
as sent when it is JSON, else a description), so the trace and the checkpoint record what
the model really said. An assistant turn with no content at all is sent as one text block
(:data:`~primer.loop.messages.EMPTY_REPLY_TEXT`): the API accepts empty content only on
the final message.
"""

from __future__ import annotations

import re
from typing import Any

from primer.harness.request_check import block_problem

from .messages import Block, text_block, tool_use_block
from .model import STOP_REASONS, Reply, Usage
from .schema import json_type, object_problem
from .text import MAX_INPUT_DEPTH, json_problem, safe_repr, safe_str, valid_text

#: Content block types a model reply may hold, as the Messages API sends them (the
#: ``ContentBlock`` union of the ``anthropic`` SDK's response types; a test keeps the two
#: in step). Other types are replaced by a text block describing them.
ASSISTANT_BLOCK_TYPES = frozenset({
    "text", "tool_use", "thinking", "redacted_thinking", "server_tool_use",
    "web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result",
    "bash_code_execution_tool_result", "text_editor_code_execution_tool_result",
    "tool_search_tool_result", "container_upload",
})

_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def accept_reply(raw: Any, call_no: int, taken: set[str]) -> Reply | str:
    """A model's return value as a :class:`Reply` safe to act on, or why it cannot be one.

    ``call_no`` numbers the model call (for fresh ids); ``taken`` holds the run's
    ``tool_use`` ids so far and gains this reply's. The returned reply's content is the
    transcript form (see the module docstring), ``received`` and ``refused`` are set when a
    repair was needed, and ``reply.tool_uses`` is filled in. A string return is the
    problem (:func:`reply_problem`): nothing in the reply may be acted on.
    """
    if type(raw) is Reply and type(raw.content) is list and type(raw.usage) is Usage \
            and type(raw.stop_reason) is str and type(raw.model) is str:
        u = raw.usage  # the common shape: check the counts in place
        if not (type(u.input_tokens) is int and type(u.output_tokens) is int
                and 0 <= u.input_tokens <= _MAX and 0 <= u.output_tokens <= _MAX
                and (not (u.cache_creation_input_tokens or u.cache_read_input_tokens)
                     or u.problem() is None)):
            return f"an untrustworthy usage ({u.problem()}), so the run's budgets could not " \
                   f"be enforced"
        calls = _plain(raw.content, taken)
        if calls is not None:  # every block plain and valid: taken as it is, no copy made
            reply = Reply(raw.content[:], raw.stop_reason, u, raw.model)
            reply.tool_uses = calls
            return reply
        usage = u
    else:
        problem = reply_problem(raw)  # the uncommon shapes: check, then convert
        if problem:
            return problem
        usage = raw.usage if isinstance(raw.usage, Usage) else Usage.from_dict(raw.usage)
    content = raw.content if isinstance(raw.content, (list, str)) else [raw.content]
    blocks, received, refused = normalize_content(content, call_no, taken)
    model = str.__str__(raw.model) if isinstance(raw.model, str) else safe_str(raw.model)
    reply = Reply(blocks, str.__str__(raw.stop_reason), usage, model, received,
                  refused or None)  # (plain strings: a subclass or an enum of str is not)
    reply.tool_uses = [b for b in blocks if b["type"] == "tool_use"]  # known: no second scan
    return reply


_MAX = 10**12  # llm.MAX_USAGE_TOKENS, bound here for the fast path
_BIG = 10**100  # bounded.MAX_INT_DIGITS digits
_GOOD_NAMES: set[str] = set()  # names that passed _NAME (a few hundred at most are kept)


def _plain(content: list[Any], taken: set[str]) -> list[Block] | None:
    """The ``tool_use`` blocks of ``content`` when every block is a plain, valid text or
    ``tool_use`` block needing no repair (their ids are then added to ``taken``), else
    ``None`` (nothing added): the per-step fast path of :func:`accept_reply`, written for
    speed (subscripts, no allocation but the list of calls)."""
    calls: list[Block] = []
    try:
        for b in content:
            if type(b) is not dict:
                return None
            kind = b["type"]
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
                calls.append(b)
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
    """Why a model's return value cannot be acted on, or ``None`` when it can.

    A reply must be a :class:`Reply` whose ``content`` is a list of blocks, a string or one
    block (a dict), whose ``stop_reason`` is a string, and whose ``usage`` is a
    :class:`Usage` or a usage dict with every count a whole number of tokens from 0 to
    :data:`~primer.loop.model.MAX_USAGE_TOKENS`: without a usage it can trust, the run's
    budgets could not be enforced.
    """
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
        problem = reply.usage.problem()
        if problem:
            return f"an untrustworthy usage ({problem}), so the run's budgets could not be " \
                   f"enforced"
    else:
        return (f"no usage (got {type(reply.usage).__name__}), so the run's budgets could not "
                f"be enforced")
    return None


def normalize_content(content: Any, call_no: int, taken: set[str] | None = None
                      ) -> tuple[list[Block], list[Any] | str | None, dict[str, dict[str, str]]]:
    """A reply's content in transcript form: ``(blocks, received, refused)``.

    ``blocks`` is the content made valid (see the module docstring); ``received`` is
    ``None`` when nothing had to change, else the content as it arrived (JSON-ready);
    ``refused`` maps each ``tool_use`` id the harness will not run to ``{"error_kind",
    "problem"}``. ``taken`` (the run's ids so far) is updated with this reply's ids.
    """
    if isinstance(content, str):
        fixed = valid_text(content)
        blocks = [text_block(fixed)] if fixed.strip() else []
        unchanged = fixed is content and blocks
        return blocks, (None if unchanged or not content else content), {}
    taken = taken if taken is not None else set()
    out: list[Block] = []
    refused: dict[str, dict[str, str]] = {}
    changed = False
    present: set[str] | None = None  # the reply's own tool_use ids, found once when needed
    for k, block in enumerate(content, start=1):
        kind = block.get("type") if type(block) is dict else None
        if kind == "text":
            text = block.get("text")
            if type(text) is str and len(block) == 2 and text.strip() \
                    and valid_text(text) is text:
                out.append(block)  # the common case: exactly as sent
                continue
            changed = True
            if type(text) is not str:
                out.append(_note(f"(a text block whose text was {_described(text)})"))
            elif text.strip():
                out.append(_text_like(block, valid_text(text)))
        elif kind == "tool_use":
            if present is None and _needs_fresh_id(block.get("id"), taken):
                present = {b.get("id") for b in content if type(b) is dict
                           and b.get("type") == "tool_use" and type(b.get("id")) is str}
            block, problem, fixed = _tool_use(block, present or set(), call_no, k, taken)
            changed = changed or fixed
            if problem is not None:
                refused[block["id"]] = problem
            out.append(block)
        elif kind in ASSISTANT_BLOCK_TYPES:  # thinking, server tools: kept exactly as sent
            problem = json_problem(block, text=True, max_depth=MAX_INPUT_DEPTH + 2)
            if problem is None:
                shape = block_problem(block, "assistant")  # the request's own check
                if shape is None:
                    out.append(block)
                    continue
                problem = f"{kind}{shape}" if shape.startswith(".") else shape[2:]
            changed = True
            out.append(_note(f"(a {kind} block that cannot be sent on: {problem})"))
        else:
            changed = True
            if type(block) is dict:
                out.append(_note(f"(a content block of type {_described(kind)}, which a "
                                      f"model reply cannot hold)"))
            else:
                out.append(_note(f"(unreadable content block: {safe_str(block, 200)})"))
    received = [_as_received(b) for b in content] if changed else None
    return out, received, refused


def _tool_use(block: dict[str, Any], present: set[str], call_no: int, k: int,
              taken: set[str]) -> tuple[Block, dict[str, str] | None, bool]:
    """One ``tool_use`` block in transcript form: ``(block, refusal or None, changed)``;
    ``present`` holds the ids the reply's ``tool_use`` blocks arrived with (a fresh id
    avoids them), needed only when this block's id must be replaced."""
    changed = len(block) != 4
    call_id = block.get("id")
    if _needs_fresh_id(call_id, taken):
        call_id, j = f"toolu_fixed_{call_no:02d}_{k}", 1
        while call_id in taken or call_id in present:
            call_id, j = f"toolu_fixed_{call_no:02d}_{k}_{j}", j + 1
        changed = True
    taken.add(call_id)
    name, args = block.get("name"), block.get("input")
    problem: dict[str, str] | None = None
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
    out = tool_use_block(call_id, name, args) if changed else block
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
    """A text block the harness writes about what it received (valid Unicode whatever the
    received value held)."""
    return text_block(valid_text(text))


def _text_like(block: dict[str, Any], text: str) -> Block:
    """A text block with ``text`` that keeps the block's ``citations`` when a request may
    send them (JSON within the limits, and valid for :func:`block_problem`)."""
    out = text_block(text)
    citations = block.get("citations")
    if isinstance(citations, list) and citations and json_problem(
            citations, text=True, max_depth=MAX_INPUT_DEPTH) is None:
        cited = {**out, "citations": citations}
        if block_problem(cited, "assistant") is None:
            return cited
    return out


def _as_received(block: Any) -> Any:
    """A block as the trace can record it: itself when it is JSON within the limits, else a
    description (``{"unreadable": repr, "problem": why}``)."""
    problem = json_problem(block, max_depth=MAX_INPUT_DEPTH + 2)
    if problem is None:
        return block
    return {"unreadable": safe_repr(block, 200), "problem": problem}
