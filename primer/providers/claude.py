"""``ClaudeLLM``: the loop's :class:`~primer.loop.model.LLM` over the official ``anthropic`` SDK.

The same ``run_agent`` that the lessons drive with scripted models runs against Claude::

    from primer.providers.claude import ClaudeLLM
    result = run_agent(ClaudeLLM(), task, tools)          # needs ANTHROPIC_API_KEY

Each call sends ``system``, the whole message list, the tool definitions (``name``,
``description``, ``input_schema``) and ``max_tokens`` to ``client.messages.create`` and maps
the reply to a :class:`~primer.loop.model.Reply`: content blocks as plain dicts, the
``stop_reason`` unchanged (every value the SDK defines is one of
:data:`~primer.loop.model.STOP_REASONS`), and the full ``usage`` including prompt-cache
writes and reads, so the loop's budgets and dollar figures count them.

Streaming: with ``stream=True`` each call goes through the SDK's ``messages.stream``; its
events are relayed to the loop as deltas (:mod:`primer.harness.streaming`) as they arrive,
and the reply is the stream's final message, the same reply an unstreamed call gives. A
stream that ends before its ``message_delta`` (so with no ``stop_reason``) is a transient
error, never a reply, whether
the body ended in good order or the connection broke inside it (the SDK then lets its HTTP
library's ``RemoteProtocolError``, ``ReadError`` or ``ReadTimeout`` through, not an
``anthropic.APIError``): a half-written ``tool_use`` is never run, and the loop retries.
An ``error`` event in the middle of a stream (``overloaded_error``) counts as the status
it stands for (529).

Extended thinking: ``thinking={"type": "enabled", "budget_tokens": 2048}`` is sent as it is.
``thinking`` and ``redacted_thinking`` blocks come back with their ``signature`` (or
``data``) and stay in the assistant message exactly as they came, so the next request of a
tool round carries them unchanged, as the API requires. Thinking tokens are billed as
output tokens, so they are in ``usage.output_tokens`` and count against the run's budgets.

SDK 2.x (checked with 2.16): each call also carries what the 2.x API adds, when asked for.
``effort`` (``"low"`` ... ``"max"``) and ``output_format`` (API-native structured output: a
pydantic model class or a JSON Schema, sent as ``output_config.format``; the loop's prompted
check, ``run_agent(output_model=...)``, still validates the answer) go in ``output_config``.
A refusal's ``stop_details`` (``category``, ``explanation``) travel on the reply to the
result. ``usage.output_tokens_details.thinking_tokens`` becomes ``Usage.thinking_tokens`` (a
part of ``output_tokens``, priced with them). ``compaction`` turns on server-side
compaction (the beta ``context_management`` edit ``compact_20260112``, sent through
``client.beta.messages``): the ``compaction`` block a reply starts with stays in the
transcript as it came, and a ``compaction`` stop reason (with ``pause_after_compaction``)
lets the loop go on, as ``pause_turn`` does. The SDK's own OpenTelemetry spans are switched
off (``sdk_spans=False``, the default): with :class:`~primer.harness.tracing.otel.OTelSink`
each call is already a ``chat`` span in the run's tree, and the SDK's span would be a second
one for the same call, outside that tree.

Retries: the client is built with ``max_retries=0``. A rate limit (429), an overload (529),
a server error (5xx), a timeout or a lost connection raises
:class:`~primer.loop.model.TransientModelError` carrying the server's ``retry-after``, so
the *loop's* model-call retry waits and tries again, visibly in the trace and inside the
run's budgets, instead of the SDK retrying out of sight. Pass ``max_retries=2`` to get the
SDK's own behaviour back. A 400 saying the prompt is too long (a request that does not fit
the context window: no reply exists) raises :class:`~primer.loop.model.PromptTooLong` and
the loop stops with ``context_window``; any other client error (bad request, bad key, no
access) raises :class:`~primer.loop.model.PermanentModelError` and the run stops with
``model_error``.

:class:`AsyncClaudeLLM` is the same over ``anthropic.AsyncAnthropic``, an ``async def``
model for :func:`~primer.harness.async_loop.run_agent_async`.

This module imports ``anthropic``; ``import primer`` does not import this module.
The API key is read by the SDK from ``ANTHROPIC_API_KEY`` (or passed in) and never stored
on the ``ClaudeLLM``, printed in its ``repr`` or copied into any reply or error text.
"""

