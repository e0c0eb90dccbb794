"""What the Messages API rejects, checked offline: one strict validator for requests.

:func:`request_problems` reads a ``POST /v1/messages`` body and lists every reason the real
API would answer it with a 400 (empty when it would accept it); :func:`messages_problems`
does the same for a message list alone; :func:`check_request` raises :class:`InvalidRequest`.
:class:`~primer.providers.fake_server.FakeModelServer` answers with it, so every test that goes
through the real SDK checks that what the loop sends is valid on the wire; the fuzz tests
check every request of every generated run with it; lesson 14's ``check-loop`` can check a
learner's transcripts with it.

Two layers:

* **Shapes**, from the ``anthropic`` SDK's own request types: each content block is
  validated with pydantic against the SDK's ``TypedDict`` for its ``type``
  (``TextBlockParam``, ``ToolUseBlockParam``, ``ToolResultBlockParam``, ...; the table is
  read from the SDK's ``MessageContentParam``, so a newer SDK brings its new blocks),
  strictly (no coercion: ``"is_error": "yes"`` is refused) and with extra fields refused, as
  the API refuses them.
* **Rules the types cannot express** (the API's error messages in quotes; sources: the
  Messages API reference and the "Handle tool calls" page of the tool-use docs):

  - at least one message; each ``{"role": "user" | "assistant", "content"}``;
  - "all messages must have non-empty content except for the optional final assistant
    message", and "text content blocks must be non-empty" / "must contain non-whitespace
    text"; the final assistant message "cannot end with trailing whitespace";
  - ``tool_use`` (and thinking and server-tool blocks) only in assistant turns,
    ``tool_result`` only in user turns;
  - every ``tool_use`` id unique, and answered by exactly one ``tool_result`` in the
    immediately following user turn ("tool_use ids were found without tool_result blocks
    immediately after"), the results first in that turn, before any text; every
    ``tool_result`` answering a ``tool_use`` of the turn before ("unexpected tool_use_id
    found in tool_result blocks"). A final assistant turn (a prefill, or a ``pause_turn``
    continuation) needs no results yet;
  - strings that are valid Unicode (a lone surrogate cannot be encoded as UTF-8);
  - a ``compaction`` block (the beta type ``BetaCompactionBlockParam``) only in an
    assistant turn;
  - for a whole body: ``model`` a non-empty string, ``max_tokens`` an integer >= 1, ``system``
    a string or a list of text blocks, ``tools`` with unique names of 1-64 letters, digits,
    ``_`` or ``-`` and an object ``input_schema``.

Consecutive turns of the same role are allowed: the API combines them into one turn
(its reference says so), and the pairing rules above apply to the combined turns.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator
from typing import Any, Union, cast, get_args

import pydantic
from typing_extensions import TypedDict, get_type_hints

from primer.loop.text import json_problem, safe_repr

#: Block types only a model's turn may hold.
ASSISTANT_ONLY = frozenset({"tool_use", "thinking", "redacted_thinking", "server_tool_use",
                            "web_search_tool_result", "web_fetch_tool_result",
                            "code_execution_tool_result", "bash_code_execution_tool_result",
                            "text_editor_code_execution_tool_result",
                            "tool_search_tool_result", "container_upload", "compaction"})
#: Block types only a user turn may hold.
USER_ONLY = frozenset({"tool_result"})

_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


class InvalidRequest(ValueError):
    """A request the Messages API would reject; ``problems`` lists every reason (the
    message is the first, as the API reports one)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(problems[0] if problems else "invalid request")
        self.problems = problems


def check_request(body: Any) -> None:
    """Raise :class:`InvalidRequest` when the ``/v1/messages`` ``body`` would be rejected."""
    problems = request_problems(body)
    if problems:
        raise InvalidRequest(problems)


def check_messages(messages: Any) -> None:
    """Raise :class:`InvalidRequest` when a request sending ``messages`` (a list of
    ``{"role", "content"}`` dicts) would be rejected for them."""
    problems = messages_problems(messages)
    if problems:
        raise InvalidRequest(problems)


