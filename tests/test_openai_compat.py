"""The OpenAI-compatible adapter: chat-completions tool_calls map to our blocks and back, and
the loop runs through the real ``openai`` client against the local server."""

from __future__ import annotations

import json

import pytest

from primer.harness.production import run_production
from primer.loop.config import AgentConfig
from primer.loop.model import ScriptedLLM, TransientModelError, text_reply, tool_reply
from primer.loop.state import StopCause
from primer.loop.tools import tool
from primer.providers.fake_server import FakeModelServer
from primer.providers.openai_compat import (
    chat_completion_json,
    from_chat_request,
    reply_from_chat_completion,
    to_chat_messages,
    to_chat_tools,
)


def completion(message: dict, finish: str = "stop", usage: dict | None = None) -> dict:
    return {"id": "c1", "model": "m", "choices": [{"index": 0, "message": message,
                                                    "finish_reason": finish}],
            "usage": usage or {"prompt_tokens": 10, "completion_tokens": 2}}


def test_tool_call_arguments_arrive_as_a_json_string_and_become_an_input_object():
    reply = reply_from_chat_completion(completion(
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "call_1", "type": "function",
                         "function": {"name": "get_order", "arguments": '{"order_id": "A123"}'}}]},
        finish="tool_calls"))
    assert reply.stop_reason == "tool_use"
    assert reply.tool_uses == [{"type": "tool_use", "id": "call_1", "name": "get_order",
                                "input": {"order_id": "A123"}}]


def test_a_cut_off_call_keeps_its_broken_arguments_and_stops_as_max_tokens():
    reply = reply_from_chat_completion(completion(
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "call_1", "type": "function",
                         "function": {"name": "get_order", "arguments": '{"order_id": "A1'}}]},
        finish="length"))
    assert reply.stop_reason == "max_tokens"
    assert reply.tool_uses[0]["input"] == '{"order_id": "A1'


def test_a_refusal_field_is_a_refusal_whatever_the_finish_reason():
    reply = reply_from_chat_completion(completion(
        {"role": "assistant", "content": None, "refusal": "I can't help with that."}))
    assert reply.stop_reason == "refusal" and reply.text == "I can't help with that."


def test_cached_prompt_tokens_count_as_cache_reads():
    reply = reply_from_chat_completion(completion(
        {"role": "assistant", "content": "hi"},
        usage={"prompt_tokens": 100, "completion_tokens": 5,
               "prompt_tokens_details": {"cached_tokens": 60}}))
    assert (reply.usage.input_tokens, reply.usage.cache_read_input_tokens,
            reply.usage.output_tokens) == (40, 60, 5)
    assert reply.usage.prompt_tokens == 100


def test_our_messages_become_chat_messages_and_come_back_the_same():
    messages = [
        {"role": "user", "content": "total of A123?"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "looking"},
            {"type": "tool_use", "id": "t1", "name": "get_order", "input": {"order_id": "A123"}},
            {"type": "tool_use", "id": "t2", "name": "get_order", "input": {"order_id": "B9"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "{}", "is_error": False},
            {"type": "tool_result", "tool_use_id": "t2", "content": "unknown id",
             "is_error": True}]},
    ]
    tools = [{"name": "get_order", "description": "d", "input_schema": {"type": "object"}}]
    chat = to_chat_messages("sys", messages)
    assert [m["role"] for m in chat] == ["system", "user", "assistant", "tool", "tool"]
    assert json.loads(chat[2]["tool_calls"][0]["function"]["arguments"]) == {"order_id": "A123"}
    assert chat[4]["content"].startswith("Error: ")
    body = {"model": "m", "messages": chat, "tools": to_chat_tools(tools), "max_tokens": 50}
    assert from_chat_request(body) == ("sys", messages, tools, 50)


def test_a_refusal_reply_is_served_in_the_refusal_field():
    wire = chat_completion_json(text_reply("no", stop_reason="refusal"), "c1", "m")
    message = wire["choices"][0]["message"]
    assert message["content"] is None and message["refusal"] == "no"


# ---------------------------------------------------------------- through the openai client

openai = pytest.importorskip("openai", reason="the optional `openai` extra is not installed "
                                              "(.venv/bin/pip install -e '.[openai]')")

ran: list[str] = []


@tool
def lookup(city: str) -> str:
    """Look up the weather in a city."""
    ran.append(city)
    return f"sunny in {city}"


def compat(srv: FakeModelServer):
    from primer.providers.openai_compat import OpenAICompatLLM

    client = openai.OpenAI(api_key="sk-local", base_url=srv.base_url + "/v1", max_retries=0)
    return OpenAICompatLLM("local-model", client=client)


@pytest.fixture(autouse=True)
def _fresh():
    ran.clear()


def test_the_loop_runs_parallel_calls_through_the_openai_client():
    script = [tool_reply(("lookup", {"city": "Paris"}), ("lookup", {"city": "Oslo"})),
              text_reply("both sunny")]
    with FakeModelServer(ScriptedLLM(script)) as srv:
        result = run_production(compat(srv), "weather?", [lookup])
        second = srv.requests[1].body
    assert result.stop_cause is StopCause.END_TURN and result.final_text == "both sunny"
    assert sorted(ran) == ["Oslo", "Paris"]
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "tool", "tool"]
    calls = second["messages"][1]["tool_calls"]
    answers = [m for m in second["messages"] if m["role"] == "tool"]
    assert [a["tool_call_id"] for a in answers] == [c["id"] for c in calls]
    assert second["tools"][0]["function"]["parameters"]["required"] == ["city"]


def test_a_length_cut_off_never_runs_its_call_through_the_openai_client():
    cut = tool_reply(("lookup", {"city": "Par"}), stop_reason="max_tokens")
    with FakeModelServer(ScriptedLLM([cut])) as srv:
        result = run_production(compat(srv), "weather?", [lookup])
    assert result.stop_cause is StopCause.MAX_TOKENS and ran == []


def test_a_refusal_through_the_openai_client_stops_the_run():
    with FakeModelServer(ScriptedLLM([text_reply("no", stop_reason="refusal")])) as srv:
        result = run_production(compat(srv), "bad", [lookup])
    assert result.stop_cause is StopCause.REFUSAL and result.final_text is None


def test_a_429_through_the_openai_client_is_transient_and_the_loop_retries_it():
    waits: list[float] = []
    with FakeModelServer(ScriptedLLM([text_reply("ok")])) as srv:
        srv.fail_next(429, retry_after_s=0.02)
        with pytest.raises(TransientModelError) as caught:
            compat(srv)(system="", messages=[{"role": "user", "content": "x"}], tools=[],
                        max_tokens=5)
        srv.fail_next(429, retry_after_s=0.02)
        result = run_production(compat(srv), "x", [lookup],
                                config=AgentConfig(model_retries=1, sleep=waits.append))
    assert caught.value.retry_after_s == pytest.approx(0.02)
    assert result.stop_cause is StopCause.END_TURN and len(waits) == 1


def test_a_context_length_error_through_the_openai_client_stops_with_context_window():
    with FakeModelServer(ScriptedLLM([text_reply("never sent")])) as srv:
        srv.fail_next(400, message="This model's maximum context length is 8192 tokens.")
        result = run_production(compat(srv), "x" * 50, [lookup])
    assert result.stop_cause is StopCause.CONTEXT_WINDOW and result.steps == []
    assert "maximum context length" in result.stop_detail and ran == []
