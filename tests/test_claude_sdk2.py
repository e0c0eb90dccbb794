"""What SDK 2.x adds, through ClaudeLLM, the real ``anthropic`` client and the local server:
refusal categories, thinking tokens, effort, API-native structured output, server-side
compaction, and the SDK's own spans kept out of the run's span tree."""

from __future__ import annotations

import anthropic
import pydantic
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from primer.harness.production import run_production
from primer.harness.request_check import messages_problems
from primer.harness.tracing.otel import OTelSink
from primer.loop.config import AgentConfig
from primer.loop.cost import thinking_cost_usd
from primer.loop.loop import run_agent
from primer.loop.model import Reply, ScriptedLLM, cost_usd, text_reply, tool_reply
from primer.loop.state import StopCause
from primer.loop.tools import tool
from primer.providers.claude import (
    COMPACTION_BETA,
    ClaudeLLM,
    compaction_edit,
    output_format_of,
    without_sdk_spans,
)
from primer.providers.fake_server import FakeModelServer

KEY = "sk-ant-test-sdk2"


def client(srv: FakeModelServer, **options) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=KEY, base_url=srv.base_url, max_retries=0, **options)


@tool
def weather(city: str) -> str:
    """Today's weather in a city."""
    return f"sunny and mild in {city}, " + "with a light breeze from the west " * 8


class Forecast(pydantic.BaseModel):
    city: str
    temp_c: int


def refusal(category: str | None, explanation: str | None = None) -> Reply:
    return Reply([{"type": "text", "text": "I can't help with that."}], "refusal",
                 stop_details={"type": "refusal", "category": category,
                               "explanation": explanation})


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize("stream", [False, True])
def test_a_refusals_category_reaches_the_result_and_its_summary(stream):
    script = ScriptedLLM([refusal("cyber", "could enable malware")])
    with FakeModelServer(script) as srv:
        result = run_agent(ClaudeLLM(client=client(srv), stream=stream), "write malware")
    assert result.stop_cause is StopCause.REFUSAL
    assert result.stop_details == {"type": "refusal", "category": "cyber",
                                   "explanation": "could enable malware"}
    assert "(category: cyber; could enable malware)" in result.summary
    assert result.final_text is None


def test_a_refusal_without_a_category_says_nothing_more():
    with FakeModelServer(ScriptedLLM([refusal(None)])) as srv:
        result = run_agent(ClaudeLLM(client=client(srv)), "hm")
    assert result.stop_cause is StopCause.REFUSAL
    assert result.stop_details["category"] is None
    assert "the model refused on call 1." in result.summary


# ---------------------------------------------------------------- thinking tokens


@pytest.mark.parametrize("stream", [False, True])
def test_thinking_tokens_are_counted_apart_inside_the_output_and_priced_with_it(stream):
    thought = "Oslo is far north; in March it is cold, so I should say so. " * 4
    with FakeModelServer(ScriptedLLM([text_reply("Cold.", thinking=thought)])) as srv:
        llm = ClaudeLLM(client=client(srv), stream=stream,
                        thinking={"type": "enabled", "budget_tokens": 1024})
        result = run_agent(llm, "Weather in Oslo?", config=AgentConfig(max_tokens=2048))
        sent = srv.requests[0].body
    assert sent["thinking"]["type"] == "enabled"
    u = result.usage
    assert 0 < u.thinking_tokens < u.output_tokens
    assert result.steps[0].usage.thinking_tokens == u.thinking_tokens
    # priced as output tokens: inside the run's cost, never added on top
    assert result.cost_usd == pytest.approx(cost_usd(u))
    assert thinking_cost_usd(u) == pytest.approx(u.thinking_tokens * 25 / 1e6)
    assert thinking_cost_usd(u) < result.cost_usd


# ---------------------------------------------------------------- effort and structured output


def test_effort_and_the_output_format_travel_in_output_config():
    with FakeModelServer(ScriptedLLM(['{"city": "Oslo", "temp_c": 3}'])) as srv:
        llm = ClaudeLLM(client=client(srv), effort="low", output_format=Forecast)
        result = run_agent(llm, "Forecast for Oslo, as JSON", output_model=Forecast)
        config = srv.requests[0].body["output_config"]
    assert config["effort"] == "low"
    assert config["format"]["type"] == "json_schema"
    assert config["format"]["schema"]["additionalProperties"] is False
    assert result.stop_cause is StopCause.END_TURN
    assert result.output == Forecast(city="Oslo", temp_c=3)


