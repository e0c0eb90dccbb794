"""Streaming, extended thinking, async and fallback through the real ``anthropic`` SDK, against
the local server that speaks the Messages API (with server-sent events)."""

from __future__ import annotations

import asyncio

import anthropic
import pytest

from primer.harness.async_loop import run_agent_async
from primer.harness.fallback import FallbackLLM
from primer.harness.production import run_production
from primer.harness.retry import ManualClock
from primer.harness.streaming import StreamingScriptedLLM
from primer.loop.config import AgentConfig
from primer.loop.model import PermanentModelError, ScriptedLLM, text_reply, tool_reply
from primer.loop.state import StopCause
from primer.loop.tools import tool
from primer.providers.claude import TRANSPORT_ERRORS, AsyncClaudeLLM, ClaudeLLM
from primer.providers.fake_server import FakeModelServer

KEY = "sk-ant-test-streaming-never-print-me"
THINK = {"type": "enabled", "budget_tokens": 1024}

ran: list[str] = []


@tool
def get_order(order_id: str) -> dict:
    """Look an order up by its id.

    Args:
        order_id: the order's id, like A123
    """
    ran.append(order_id)
    return {"order_id": order_id, "unit_price": 2500, "quantity": 2}


@pytest.fixture(autouse=True)
def _fresh():
    ran.clear()


def script():
    """Look the order up, then answer: a policy of the history, so a retried call gets the
    same reply again."""
    def policy(messages):
        if len(messages) == 1:
            return tool_reply(("get_order", {"order_id": "A123"}), text="I will look the order "
                              "up.", thinking="The user wants a total; I need the price first.")
        return text_reply("Order A123 costs 5,900 with GST.",
                          thinking="2 x 2500 = 5000, plus 18% is 5900.")
    return policy


def claude(srv, cls=ClaudeLLM, **kwargs):
    client_cls = anthropic.AsyncAnthropic if cls is AsyncClaudeLLM else anthropic.Anthropic
    return cls(client=client_cls(api_key=KEY, base_url=srv.base_url, max_retries=0), **kwargs)


def deltas(events):
    return [(k, d) for k, d in events if k in ("text_delta", "thinking_delta", "tool_use_start",
                                               "input_json_delta", "tool_use_input")]


def run(llm, events=None, **config):
    """One run of the order task; ``max_tokens`` 2,048 by default (above the thinking
    budget, as the API requires)."""
    sink = (lambda k, d: events.append((k, d))) if events is not None else None
    return run_production(llm, "What does order A123 cost with GST?", [get_order], on_event=sink,
                          config=AgentConfig(**{"max_tokens": 2048, **config}))


# ---------------------------------------------------------------- streaming


def test_a_streamed_run_ends_up_identical_to_the_unstreamed_one():
    with FakeModelServer(ScriptedLLM(script())) as srv:
        plain = run(claude(srv))
    events = []
    with FakeModelServer(ScriptedLLM(script())) as srv:
        streamed = run(claude(srv, stream=True), events)
        assert all(r.body.get("stream") is True for r in srv.model_requests)
    assert streamed.stop_cause is plain.stop_cause is StopCause.END_TURN
    assert streamed.messages == plain.messages and streamed.usage == plain.usage
    assert streamed.rows() == plain.rows() and ran == ["A123", "A123"]
    text = "".join(d["text"] for k, d in events if k == "text_delta" and d["step"] == 2)
    assert text == "Order A123 costs 5,900 with GST."


def test_the_sdk_stream_gives_the_same_deltas_as_the_offline_scripted_stream():
    offline = []
    run(StreamingScriptedLLM(script()), offline)
    online = []
    with FakeModelServer(ScriptedLLM(script())) as srv:
        run(claude(srv, stream=True), online)
    assert deltas(online) == deltas(offline) and deltas(online)


def test_a_stream_cut_off_at_max_tokens_mid_tool_call_never_runs_the_half_written_call():
    events = []
    with FakeModelServer(ScriptedLLM(script())) as srv:
        srv.cut_next_stream("max_tokens")
        result = run(claude(srv, stream=True), events)
    assert result.stop_cause is StopCause.MAX_TOKENS and ran == []
    kinds = [k for k, _ in events]
    assert "tool_use_start" in kinds and "tool_use_input" not in kinds
    [e] = result.executions
    assert e.error_kind == "not_run"
    assert result.messages[-1]["content"][0]["tool_use_id"] == result.messages[-2]["content"][
        -1]["id"]  # the half-written call is answered, so the history can be sent again