from __future__ import annotations

import functools
import importlib
import os
from typing import Any, NoReturn, cast

import anthropic

from primer.harness.retry import retry_after_s
from primer.harness.streaming import DeltaRelay, DeltaSink
from primer.loop.messages import Block, Message, result_text
from primer.loop.model import PermanentModelError, PromptTooLong, Reply, TransientModelError, Usage
from primer.loop.tools import ToolError

from .api_options import COMPACTION_EDIT, EFFORTS
from .thinking import checked_thinking

#: The model used when none is given and ``PRIMER_CLAUDE_MODEL`` is not set. Runs are priced at
#: ``AgentConfig().prices`` (the course's reference 5 / 25 USD per million input / output
#: tokens), not at this model's price: pass ``AgentConfig(prices=Prices(3, 15))`` for its
#: list price.
DEFAULT_MODEL = "claude-sonnet-4-6"

#: The shortest prefix (tokens) each model caches; a shorter one marked with ``cache_control``
#: is processed at the full input price, with no cache write or read reported. Source: the
#: provider's prompt-caching page (minimum cacheable prompt length, by model).
MIN_CACHEABLE_TOKENS: dict[str, int] = {
    "claude-opus-4-6": 4096, "claude-opus-4-5": 4096, "claude-haiku-4-5": 4096,
    "claude-sonnet-4-6": 2048, "claude-sonnet-4-5": 1024, "claude-opus-4-1": 1024,
    "claude-sonnet-4-0": 1024, "claude-opus-4-0": 1024, "claude-3-5-haiku": 2048,
}
#: The environment variable that overrides :data:`DEFAULT_MODEL`.
MODEL_ENV_VAR = "PRIMER_CLAUDE_MODEL"
#: The environment variable the SDK reads the API key from.
API_KEY_ENV_VAR = "ANTHROPIC_API_KEY"

#: How to get going without a key (used by the command line and the lesson).
NO_KEY_HELP = (
    f"No Anthropic API key found: set {API_KEY_ENV_VAR} (for example "
    f"`export {API_KEY_ENV_VAR}=sk-ant-...`, a key from console.anthropic.com) and run again. "
    f"Every lesson and test runs offline without one, against scripted models and a local "
    f"server that speaks the Messages API.")


#: The beta that server-side compaction needs (its edit: ``COMPACTION_EDIT``).
COMPACTION_BETA = "compact-2026-01-12"


def output_format_of(spec: Any) -> dict[str, Any] | None:
    """``output_config.format`` for ``spec``: ``None`` for none; a pydantic model class or a
    JSON Schema dict becomes ``{"type": "json_schema", "schema": ...}`` with
    ``additionalProperties: false`` on every object that does not say (structured output
    needs closed objects); a dict that is already ``{"type": "json_schema", ...}`` is kept.
    ``TypeError`` for anything else."""
    if spec is None:
        return None
    if isinstance(spec, dict) and spec.get("type") == "json_schema" and "schema" in spec:
        return {"type": "json_schema", "schema": closed_objects(spec["schema"])}
    if isinstance(spec, dict):
        return {"type": "json_schema", "schema": closed_objects(spec)}
    schema = getattr(spec, "model_json_schema", None)
    if not callable(schema):
        raise TypeError(f"output_format must be a pydantic model class or a JSON Schema dict, "
                        f"not {type(spec).__name__}")
    return {"type": "json_schema", "schema": closed_objects(schema())}