def request_problems(body: Any, *, messages: list[Any] | None = None,
                     count_tokens: bool = False) -> list[str]:
    """Every reason the Messages API would reject the request ``body`` (a dict, as sent to
    ``POST /v1/messages``); ``[]`` when it would accept it. Paths name the field as the API
    does (``messages.2.content.0.input``).

    ``messages``, when given, is checked instead of ``body["messages"]`` (a server-side
    thread's whole history, say); ``count_tokens`` checks a ``/v1/messages/count_tokens``
    body (no ``max_tokens``). Fields this module does not know are not checked.
    """
    if not isinstance(body, dict):
        return ["The request body must be a JSON object."]
    problems = []
    for f in ("model", "messages") if count_tokens else ("model", "max_tokens", "messages"):
        if f not in body:
            problems.append(f"{f}: Field required")
    model = body.get("model")
    if "model" in body and (not isinstance(model, str) or not model):
        problems.append("model: Input should be a non-empty string")
    max_tokens = body.get("max_tokens")
    if "max_tokens" in body and (type(max_tokens) is not int or max_tokens < 1):
        problems.append("max_tokens: Input should be an integer greater than or equal to 1")
    problems.extend(_system_problems(body.get("system")))
    problems.extend(_tools_problems(body.get("tools")))
    problems.extend(_tool_choice_problems(body.get("tool_choice")))
    sent = body.get("messages") if messages is None else messages
    if messages is not None or "messages" in body:
        problems.extend(messages_problems(sent))
    if not problems and not body.get("tools") and "thread" not in body \
            and _holds_tool_blocks(sent):
        problems.append(TOOLS_REQUIRED)
    return problems


def messages_problems(messages: Any) -> list[str]:
    """Every reason the Messages API would reject ``messages`` (the request's list of
    ``{"role", "content"}`` dicts); ``[]`` when it would accept them."""
    if not isinstance(messages, list):
        return ["messages: Input should be a valid list"]
    if not messages:
        return ["messages: at least one message is required"]
    problems: list[str] = []
    turns: list[tuple[str, list[tuple[str, dict[str, Any]]]]] = []  # role, [(path, block)]
    last = len(messages) - 1
    for i, msg in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(msg, dict):
            problems.append(f"{where}: Input should be an object with role and content")
            continue
        extra = set(msg) - {"role", "content"}
        if extra:
            problems.append(f"{where}.{sorted(extra)[0]}: Extra inputs are not permitted")
        role, content = msg.get("role"), msg.get("content")
        if role not in ("user", "assistant"):
            problems.append(f"{where}.role: Input should be 'user' or 'assistant'")
            continue
        final_assistant = i == last and role == "assistant"
        blocks = _content_blocks(where, content, role, final_assistant, problems)
        if turns and turns[-1][0] == role:  # consecutive turns of one role are combined
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, blocks))
    if not problems:
        problems.extend(_pairing_problems(turns, final_is_assistant=turns[-1][0] == "assistant"))
    return problems


# ---------------------------------------------------------------- content


