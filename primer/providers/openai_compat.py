"""The loop over any OpenAI-compatible chat-completions server (OpenAI, vLLM, Ollama, llama.cpp).

Our messages are in the Anthropic shape; chat completions carry the same ideas in other
fields. This module maps both ways:

==========================  =============================================================
ours                        chat completions
==========================  =============================================================
``system`` argument         a first message ``{"role": "system", "content": ...}``
``tool_use`` block          ``message.tool_calls[k]``: ``{"id", "type": "function",
                            "function": {"name", "arguments"}}``; ``arguments`` is a JSON
                            *string*, parsed here (a string that is not a JSON object, e.g.
                            a cut-off one, is kept as the raw text so the harness answers
                            it with an error result instead of crashing)
``tool_result`` block       a message ``{"role": "tool", "tool_call_id", "content"}``;
                            there is no error flag, so an error result's content starts
                            with ``"Error: "``
tool definition             ``{"type": "function", "function": {"name", "description",
                            "parameters": input_schema}}``
stop_reason ``end_turn``    ``finish_reason`` ``stop``
``tool_use``                ``tool_calls`` (or the older ``function_call``)
``max_tokens``              ``length`` (cut off: its tool calls never run)
``refusal``                 ``content_filter``, or a non-empty ``message.refusal`` field
usage                       ``prompt_tokens`` (cached part in ``prompt_tokens_details.
                            cached_tokens`` → ``cache_read_input_tokens``),
                            ``completion_tokens`` → ``output_tokens``
==========================  =============================================================

:class:`OpenAICompatLLM` is the :class:`~primer.loop.model.LLM`; it imports ``openai`` (the
optional extra: ``.venv/bin/pip install -e '.[openai]'``) only when constructed. The pure
functions below need no ``openai`` and also serve the local test server.
Source of the wire format: the OpenAI API reference, "Chat Completions".
"""

from __future__ import annotations

import json
from typing import Any, cast

from primer.harness.retry import retry_after_s
from primer.loop.messages import (
    Block,
    Message,
    TextBlock,
    ToolResultBlock,
    text_block,
    tool_result_block,
    tool_use_block,
    tool_uses_of,
)
from primer.loop.model import PermanentModelError, PromptTooLong, Reply, TransientModelError, Usage

#: finish_reason → our stop_reason.
FINISH_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use",
                  "length": "max_tokens", "content_filter": "refusal"}
#: Our stop_reason → finish_reason (for the local server).
STOP_TO_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls",
                  "max_tokens": "length", "refusal": "content_filter", "pause_turn": "stop",
                  "model_context_window_exceeded": "length"}
ERROR_PREFIX = "Error: "


# ------------------------------------------------------------------ ours → chat completions

def to_chat_messages(system: str, messages: list[Message]) -> list[dict[str, Any]]:
    """Our system prompt and message list as chat-completions messages (see the table)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            out.append({"role": m["role"], "content": content})
            continue
        blocks = [b for b in content or [] if isinstance(b, dict)]
        # each block read as the type its "type" names
        text = "\n".join(cast(TextBlock, b).get("text", "") for b in blocks
                         if b.get("type") == "text")
        if m["role"] == "assistant":
            calls = [{"id": b["id"], "type": "function",
                      "function": {"name": b["name"],
                                   "arguments": b["input"] if isinstance(b["input"], str)
                                   else json.dumps(b["input"], ensure_ascii=False)}}
                     for b in tool_uses_of(blocks)]
            msg: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                msg["tool_calls"] = calls
            out.append(msg)
            continue
        for b in blocks:
            if b.get("type") == "tool_result":
                result = cast(ToolResultBlock, b)
                body = _result_text(result.get("content"))
                out.append({"role": "tool", "tool_call_id": result["tool_use_id"],
                            "content": ERROR_PREFIX + body if result.get("is_error") else body})
        if text:
            out.append({"role": "user", "content": text})
    return out


def to_chat_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Our tool definitions (``name``, ``description``, ``input_schema``) as function tools."""
    return [{"type": "function",
             "function": {"name": t["name"], "description": t.get("description", ""),
                          "parameters": t.get("input_schema", {"type": "object"})}}
            for t in tools]