def closed_objects(schema: Any) -> Any:
    """A copy of ``schema`` where every ``"type": "object"`` without ``additionalProperties``
    gets ``additionalProperties: false``."""
    if isinstance(schema, list):
        return [closed_objects(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: closed_objects(v) for k, v in schema.items()}
    if out.get("type") == "object" and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def compaction_edit(option: bool | dict[str, Any]) -> dict[str, Any] | None:
    """The ``context_management`` edit for ``ClaudeLLM(compaction=...)``: ``None`` for
    ``False``, ``{"type": "compact_20260112"}`` for ``True``, with a dict's options
    (``trigger``: ``{"type": "input_tokens", "value": n}``, ``pause_after_compaction``,
    ``instructions``) added. ``TypeError`` for anything else."""
    if option is False:
        return None
    if option is True:
        return {"type": COMPACTION_EDIT}
    if isinstance(option, dict):
        return {"type": COMPACTION_EDIT, **{k: v for k, v in option.items() if k != "type"}}
    raise TypeError(f"compaction must be True, False or a dict of the edit's options, not "
                    f"{type(option).__name__}")


def without_sdk_spans(client: Any) -> Any:
    """``client`` with the SDK's own OpenTelemetry spans switched off: its copy made by
    ``with_options(open_telemetry=False)`` (SDK 2.x; the copy shares the connection pool).
    An SDK without that option (before 2.x) emits no spans: ``client`` comes back as it is."""
    try:
        return client.with_options(open_telemetry=False)
    except (TypeError, AttributeError):  # an SDK without the option has no spans
        return client


def default_model() -> str:
    """The model id to use: ``$PRIMER_CLAUDE_MODEL`` if set, else :data:`DEFAULT_MODEL`."""
    return os.environ.get(MODEL_ENV_VAR) or DEFAULT_MODEL


def has_api_key() -> bool:
    """Whether ``ANTHROPIC_API_KEY`` is set to something non-empty."""
    return bool(os.environ.get(API_KEY_ENV_VAR, "").strip())


class ClaudeLLM:
    """An :class:`~primer.loop.model.LLM` that calls Claude through ``anthropic.Anthropic``.

    - ``model``: the model id (default :func:`default_model`).
    - ``client``: an ``anthropic.Anthropic`` to use (tests pass one pointed at a local
      server); when omitted one is built from ``api_key``/``base_url`` (or the SDK's
      environment variables) with ``max_retries`` and ``timeout_s``.
    - ``max_retries``: the SDK's own retries (default 0: the loop retries, see the module).
    - ``cache_prefix``: mark the static prefix (tool definitions and system prompt) with
      ``cache_control: {"type": "ephemeral"}`` so later calls read it from the prompt cache.
      The API caches a prefix only from :data:`MIN_CACHEABLE_TOKENS` tokens on.
    - ``cache_ttl``: ``"5m"`` (the API's default lifetime) or ``"1h"``, sent as the mark's
      ``ttl``; a 1-hour write is billed at 2× the input price instead of 1.25×
      (``Prices(cache_write_multiplier=2.0)``). ``ValueError`` for another value.
    - ``exact_count``: before each call, the loop's ``budget_check="before"`` asks
      :meth:`count_tokens` (``messages.count_tokens``, one extra request) for the prompt's
      exact size instead of a characters/4 estimate.
    - ``stream``: call through ``messages.stream`` and relay the deltas (see the module).
    - ``thinking``: the API's ``thinking`` setting, e.g. ``{"type": "enabled",
      "budget_tokens": 2048}`` (``ValueError`` for one that is not a dict with a ``type``,
      or an ``enabled`` one without an integer ``budget_tokens`` of at least 1,024).
    - ``effort``: ``output_config.effort``, one of :data:`EFFORTS` (``ValueError`` else).
    - ``output_format``: API-native structured output, ``output_config.format``: a pydantic
      model class or a JSON Schema dict (:func:`output_format`).
    - ``compaction``: server-side compaction, ``True`` or the options of the
      ``compact_20260112`` edit (``trigger``, ``pause_after_compaction``, ``instructions``).
    - ``sdk_spans``: keep the SDK's own OpenTelemetry span of each call (default ``False``:
      switched off on the client, given or built; see the module).

    Calling it returns a :class:`Reply`; raises :class:`TransientModelError` (retry may help)
    or :class:`PermanentModelError` (fix the request: also for ``max_tokens`` not above the
    thinking budget) as described in the module docstring.
    """

    def __init__(self, model: str | None = None, *, client: anthropic.Anthropic | None = None,
                 api_key: str | None = None, base_url: str | None = None,
                 max_retries: int = 0, timeout_s: float = 120.0, cache_prefix: bool = False,
                 exact_count: bool = False, stream: bool = False,
                 thinking: dict[str, Any] | None = None, cache_ttl: str | None = None,
                 effort: str | None = None, output_format: Any = None,
                 compaction: bool | dict[str, Any] = False, sdk_spans: bool = False) -> None:
        if cache_ttl not in (None, "5m", "1h"):
            raise ValueError(f"cache_ttl must be '5m' or '1h' (got {cache_ttl!r})")
        if effort is not None and effort not in EFFORTS:
            raise ValueError(f"effort must be one of {', '.join(EFFORTS)} (got {effort!r})")
        self.effort = effort
        self.output_format = output_format_of(output_format)
        self.compaction = compaction_edit(compaction)
        self.sdk_spans = sdk_spans
        self.cache_ttl = cache_ttl
        self.model = model or default_model()
        self.thinking = checked_thinking(thinking)
        if client is None:
            if api_key is None and not has_api_key():
                raise PermanentModelError(NO_KEY_HELP)
            client = self._client_class(api_key=api_key, base_url=base_url,
                                        max_retries=max_retries, timeout=timeout_s)
        self.client = client if sdk_spans else without_sdk_spans(client)
        self.cache_prefix = cache_prefix
        self.exact_count = exact_count
        self.stream = stream
        self.calls = 0

    _client_class: Any = anthropic.Anthropic
    #: The wrap-up's tools-off call keeps the definitions (the API refuses ``tool_use``
    #: blocks in a request that defines no tools) and sends ``tool_choice`` none.
    takes_tool_choice = True

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(model={self.model!r}, cache_prefix={self.cache_prefix}, "
                f"exact_count={self.exact_count}, stream={self.stream}, "
                f"thinking={self.thinking}, effort={self.effort}, "
                f"compaction={self.compaction is not None})")

    def request(self, *, system: str, messages: list[Message], tools: list[dict[str, Any]],
                max_tokens: int | None = None,
                tool_choice: dict[str, Any] | None = None) -> dict[str, Any]:
        """The keyword arguments of ``messages.create`` for this prompt (no API call).

        ``effort`` and ``output_format`` go in ``output_config``; with ``compaction`` the
        edit goes in ``context_management`` and ``betas`` names its beta (the call then goes
        through ``client.beta.messages``). With ``cache_prefix``, the last tool definition
        and the system prompt (as one text block) carry ``cache_control``; the caller's lists
        are not modified. Raises
        :class:`PermanentModelError` when ``max_tokens`` is not above the thinking budget.
        """
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages}
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if self.thinking is not None:
            kwargs["thinking"] = dict(self.thinking)
            budget = self.thinking.get("budget_tokens")
            if max_tokens is not None and isinstance(budget, int) and max_tokens <= budget:
                raise PermanentModelError(
                    f"max_tokens ({max_tokens:,}) must be greater than thinking.budget_tokens "
                    f"({budget:,}): thinking tokens count toward max_tokens. Raise "
                    f"AgentConfig.max_tokens or lower the thinking budget.")
        output_config = {k: v for k, v in (("effort", self.effort),
                                           ("format", self.output_format)) if v is not None}
        if output_config:
            kwargs["output_config"] = output_config
        if self.compaction is not None:
            kwargs["context_management"] = {"edits": [dict(self.compaction)]}
            kwargs["betas"] = [COMPACTION_BETA]
        if tools:
            kwargs["tools"] = [dict(t) for t in tools]
        if tool_choice is not None:
            kwargs["tool_choice"] = dict(tool_choice)
        if system:
            kwargs["system"] = system
        if self.cache_prefix:
            mark = {"type": "ephemeral", **({"ttl": self.cache_ttl} if self.cache_ttl else {})}
            if tools:
                kwargs["tools"][-1]["cache_control"] = mark
            if system:
                kwargs["system"] = [{"type": "text", "text": system, "cache_control": mark}]
        return kwargs

    def __call__(self, *, system: str, messages: list[Message], tools: list[dict[str, Any]],
                 max_tokens: int, on_delta: DeltaSink | None = None,
                 tool_choice: dict[str, Any] | None = None) -> Reply:
        self.calls += 1
        kwargs = self.request(system=system, messages=messages, tools=tools,
                              max_tokens=max_tokens, tool_choice=tool_choice)
        messages_api = self.client.beta.messages if "betas" in kwargs else self.client.messages
        try:
            if not self.stream:
                return reply_from_message(messages_api.create(**kwargs))
            relay = DeltaRelay(on_delta) if on_delta is not None else None
            with messages_api.stream(**kwargs) as stream:
                for event in stream:
                    relay_event(relay, event)
                message = stream.get_final_message()
        except anthropic.APIError as e:
            return self._on_error(e)
        except TRANSPORT_ERRORS as e:
            raise stream_broken(e) from e
        return reply_from_stream(message)

    def count_tokens(self, *, system: str, messages: list[Message],
                     tools: list[dict[str, Any]]) -> int:
        """The prompt's exact input tokens, from ``messages.count_tokens`` (one API request).

        Raises :class:`TransientModelError` or :class:`PermanentModelError` like a call.
        """
        request = self.request(system=system, messages=messages, tools=tools)
        messages_api = self.client.beta.messages if "betas" in request else self.client.messages
        try:
            counted = messages_api.count_tokens(**request)
        except anthropic.APIError as e:
            raise model_error(e) from e
        return int(counted.input_tokens)

    def _on_error(self, e: anthropic.APIError) -> NoReturn:
        raise model_error(e) from e