def _content_blocks(where: str, content: Any, role: str, final_assistant: bool,
                    problems: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """Check one message's content; returns its blocks (path, block) for the pairing rules."""
    if isinstance(content, str):
        if _unicode_problem(content):
            problems.append(f"{where}.content: {_unicode_problem(content)}")
        if not content.strip() and not final_assistant:
            problems.append(f"{where}: all messages must have non-empty content except for "
                            f"the optional final assistant message")
        elif final_assistant and content != content.rstrip():
            problems.append(f"{where}: final assistant content cannot end with trailing "
                            f"whitespace")
        return []
    if not isinstance(content, list):
        problems.append(f"{where}.content: Input should be a valid string or list of content "
                        f"blocks")
        return []
    if not content and not final_assistant:
        problems.append(f"{where}: all messages must have non-empty content except for the "
                        f"optional final assistant message")
    out = []
    for j, block in enumerate(content):
        path = f"{where}.content.{j}"
        problem = block_problem(block, role)
        if problem:
            problems.append(f"{path}{problem}")
            continue
        out.append((path, block))
    if final_assistant and out and out[-1][1].get("type") == "text" \
            and out[-1][1]["text"] != out[-1][1]["text"].rstrip():
        problems.append(f"{where}: final assistant content cannot end with trailing whitespace")
    return out


def block_problem(block: Any, role: str) -> str | None:
    """Why one content block of a ``role`` message would be rejected, as ``".field: why"``
    (or ``": why"``), or ``None`` when it is valid. The shape is checked against the SDK's
    request type for the block's ``type``."""
    if not isinstance(block, dict):
        return ": Input should be an object (a content block)"
    kind = block.get("type")
    table = _block_types()
    if kind not in table:
        return f".type: Input tag {safe_repr(kind, 40)} is not one of {', '.join(sorted(table))}"
    if role == "user" and kind in ASSISTANT_ONLY:
        return f".type: a {kind} block can only be in an assistant message"
    if role == "assistant" and kind in USER_ONLY:
        return f".type: a {kind} block can only be in a user message"
    shape = dict(block)
    result_content = shape.pop("content", None) if kind == "tool_result" else None
    problem = _shape_problem(table[kind], shape)
    if problem:
        return problem
    unicode = json_problem(block, text=True, max_depth=10**6)
    if unicode:
        return f": {unicode}"
    if kind == "text" and not block["text"].strip():
        return ": text content blocks must contain non-whitespace text" if block["text"] \
            else ": text content blocks must be non-empty"
    if kind == "tool_result" and "content" in block:
        return _result_content_problem(result_content)
    return None


def _result_content_problem(content: Any) -> str | None:
    if isinstance(content, str):
        return None
    if not isinstance(content, list):
        return ".content: Input should be a valid string or list of content blocks"
    table = _result_types()
    for j, b in enumerate(content):
        kind = b.get("type") if isinstance(b, dict) else None
        if kind not in table:
            return (f".content.{j}.type: Input tag {safe_repr(kind, 40)} is not one of "
                    f"{', '.join(sorted(table))}")
        problem = _shape_problem(table[kind], b)
        if problem:
            return f".content.{j}{problem}"
        if kind == "text" and not b["text"].strip():
            return f".content.{j}: text content blocks must be non-empty"
    return None


def _shape_problem(adapter: pydantic.TypeAdapter[Any], block: dict[str, Any]) -> str | None:
    try:
        _force(adapter.validate_python({"block": block})["block"])
    except pydantic.ValidationError as e:
        err = e.errors(include_url=False)[0]
        loc = [str(x) for x in err["loc"] if x != "block"]
        return f"{'.' + '.'.join(loc) if loc else ''}: {err['msg']}"
    return None


def _force(value: Any) -> None:
    """Consume the lazy ``Iterable`` fields pydantic leaves unvalidated until iterated."""
    if isinstance(value, dict):
        for v in value.values():
            _force(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _force(v)
    elif isinstance(value, Iterator):  # pydantic's ValidatorIterator
        for v in value:
            _force(v)


# ---------------------------------------------------------------- pairing


def _pairing_problems(turns: list[tuple[str, list[tuple[str, dict[str, Any]]]]],
                      final_is_assistant: bool) -> list[str]:
    problems: list[str] = []
    seen: set[str] = set()
    for t, (role, blocks) in enumerate(turns):
        if role == "assistant":
            uses = [(p, b) for p, b in blocks if b["type"] == "tool_use"]
            for p, b in uses:
                if b["id"] in seen:
                    problems.append(f"{p}: `tool_use` ids must be unique ({b['id']})")
                seen.add(b["id"])
            if not uses or (t == len(turns) - 1 and final_is_assistant):
                continue
            nxt = turns[t + 1][1] if t + 1 < len(turns) else []
            # each block here passed block_problem: a tool_result's tool_use_id is a string
            answered = [cast(str, b.get("tool_use_id")) for _, b in nxt
                        if b["type"] == "tool_result"]
            missing = [b["id"] for _, b in uses if b["id"] not in answered]
            if missing:
                problems.append(f"{uses[0][0].rsplit('.content', 1)[0]}: `tool_use` ids were "
                                f"found without `tool_result` blocks immediately after: "
                                f"{', '.join(missing)}. Each `tool_use` block must have a "
                                f"corresponding `tool_result` block in the next message.")
            twice = sorted({x for x in answered if answered.count(x) > 1})
            if twice:
                problems.append(f"{nxt[0][0].rsplit('.content', 1)[0]}: each `tool_use` must "
                                f"have exactly one `tool_result`; answered twice: "
                                f"{', '.join(map(str, twice))}")
            kinds = [b["type"] for _, b in nxt]
            results_end = max((k for k, kind in enumerate(kinds) if kind == "tool_result"),
                              default=-1)
            if any(kind != "tool_result" for kind in kinds[:results_end]):
                problems.append(f"{nxt[0][0].rsplit('.content', 1)[0]}: `tool_result` blocks "
                                f"must come first in the user message, before any other "
                                f"content")
        else:
            asked = {b["id"] for _, b in turns[t - 1][1] if b["type"] == "tool_use"} \
                if t > 0 else set()
            for p, b in blocks:
                if b["type"] == "tool_result" and b.get("tool_use_id") not in asked:
                    problems.append(f"{p}: unexpected `tool_use_id` found in `tool_result` "
                                    f"blocks: {b.get('tool_use_id')}. Each `tool_result` "
                                    f"block must have a corresponding `tool_use` block in the "
                                    f"previous message.")
    return problems


# ---------------------------------------------------------------- system and tools


def _system_problems(system: Any) -> list[str]:
    if system is None or isinstance(system, str):
        return [f"system: {_unicode_problem(system)}"] if _unicode_problem(system) else []
    if not isinstance(system, list):
        return ["system: Input should be a valid string or list of text blocks"]
    out = []
    for j, b in enumerate(system):
        if not (isinstance(b, dict) and b.get("type") == "text"):
            out.append(f"system.{j}.type: Input should be 'text'")
            continue
        problem = _shape_problem(_block_types()["text"], b)
        if problem:
            out.append(f"system.{j}{problem}")
    return out


#: The API's answer to a request whose history holds tool_use or tool_result blocks but that
#: defines no tools (a tools-off call must keep the definitions and send tool_choice none).
TOOLS_REQUIRED = ("Requests which include `tool_use` or `tool_result` blocks must define "
                  "tools.")
_TOOL_CHOICES = ("auto", "any", "tool", "none")


def _holds_tool_blocks(messages: Any) -> bool:
    return isinstance(messages, list) and any(
        isinstance(m, dict) and isinstance(m.get("content"), list) and any(
            isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result")
            for b in m["content"]) for m in messages)


def _tool_choice_problems(choice: Any) -> list[str]:
    if choice is None:
        return []
    if not isinstance(choice, dict) or choice.get("type") not in _TOOL_CHOICES:
        return [f"tool_choice.type: Input should be one of {', '.join(map(repr, _TOOL_CHOICES))}"]
    if choice["type"] == "tool" and not isinstance(choice.get("name"), str):
        return ["tool_choice.tool.name: Field required"]
    return []


def _tools_problems(tools: Any) -> list[str]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        return ["tools: Input should be a valid list"]
    out, names = [], set()
    for j, t in enumerate(tools):
        if not isinstance(t, dict):
            out.append(f"tools.{j}: Input should be an object")
            continue
        if "type" in t and t["type"] != "custom":  # a server tool (web search, ...)
            continue
        name = t.get("name")
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            out.append(f"tools.{j}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'")
        elif name in names:
            out.append(f"tools: Tool names must be unique ({name})")
        names.add(name)
        schema = t.get("input_schema")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            out.append(f"tools.{j}.input_schema.type: Input should be 'object'")
    return out


# ---------------------------------------------------------------- the SDK's types


def _type_of(cls: Any) -> str | None:
    """The ``type`` literal of an SDK request TypedDict (``None`` for anything else)."""
    try:
        hint = get_type_hints(cls)["type"]
    except (KeyError, TypeError, NameError):
        return None
    values = get_args(hint)
    return values[0] if len(values) == 1 and isinstance(values[0], str) else None


def _members(union: Any) -> Iterable[Any]:
    for arg in get_args(union):
        if getattr(arg, "__origin__", None) is Union:
            yield from _members(arg)
        else:
            yield arg


def _adapter(cls: Any) -> pydantic.TypeAdapter[Any]:
    @pydantic.with_config(pydantic.ConfigDict(extra="forbid", strict=True))
    class Strict(TypedDict):
        block: cls

    return pydantic.TypeAdapter(Strict)


@functools.cache
def _block_types() -> dict[str, pydantic.TypeAdapter[Any]]:
    """``type`` → adapter, for every block type the SDK's ``MessageContentParam`` allows."""
    from anthropic.types.message_content_param import MessageContentParam

    iterable = next(a for a in get_args(MessageContentParam) if a is not str)
    classes = [c for c in _members(get_args(iterable)[0]) if _type_of(c)]
    try:  # server-side compaction's block, a beta type (SDK 2.x)
        from anthropic.types.beta import BetaCompactionBlockParam
        classes.append(BetaCompactionBlockParam)
    except ImportError:  # an SDK without it: such blocks are refused, as its API would
        pass
    return {_type_of(c): _adapter(c) for c in classes}  # type: ignore[misc]


@functools.cache
def _result_types() -> dict[str, pydantic.TypeAdapter[Any]]:
    """``type`` → adapter, for the blocks a ``tool_result``'s content may hold."""
    from anthropic.types.tool_result_block_param import Content

    return {_type_of(c): _adapter(c) for c in _members(Content) if _type_of(c)}  # type: ignore[misc]


def _unicode_problem(text: Any) -> str | None:
    if isinstance(text, str) and not text.isascii():
        return json_problem(text, text=True)
    return None