@pytest.mark.parametrize("how", ["disconnect", "abort", "overloaded"])
def test_a_stream_that_breaks_off_mid_tool_call_is_retried_and_the_call_runs_once(how):
    clock = ManualClock()
    with FakeModelServer(ScriptedLLM(script())) as srv:
        srv.cut_next_stream(how)
        result = run(claude(srv, stream=True), clock=clock, sleep=clock.sleep)
        assert len(srv.model_requests) == 3  # the broken stream, its retry, the answer
    assert result.stop_cause is StopCause.END_TURN and ran == ["A123"]
    [retry] = result.steps[0].model_retries
    expected = {"disconnect": "stream ended before its message_stop",
                "abort": "connection broke while the reply streamed in (RemoteProtocolError",
                "overloaded": "529 (overloaded)"}[how]
    assert expected in retry["error"]


def test_an_aborted_stream_is_a_real_broken_chunked_body_cut_inside_input_json_delta():
    """What the SDK itself sees when the server breaks the body: the chunked transfer ends
    mid-chunk, after part of the tool call's input_json_delta events, and the SDK's HTTP
    library (httpx, or httpx2 in SDK 2.x), not anthropic, raises while the stream is
    read."""
    with FakeModelServer(ScriptedLLM(script())) as srv:
        srv.cut_next_stream("abort")
        client = anthropic.Anthropic(api_key=KEY, base_url=srv.base_url, max_retries=0)
        seen = []
        with pytest.raises(TRANSPORT_ERRORS, match="incomplete chunked read") as raised:
            with client.messages.stream(model="m", max_tokens=2048, messages=[
                    {"role": "user", "content": "total?"}]) as stream:
                for event in stream:
                    seen.append(event.type)
    assert type(raised.value).__name__ == "RemoteProtocolError"
    assert "content_block_delta" in seen and "message_stop" not in seen
    assert seen[-1] == "input_json"  # the SDK's event for a piece of the tool input read last


@pytest.mark.parametrize("how", ["disconnect", "abort"])
def test_the_async_adapter_retries_a_broken_stream_and_runs_the_call_once(how):
    events = []
    with FakeModelServer(ScriptedLLM(script())) as srv:
        srv.cut_next_stream(how)
        llm = claude(srv, cls=AsyncClaudeLLM, stream=True)
        result = asyncio.run(run_agent_async(
            llm, "What does order A123 cost with GST?", [get_order],
            on_event=lambda k, d: events.append((k, d)),
            config=AgentConfig(max_tokens=2048, retry={"base_s": 0.001, "jitter": 0.0})))
        assert len(srv.model_requests) == 3
    assert result.stop_cause is StopCause.END_TURN and ran == ["A123"]
    [retry] = result.steps[0].model_retries
    assert ("RemoteProtocolError" in retry["error"]) == (how == "abort")
    # the half-written call of the broken stream was never announced as complete
    complete = [d for k, d in events if k == "tool_use_input"]
    assert len(complete) == 1


# ---------------------------------------------------------------- extended thinking


def test_thinking_blocks_come_back_signed_and_go_back_unchanged_with_the_tool_use():
    with FakeModelServer(ScriptedLLM(script())) as srv:
        result = run(claude(srv, thinking=THINK, stream=True))
        first, second = srv.model_requests
    assert first.body["thinking"] == THINK
    sent = result.steps[0].reply.content[0]
    assert sent["type"] == "thinking" and sent["signature"] == srv.sign(sent["thinking"])
    assert second.body["messages"][1]["content"] == result.steps[0].reply.content
    assert result.stop_cause is StopCause.END_TURN
    assert result.rows()[0]["tool calls"].startswith("[thought] get_order(")
    assert result.steps[0].usage.output_tokens > ScriptedLLM(
        [tool_reply(("get_order", {"order_id": "A123"}), text="I will look the order up.")])(
        system="", messages=[], tools=[], max_tokens=9999).usage.output_tokens


def test_a_harness_that_drops_the_thinking_blocks_gets_the_apis_400():
    class Forgetful(ClaudeLLM):
        def request(self, **kwargs):
            out = super().request(**kwargs)
            out["messages"] = [{**m, "content": [b for b in m["content"]
                                                 if b.get("type") != "thinking"]}
                               if m["role"] == "assistant" and isinstance(m["content"], list)
                               else m for m in out["messages"]]
            return out

    with FakeModelServer(ScriptedLLM(script())) as srv:
        llm = Forgetful(client=anthropic.Anthropic(api_key=KEY, base_url=srv.base_url,
                                                   max_retries=0), thinking=THINK)
        result = run(llm)
    assert result.stop_cause is StopCause.MODEL_ERROR
    assert "Expected `thinking` or `redacted_thinking`, but found `text`" in result.stop_detail