def test_an_unknown_effort_is_refused_before_any_call():
    with pytest.raises(ValueError, match="effort must be one of low, medium"):
        ClaudeLLM(client=anthropic.Anthropic(api_key=KEY), effort="extreme")


def test_the_output_format_closes_every_object_of_the_schema():
    class Outer(pydantic.BaseModel):
        inner: Forecast

    fmt = output_format_of(Outer)
    assert fmt["schema"]["additionalProperties"] is False
    assert fmt["schema"]["$defs"]["Forecast"]["additionalProperties"] is False
    assert output_format_of({"type": "object"}) == {
        "type": "json_schema", "schema": {"type": "object", "additionalProperties": False}}
    with pytest.raises(TypeError, match="pydantic model class or a JSON Schema"):
        output_format_of(42)


def test_an_answer_that_breaks_the_format_is_a_failed_call_not_an_answer():
    with FakeModelServer(ScriptedLLM(['{"city": "Oslo", "temp_c": "3"}'])) as srv:
        result = run_agent(ClaudeLLM(client=client(srv), output_format=Forecast), "Forecast?")
    assert result.stop_cause is StopCause.MODEL_ERROR
    assert "does not match output_config.format" in result.stop_detail
    assert result.final_text is None


# ---------------------------------------------------------------- server-side compaction


def compaction_run(pause: bool, runner=run_production, stream=False):
    script = ScriptedLLM([tool_reply(("weather", {"city": "Oslo"})),
                          tool_reply(("weather", {"city": "Bergen"})), text_reply("Both sunny.")])
    with FakeModelServer(script) as srv:
        llm = ClaudeLLM(client=client(srv), stream=stream, compaction={
            "trigger": {"type": "input_tokens", "value": 300}, "pause_after_compaction": pause})
        result = runner(llm, "Weather in Oslo and Bergen?", [weather])
        requests = [r for r in srv.model_requests]
        assert srv.failures == []
    return result, requests


@pytest.mark.parametrize("runner, stream", [(run_agent, False), (run_production, False),
                                            (run_production, True)])
def test_a_compaction_stop_reason_goes_on_and_its_block_stays_in_the_transcript(runner, stream):
    result, requests = compaction_run(pause=True, runner=runner, stream=stream)
    assert [s.reply.stop_reason for s in result.steps] == [
        "tool_use", "tool_use", "compaction", "end_turn"]
    assert result.stop_cause is StopCause.END_TURN and result.final_text == "Both sunny."
    block = result.messages[-2]["content"][0]
    assert block["type"] == "compaction" and block["content"].startswith("Summary of")
    # the next request sent the block back unchanged, as the last (assistant) message
    assert requests[-1].body["messages"][-1] == {"role": "assistant", "content": [block]}
    assert requests[-1].headers["anthropic-beta"] == COMPACTION_BETA
    assert messages_problems(result.messages) == []
    # the call after it is billed from the block on: a smaller prompt than the one it cut
    before, after = result.steps[2].usage.input_tokens, result.steps[3].usage.input_tokens
    assert after < before


def test_without_a_pause_the_compaction_block_opens_the_reply_that_answers():
    result, requests = compaction_run(pause=False)
    assert [s.reply.stop_reason for s in result.steps] == ["tool_use", "tool_use", "end_turn"]
    assert [b["type"] for b in result.messages[-1]["content"]] == ["compaction", "text"]
    assert result.final_text == "Both sunny."
    assert requests[0].body["context_management"] == {"edits": [{
        "type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 300},
        "pause_after_compaction": False}]}


def test_the_compaction_option_becomes_the_edit():
    assert compaction_edit(False) is None
    assert compaction_edit(True) == {"type": "compact_20260112"}
    assert compaction_edit({"pause_after_compaction": True}) == {
        "type": "compact_20260112", "pause_after_compaction": True}
    with pytest.raises(TypeError):
        compaction_edit("yes")


# ---------------------------------------------------------------- the SDK's own spans


def traced_run(sdk_spans: bool):
    exporter, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    script = ScriptedLLM([tool_reply(("weather", {"city": "Oslo"})), text_reply("Sunny.")])
    with FakeModelServer(script) as srv:
        # the SDK is told to trace into the same provider as ours, as a global one would
        sdk = client(srv, open_telemetry={"tracer_provider": provider})
        run_production(ClaudeLLM(client=sdk, sdk_spans=sdk_spans), "Weather in Oslo?",
                       [weather], on_event=OTelSink(provider))
    return exporter.get_finished_spans()


