"""OpenTelemetry export: a run as GenAI spans (names, nesting, attributes, errors, content
opt-in, secrets redacted), live and from a recorded trace, and as OTLP/JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from primer.__main__ import main
from primer.harness.production import run_production
from primer.harness.streaming import StreamingScriptedLLM
from primer.harness.tracing import otel
from primer.harness.tracing.otel import OTelSink, otlp_json, spans_from_trace
from primer.harness.tracing.trace import load_trace
from primer.loop.config import AgentConfig
from primer.loop.model import Reply, ScriptedLLM, TransientModelError, Usage, tool_reply
from primer.loop.tools import tool
from primer.scenarios import get_demo

ROOT = Path(__file__).resolve().parent.parent
SECRET = "sk-ant-api03-" + "x" * 40


@pytest.fixture
def exporter():
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter):
    p = TracerProvider()
    p.add_span_processor(SimpleSpanProcessor(exporter))
    return p


def run_demo(name, provider, **sink_options):
    demo = get_demo(name)
    return run_production(demo.make_llm(), demo.task, demo.make_tools(), system=demo.system,
                          config=demo.config, on_event=OTelSink(provider, **sink_options))


def by_name(spans):
    return {s.name: s for s in spans}


def test_a_run_is_one_invoke_agent_span_with_a_chat_span_per_call_and_a_tool_span_per_call(
        provider, exporter):
    result = run_demo("orders", provider, agent_name="orders-desk")
    spans = exporter.get_finished_spans()
    agent = [s for s in spans if s.name == "invoke_agent orders-desk"]
    chats = [s for s in spans if s.name == "chat scripted"]
    tools = [s for s in spans if s.name.startswith("execute_tool ")]
    assert len(agent) == 1 and len(chats) == len(result.steps)
    assert [s.name for s in tools] == [f"execute_tool {e.name}" for e in result.executions]
    root = agent[0]
    assert root.parent is None
    assert all(s.parent.span_id == root.context.span_id for s in chats + tools)
    assert {s.context.trace_id for s in spans} == {root.context.trace_id}
    assert (root.kind, chats[0].kind, tools[0].kind) == (SpanKind.INTERNAL, SpanKind.CLIENT,
                                                        SpanKind.INTERNAL)
    assert all(root.start_time <= s.start_time <= s.end_time <= root.end_time
               for s in chats + tools)
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["primer.stop_cause"] == "end_turn"
    assert root.attributes["primer.steps"] == len(result.steps)
    assert root.attributes["gen_ai.usage.input_tokens"] == result.usage.prompt_tokens
    assert root.attributes["gen_ai.usage.output_tokens"] == result.usage.output_tokens
    assert root.attributes["primer.cost_usd"] == pytest.approx(result.cost_usd)


def test_chat_spans_carry_model_finish_reason_and_each_calls_usage(provider, exporter):
    result = run_demo("orders", provider)
    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    for span, step in zip(chats, result.steps, strict=True):
        a = span.attributes
        assert a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.request.model"] == a["gen_ai.response.model"] == "scripted"
        assert a["gen_ai.response.finish_reasons"] == (step.reply.stop_reason,)
        assert a["gen_ai.usage.input_tokens"] == step.usage.prompt_tokens
        assert a["gen_ai.usage.output_tokens"] == step.usage.output_tokens
        assert a["gen_ai.request.max_tokens"] == AgentConfig().max_tokens
        assert span.end_time - span.start_time == pytest.approx(step.model_latency_s * 1e9,
                                                                abs=1e3)


def test_input_tokens_include_cache_reads_and_writes_and_the_cache_fields_are_set(provider,
                                                                                   exporter):
    reply = Reply([{"type": "text", "text": "hi"}], "end_turn", Usage(10, 5, 3, 7),
                  "claude-sonnet-4-5")
    run_production(lambda **kwargs: reply, "hello", on_event=OTelSink(provider))
    chat = by_name(exporter.get_finished_spans())["chat claude-sonnet-4-5"]
    assert chat.attributes["gen_ai.usage.input_tokens"] == 20
    assert chat.attributes["gen_ai.usage.cache_read.input_tokens"] == 7
    assert chat.attributes["gen_ai.usage.cache_creation.input_tokens"] == 3
    assert chat.attributes["gen_ai.provider.name"] == "anthropic"


def test_parallel_tool_calls_are_sibling_spans_that_start_together(provider, exporter):
    run_demo("pto", provider)
    spans = exporter.get_finished_spans()
    tools = [s for s in spans if s.name.startswith("execute_tool ")]
    agent = by_name(spans)["invoke_agent agent"]
    assert sorted(s.attributes["gen_ai.tool.name"] for s in tools) == ["get_pto_balance",
                                                                       "search_kb"]
    assert {s.parent.span_id for s in tools} == {agent.context.span_id}
    assert len({s.start_time for s in tools}) == 1
    assert [s.attributes["gen_ai.tool.call.id"] for s in tools] == ["toolu_01_2", "toolu_01_3"]


def test_a_failed_tool_call_has_error_status_and_its_error_kind(provider, exporter):
    run_demo("orders", provider)  # the first get_order call has a wrong argument name
    first = [s for s in exporter.get_finished_spans() if s.name == "execute_tool get_order"][0]
    assert first.status.status_code is StatusCode.ERROR
    assert first.attributes["error.type"] == "invalid_input"


def test_a_failed_model_call_is_an_error_chat_span_and_the_run_an_error(provider, exporter):
    def broken(**kwargs):
        raise RuntimeError("backend down")

    result = run_production(broken, "hello", on_event=OTelSink(provider, request_model="m-1"))
    assert result.stop_cause.value == "model_error"
    spans = by_name(exporter.get_finished_spans())
    chat, agent = spans["chat m-1"], spans["invoke_agent agent"]
    assert chat.status.status_code is StatusCode.ERROR
    assert chat.attributes["error.type"] == "RuntimeError"
    assert agent.status.status_code is StatusCode.ERROR
    assert agent.attributes["primer.stop_cause"] == "model_error"


def test_a_retried_model_call_records_each_failed_attempt_as_an_event(provider, exporter):
    calls = []

    def flaky(**kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise TransientModelError("overloaded")
        return Reply([{"type": "text", "text": "done"}], "end_turn", Usage(5, 2), "m")

    run_production(flaky, "hello", config=AgentConfig(sleep=lambda s: None),
                   on_event=OTelSink(provider))
    chat = by_name(exporter.get_finished_spans())["chat m"]
    assert chat.status.status_code is StatusCode.UNSET
    (event,) = chat.events
    assert event.name == "gen_ai.model_retry"
    assert event.attributes["error.type"] == "TransientModelError"


@tool
def read_config(name: str) -> dict:
    """Read a config entry.

    Args:
        name: the entry.
    """
    return {"name": name, "api_key": SECRET}


def secret_run(provider, capture_content):
    llm = ScriptedLLM([tool_reply(("read_config", {"name": f"db {SECRET}"})), "all set"])
    run_production(llm, f"check the config, my key is {SECRET}", [read_config],
                   system="be brief", on_event=OTelSink(provider, capture_content=capture_content))


def test_message_content_is_left_out_unless_asked_for(provider, exporter):
    secret_run(provider, capture_content=False)
    for span in exporter.get_finished_spans():
        assert not any(k in span.attributes for k in (
            "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
            "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"))


def test_content_when_asked_for_is_recorded_with_secrets_redacted(provider, exporter):
    secret_run(provider, capture_content=True)
    spans = by_name(exporter.get_finished_spans())
    agent, tool_span = spans["invoke_agent agent"], spans["execute_tool read_config"]
    assert json.loads(agent.attributes["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "be brief"}]
    task = json.loads(agent.attributes["gen_ai.input.messages"])[0]["parts"][0]["content"]
    assert task == "check the config, my key is [REDACTED]"
    assert json.loads(agent.attributes["gen_ai.output.messages"])[0]["parts"] == [
        {"type": "text", "content": "all set"}]
    assert json.loads(tool_span.attributes["gen_ai.tool.call.arguments"]) == {
        "name": "db [REDACTED]"}
    assert "[REDACTED]" in tool_span.attributes["gen_ai.tool.call.result"]
    first_chat = [s for s in exporter.get_finished_spans() if s.name == "chat scripted"][0]
    (message,) = json.loads(first_chat.attributes["gen_ai.output.messages"])
    assert message["parts"][0]["type"] == "tool_call"
    for span in exporter.get_finished_spans():
        assert SECRET not in json.dumps(dict(span.attributes))


def test_the_agent_span_nests_under_the_span_current_when_the_run_starts(provider, exporter):
    with provider.get_tracer("test").start_as_current_span("eval task") as outer:
        run_demo("orders", provider)
    agent = by_name(exporter.get_finished_spans())["invoke_agent agent"]
    assert agent.parent.span_id == outer.get_span_context().span_id


def test_attribute_names_are_the_semantic_conventions_own():
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as g

    ours = {otel.OPERATION: "GEN_AI_OPERATION_NAME", otel.PROVIDER: "GEN_AI_PROVIDER_NAME",
            otel.AGENT_NAME: "GEN_AI_AGENT_NAME", otel.REQUEST_MODEL: "GEN_AI_REQUEST_MODEL",
            otel.RESPONSE_MODEL: "GEN_AI_RESPONSE_MODEL",
            otel.FINISH_REASONS: "GEN_AI_RESPONSE_FINISH_REASONS",
            otel.REQUEST_MAX_TOKENS: "GEN_AI_REQUEST_MAX_TOKENS",
            otel.INPUT_TOKENS: "GEN_AI_USAGE_INPUT_TOKENS",
            otel.OUTPUT_TOKENS: "GEN_AI_USAGE_OUTPUT_TOKENS",
            otel.CACHE_READ: "GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS",
            otel.CACHE_CREATION: "GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS",
            otel.REASONING_TOKENS: "GEN_AI_USAGE_REASONING_OUTPUT_TOKENS",
            otel.TOOL_NAME: "GEN_AI_TOOL_NAME", otel.TOOL_CALL_ID: "GEN_AI_TOOL_CALL_ID",
            otel.TOOL_TYPE: "GEN_AI_TOOL_TYPE", otel.TOOL_ARGUMENTS: "GEN_AI_TOOL_CALL_ARGUMENTS",
            otel.TOOL_RESULT: "GEN_AI_TOOL_CALL_RESULT",
            otel.SYSTEM_INSTRUCTIONS: "GEN_AI_SYSTEM_INSTRUCTIONS",
            otel.INPUT_MESSAGES: "GEN_AI_INPUT_MESSAGES",
            otel.OUTPUT_MESSAGES: "GEN_AI_OUTPUT_MESSAGES"}
    assert {name: getattr(g, const) for name, const in ours.items()} == {
        name: name for name in ours}
    values = g.GenAiOperationNameValues
    assert {values.INVOKE_AGENT.value, values.CHAT.value, values.EXECUTE_TOOL.value} == {
        "invoke_agent", "chat", "execute_tool"}


def shape(spans):
    """Each span's name, parent's name, kind, status and attributes (no ids, no times)."""
    names = {s.context.span_id: s.name for s in spans}
    return [(s.name, names.get(s.parent.span_id) if s.parent else None, s.kind,
             s.status.status_code, dict(s.attributes)) for s in spans]


def test_a_recorded_trace_exports_the_same_spans_as_the_live_run(tmp_path, provider,
                                                                 exporter):
    demo = get_demo("pto")
    path = tmp_path / "pto.jsonl"
    run_production(demo.make_llm(), demo.task, demo.make_tools(), system=demo.system,
                   config=demo.config, trace=path, on_event=OTelSink(provider))
    live = shape(exporter.get_finished_spans())
    exporter.clear()
    spans_from_trace(path, provider, start_ns=1_000_000_000)
    spans = exporter.get_finished_spans()
    assert shape(spans) == live
    recorded = load_trace(path)
    agent = by_name(spans)["invoke_agent agent"]
    assert agent.start_time == 1_000_000_000 + round(recorded.events[0]["t"] * 1e9)
    assert agent.end_time == 1_000_000_000 + round(recorded.events[-1]["t"] * 1e9)


def test_a_trace_cut_off_before_its_stop_still_ends_its_agent_span(tmp_path, provider,
                                                                   exporter):
    path = tmp_path / "orders.jsonl"
    get_demo("orders").run(trace=path)
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-1]))  # no stop line: the run was killed
    spans_from_trace(path, provider, start_ns=0)
    agent = by_name(exporter.get_finished_spans())["invoke_agent agent"]
    assert agent.attributes["primer.finished"] is False
    assert "primer.stop_cause" not in agent.attributes


def test_otlp_json_is_an_export_request_with_hex_ids_and_the_service_name(tmp_path):
    from opentelemetry.proto_json.collector.trace.v1.trace_service import (
        ExportTraceServiceRequest,
    )

    path = tmp_path / "pto.jsonl"
    get_demo("pto").run(trace=path)
    body = json.loads(otlp_json([path], service_name="hr-desk"))
    ExportTraceServiceRequest.from_dict(body)  # the OTLP/JSON model reads it back
    (resource_spans,) = body["resourceSpans"]
    attrs = {a["key"]: a["value"] for a in resource_spans["resource"]["attributes"]}
    assert attrs["service.name"] == {"stringValue": "hr-desk"}
    spans = resource_spans["scopeSpans"][0]["spans"]
    assert len(spans) == 5  # agent, 2 chat, 2 tools
    assert all(len(s["traceId"]) == 32 and len(s["spanId"]) == 16 for s in spans)
    int(spans[0]["traceId"], 16)


def test_trace_export_writes_otlp_json_to_a_file_or_stdout(tmp_path, capsys):
    path = tmp_path / "pto.jsonl"
    get_demo("pto").run(trace=path)
    out = tmp_path / "spans.json"
    assert main(["trace", "export", str(path), "--otlp-json", "-o", str(out)]) == 0
    names = [s["name"] for s in json.loads(out.read_text())["resourceSpans"][0][
        "scopeSpans"][0]["spans"]]
    assert "invoke_agent agent" in names and "execute_tool search_kb" in names
    assert main(["trace", "export", str(path), "--otlp-json", "--agent-name", "hr"]) == 0
    assert "invoke_agent hr" in capsys.readouterr().out


def test_trace_export_of_a_missing_file_or_to_a_missing_folder_is_one_line_and_exit_2(
        tmp_path, capsys):
    assert main(["trace", "export", str(tmp_path / "none.jsonl"), "--otlp-json"]) == 2
    assert "no such trace file" in capsys.readouterr().err
    path = tmp_path / "pto.jsonl"
    get_demo("pto").run(trace=path)
    assert main(["trace", "export", str(path), "--otlp-json", "-o",
                 str(tmp_path / "no" / "spans.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trace export: -o ") and "does not exist" in err
    assert err.count("\n") == 1


def test_a_sink_that_cannot_read_an_event_logs_it_and_never_breaks_the_run(provider, caplog):
    sink = OTelSink(provider)
    sink("model_call", {"reply": None})
    assert "could not turn a 'model_call' event into spans" in caplog.text
    result = run_production(ScriptedLLM(["fine"]), "hi", on_event=sink)
    assert result.final_text == "fine"


def test_importing_the_core_imports_neither_opentelemetry_nor_dask_nor_yaml():
    heavy = ("opentelemetry", "dask", "distributed", "yaml")
    code = ("import primer, primer.loop.loop, sys; "
            f"print(' '.join(m for m in {heavy!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    assert done.stdout.strip() == ""


def test_otel_sink_is_one_lazy_name_of_primer():
    import primer

    assert primer.OTelSink is OTelSink


def test_a_streamed_replys_deltas_add_no_span_events(provider, exporter):
    demo = get_demo("orders")
    scripted = demo.make_llm()
    llm = StreamingScriptedLLM(scripted.script, name=scripted.name)  # replies as deltas too
    seen, inner = [], OTelSink(provider)

    def sink(kind, data):
        seen.append(kind)
        inner(kind, data)

    run_production(llm, demo.task, demo.make_tools(), system=demo.system, config=demo.config,
                   on_event=sink)
    assert "text_delta" in seen  # the run streamed
    events = [e.name for s in exporter.get_finished_spans() for e in s.events]
    assert not [e for e in events if "delta" in e or "tool_use_start" in e]


def test_a_chat_span_counts_the_output_tokens_spent_thinking(provider, exporter):
    sink = OTelSink(provider)
    sink.handle("run_start", {"task": "t", "config": {}}, 1_000)
    sink.handle("model_call", {"reply": {"model": "claude-x", "stop_reason": "end_turn",
                                         "content": [], "usage": {"input_tokens": 10,
                                                                  "output_tokens": 40,
                                                                  "thinking_tokens": 25}},
                               "latency_s": 0.0}, 2_000)
    sink.handle("stop", {"cause": "end_turn", "usage": {}}, 3_000)
    chat = by_name(exporter.get_finished_spans())["chat claude-x"]
    assert chat.attributes[otel.OUTPUT_TOKENS] == 40
    assert chat.attributes[otel.REASONING_TOKENS] == 25