def reply_from_chat_completion(completion: dict[str, Any]) -> Reply:
    """A chat-completions response body (a dict) as a :class:`Reply` (see the table).

    A non-empty ``refusal`` field wins over ``finish_reason``: the content is not an answer.
    Raises ``ValueError`` when the body has no choices.
    """
    choices = completion.get("choices") or []
    if not choices:
        raise ValueError("the chat completion has no choices; nothing to read")
    choice = choices[0]
    msg = choice.get("message") or {}
    content: list[Block] = []
    refusal = msg.get("refusal")
    if refusal:
        content.append(text_block(str(refusal)))
    elif msg.get("content"):
        content.append(text_block(str(msg["content"])))
    for call in msg.get("tool_calls") or []:
        fn = call.get("function") or {}
        content.append(tool_use_block(str(call.get("id") or ""), str(fn.get("name")),
                                      parse_arguments(fn.get("arguments"))))
    finish = choice.get("finish_reason") or "stop"
    stop_reason = "refusal" if refusal else FINISH_REASONS.get(finish, "end_turn")
    if stop_reason == "end_turn" and any(b["type"] == "tool_use" for b in content):
        stop_reason = "tool_use"  # some local servers say "stop" after a tool call
    u = completion.get("usage") or {}
    cached = int(((u.get("prompt_tokens_details") or {}).get("cached_tokens")) or 0)
    # cached tokens are part of prompt_tokens; a provider that reports more cached than
    # prompt tokens must not produce a negative count (budgets would be bypassed)
    usage = Usage(max(0, int(u.get("prompt_tokens") or 0) - cached),
                  int(u.get("completion_tokens") or 0), 0, cached)
    return Reply(content, stop_reason, usage, str(completion.get("model") or ""))


def parse_arguments(arguments: Any) -> Any:
    """A tool call's ``arguments`` JSON string as an object; the raw string when it is not
    a JSON object (the argument validator then rejects it with a readable error)."""
    if isinstance(arguments, dict):
        return arguments
    try:
        value = json.loads(arguments or "{}")
    except (TypeError, ValueError):
        return arguments
    return value if isinstance(value, dict) else arguments


# ------------------------------------------------------------------ chat completions → ours

def from_chat_request(body: dict[str, Any]) -> tuple[str, list[Message], list[dict[str, Any]],
                                                      int]:
    """A chat-completions request body as ``(system, messages, tools, max_tokens)``.

    The inverse of :func:`to_chat_messages` and :func:`to_chat_tools`, for the local server.
    ``max_tokens`` is ``max_completion_tokens`` or ``max_tokens`` (default 1,024).
    """
    system_parts: list[str] = []
    messages: list[Message] = []
    for m in body.get("messages") or []:
        role, content = m.get("role"), m.get("content")
        if isinstance(content, list):  # content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if role in ("system", "developer"):
            system_parts.append(content or "")
        elif role == "tool":
            text = content or ""
            is_error = text.startswith(ERROR_PREFIX)
            block = tool_result_block(str(m.get("tool_call_id")),
                                      text[len(ERROR_PREFIX):] if is_error else text, is_error)
            if messages and messages[-1]["role"] == "user" and isinstance(
                    messages[-1]["content"], list):
                messages[-1]["content"].append(block)
            else:
                messages.append({"role": "user", "content": [block]})
        elif role == "assistant":
            blocks: list[Block] = [text_block(content)] if content else []
            for call in m.get("tool_calls") or []:
                fn: Any = call.get("function") or {}  # the request's JSON, as it came
                blocks.append(tool_use_block(call.get("id"), fn.get("name"),
                                             parse_arguments(fn.get("arguments"))))
            messages.append({"role": "assistant", "content": blocks})
        else:
            messages.append({"role": "user", "content": content or ""})
    tools = [{"name": t["function"]["name"], "description": t["function"].get("description", ""),
              "input_schema": t["function"].get("parameters", {})}
             for t in body.get("tools") or [] if isinstance(t, dict) and "function" in t]
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or 1024
    return "\n".join(system_parts), messages, tools, int(max_tokens)


