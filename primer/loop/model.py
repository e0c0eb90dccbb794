"""The model side of the loop: the ``LLM`` protocol, ``Reply``, ``Usage`` and ``ScriptedLLM``.

A model is anything callable as ``llm(*, system, messages, tools, max_tokens) -> Reply``.
It is stateless: everything it knows arrives in ``system`` (a string), ``messages`` (the
whole history, see :mod:`primer.loop.messages`) and ``tools`` (the tool definitions, each
``{"name", "description", "input_schema"}``). It runs nothing; it returns content blocks
and a ``stop_reason`` saying why it stopped writing.

``ScriptedLLM`` is the offline model every lesson and test uses. It replays a script (a list
of replies, or a function of the message list) and reports usage computed by
:func:`estimate_tokens`, so offline runs have deterministic token and dollar figures.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from primer.harness.streaming import DeltaRelay, DeltaSink, wire_events

from .jsontext import compact_length
from .messages import (
    Block,
    Message,
    blocks_of,
    text_block,
    thinking_block,
    tool_use_block,
    tool_uses_of,
)
from .text import safe_repr

#: Stop reasons a reply may carry (the Anthropic Messages API's set).
STOP_REASONS = ("end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn",
                "refusal", "model_context_window_exceeded")

#: The largest token count one usage field may hold. No model call reads or writes a
#: trillion tokens; a larger figure (``1e400``, a 309-digit integer) is a broken report, and
#: would overflow the dollar arithmetic.
MAX_USAGE_TOKENS = 10**12

USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens",
                "cache_read_input_tokens")


@dataclass(frozen=True)
class Usage:
    """Tokens one model call consumed, as the provider reports them (or estimated offline).

    Fields are token counts: ``input_tokens`` (uncached prompt tokens), ``output_tokens``
    (tokens the model wrote), ``cache_creation_input_tokens`` (prompt tokens written to the
    prompt cache) and ``cache_read_input_tokens`` (prompt tokens read from it). Usages add:
    ``u1 + u2`` sums every field. Source: the ``usage`` object of the Anthropic Messages API.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(self.input_tokens + other.input_tokens,
                     self.output_tokens + other.output_tokens,
                     self.cache_creation_input_tokens + other.cache_creation_input_tokens,
                     self.cache_read_input_tokens + other.cache_read_input_tokens)

    @property
    def prompt_tokens(self) -> int:
        """Every prompt token of the call: uncached + cache writes + cache reads."""
        return (self.input_tokens + self.cache_creation_input_tokens
                + self.cache_read_input_tokens)

    @property
    def total_tokens(self) -> int:
        """Prompt tokens plus output tokens: what a token budget counts."""
        return self.prompt_tokens + self.output_tokens

    def to_dict(self) -> dict[str, int]:
        """The four counts as a JSON-ready dict."""
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cache_creation_input_tokens": self.cache_creation_input_tokens,
                "cache_read_input_tokens": self.cache_read_input_tokens}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Usage:
        """Read a usage dict; a missing or ``null`` field counts as 0.

        Raises ``ValueError`` naming the field when a count is not a whole number of tokens
        from 0 to :data:`MAX_USAGE_TOKENS` (a string, a float such as ``1e400``, a boolean,
        a negative number), and ``TypeError`` when ``d`` is not a dict.
        """
        if not isinstance(d, dict):
            raise TypeError(f"usage must be an object of token counts, not "
                            f"{type(d).__name__}")
        values = []
        for name in USAGE_FIELDS:
            v = d.get(name)
            if v is None:
                v = 0
            elif type(v) is not int or not 0 <= v <= MAX_USAGE_TOKENS:
                raise ValueError(f"usage.{name} must be a whole number of tokens from 0 to "
                                 f"{MAX_USAGE_TOKENS:,}, not {safe_repr(v, 40)}")
            values.append(v)
        return cls(*values)

    def problem(self) -> str | None:
        """``None`` when every field is a whole number of tokens from 0 to
        :data:`MAX_USAGE_TOKENS`, else which field is not (a report budgets cannot trust)."""
        for name in USAGE_FIELDS:
            v = getattr(self, name)
            if type(v) is not int or not 0 <= v <= MAX_USAGE_TOKENS:
                return (f"usage.{name} is {safe_repr(v, 40)}, not a whole number of tokens from "
                        f"0 to {MAX_USAGE_TOKENS:,}")
        return None