def test_a_changed_thinking_block_is_refused():
    with FakeModelServer(ScriptedLLM(script())) as srv:
        client = anthropic.Anthropic(api_key=KEY, base_url=srv.base_url, max_retries=0)
        messages = [{"role": "user", "content": "total?"},
                    {"role": "assistant", "content": [
                        {"type": "thinking", "thinking": "edited", "signature": "forged"},
                        {"type": "tool_use", "id": "t1", "name": "get_order",
                         "input": {"order_id": "A123"}}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                                  "content": "{}"}]}]
        tools = [{"name": "get_order", "description": "Look an order up.",
                  "input_schema": {"type": "object"}}]
        with pytest.raises(anthropic.BadRequestError, match="cannot be modified"):
            client.messages.create(model="m", max_tokens=2048, thinking=THINK,
                                   messages=messages, tools=tools)


def test_redacted_thinking_is_kept_and_sent_back_as_it_came():
    redacted = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"}
    replies = [tool_reply(("get_order", {"order_id": "A123"})), text_reply("5,900")]
    replies[0].content.insert(0, redacted)
    with FakeModelServer(ScriptedLLM(replies)) as srv:
        result = run(claude(srv, thinking=THINK))
        second = srv.model_requests[1]
    assert second.body["messages"][1]["content"][0] == redacted
    assert result.stop_cause is StopCause.END_TURN and ran == ["A123"]


def test_a_thinking_budget_not_below_max_tokens_is_a_clear_model_error():
    with FakeModelServer(ScriptedLLM(script())) as srv:
        result = run(claude(srv, thinking={"type": "enabled", "budget_tokens": 4096}),
                     max_tokens=4096)
        assert srv.model_requests == []  # refused before sending
    assert result.stop_cause is StopCause.MODEL_ERROR
    assert "max_tokens (4,096) must be greater than thinking.budget_tokens (4,096)" in \
        result.stop_detail


@pytest.mark.parametrize("thinking", [{"budget_tokens": 2048}, {"type": "enabled"},
                                      {"type": "enabled", "budget_tokens": 100}, "on"])
def test_a_thinking_setting_the_api_would_refuse_is_refused_at_once(thinking):
    with pytest.raises(ValueError, match="thinking"):
        ClaudeLLM(client=anthropic.Anthropic(api_key=KEY, base_url="http://127.0.0.1:9"),
                  thinking=thinking)


def test_the_server_checks_the_budget_too():
    with FakeModelServer(ScriptedLLM(["x"])) as srv:
        client = anthropic.Anthropic(api_key=KEY, base_url=srv.base_url, max_retries=0)
        with pytest.raises(anthropic.BadRequestError, match="max_tokens"):
            client.messages.create(model="m", max_tokens=1024, thinking=THINK,
                                   messages=[{"role": "user", "content": "hi"}])


# ---------------------------------------------------------------- async, fallback


@pytest.mark.parametrize("stream", [False, True])
def test_the_async_client_under_the_async_loop_gives_the_sync_run(stream):
    with FakeModelServer(ScriptedLLM(script())) as srv:
        plain = run(claude(srv, thinking=THINK))
    events = []
    with FakeModelServer(ScriptedLLM(script())) as srv:
        llm = claude(srv, cls=AsyncClaudeLLM, thinking=THINK, stream=stream)
        result = asyncio.run(run_agent_async(llm, "What does order A123 cost with GST?",
                                             [get_order], on_event=lambda k, d: events.append(k),
                                             config=AgentConfig(max_tokens=2048)))
    assert result.stop_cause is plain.stop_cause is StopCause.END_TURN
    assert result.messages[0] == plain.messages[0] and result.usage == plain.usage
    assert [m["content"] for m in result.messages[2:]] == [m["content"]
                                                          for m in plain.messages[2:]]
    assert ("text_delta" in events) == stream


def test_async_claude_refuses_exact_count():
    with pytest.raises(ValueError, match="exact_count"):
        AsyncClaudeLLM(client=anthropic.AsyncAnthropic(api_key=KEY, base_url="http://x"),
                       exact_count=True)


def test_a_529_from_the_primary_provider_makes_the_secondary_answer():
    clock = ManualClock()
    with FakeModelServer(ScriptedLLM(script()), model="big") as big, \
            FakeModelServer(ScriptedLLM(script()), model="small") as small:
        big.fail_next(529, 2)
        llm = FallbackLLM([claude(big, model="claude-big"), claude(small, model="claude-small")],
                          retries=1, sleep=clock.sleep)
        result = run(llm)
    assert result.stop_cause is StopCause.END_TURN
    assert [s.reply.model for s in result.steps] == ["claude-small", "claude-big"]
    assert llm.fallbacks[0]["error"].startswith("TransientModelError: the API answered 529")


def test_a_permanent_error_is_not_a_reason_to_fall_back():
    with FakeModelServer(ScriptedLLM(script())) as big, \
            FakeModelServer(ScriptedLLM(script())) as small:
        big.fail_next(401, message="invalid x-api-key")
        llm = FallbackLLM([claude(big), claude(small)])
        with pytest.raises(PermanentModelError):
            llm(system="", messages=[{"role": "user", "content": "hi"}], tools=[],
                max_tokens=100)
        assert small.model_requests == []
