"""The model side of the loop: the ``LLM`` protocol, ``Reply``, ``Usage`` and ``ScriptedLLM``.

A model is anything callable as ``llm(*, system, messages, tools, max_tokens) -> Reply``. It
is stateless: all it knows arrives in ``system``, ``messages`` (the whole history, see
:mod:`primer.loop.messages`) and ``tools`` (the tool definitions). It runs nothing; it returns
content blocks and a ``stop_reason`` saying why it stopped writing. A model whose ``stream``
attribute is ``True`` also takes ``on_delta`` and reports the reply's pieces as they arrive
(:data:`MODEL_EVENT_KINDS`). ``ScriptedLLM`` is the offline model of every lesson and test.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import threading
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from .messages import (
    Block,
    Message,
    ToolUseBlock,
    blocks_of,
    compact_length,
    text_block,
    thinking_block,
    tool_use_block,
    tool_uses_of,
)
from .text import safe_repr

#: Stop reasons a reply may carry (the Anthropic Messages API's set; ``compaction``, the
#: pause after a server-side compaction, is in the API's beta set).
STOP_REASONS = ("end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn",
                "refusal", "model_context_window_exceeded", "compaction")

#: The largest token count one usage field may hold: no call reads or writes a trillion; a
#: larger figure (``1e400``, a 309-digit integer) is a broken report, overflowing cost math.
MAX_USAGE_TOKENS = 10**12

USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens",
                "cache_read_input_tokens")
#: The part of ``output_tokens`` counted apart (never added to them).
THINKING_FIELD = "thinking_tokens"

#: What a streaming model may report through ``on_delta(kind, data)`` (see
#: :mod:`primer.harness.streaming`), and ``model_fallback``. The loop passes only these on,
#: tagged with ``step``, so a model cannot send events under the loop's names (``stop``, ...).
DELTA_KINDS = ("text_delta", "thinking_delta", "tool_use_start", "input_json_delta",
               "tool_use_input")
MODEL_EVENT_KINDS = frozenset(DELTA_KINDS) | {"model_fallback"}

#: Where events go: ``sink(kind, data)``.
EventSink = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True)
class Usage:
    """Tokens one model call consumed, as the provider reports them (or estimated offline):
    ``input_tokens`` (uncached prompt), ``output_tokens`` (written by the model),
    ``cache_creation_input_tokens`` / ``cache_read_input_tokens`` (prompt written to / read
    from the prompt cache), and ``thinking_tokens``: how many of ``output_tokens`` the model
    spent thinking (a part of them, never added to them: the API's
    ``usage.output_tokens_details.thinking_tokens``). ``u1 + u2`` sums every field. Source:
    the ``usage`` object of the Anthropic Messages API."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    thinking_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(self.input_tokens + other.input_tokens,
                     self.output_tokens + other.output_tokens,
                     self.cache_creation_input_tokens + other.cache_creation_input_tokens,
                     self.cache_read_input_tokens + other.cache_read_input_tokens,
                     self.thinking_tokens + other.thinking_tokens)

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
        """The four counts as a JSON-ready dict, and ``thinking_tokens`` when not 0."""
        d = {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
             "cache_creation_input_tokens": self.cache_creation_input_tokens,
             "cache_read_input_tokens": self.cache_read_input_tokens}
        if self.thinking_tokens:
            d[THINKING_FIELD] = self.thinking_tokens
        return d

    @classmethod
    def from_dict(cls, d: object) -> Usage:
        """Read a usage dict; a missing or ``null`` field counts as 0. Raises ``TypeError``
        for a non-dict, ``ValueError`` naming the field for a count that is not a whole
        number of tokens from 0 to :data:`MAX_USAGE_TOKENS` (a string, ``1e400``, a bool)."""
        if not isinstance(d, dict):
            raise TypeError(f"usage must be an object of token counts, not "
                            f"{type(d).__name__}")
        values = []
        for name in (*USAGE_FIELDS, THINKING_FIELD):
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
        for name in (*USAGE_FIELDS, THINKING_FIELD):
            v = getattr(self, name)
            if type(v) is not int or not 0 <= v <= MAX_USAGE_TOKENS:
                return (f"usage.{name} is {safe_repr(v, 40)}, not a whole number of tokens from "
                        f"0 to {MAX_USAGE_TOKENS:,}")
        return None


@dataclass(frozen=True)
class Prices:
    """Prices in USD per million tokens, and the prompt-cache multipliers of the input price.

    The defaults, 5 USD per million input and 25 USD per million output tokens, are the
    course's reference prices: every run in the lessons is priced at them, whichever model
    it names. Real prices depend on the model; set them per run, e.g.
    ``AgentConfig(prices=Prices(3, 15))`` for ``claude-sonnet-4-6`` (the default model of
    :class:`~primer.providers.claude.ClaudeLLM`) at its list price. Check the provider's price
    list: prices change.
    """

    input_per_mtok: float = 5.0
    output_per_mtok: float = 25.0
    cache_write_multiplier: float = 1.25
    cache_read_multiplier: float = 0.1