class AsyncClaudeLLM(ClaudeLLM):
    """:class:`ClaudeLLM` over ``anthropic.AsyncAnthropic``: an ``async def`` model for
    :func:`~primer.harness.async_loop.run_agent_async` (the sync loop runs each call to
    completion). Same options, except ``exact_count`` (the before-call budget check is
    synchronous: ``ValueError``); ``client`` is an ``anthropic.AsyncAnthropic``."""

    _client_class = anthropic.AsyncAnthropic

    def __init__(self, model: str | None = None, *,
                 client: anthropic.AsyncAnthropic | None = None, **options: Any) -> None:
        if options.get("exact_count"):
            raise ValueError("AsyncClaudeLLM cannot count tokens before a call (the budget "
                             "check is synchronous); use ClaudeLLM(exact_count=True)")
        super().__init__(model, client=client, **options)  # type: ignore[arg-type]

    async def __call__(self, *, system: str, messages: list[Message],  # type: ignore[override]
                       tools: list[dict[str, Any]], max_tokens: int,
                       on_delta: DeltaSink | None = None,
                       tool_choice: dict[str, Any] | None = None) -> Reply:
        self.calls += 1
        kwargs = self.request(system=system, messages=messages, tools=tools,
                              max_tokens=max_tokens, tool_choice=tool_choice)
        # the client this class builds (_client_class) or is given is an AsyncAnthropic
        client = cast(anthropic.AsyncAnthropic, self.client)
        messages_api: Any = client.beta.messages if "betas" in kwargs else client.messages
        try:
            if not self.stream:
                return reply_from_message(await messages_api.create(**kwargs))
            relay = DeltaRelay(on_delta) if on_delta is not None else None
            async with messages_api.stream(**kwargs) as stream:
                async for event in stream:
                    relay_event(relay, event)
                message = await stream.get_final_message()
        except anthropic.APIError as e:
            return self._on_error(e)
        except TRANSPORT_ERRORS as e:
            raise stream_broken(e) from e
        return reply_from_stream(message)

    def count_tokens(self, *, system: str, messages: list[Message],
                     tools: list[dict[str, Any]]) -> int:
        """Not offered: the before-call budget check that asks for it is synchronous.
        Raises :class:`PermanentModelError` saying to use :class:`ClaudeLLM`."""
        raise PermanentModelError("AsyncClaudeLLM does not count tokens before a call; use "
                                  "ClaudeLLM(exact_count=True) for an exact budget check")


