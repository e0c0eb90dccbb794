"""Streaming offline: a reply as the Messages API's server-sent events, those events as the
loop's deltas, and a ScriptedLLM that streams without changing what it replies."""

import json

import pytest

from primer.harness.production import run_production
from primer.harness.streaming import CUTS, DeltaRelay, StreamingScriptedLLM, pieces, wire_events
from primer.loop.config import AgentConfig
from primer.loop.model import DELTA_KINDS, ScriptedLLM, text_reply, tool_reply
from primer.loop.tools import tool

MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
           "content": [{"type": "thinking", "thinking": "Look the order up first.",
                        "signature": "sig-1"},
                       {"type": "text", "text": "Checking the order."},
                       {"type": "tool_use", "id": "toolu_1", "name": "get_order",
                        "input": {"order_id": "A123", "with_items": True}}],
           "stop_reason": "tool_use", "stop_sequence": None,
           "usage": {"input_tokens": 120, "output_tokens": 45}}


def relayed(events):
    out = []
    relay = DeltaRelay(lambda kind, data: out.append((kind, data)))
    for event in events:
        relay.feed(event)
    return out


def test_the_events_of_a_reply_follow_the_api_order():
    types = [e["type"] for e in wire_events(MESSAGE)]
    assert types[:2] == ["message_start", "ping"]
    assert types[-2:] == ["message_delta", "message_stop"]
    assert types.count("content_block_start") == types.count("content_block_stop") == 3
    start = wire_events(MESSAGE)[0]["message"]
    assert start["content"] == [] and start["stop_reason"] is None
    delta = wire_events(MESSAGE)[-2]
    assert delta["delta"]["stop_reason"] == "tool_use" and delta["usage"]["output_tokens"] == 45


def test_the_deltas_add_up_to_the_reply_and_the_call_is_announced_whole():
    deltas = relayed(wire_events(MESSAGE))
    assert {k for k, _ in deltas} == set(DELTA_KINDS)
    assert "".join(d["text"] for k, d in deltas if k == "text_delta") == "Checking the order."
    assert "".join(d["thinking"] for k, d in deltas
                   if k == "thinking_delta") == "Look the order up first."
    assert json.loads("".join(d["partial_json"] for k, d in deltas
                              if k == "input_json_delta")) == MESSAGE["content"][2]["input"]
    [complete] = [d for k, d in deltas if k == "tool_use_input"]
    assert complete == {"index": 2, "id": "toolu_1", "name": "get_order",
                        "input": {"order_id": "A123", "with_items": True}}
    kinds = [k for k, _ in deltas]
    assert kinds.index("tool_use_start") < kinds.index("input_json_delta") < kinds.index(
        "tool_use_input")


@pytest.mark.parametrize("cut", CUTS)
def test_a_stream_cut_off_mid_tool_call_never_announces_the_call_complete(cut):
    events = wire_events(MESSAGE, cut=cut, max_tokens=64)
    deltas = relayed(events)
    assert ("tool_use_start" in [k for k, _ in deltas])
    assert "tool_use_input" not in [k for k, _ in deltas]
    written = "".join(d["partial_json"] for k, d in deltas if k == "input_json_delta")
    assert written and json.dumps(MESSAGE["content"][2]["input"],
                                  separators=(",", ":")).startswith(written)
    last = events[-1]["type"]
    assert last == {"max_tokens": "message_stop", "disconnect": "content_block_delta",
                    "abort": "content_block_delta",
                    "overloaded": "error"}[cut]
    if cut == "max_tokens":
        assert events[-2]["delta"]["stop_reason"] == "max_tokens"
        assert events[-2]["usage"]["output_tokens"] == 64


def test_an_unknown_cut_is_refused():
    with pytest.raises(ValueError, match="cut must be one of"):
        wire_events(MESSAGE, cut="sometimes")


def test_text_is_streamed_word_by_word():
    assert pieces("The total is 5900.") == ["The ", "total ", "is ", "5900."]
    assert "".join(pieces("  spaced   out ")) == "  spaced   out "


@tool
def get_order(order_id: str) -> dict:
    """Look an order up.

    Args:
        order_id: the order's id
    """
    return {"order_id": order_id, "total": 5900}


def test_a_streaming_scripted_model_gives_the_same_run_and_shows_it_as_it_goes():
    script = [tool_reply(("get_order", {"order_id": "A123"}), text="Looking it up.",
                         thinking="I need the order."), text_reply("It costs 5900.")]
    seen = []
    streamed = run_production(StreamingScriptedLLM(script), "task", [get_order],
                              on_event=lambda kind, data: seen.append((kind, data)))
    plain = run_production(ScriptedLLM(script), "task", [get_order])
    assert streamed.messages == plain.messages and streamed.usage == plain.usage
    assert streamed.rows() == plain.rows()
    text = [(d["step"], d["text"]) for k, d in seen if k == "text_delta"]
    assert "".join(t for s, t in text if s == 2) == "It costs 5900."
    kinds = [k for k, _ in seen]
    assert kinds.index("tool_use_input") < kinds.index("model_call") < kinds.index(
        "tool_execution")
    assert streamed.rows()[0]["tool calls"].startswith("[thought] get_order(")


def test_deltas_go_to_on_event_but_never_into_the_trace(tmp_path):
    from primer.harness.tracing.trace import load_trace

    seen = []
    run_production(StreamingScriptedLLM(["Hello there."]), "task", trace=tmp_path / "t.jsonl",
                   on_event=lambda kind, data: seen.append(kind))
    assert "text_delta" in seen
    assert "text_delta" not in [e["event"] for e in load_trace(tmp_path / "t.jsonl").events]


def test_a_scripted_model_cut_off_by_max_tokens_streams_and_runs_nothing():
    ran = []

    @tool
    def calculator(expression: str) -> str:
        """Work out an expression.

        Args:
            expression: arithmetic
        """
        ran.append(expression)
        return "0"

    script = [tool_reply(("calculator", {"expression": "2500 * 2 * 1.18"}),
                         text="The total with GST is")]
    result = run_production(StreamingScriptedLLM(script), "task", [calculator],
                            config=AgentConfig(max_tokens=5))
    assert result.stop_cause.value == "max_tokens" and ran == []
    assert result.executions[0].error_kind == "not_run"


def test_a_trace_read_back_marks_the_steps_that_thought(tmp_path):
    from primer.harness.tracing.trace import load_trace

    script = [tool_reply(("get_order", {"order_id": "A123"}), thinking="I need the order."),
              text_reply("It costs 5900.")]
    run_production(ScriptedLLM(script), "task", [get_order], trace=tmp_path / "t.jsonl")
    rows = load_trace(tmp_path / "t.jsonl").rows()
    assert [r["tool calls"].startswith("[thought]") for r in rows] == [True, False]