@dataclass
class Reply:
    """One model reply: ``content`` blocks, the ``stop_reason``, its ``usage`` and ``model``.

    ``stop_reason`` is one of :data:`STOP_REASONS`. A reply with ``tool_use`` blocks is a
    request: the model runs nothing itself.

    Once a reply has entered the loop (:func:`primer.loop.replies.accept_reply`),
    ``content`` is the transcript form, valid for the Messages API whatever the model
    wrote. When that took a repair, ``received`` holds the content as it arrived (a
    JSON-ready rendering of it, for the trace and the checkpoint), and ``refused`` maps the
    id of each ``tool_use`` the harness will not run to its ``{"error_kind", "problem"}``
    (its input in ``content`` is then ``{}``). Both are ``None`` for a reply taken as it was.
    """

    content: list[Block]
    stop_reason: str
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    received: list[Any] | str | None = None
    refused: dict[str, dict[str, str]] | None = None

    @functools.cached_property
    def tool_uses(self) -> list[Block]:
        """The ``tool_use`` blocks, in the order the model wrote them (computed once: the loop
        asks at every check, and a reply's content does not change after it arrives)."""
        return tool_uses_of(self.content)

    @property
    def text(self) -> str:
        """The reply's text blocks joined by newlines (a text that is not a string, in a
        reply that has not been through the boundary, is left out)."""
        return "\n".join(t for b in self.content
                         if isinstance(b, dict) and b.get("type") == "text"
                         and isinstance(t := b.get("text"), str))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (for traces and checkpoints); ``received`` and ``refused``
        only when set."""
        d = {"content": self.content, "stop_reason": self.stop_reason,
             "usage": self.usage.to_dict(), "model": self.model}
        if self.received is not None:
            d["received"] = self.received
        if self.refused:
            d["refused"] = self.refused
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Reply:
        """Inverse of :meth:`to_dict`; ``KeyError``, ``TypeError`` or ``ValueError`` for a
        malformed dict."""
        refused = d.get("refused")
        if refused is not None and not isinstance(refused, dict):
            raise TypeError("reply.refused must be an object")
        return cls(list(d["content"]), d["stop_reason"], Usage.from_dict(d.get("usage") or {}),
                   d.get("model", ""), d.get("received"), refused)


class LLM(Protocol):
    """What the loop needs of a model: one stateless call.

    ``llm(*, system: str, messages: list[Message], tools: list[dict], max_tokens: int)``
    returns a :class:`Reply`. ``max_tokens`` caps the reply's output tokens; a reply that hits
    it comes back with ``stop_reason == "max_tokens"`` and may hold a half-written tool call.
    """

    def __call__(self, *, system: str, messages: list[Message], tools: list[dict[str, Any]],
                 max_tokens: int) -> Reply: ...


def estimate_tokens(obj: Any) -> int:
    """Estimated tokens of a string or JSON value: ``ceil(characters / 4)``.

    A string counts its own characters; anything else counts the characters of its compact
    JSON text. The characters/4 rule is the common rough figure for English text (Anthropic
    and OpenAI both quote about four characters per token); real budgets should use the
    usage a provider reports. Deterministic, so offline runs give the same numbers.
    """
    if obj is None:
        return 0
    return math.ceil((len(obj) if isinstance(obj, str) else compact_length(obj)) / 4)


def text_reply(text: str, stop_reason: str = "end_turn", *, thinking: str | None = None
               ) -> Reply:
    """A scripted reply holding one text block (usage is filled in by ``ScriptedLLM``);
    ``thinking`` puts a ``thinking`` block (extended thinking, no signature) before it."""
    return Reply([*([thinking_block(thinking)] if thinking else []), text_block(text)],
                 stop_reason)


def tool_reply(*calls: tuple[str, Any] | tuple[str, Any, str], text: str | None = None,
               stop_reason: str = "tool_use", thinking: str | None = None) -> Reply:
    """A scripted reply asking for one or more tool calls.

    Each call is ``(name, input)`` or ``(name, input, id)``. Calls without an id get a
    deterministic one from the ``ScriptedLLM`` that returns the reply (``toolu_<call>_<k>``).
    ``text`` adds a text block before the calls (a short thought, as in ReAct);
    ``thinking`` a ``thinking`` block before everything (extended thinking, no signature:
    a server that speaks the API signs it).
    """
    content: list[Block] = [thinking_block(thinking)] if thinking else []
    if text:
        content.append(text_block(text))
    for call in calls:
        name, args = call[0], call[1]
        content.append(tool_use_block(call[2] if len(call) > 2 else "", name, args))
    return Reply(content, stop_reason)


ReplyLike = Reply | str | list
Policy = Callable[[list[Message]], ReplyLike]


class ScriptExhausted(RuntimeError):
    """A ``ScriptedLLM`` was asked for more replies than it was scripted with."""


class TransientModelError(RuntimeError):
    """A model call failed in a way a later try may not (rate limit, overload, timeout).

    Adapters raise it so the loop's model-call retry can wait and try again. ``retry_after_s``
    is the wait in seconds the provider asked for (its ``retry-after`` header), or ``None``;
    ``usage`` the tokens the failed call still consumed, if the provider reported any;
    ``status`` the HTTP status (429, 529, 5xx, ...), or ``None`` when no answer came (a lost
    connection, a timeout, a stream that broke off): what a fallback model decides on.
    """

    def __init__(self, message: str, retry_after_s: float | None = None,
                 usage: Usage | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
        self.usage = usage
        self.status = status


def retry_after_s(headers: Any) -> float | None:
    """Seconds to wait from HTTP response ``headers``: ``retry-after-ms`` (milliseconds,
    non-standard but sent by Anthropic and OpenAI) or ``retry-after`` (seconds, RFC 9110);
    ``None`` when neither is there or readable."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            return max(0.0, float(headers[name]) / scale)
        except (KeyError, TypeError, ValueError):
            continue
    return None