def cost_usd(usage: Usage, prices: Prices | None = None) -> float:
    """Dollars (USD) for ``usage`` at ``prices`` (default: ``Prices()``, 5 / 25 USD per MTok).

    ``input × p_in + output × p_out + cache_write × p_in × w + cache_read × p_in × r``, all
    divided by one million, where ``w`` and ``r`` are the cache multipliers. Thinking tokens
    are inside ``output`` (billed as output; their share:
    :func:`~primer.loop.cost.thinking_cost_usd`).
    """
    p = prices or Prices()
    return (usage.input_tokens * p.input_per_mtok
            + usage.output_tokens * p.output_per_mtok
            + usage.cache_creation_input_tokens * p.input_per_mtok * p.cache_write_multiplier
            + usage.cache_read_input_tokens * p.input_per_mtok * p.cache_read_multiplier
            ) / 1_000_000


@dataclass
class Reply:
    """One model reply: ``content`` blocks, the ``stop_reason`` (one of :data:`STOP_REASONS`),
    its ``usage`` and ``model``; ``stop_details``, what the provider said about the stop (the
    API's ``stop_details`` of a refusal: ``{"type": "refusal", "category", "explanation"}``),
    or ``None``. ``tool_use`` blocks are requests: the model runs nothing.
    What the harness decided about the reply (a refused call, a repair) is on its
    :class:`~primer.loop.state.Step`."""

    content: list[Block]
    stop_reason: str
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    stop_details: dict[str, Any] | None = None

    @functools.cached_property
    def tool_uses(self) -> list[ToolUseBlock]:
        """The ``tool_use`` blocks in the order written (computed once: the loop asks often)."""
        return tool_uses_of(self.content)

    @property
    def text(self) -> str:
        """The reply's text blocks joined by newlines (a text that is not a string, in a
        reply that has not been through the boundary, is left out)."""
        return "\n".join(t for b in self.content
                         if isinstance(b, dict) and b.get("type") == "text"
                         and isinstance(t := b.get("text"), str))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (for traces and checkpoints); ``stop_details`` only when set."""
        d = {"content": self.content, "stop_reason": self.stop_reason,
             "usage": self.usage.to_dict(), "model": self.model}
        if self.stop_details is not None:
            d["stop_details"] = self.stop_details
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Reply:
        """Inverse of :meth:`to_dict`; ``KeyError``, ``TypeError`` or ``ValueError`` for a
        malformed dict."""
        details = d.get("stop_details")
        return cls(list(d["content"]), d["stop_reason"], Usage.from_dict(d.get("usage") or {}),
                   d.get("model", ""), dict(details) if isinstance(details, dict) else None)


class LLM(Protocol):
    """What the loop needs of a model: one stateless call returning a :class:`Reply` (an
    ``async def`` model, from a coroutine). ``max_tokens`` caps the reply's output tokens; a
    reply that hits it has ``stop_reason == "max_tokens"`` and may hold a half-written call."""

    def __call__(self, *, system: str, messages: list[Message], tools: list[dict[str, Any]],
                 max_tokens: int) -> Any: ...


def estimate_tokens(obj: object) -> int:
    """Estimated tokens of a string or JSON value: ``ceil(characters / 4)``, counting a
    non-string's compact JSON text. Characters/4 is the common rough figure for English
    (Anthropic and OpenAI both quote about four characters per token); real budgets should
    use the usage a provider reports. Deterministic, so offline runs give the same numbers."""
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
    """A scripted reply asking for tool calls, each ``(name, input)`` or ``(name, input, id)``
    (no id: the ``ScriptedLLM`` gives ``toolu_<call>_<k>``). ``text`` adds a text block before
    the calls (a short thought, as in ReAct), ``thinking`` a ``thinking`` block before all."""
    content: list[Block] = [thinking_block(thinking)] if thinking else []
    if text:
        content.append(text_block(text))
    for call in calls:
        name, args = call[0], call[1]
        content.append(tool_use_block(call[2] if len(call) > 2 else "", name, args))
    return Reply(content, stop_reason)


ReplyLike = Reply | str | list[Any]
Policy = Callable[[list[Message]], ReplyLike]


class ScriptExhausted(RuntimeError):
    """A ``ScriptedLLM`` was asked for more replies than it was scripted with."""


class TransientModelError(RuntimeError):
    """A model call failed in a way a later try may not (rate limit, overload, timeout); the
    loop's retry waits and tries again. ``retry_after_s``: the seconds the provider asked for
    (``retry-after``), or ``None``; ``usage``: tokens the failed call still consumed, if
    reported; ``status``: the HTTP status (429, 529, 5xx), or ``None`` when no answer came (a
    lost connection, a timeout): what a fallback model decides on."""

    def __init__(self, message: str, retry_after_s: float | None = None,
                 usage: Usage | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
        self.usage = usage
        self.status = status


class PermanentModelError(RuntimeError):
    """A model call failed in a way retrying will not fix (bad request, bad key, no access):
    the run ends with ``model_error``, the message saying what to fix."""


class PromptTooLong(PermanentModelError):
    """The provider refused a prompt too long for the model's context window (Anthropic: a 400
    ``invalid_request_error``, "prompt is too long"): nothing was generated, unlike a reply
    with ``stop_reason`` ``model_context_window_exceeded``. The run ends with
    ``context_window``; the message gives the provider's figures."""