#: The SDK stream events that carry deltas (the rest are snapshots or message events).
_BLOCK_EVENTS = frozenset({"content_block_start", "content_block_delta", "content_block_stop"})


def relay_event(relay: DeltaRelay | None, event: Any) -> None:
    """Hand one SDK stream event to ``relay`` (in the wire shape), if it carries a delta."""
    if relay is not None and event.type in _BLOCK_EVENTS:
        relay.feed(event.model_dump(mode="json", exclude_none=True))


def _transport_errors() -> tuple[type[Exception], ...]:
    """``TransportError`` of each HTTP library the SDK may read a stream with: ``httpx``
    (SDK 0.x and 1.x) and ``httpx2`` (SDK 2.x), those installed."""
    found = []
    for name in ("httpx2", "httpx"):
        try:
            found.append(importlib.import_module(name).TransportError)
        except (ImportError, AttributeError):
            continue
    return tuple(found)


#: What the SDK raises, unwrapped, when a connection breaks while a stream is being read.
TRANSPORT_ERRORS = _transport_errors()


def stream_broken(e: Exception) -> TransientModelError:
    """The error for a connection that broke while a reply streamed in (the SDK passes its
    HTTP library's transport errors through once the response has begun): transient, so
    the loop retries the call; nothing the stream had written is used."""
    return TransientModelError(f"the connection broke while the reply streamed in "
                               f"({type(e).__name__}: {e}); nothing in it was used",
                               status=None)


