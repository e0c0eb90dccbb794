"""OpenTelemetry spans of a run, following the OpenTelemetry GenAI semantic conventions.

:class:`OTelSink` is an ``on_event`` sink: ``run_agent(..., on_event=OTelSink())`` turns the
run into spans on the tracer provider you configured (any exporter: OTLP to a collector, the
console, or the SDK's in-memory exporter in tests). :func:`spans_from_trace` builds the same
spans from a recorded JSON Lines trace, and :func:`otlp_json` encodes them as an OTLP/JSON
``ExportTraceServiceRequest`` (the body a collector's ``/v1/traces`` accepts), with the
SDK's own JSON encoder.

The spans (conventions: semantic-conventions ``docs/gen-ai``, agent and inference spans)
---------------------------------------------------------------------------------------
``invoke_agent {agent}`` (kind INTERNAL), one per run, from ``run_start`` to ``stop``:
    ``gen_ai.operation.name = invoke_agent``, ``gen_ai.agent.name``,
    ``gen_ai.provider.name``, ``gen_ai.request.model``, the run's token totals
    (``gen_ai.usage.*``) and, outside the conventions, ``primer.stop_cause``,
    ``primer.stop_detail``, ``primer.cost_usd`` and ``primer.steps``. Status ERROR with
    ``error.type`` when the run stopped with ``model_error``. Events the conventions have no
    span for (approval, compaction, hook errors, ...) are span events on it.
``chat {model}`` (kind CLIENT), a child of the agent span, one per model call:
    ``gen_ai.operation.name = chat``, provider, ``gen_ai.request.model``,
    ``gen_ai.response.model``, ``gen_ai.response.finish_reasons`` (the ``stop_reason``),
    ``gen_ai.request.max_tokens``, ``gen_ai.usage.input_tokens`` (all prompt tokens, cache
    reads and writes included, as the Anthropic conventions say),
    ``gen_ai.usage.output_tokens``, ``gen_ai.usage.cache_read.input_tokens``,
    ``gen_ai.usage.cache_creation.input_tokens`` and, for a model that thought,
    ``gen_ai.usage.reasoning.output_tokens`` (a part of the output tokens). Retried attempts
    are span events ``gen_ai.model_retry`` with their ``error.type``. A call that failed for
    good (the run stopped with ``model_error``) is a chat span with status ERROR and
    ``error.type``.
``execute_tool {tool}`` (kind INTERNAL), a child of the agent span, one per call that ran:
    ``gen_ai.operation.name = execute_tool``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
    ``gen_ai.tool.type = function``; status ERROR and ``error.type`` (the error kind, e.g.
    ``invalid_input``, ``timeout``) for an error result. The calls of one reply are
    siblings: they run concurrently, so each starts when its reply arrived.

Times: events arrive when something has finished, with its latency, so a span's start is
its end minus its latency (a model call), or the arrival of the reply that asked for it (a
tool call; its end is that start plus its latency). A failed model call starts where the
previous event ended.

The ``anthropic`` SDK (2.x) makes a span of its own for each API call, a root span of its
own trace while a run's spans are made from events; :class:`~primer.providers.claude.ClaudeLLM`
switches those off (``sdk_spans=False``), so each call is one ``chat`` span, in the run's tree.

Content (the task, the system prompt, replies, tool arguments and results) is recorded only
with ``capture_content=True``, as the opt-in attributes ``gen_ai.system_instructions``,
``gen_ai.input.messages`` (the task, on the agent span), ``gen_ai.output.messages`` (each
chat span's reply; the final answer on the agent span), ``gen_ai.tool.call.arguments`` and
``gen_ai.tool.call.result``, as JSON text. Each chat span records its output, not its whole
input: the input is the task plus the spans before it. Every string that could carry a
secret passes through :func:`~primer.harness.tracing.trace.redact` first, as in our traces.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider

from primer.loop.model import DELTA_KINDS, Usage

from .trace import Trace, load_trace, redact

log = logging.getLogger(__name__)

# attribute names, as in the semantic conventions (tests check them against the
# opentelemetry-semantic-conventions package)
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
AGENT_NAME = "gen_ai.agent.name"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
RESPONSE_MODEL = "gen_ai.response.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ = "gen_ai.usage.cache_read.input_tokens"
CACHE_CREATION = "gen_ai.usage.cache_creation.input_tokens"
REASONING_TOKENS = "gen_ai.usage.reasoning.output_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
ERROR_TYPE = "error.type"

#: Model name prefixes → ``gen_ai.provider.name`` (a well-known value of the conventions).
PROVIDERS = (("claude", "anthropic"), ("gpt", "openai"), ("o1", "openai"), ("o3", "openai"),
             ("o4", "openai"), ("gemini", "gcp.gemini"), ("mistral", "mistral_ai"))

Clock = Callable[[], int]


def provider_of(model: str) -> str:
    """``gen_ai.provider.name`` for a model name (``claude-...`` → ``anthropic``), or
    ``_OTHER`` (the conventions' value when none applies)."""
    name = model.lower()
    return next((p for prefix, p in PROVIDERS if name.startswith(prefix)), "_OTHER")


def _ns(seconds: float) -> int:
    return int(round(seconds * 1e9))


def _json(value: Any) -> str:
    return json.dumps(redact(value), ensure_ascii=False, separators=(",", ":"))


def _usage_attributes(usage: dict[str, Any]) -> dict[str, int]:
    u = Usage.from_dict(usage)  # a missing or null count is 0, as everywhere
    read, creation = u.cache_read_input_tokens, u.cache_creation_input_tokens
    attrs = {INPUT_TOKENS: u.input_tokens + read + creation, OUTPUT_TOKENS: u.output_tokens,
             CACHE_READ: read, CACHE_CREATION: creation}
    if u.thinking_tokens:  # (of the output tokens, those spent thinking)
        attrs[REASONING_TOKENS] = u.thinking_tokens
    return attrs


def _parts(content: Any) -> list[dict[str, Any]]:
    """Message content blocks as the conventions' message parts."""
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts: list[dict[str, Any]] = []
    for b in content or []:
        if b.get("type") == "text":
            parts.append({"type": "text", "content": b.get("text", "")})
        elif b.get("type") == "tool_use":
            parts.append({"type": "tool_call", "id": b.get("id"), "name": b.get("name"),
                          "arguments": b.get("input")})
    return parts


def _error_type(text: str, fallback: str) -> str:
    """The exception class a loop message names (``"...failed: RuntimeError: boom"`` →
    ``RuntimeError``), else ``fallback``: a low-cardinality ``error.type``."""
    m = re.search(r"\b([A-Z][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*): ", text)
    return m.group(1) if m else fallback


class OTelSink:
    """An ``on_event`` sink that turns one run at a time into GenAI spans (see the module
    docstring for the spans and their attributes).

    ``tracer_provider``: where the spans go (default: the global provider, set with
    ``opentelemetry.trace.set_tracer_provider``). ``agent_name``: ``gen_ai.agent.name``.
    ``provider_name`` and ``request_model``: ``gen_ai.provider.name`` and
    ``gen_ai.request.model`` (default: from each reply's model name, which the loop's events
    carry; the requested and the answering model are then the same name).
    ``capture_content``: record the task, the system prompt, replies, tool arguments and
    results (redacted). ``clock``: nanoseconds since the epoch (default ``time.time_ns``).

    The agent span's parent is the span current when the run starts, so a run inside your
    own span nests under it. A sink serves one run at a time; runs in parallel need one
    sink each. It never breaks a run: an event it cannot read is logged and skipped.
    """

    def __init__(self, tracer_provider: TracerProvider | None = None, *,
                 agent_name: str = "agent", provider_name: str | None = None,
                 request_model: str | None = None, capture_content: bool = False,
                 clock: Clock = time.time_ns) -> None:
        from primer import __version__

        provider = tracer_provider or trace.get_tracer_provider()
        self.tracer = provider.get_tracer("primer", __version__)
        self.agent_name = agent_name
        self.provider_name = provider_name
        self.request_model = request_model
        self.capture_content = capture_content
        self.clock = clock
        self.parent_context: otel_context.Context | None = None
        self._agent: Span | None = None
        self._reset()

    def _reset(self) -> None:
        self._ctx: otel_context.Context | None = None
        self._cursor = 0  # ns: when the last event arrived
        self._turn_start = 0  # ns: when the last reply arrived (its tool calls start then)
        self._retries: list[dict[str, Any]] = []
        self._max_tokens: int | None = None
        self._last_reply: dict[str, Any] | None = None

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        self.handle(kind, data, self.clock())

    def handle(self, kind: str, data: dict[str, Any], at_ns: int) -> None:
        """Turn one event (``kind``, its ``data``) that arrived at ``at_ns`` into spans."""
        if kind in DELTA_KINDS:  # a streamed reply's pieces: the chat span records the reply
            return
        try:
            handler = getattr(self, f"_on_{kind}", None)
            if handler is not None:
                handler(data, at_ns)
            elif self._agent is not None:
                self._agent.add_event(f"primer.{kind}", _scalars(data), at_ns)
            if kind != "model_retry":  # retries arrive after the call, not before it
                self._cursor = max(self._cursor, at_ns)
        except Exception:  # noqa: BLE001 - telemetry must never stop the run
            log.warning("OTelSink could not turn a %r event into spans", kind, exc_info=True)

    def close(self, at_ns: int | None = None) -> None:
        """End the agent span of a run that never sent ``stop`` (killed, or a trace cut
        off), marked ``primer.finished = false``."""
        if self._agent is not None:
            self._agent.set_attribute("primer.finished", False)
            self._agent.end(at_ns if at_ns is not None else self.clock())
            self._agent = None
        self._reset()

    # ------------------------------------------------------------ events

    def _on_run_start(self, data: dict[str, Any], at: int) -> None:
        if self._agent is not None:
            self.close(at)
        config = data.get("config") or {}
        self._max_tokens = config.get("max_tokens")
        attrs: dict[str, Any] = {OPERATION: "invoke_agent", AGENT_NAME: self.agent_name}
        if self.provider_name:
            attrs[PROVIDER] = self.provider_name
        if self.request_model:
            attrs[REQUEST_MODEL] = self.request_model
        if self.capture_content:
            if data.get("system"):
                attrs[SYSTEM_INSTRUCTIONS] = _json([{"type": "text",
                                                     "content": data["system"]}])
            attrs[INPUT_MESSAGES] = _json([{"role": "user",
                                            "parts": _parts(data.get("task", ""))}])
        self._agent = self.tracer.start_span(
            f"invoke_agent {self.agent_name}", context=self.parent_context,
            kind=SpanKind.INTERNAL, attributes=attrs, start_time=at)
        self._ctx = trace.set_span_in_context(self._agent)
        self._cursor = self._turn_start = at

    def _on_model_retry(self, data: dict[str, Any], at: int) -> None:
        self._retries.append(data)

    def _on_model_call(self, data: dict[str, Any], at: int) -> None:
        reply = data["reply"]
        model = str(reply.get("model") or "unknown")
        span = self._chat_span(model, at - _ns(float(data.get("latency_s", 0))))
        span.set_attributes({RESPONSE_MODEL: model,
                             FINISH_REASONS: [str(reply.get("stop_reason"))],
                             **_usage_attributes(reply.get("usage") or {})})
        if self.capture_content:
            span.set_attribute(OUTPUT_MESSAGES, _json([{
                "role": "assistant", "parts": _parts(reply.get("content")),
                "finish_reason": reply.get("stop_reason")}]))
        span.end(at)
        self._turn_start = at
        self._last_reply = reply

    def _chat_span(self, model: str, start: int) -> Span:
        request_model = self.request_model or model
        provider = self.provider_name or provider_of(model)
        if self._agent is not None and not self.provider_name:
            self._agent.set_attributes({PROVIDER: provider, REQUEST_MODEL: request_model})
        attrs: dict[str, Any] = {OPERATION: "chat", PROVIDER: provider,
                                 REQUEST_MODEL: request_model}
        if self._max_tokens:
            attrs[REQUEST_MAX_TOKENS] = int(self._max_tokens)
        span = self.tracer.start_span(f"chat {request_model}", context=self._ctx,
                                      kind=SpanKind.CLIENT, attributes=attrs,
                                      start_time=start)
        for r in self._retries:
            span.add_event("gen_ai.model_retry", {
                "primer.attempt": int(r.get("attempt", 0)),
                ERROR_TYPE: _error_type(str(r.get("error", "")), "_OTHER"),
                "primer.delay_s": float(r.get("delay_s") or 0.0)}, start)
        return span

    def _on_tool_execution(self, data: dict[str, Any], at: int) -> None:
        latency = _ns(float(data.get("latency_s") or 0.0))
        start = self._turn_start if self._turn_start else at - latency
        name = str(data.get("name"))
        attrs: dict[str, Any] = {OPERATION: "execute_tool", TOOL_NAME: name,
                                 TOOL_CALL_ID: str(data.get("tool_use_id")),
                                 TOOL_TYPE: "function",
                                 "primer.attempts": int(data.get("attempts") or 1)}
        if self.capture_content:
            attrs[TOOL_ARGUMENTS] = _json(data.get("input"))
            attrs[TOOL_RESULT] = _json(data.get("content"))
        span = self.tracer.start_span(f"execute_tool {name}", context=self._ctx,
                                      kind=SpanKind.INTERNAL, attributes=attrs,
                                      start_time=start)
        if data.get("is_error"):
            kind = str(data.get("error_kind") or "tool_error")
            span.set_attribute(ERROR_TYPE, kind)
            span.set_status(Status(StatusCode.ERROR, redact(str(data.get("content", "")))[:200]))
        span.end(max(start, min(start + latency, at)))

    def _on_stop(self, data: dict[str, Any], at: int) -> None:
        cause = str(data.get("cause"))
        detail = redact(str(data.get("detail") or ""))
        if cause == "model_error":  # the last model call failed: it gets a span of its own
            model = self.request_model or str((self._last_reply or {}).get("model") or
                                              "unknown")
            span = self._chat_span(model, self._cursor)
            error = _error_type(detail, "model_error")
            span.set_attribute(ERROR_TYPE, error)
            span.set_status(Status(StatusCode.ERROR, detail[:200]))
            span.end(at)
        self._retries = []
        agent = self._agent
        if agent is None:
            return
        agent.set_attributes({"primer.stop_cause": cause, "primer.stop_detail": detail,
                              "primer.cost_usd": float(data.get("cost_usd") or 0.0),
                              "primer.steps": int(data.get("steps") or 0),
                              **_usage_attributes(data.get("usage") or {})})
        if cause == "model_error":
            agent.set_attribute(ERROR_TYPE, _error_type(detail, "model_error"))
            agent.set_status(Status(StatusCode.ERROR, detail[:200]))
        if self.capture_content and cause == "end_turn" and self._last_reply is not None:
            agent.set_attribute(OUTPUT_MESSAGES, _json([{
                "role": "assistant", "parts": _parts(self._last_reply.get("content")),
                "finish_reason": self._last_reply.get("stop_reason")}]))
        agent.end(at)
        self._agent = None
        self._reset()


def _scalars(data: dict[str, Any]) -> dict[str, Any]:
    """The event fields an OpenTelemetry attribute can hold (strings redacted)."""
    out: dict[str, Any] = {}
    for k, v in data.items():
        if k in ("event", "seq", "t"):
            continue
        if isinstance(v, str):
            out[f"primer.{k}"] = redact(v)
        elif isinstance(v, bool | int | float):
            out[f"primer.{k}"] = v
    return out


def spans_from_trace(trace_or_path: Trace | str, tracer_provider: TracerProvider, *,
                     start_ns: int | None = None, **sink_options: Any) -> None:
    """Build the spans of a recorded run on ``tracer_provider`` (see :class:`OTelSink`;
    ``sink_options`` go to it). Each event's time is ``start_ns`` plus its recorded ``t``;
    by default ``start_ns`` is the trace file's last change minus the last event's ``t``
    (when the run's last line was written), else now. The agent span is a root span.
    Raises :class:`~primer.harness.tracing.trace.TraceError` for an unreadable trace."""
    tr = trace_or_path if isinstance(trace_or_path, Trace) else load_trace(trace_or_path)
    last = float(tr.events[-1].get("t", 0.0)) if tr.events else 0.0
    if start_ns is None:
        written = tr.path.stat().st_mtime_ns if tr.path and tr.path.exists() else (
            time.time_ns())
        start_ns = written - _ns(last)
    sink = OTelSink(tracer_provider, **sink_options)
    sink.parent_context = otel_context.Context()
    for event in tr.events:
        sink.handle(str(event.get("event")), event, start_ns + _ns(float(event.get("t", 0))))
    sink.close(start_ns + _ns(last))


def otlp_json(traces: Iterable[Trace | str], *, service_name: str = "primer",
              start_ns: int | None = None, **sink_options: Any) -> str:
    """The spans of recorded runs as OTLP/JSON text: one ``ExportTraceServiceRequest``, the
    body to POST to a collector's ``/v1/traces`` with ``Content-Type: application/json``.

    Encoded by ``opentelemetry-exporter-otlp-json-common`` (trace and span ids in hex, as
    OTLP/JSON requires). ``service_name`` is the resource's ``service.name``; the other
    options are those of :func:`spans_from_trace`.
    """
    from opentelemetry.exporter.otlp.json.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider as SDKTracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = SDKTracerProvider(resource=Resource.create({"service.name": service_name}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    for t in traces:
        spans_from_trace(t, provider, start_ns=start_ns, **sink_options)
    provider.shutdown()
    return str(encode_spans(exporter.get_finished_spans()).to_json())