class PermanentModelError(RuntimeError):
    """A model call failed in a way retrying will not fix (bad request, bad key, no access).

    The loop ends the run with ``model_error``; the message says what to fix.
    """


class PromptTooLong(PermanentModelError):
    """The provider refused a request whose prompt does not fit the model's context window
    (Anthropic: a 400 ``invalid_request_error`` saying "prompt is too long").

    No reply exists and nothing was generated, unlike a reply whose ``stop_reason`` is
    ``model_context_window_exceeded`` (the model stopped mid-answer at the window's end).
    The loop ends the run with ``context_window``; the message gives the provider's figures.
    """


class ScriptedLLM:
    """An offline model that replays a script and reports estimated usage.

    ``script`` is either a list of replies, returned one per call in order, or a *policy*: a
    function of the message list returning the next reply. A reply may be a :class:`Reply`,
    a string (a final text answer, ``end_turn``) or a list of blocks (``tool_use`` when it
    holds a tool call, else ``end_turn``). ``tool_use`` blocks with an empty id get a
    deterministic one.

    Usage: ``input_tokens`` = :func:`estimate_tokens` of the system prompt, the tool
    definitions and every message; ``output_tokens`` = the estimate of the reply's content.
    The message estimate is kept incrementally while the caller appends to the same list,
    so a long run costs no re-scan per call. Like a real model it never writes more than
    ``max_tokens``: a reply whose estimate is larger comes back with ``stop_reason
    "max_tokens"`` and ``output_tokens == max_tokens`` (its content is kept as scripted).

    With ``stream=True`` it streams like a real model: the loop passes ``on_delta`` and each
    reply reaches it as the deltas of :mod:`primer.harness.streaming` (the events the
    Messages API would send for it) before the reply is returned, unchanged.

    Raises :class:`ScriptExhausted` when a list script runs out, naming the call.
    """

    def __init__(self, script: Sequence[ReplyLike] | Policy, *, model: str = "scripted",
                 name: str = "scripted model", stream: bool = False) -> None:
        self.script = script
        self.model = model
        self.name = name
        self.stream = stream
        self.calls = 0
        self._tools_ref: Any = None
        self._tools_tokens = 0
        self._msgs_ref: list[Message] | None = None
        self._msgs_seen = 0
        self._msgs_last: Any = None
        self._msgs_tokens = 0

    def _messages_tokens(self, messages: list[Message]) -> int:
        n = self._msgs_seen
        same_prefix = (messages is self._msgs_ref and len(messages) >= n
                       and (n == 0 or messages[n - 1] is self._msgs_last))
        if not same_prefix:
            self._msgs_ref, n, self._msgs_tokens = messages, 0, 0
        for m in messages[n:]:
            self._msgs_tokens += estimate_tokens(m)
        self._msgs_seen = len(messages)
        self._msgs_last = messages[-1] if messages else None
        return self._msgs_tokens

    def _next(self, messages: list[Message]) -> ReplyLike:
        if callable(self.script):
            return self.script(messages)
        if self.calls >= len(self.script):
            raise ScriptExhausted(
                f"{self.name} was scripted with {len(self.script)} "
                f"repl{'y' if len(self.script) == 1 else 'ies'} and was asked for "
                f"reply {self.calls + 1}. Add replies to its script, or lower max_steps.")
        return self.script[self.calls]

    def __call__(self, *, system: str, messages: list[Message], tools: list[dict[str, Any]],
                 max_tokens: int, on_delta: DeltaSink | None = None) -> Reply:
        raw = self._next(messages)
        self.calls += 1
        reply = _as_reply(raw)
        content = []
        for k, block in enumerate(reply.content, start=1):
            if isinstance(block, dict) and block.get("type") == "tool_use" and not block.get("id"):
                block = {**block, "id": f"toolu_{self.calls:02d}_{k}"}
            content.append(block)
        if tools is not self._tools_ref:
            self._tools_ref, self._tools_tokens = tools, estimate_tokens(tools)
        prompt = estimate_tokens(system) + self._tools_tokens + self._messages_tokens(messages)
        output, stop_reason = estimate_tokens(content), reply.stop_reason
        if output > max_tokens:  # a real model stops writing at max_tokens: so does this one
            output, stop_reason = max_tokens, "max_tokens"
        out = Reply(content, stop_reason, Usage(prompt, output), self.model)
        if on_delta is not None and self.stream:
            relay = DeltaRelay(on_delta)
            for event in wire_events({"content": content, "stop_reason": stop_reason,
                                      "usage": out.usage.to_dict()}):
                relay.feed(event)
        return out


def _as_reply(raw: ReplyLike) -> Reply:
    if isinstance(raw, Reply):
        return raw
    if isinstance(raw, str):
        return text_reply(raw)
    if isinstance(raw, list):
        blocks = blocks_of(raw)
        return Reply(blocks, "tool_use" if tool_uses_of(blocks) else "end_turn")
    raise TypeError(f"a scripted reply must be a Reply, a string or a list of blocks, "
                    f"not {type(raw).__name__}")