def reply_from_stream(message: Any) -> Reply:
    """The reply of a finished stream (:func:`reply_from_message`); a stream that ended
    before its ``message_delta`` (no ``stop_reason``: the connection dropped) raises
    :class:`TransientModelError` instead, so nothing it half-wrote is acted on. (A stream
    cut after ``message_delta`` has every block complete and its stop reason: it is used.)"""
    if message.stop_reason is None:
        written = ", ".join(b.type for b in message.content) or "nothing"
        raise TransientModelError(f"the stream ended before its message_stop (it had written "
                                  f"{written}); nothing in it was used", status=None)
    return reply_from_message(message)


def reply_from_message(message: Any) -> Reply:
    """Map an SDK ``Message`` to a :class:`Reply`: blocks as dicts, stop reason, full usage.

    Blocks keep the fields the API sent (``text``, ``tool_use`` with ``id``/``name``/
    ``input``, and any others such as ``thinking``), so the reply can be sent back
    unchanged. A ``stop_reason`` outside :data:`~primer.loop.model.STOP_REASONS` (a newer
    API value) is kept as it is; the loop stops on it with ``model_error`` (its tool calls,
    if any, do not run), since it cannot know whether the turn ended. ``stop_details`` (a
    refusal's category) and ``usage.output_tokens_details.thinking_tokens`` are read from
    the SDK's fields, or from the raw JSON an SDK without them keeps as extra fields.
    """
    content: list[Block] = [block_to_dict(b) for b in message.content]
    u = message.usage
    details = _field(u, "output_tokens_details")
    usage = Usage(int(u.input_tokens or 0), int(u.output_tokens or 0),
                  int(getattr(u, "cache_creation_input_tokens", 0) or 0),
                  int(getattr(u, "cache_read_input_tokens", 0) or 0),
                  int(_field(details, "thinking_tokens") or 0))
    stop_reason = message.stop_reason or "end_turn"
    stop_details = _field(message, "stop_details")
    if stop_details is not None and not isinstance(stop_details, dict):
        stop_details = stop_details.model_dump(mode="json")
    return Reply(content, stop_reason, usage, str(message.model), stop_details)


def _field(obj: Any, name: str) -> Any:
    """``obj.name``, or the key ``name`` of a dict, or ``None`` (an SDK model keeps fields it
    does not know as extra attributes, so this reads a newer API's fields too)."""
    if obj is None:
        return None
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def block_to_dict(block: Any) -> Block:
    """An SDK content block as the plain dict the API sent (``None`` fields dropped)."""
    if isinstance(block, dict):
        return cast(Block, block)  # already a dict: kept as it is, like the API's
    d = block.model_dump(mode="json", exclude_none=True)
    kind = d.get("type")
    if kind == "tool_use":  # our shape: exactly the four fields the API reads back
        return {"type": "tool_use", "id": d["id"], "name": d["name"], "input": d.get("input")}
    if kind == "text":
        return {"type": "text", "text": d.get("text", "")}
    if kind == "thinking":  # sent back byte for byte: the API checks the signature
        return {"type": "thinking", "thinking": d.get("thinking", ""),
                "signature": d.get("signature", "")}
    if kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": d.get("data", "")}
    if kind == "compaction":  # sent back verbatim; a null content (a failed summary) kept
        return cast(Block, {"type": "compaction", "content": d.get("content"),
                            **{k: v for k, v in d.items() if k not in ("type", "content")}})
    return d


_PROMPT_TOO_LONG = "prompt is too long"