def test_with_otel_on_every_span_is_in_the_runs_tree_and_each_call_is_one_chat_span():
    spans = traced_run(sdk_spans=False)
    ids = {s.context.span_id for s in spans}
    roots = [s for s in spans if s.parent is None]
    assert [s.name for s in roots] == ["invoke_agent agent"]
    assert all(s.parent.span_id in ids for s in spans if s.parent is not None)
    assert len({s.context.trace_id for s in spans}) == 1
    assert sorted(s.name for s in spans) == ["chat claude-sonnet-4-6", "chat claude-sonnet-4-6",
                                             "execute_tool weather", "invoke_agent agent"]
    assert not [s for s in spans if s.instrumentation_scope.name != "primer"]


def test_the_sdks_own_spans_kept_on_would_be_orphans_outside_the_tree():
    spans = traced_run(sdk_spans=True)  # why ClaudeLLM switches them off by default
    sdk = [s for s in spans if s.instrumentation_scope.name == "com.anthropic.sdk.python"]
    agent = next(s for s in spans if s.name.startswith("invoke_agent"))
    assert [s.name for s in sdk] == ["anthropic.messages.create"] * 2
    assert all(s.parent is None and s.context.trace_id != agent.context.trace_id for s in sdk)


def test_a_given_client_is_copied_with_its_spans_off_and_left_alone():
    given = anthropic.Anthropic(api_key=KEY)
    quiet = without_sdk_spans(given)
    assert quiet is not given
    assert quiet.open_telemetry["traces"]["enabled"] is False
    assert given.open_telemetry["traces"]["enabled"] is True


def test_the_async_model_sends_the_same_2x_options_and_goes_on_after_a_compaction():
    import asyncio

    from primer.harness.async_loop import run_agent_async
    from primer.providers.claude import AsyncClaudeLLM

    script = ScriptedLLM([tool_reply(("weather", {"city": "Oslo"})),
                          tool_reply(("weather", {"city": "Bergen"})), text_reply("Both sunny.")])
    with FakeModelServer(script) as srv:
        sdk = anthropic.AsyncAnthropic(api_key=KEY, base_url=srv.base_url, max_retries=0)
        llm = AsyncClaudeLLM(client=sdk, effort="high", compaction={
            "trigger": {"type": "input_tokens", "value": 300}, "pause_after_compaction": True})
        result = asyncio.run(run_agent_async(llm, "Weather in Oslo and Bergen?", [weather]))
        first = srv.model_requests[0]
    assert first.body["output_config"] == {"effort": "high"}
    assert first.headers["anthropic-beta"] == COMPACTION_BETA
    assert "compaction" in [s.reply.stop_reason for s in result.steps]
    assert result.stop_cause is StopCause.END_TURN and result.final_text == "Both sunny."


# ---------------------------------------------------------------- the wrap-up at a limit


def test_the_wrap_up_through_the_sdk_keeps_the_tools_and_sends_tool_choice_none():
    """The API refuses tool_use blocks in a request that defines no tools; the local server
    answers such a request with that 400 too."""
    from primer.harness.request_check import TOOLS_REQUIRED, request_problems
    from primer.loop.steps import WRAP_UP_OPENING

    seen: list[dict] = []

    def policy(messages):
        last = messages[-1]["content"]
        if any(b.get("type") == "text" and WRAP_UP_OPENING in b.get("text", "")
               for b in last if isinstance(b, dict)):
            return "Best effort: sunny."
        return tool_reply(("weather", {"city": f"Oslo {len(messages)}"}))

    with FakeModelServer(ScriptedLLM(policy)) as srv:
        llm = ClaudeLLM("claude-test", client=client(srv))
        original = llm.request

        def spy(**kw):
            body = original(**kw)
            seen.append(body)
            return body

        llm.request = spy  # type: ignore[method-assign]
        result = run_agent(llm, "Weather?", [weather],
                           config=AgentConfig(max_steps=2, wrap_up=True))
    assert result.stop_cause is StopCause.MAX_STEPS and result.wrapped_up
    assert result.final_text == "Best effort: sunny."
    assert seen[-1]["tool_choice"] == {"type": "none"} and seen[-1]["tools"]
    stripped = {k: v for k, v in seen[-1].items() if k not in ("tools", "tool_choice")}
    assert TOOLS_REQUIRED in request_problems(stripped)