class CallCancelled(Exception):
    """A streaming model call closed because the run was cancelled: raised by the loop's
    ``on_delta`` at the first delta after the cancel signal is set, so the model's stream
    ends there (leaving the SDK's ``with`` block closes its connection). ``shown``: the text
    the call had streamed (the loop keeps it in ``AgentResult.partial_text``)."""

    def __init__(self, shown: str) -> None:
        super().__init__(f"the run was cancelled; the stream had shown {len(shown)} "
                         f"characters of text")
        self.shown = shown


class ModelRetriesExhausted(RuntimeError):
    """Every attempt of one model call failed with a transient error; the loop gave up.
    ``attempts`` holds one record per failed attempt (:func:`primer.loop.steps.call_model`)."""

    def __init__(self, attempts: list[dict[str, Any]]) -> None:
        reasons = "; ".join(f"attempt {a['attempt']}: {a['error']}" for a in attempts)
        why = f": {attempts[-1]['gave_up']}" if attempts and attempts[-1].get("gave_up") else ""
        super().__init__(f"gave up after {len(attempts)} failed attempt"
                         f"{'s' if len(attempts) != 1 else ''}{why} ({reasons})")
        self.attempts = attempts


def is_async_callable(fn: object) -> bool:
    """Whether ``fn`` is an ``async def`` function or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(fn) or (
        callable(fn) and inspect.iscoroutinefunction(type(fn).__call__))


def run_to_completion(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coroutine`` to its end from sync code and return its value (or raise its error):
    with ``asyncio.run``, or, when this thread runs an event loop (a notebook), as a task of a
    fresh loop on a daemon thread. If that wait is interrupted (a time limit's timer, Ctrl-C)
    the task is cancelled, not left running, and the interruption propagates at once."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    loop = asyncio.new_event_loop()
    task, done = loop.create_task(coroutine), Future[Any]()  # the task has the caller's context

    def run() -> None:
        try:
            done.set_result(loop.run_until_complete(task))
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
            done.set_exception(e)
        finally:
            loop.close()

    threading.Thread(target=run, name="coroutine", daemon=True).start()
    try:
        return done.result()
    except BaseException:
        with contextlib.suppress(RuntimeError):  # (the loop closed: the task is done)
            loop.call_soon_threadsafe(task.cancel)
        raise


class ScriptedLLM:
    """An offline model that replays a script and reports estimated usage.

    ``script`` is a list of replies, one per call, or a *policy*: a function of the message
    list returning the next reply. A reply is a :class:`Reply`, a string (a final answer) or a
    list of blocks (``tool_use`` when it holds a call); empty ``tool_use`` ids get
    deterministic ones. Usage: ``input_tokens`` is :func:`estimate_tokens` of the system
    prompt, tool definitions and messages (kept incrementally while the caller appends to one
    list), ``output_tokens`` that of the reply. Like a real model it never writes more than
    ``max_tokens``: a longer reply comes back with ``stop_reason "max_tokens"`` and
    ``output_tokens == max_tokens`` (content kept). Raises :class:`ScriptExhausted` when a
    list script runs out.
    Streaming: :class:`primer.harness.streaming.StreamingScriptedLLM`.
    """

    def __init__(self, script: Sequence[ReplyLike] | Policy, *, model: str = "scripted",
                 name: str = "scripted model") -> None:
        self.script = script
        self.model = model
        self.name = name
        self.calls = 0
        self._tools_ref: object = None
        self._tools_tokens = 0
        self._msgs_ref: list[Message] | None = None
        self._msgs_seen = 0
        self._msgs_last: object = None
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
                 max_tokens: int) -> Reply:
        raw = self._next(messages)
        self.calls += 1
        reply = _as_reply(raw)
        content: list[Block] = []
        for k, block in enumerate(reply.content, start=1):
            if isinstance(block, dict) and block.get("type") == "tool_use" and not block.get("id"):
                block = cast(Block, {**block, "id": f"toolu_{self.calls:02d}_{k}"})
            content.append(block)
        if tools is not self._tools_ref:
            self._tools_ref, self._tools_tokens = tools, estimate_tokens(tools)
        prompt = estimate_tokens(system) + self._tools_tokens + self._messages_tokens(messages)
        output, stop_reason = estimate_tokens(content), reply.stop_reason
        if output > max_tokens:  # a real model stops writing at max_tokens: so does this one
            output, stop_reason = max_tokens, "max_tokens"
        return Reply(content, stop_reason, Usage(prompt, output), self.model, reply.stop_details)


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