def model_error(e: anthropic.APIError) -> TransientModelError | PermanentModelError:
    """Classify an SDK error: retry it, or give up (a prompt too long for the window included).

    The rules are the SDK's own (``_should_retry``): the server's ``x-should-retry`` header
    first (``true``: retry whatever the status; ``false``: never), then

    - 429, 408, 409, 5xx (529 overloaded included), timeouts and connection errors:
      :class:`TransientModelError` with the ``retry-after`` seconds the server sent and the
      status (``None`` for no answer); an ``error`` event in the middle of a stream (HTTP
      200) counts as the status its type stands for (``overloaded_error``: 529);
    - a 400 whose message says the prompt is too long: :class:`PromptTooLong` (the request
      does not fit the window; not the ``model_context_window_exceeded`` stop reason, which
      is a reply cut off at the window's end);
    - any other error: :class:`PermanentModelError` whose message says what to fix.
    """
    if isinstance(e, anthropic.APIConnectionError):  # includes APITimeoutError
        return TransientModelError(f"could not reach the API ({type(e).__name__}): {e}",
                                   status=None)
    status = getattr(e, "status_code", None)
    text = _error_message(e)
    if status == 200:  # an error event in the middle of a stream: its type says which
        error_type = _error_type(e)
        if error_type is not None:
            status = _STREAM_ERROR_STATUS.get(error_type, status)
    should = _should_retry_header(e)
    if should == "false" and status != 200:  # the server says: do not try again
        return PermanentModelError(f"the API answered {status} and said not to retry "
                                   f"(x-should-retry: false): {text}")
    if should == "true" or status in (408, 409, 429) or (isinstance(status, int)
                                                         and status >= 500):
        kind = {429: "rate limited", 529: "overloaded"}.get(status or 0, "server error")
        # a status or an x-should-retry header came with an HTTP response, which these two
        # carry (a connection error, which has none, was answered above)
        answered = cast(anthropic.APIStatusError | anthropic.APIResponseValidationError, e)
        return TransientModelError(f"the API answered {status} ({kind}): {text}",
                                   retry_after_s=retry_after_s(answered.response.headers),
                                   status=status)
    if status == 400 and _PROMPT_TOO_LONG in text.lower():
        return PromptTooLong(f"the request does not fit the model's context window; the API "
                             f"answered 400: {text} (send a shorter history: compact or trim)")
    hint = {401: f"check {API_KEY_ENV_VAR}: the API did not accept the key",
            403: "the key has no access to this model or feature",
            404: f"check the model id (set {MODEL_ENV_VAR}) and the base URL",
            413: "the request is too large; send a shorter history or smaller tool results",
            400: "the request was malformed; the message above says which field"}.get(
                status or 0, "see the message above")
    return PermanentModelError(f"the API answered {status}: {text} ({hint})")


def _should_retry_header(e: anthropic.APIError) -> str | None:
    response = getattr(e, "response", None)
    headers = getattr(response, "headers", None)
    return headers.get("x-should-retry") if headers is not None else None


#: The status an ``error`` event in the middle of a stream stands for, by its ``type``.
_STREAM_ERROR_STATUS = {"overloaded_error": 529, "api_error": 500, "rate_limit_error": 429}


def _error_type(e: anthropic.APIError) -> str | None:
    body = getattr(e, "body", None)
    inner = body.get("error") if isinstance(body, dict) else None
    return inner.get("type") if isinstance(inner, dict) else None


def _error_message(e: anthropic.APIError) -> str:
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        inner = body.get("error")
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return str(getattr(e, "message", e))



def sdk_tools(tools: Any) -> list[Any]:
    """Our :class:`~primer.loop.tools.Tool` objects as the SDK's runnable tools.

    For ``client.beta.messages.tool_runner``: each becomes ``anthropic.beta_tool(fn,
    name=..., description=..., input_schema=...)``, so the SDK's runner sees the same
    definitions our loop sends and calls the same functions (with none of our argument
    validation, timeouts or error wording: that is the point of comparing them). Results
    are rendered to text the way our loop renders them, and our
    :class:`~primer.loop.tools.ToolError` is raised as the SDK's own
    ``anthropic.lib.tools.ToolError``, which the runner sends as the error result's content
    (any other exception it sends as its ``repr`` and logs with its traceback).
    """
    return [anthropic.beta_tool(as_result_text(t.fn), name=t.name, description=t.description,
                                input_schema=t.input_schema) for t in tools]


def as_result_text(fn: Any) -> Any:
    """``fn`` returning its result as ``tool_result`` text, as our loop sends it (the SDK
    takes a string or content blocks; a dict would be sent as a list of its keys), for
    another framework's tool runner. A :class:`~primer.loop.tools.ToolError` is raised as
    the SDK's own ``ToolError``; a value that is not text or JSON raises ``ValueError``."""
    from anthropic.lib.tools import ToolError as SDKToolError

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> str:
        try:
            out = fn(*args, **kwargs)
        except ToolError as e:  # the tool's own message, as the SDK's runner expects it
            raise SDKToolError(str(e)) from e
        text, problem = result_text(out)
        if problem is not None:
            raise ValueError(problem)
        return text

    return call