def chat_completion_json(reply: Reply, completion_id: str, model: str) -> dict[str, Any]:
    """``reply`` as a chat-completions response body (for the local server).

    A ``refusal`` reply puts its text in ``message.refusal`` with ``content`` null.
    """
    text = reply.text or None
    calls = [{"id": b["id"], "type": "function",
              "function": {"name": b["name"],
                           "arguments": b["input"] if isinstance(b["input"], str)
                           else json.dumps(b["input"], ensure_ascii=False)}}
             for b in reply.tool_uses]
    refused = reply.stop_reason == "refusal"
    message: dict[str, Any] = {"role": "assistant", "content": None if refused else text,
                               "refusal": text if refused else None}
    if calls:
        message["tool_calls"] = calls
    finish = "stop" if refused else STOP_TO_FINISH.get(reply.stop_reason, "stop")
    u = reply.usage
    prompt = u.prompt_tokens
    return {"id": completion_id, "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish,
                         "logprobs": None}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": u.output_tokens,
                      "total_tokens": prompt + u.output_tokens,
                      "prompt_tokens_details": {"cached_tokens": u.cache_read_input_tokens}}}


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict))
    return "" if content is None else json.dumps(content)


# ------------------------------------------------------------------ the LLM

class OpenAICompatLLM:
    """An :class:`~primer.loop.model.LLM` over ``openai.OpenAI().chat.completions.create``.

    ``model`` is required (each server names its own). ``client`` is an ``openai.OpenAI``
    (tests pass one pointed at a local server); otherwise one is built from ``base_url``
    (e.g. ``http://localhost:11434/v1`` for Ollama, ``http://localhost:8000/v1`` for vLLM)
    and ``api_key`` (local servers accept any), with ``max_retries`` (default 0: the loop
    retries). Errors map like :class:`~primer.providers.claude.ClaudeLLM`'s: 408/409/429/5xx
    and connection errors raise :class:`TransientModelError`; a context-length error raises
    :class:`~primer.loop.model.PromptTooLong` (no reply exists; the run stops with
    ``context_window``); others raise :class:`PermanentModelError`.
    Raises :class:`PermanentModelError` at construction when ``openai`` is not installed.
    """

    def __init__(self, model: str, *, client: Any = None, base_url: str | None = None,
                 api_key: str | None = None, max_retries: int = 0) -> None:
        try:
            import openai
        except ImportError as e:
            raise PermanentModelError(
                "OpenAICompatLLM needs the `openai` package: install the optional "
                "extra with .venv/bin/pip install -e '.[openai]'") from e
        self._openai = openai
        self.model = model
        self.client = client or openai.OpenAI(base_url=base_url, api_key=api_key or "unused",
                                              max_retries=max_retries)
        self.calls = 0

    def __repr__(self) -> str:
        return f"OpenAICompatLLM(model={self.model!r})"

    def __call__(self, *, system: str, messages: list[Message], tools: list[dict[str, Any]],
                 max_tokens: int) -> Reply:
        self.calls += 1
        kwargs: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens,
                                  "messages": to_chat_messages(system, messages)}
        if tools:
            kwargs["tools"] = to_chat_tools(tools)
        openai = self._openai
        try:
            completion = self.client.chat.completions.create(**kwargs)
        except openai.APIConnectionError as e:
            raise TransientModelError(f"could not reach the server ({type(e).__name__}): "
                                      f"{e}") from e
        except openai.APIStatusError as e:
            status = e.status_code
            if status in (408, 409, 429) or status >= 500:
                raise TransientModelError(f"the server answered {status}: {e.message}",
                                          retry_after_s=retry_after_s(
                                              e.response.headers)) from e
            if "context_length" in str(e.body) or "context length" in e.message.lower():
                raise PromptTooLong(f"the server answered {status}: {e.message}") from e
            raise PermanentModelError(f"the server answered {status}: {e.message}") from e
        return reply_from_chat_completion(completion.model_dump(mode="json"))

